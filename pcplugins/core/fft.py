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
GPU, pocketfft through NumPy on the host), or along an axis of at most ``DENSE_DST`` points the
product with its m x m matrix (one matrix product, BLAS or cuBLAS): 2m operations a point instead
of the FFT's few passes over an array twice as long, which the GPU's matrix units finish sooner
while m is small, and whatever the prime factors of 2(m + 1) are.
"""
import math

import numpy

from .. import backend
from . import grid

# The longest axis whose DST-I is a dense matrix product (measured: benchmarks/fft_dst.py).
DENSE_DST = 512


def dst1(x, axis, xp):
    """Unnormalised DST-I along ``axis``: y_k = sum_j x_j sin(pi (j + 1)(k + 1) / (m + 1))."""
    x = xp.moveaxis(x, axis, -1)
    m = x.shape[-1]
    z = xp.zeros(x.shape[:-1] + (1,), x.dtype)
    y = xp.concatenate([z, x, z, -x[..., ::-1]], axis=-1)
    s = xp.fft.rfft(y, axis=-1)[..., 1:m + 1].imag * -0.5
    return xp.moveaxis(s.astype(x.dtype, copy=False), -1, axis)


_SINE = {}


def sine_matrix(m, dtype, xp):
    """The DST-I's matrix S_jk = sin(pi (j + 1)(k + 1) / (m + 1)): symmetric, S S = (m + 1)/2 I.
    Built where it is used, its argument reduced exactly in integers (sin has period 2(m + 1) in
    (j + 1)(k + 1)), and kept: a cube has one matrix for its three axes, and a new setup on the
    same grid (a Newton step, a new KSP) finds it."""
    key = (m, numpy.dtype(dtype).str, xp.__name__, backend.device_id(xp))
    if key not in _SINE:
        if len(_SINE) >= 16:
            _SINE.clear()
        k = xp.arange(1, m + 1, dtype=numpy.int64)
        r = (k[:, None] * k[None, :]) % (2 * (m + 1))
        _SINE[key] = xp.sin(r * (numpy.pi / (m + 1))).astype(dtype)
    return _SINE[key]


def dst1_dense(x, axis, s, xp):
    """dst1 along ``axis`` as a product with ``sine_matrix``: the last axis as one product on the
    right (S is symmetric), any other as a batch of products on the left, with no transposes
    (backend.matmul: a CUDA graph may capture it)."""
    x = xp.ascontiguousarray(x, dtype=s.dtype)
    shape, m = x.shape, x.shape[axis]
    out = xp.empty_like(x)
    if axis == x.ndim - 1:
        backend.matmul(x.reshape(-1, m), s, out.reshape(-1, m))
    else:
        before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
        backend.matmul(s, x.reshape(before, m, after), out.reshape(before, m, after))
    return out


class LaplacianFFT:
    """The solve on a whole (serial) grid, with the interface of multigrid.Multigrid that the
    DMDA preconditioners use (``cycle``, ``fine_box``, ``coarsest_rhs``, ...)."""

    def __init__(self, op, weights, dense=None):
        box = op.box
        if box.shape != box.global_shape:
            raise ValueError("the FFT solve needs the whole grid on one rank")
        self.box, self.xp, self.dtype = box, op.xp, op.dtype
        xp = self.xp
        self.periodic = tuple(a for a in range(box.dim) if box.periodic[a])
        self.sine = tuple(a for a in range(box.dim) if not box.periodic[a])
        limit = DENSE_DST if dense is None else dense
        self.dense = {a: sine_matrix(box.shape[a], self.dtype, xp) for a in self.sine if box.shape[a] <= limit}
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
        t = self._sine(t)
        if self.periodic:
            sizes = [self.box.shape[a] for a in self.periodic]
            t = xp.fft.irfftn(xp.fft.rfftn(t, axes=self.periodic) * self.inv, s=sizes, axes=self.periodic)
        else:
            t = t * self.inv
        t = self._sine(t)
        grid.interior(self.u)[...] = t
        return self.u

    def _sine(self, t):
        for a in self.sine:
            t = dst1_dense(t, a, self.dense[a], self.xp) if a in self.dense else dst1(t, a, self.xp)
        return t

    def memory_values(self):
        return self.inv.size + self.u.size + sum(s.size for s in self.dense.values())

    def operator_complexity(self):
        return 1.0

    def describe(self):
        d, gpu = self.box.dim, self.xp is not numpy

        def names(axes):
            return ", ".join("xyz"[d - 1 - a] for a in reversed(axes))
        by_fft = [a for a in self.sine if a not in self.dense]
        parts = [f"DST-I along {names(axes)} {how}" for axes, how in
                 ((list(self.dense), f"as matrix products ({'cuBLAS' if gpu else 'BLAS'})"),
                  (by_fft, f"by real FFTs ({'cuFFT' if gpu else 'pocketfft'})")) if axes]
        if self.periodic:
            parts.append(f"real FFTs (periodic) along {names(self.periodic)} ({'cuFFT' if gpu else 'pocketfft'})")
        return ["exact solve by " + " and ".join(parts)]
