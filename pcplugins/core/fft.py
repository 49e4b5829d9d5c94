"""Fast Poisson solve: the exact inverse of the constant-coefficient Dirichlet star Laplacian on a
structured grid by discrete sine transforms (DST-I), the direct method that Feng, Shu, Xu, Zhang
(section 5.4) compare full multigrid with (cuFFT there).

The operator diag u + sum_a w_a (u(i - e_a) + u(i + e_a)) with diag = -2 sum_a w_a and zero
Dirichlet values outside the grid has the sine modes as eigenvectors, with eigenvalues
sum_a -2 w_a (1 - cos(pi k_a / (m_a + 1))). A DST-I along every axis, a division by the
eigenvalues and a second DST-I solve it exactly. The DST-I is a real FFT of the odd extension, in
the array namespace (cuFFT through CuPy on the GPU, pocketfft through NumPy on the host).
"""
import math

import numpy

from . import grid


def dst1(x, axis, xp):
    """Unnormalised DST-I along ``axis``: y_k = sum_j x_j sin(pi (j + 1)(k + 1) / (m + 1))."""
    x = xp.moveaxis(x, axis, -1)
    m = x.shape[-1]
    z = xp.zeros(x.shape[:-1] + (1,), x.dtype)
    y = xp.concatenate([z, x, z, -x[..., ::-1]], axis=-1)
    s = xp.fft.rfft(y, axis=-1)[..., 1:m + 1].imag * -0.5
    return xp.moveaxis(s.astype(x.dtype, copy=False), -1, axis)


class DirichletFFT:
    """The solve on a whole (serial) grid, with the interface of multigrid.Multigrid that the
    DMDA preconditioners use (``cycle``, ``fine_box``, ``coarsest_rhs``, ...)."""

    def __init__(self, op, weights):
        box = op.box
        if box.shape != box.global_shape:
            raise ValueError("the FFT solve needs the whole grid on one rank")
        self.box, self.xp, self.dtype = box, op.xp, op.dtype
        xp = self.xp
        lam = xp.zeros(box.shape, numpy.float64)        # built on the device from 1-D factors
        for a, (m, w) in enumerate(zip(box.shape, weights)):
            k = numpy.arange(1, m + 1).reshape([-1 if b == a else 1 for b in range(box.dim)])
            lam += xp.asarray(-2.0 * w * (1.0 - numpy.cos(numpy.pi * k / (m + 1))))
        scale = math.prod(2.0 / (m + 1) for m in box.shape)     # DST-I applied twice
        self.inv = (scale / lam).astype(self.dtype)
        self.u = self.xp.zeros(box.padded_shape, self.dtype)
        self.coarsest_rhs = self.xp.zeros(1, self.dtype)

    @property
    def fine_box(self):
        return self.box

    def cycle(self, f, u=None, kind=None):
        """u = A^-1 f (``u`` and ``kind`` are accepted and ignored: the solve is exact)."""
        self.coarsest_rhs = f
        t = f
        for a in range(self.box.dim):
            t = dst1(t, a, self.xp)
        t = t * self.inv
        for a in range(self.box.dim):
            t = dst1(t, a, self.xp)
        grid.interior(self.u)[...] = t
        return self.u

    def memory_values(self):
        return self.inv.size + self.u.size

    def operator_complexity(self):
        return 1.0

    def describe(self):
        return [f"exact solve by DST-I along each axis ({'cuFFT' if self.xp is not numpy else 'pocketfft'})"]
