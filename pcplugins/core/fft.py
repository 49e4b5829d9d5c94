"""Fast Poisson solve: the exact inverse of the constant-coefficient star Laplacian on a structured
grid by discrete sine transforms (DST-I) along its Dirichlet axes and real FFTs along its periodic
ones, the direct method that Feng, Shu, Xu, Zhang (section 5.4) compare full multigrid with (cuFFT
there).

The operator diag u + sum_a w_a (u(i - e_a) + u(i + e_a)) with diag = -2 sum_a w_a, zero Dirichlet
values outside the grid along a Dirichlet axis and the grid's other end beyond a periodic one, has
products of sine modes (Dirichlet axes) and Fourier modes (periodic axes) as eigenvectors, with
eigenvalues sum_a -2 w_a (1 - cos theta_a): theta = pi k / (m + 1), k = 1..m, along a Dirichlet
axis of m points and theta = 2 pi k / m, k = 0..m-1, along a periodic one. A DST-I along every
Dirichlet axis, a real FFT along the periodic ones, a division by the eigenvalues and the inverse
transforms solve it exactly. Periodic along every axis the operator is singular (the constants);
the zero mode's eigenvalue is then inverted as 0: the mean-free solution, the pseudo-inverse's.
The DST-I is a real FFT of the odd extension, in the array namespace (cuFFT through CuPy on the
GPU, pocketfft through NumPy on the host).
"""
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


class LaplacianFFT:
    """The solve on a whole (serial) grid, with the interface of multigrid.Multigrid that the
    DMDA preconditioners use (``cycle``, ``fine_box``, ``coarsest_rhs``, ...)."""

    def __init__(self, op, weights):
        box = op.box
        if box.shape != box.global_shape:
            raise ValueError("the FFT solve needs the whole grid on one rank")
        self.box, self.xp, self.dtype = box, op.xp, op.dtype
        xp = self.xp
        self.periodic = tuple(a for a in range(box.dim) if box.periodic[a])
        self.sine = tuple(a for a in range(box.dim) if not box.periodic[a])
        shape = list(box.shape)
        if self.periodic:                    # the real FFT keeps half the last periodic axis' modes
            shape[self.periodic[-1]] = box.shape[self.periodic[-1]] // 2 + 1
        lam = xp.zeros(tuple(shape), numpy.float64)      # built on the device from 1-D factors
        scale = 1.0                                      # DST-I applied twice; the inverse FFT scales itself
        for a, (m, w) in enumerate(zip(box.shape, weights)):
            if box.periodic[a]:
                theta = 2.0 * numpy.pi * numpy.arange(shape[a]) / m
            else:
                theta = numpy.pi * numpy.arange(1, m + 1) / (m + 1)
                scale *= 2.0 / (m + 1)
            factor = -2.0 * w * (1.0 - numpy.cos(theta))
            lam += xp.asarray(factor.reshape([-1 if b == a else 1 for b in range(box.dim)]))
        zero = lam == 0                                  # the constants, periodic along every axis
        self.inv = xp.where(zero, 0.0, scale / xp.where(zero, 1.0, lam)).astype(self.dtype)
        self.u = self.xp.zeros(box.padded_shape, self.dtype)
        self.coarsest_rhs = self.xp.zeros(1, self.dtype)

    @property
    def fine_box(self):
        return self.box

    def cycle(self, f, u=None, kind=None):
        """u = A^-1 f (``u`` and ``kind`` are accepted and ignored: the solve is exact)."""
        self.coarsest_rhs = f
        xp, t = self.xp, f
        for a in self.sine:
            t = dst1(t, a, xp)
        if self.periodic:
            sizes = [self.box.shape[a] for a in self.periodic]
            t = xp.fft.irfftn(xp.fft.rfftn(t, axes=self.periodic) * self.inv, s=sizes, axes=self.periodic)
        else:
            t = t * self.inv
        for a in self.sine:
            t = dst1(t, a, xp)
        grid.interior(self.u)[...] = t
        return self.u

    def memory_values(self):
        return self.inv.size + self.u.size

    def operator_complexity(self):
        return 1.0

    def describe(self):
        d = self.box.dim
        names = [", ".join("xyz"[d - 1 - a] for a in reversed(axes)) for axes in (self.sine, self.periodic)]
        how = " and ".join(f"{what} along {n}" for what, n in zip(("DST-I", "real FFTs (periodic)"), names) if n)
        return [f"exact solve by {how} ({'cuFFT' if self.xp is not numpy else 'pocketfft'})"]
