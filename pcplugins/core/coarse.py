"""Solves on the coarsest level.

The coarsest operator is small (a few hundred unknowns by default), so its inverse is formed once
in setup (the pseudo-inverse where it is singular: pure Neumann, periodic) and each solve is one
dense matrix-vector product on the level's device: a single GEMV launch on the GPU.
Larger coarse grids (when the grid cannot be coarsened further) use a sparse LU on the host (of
the matrix bordered by the constants where they are its null space), or, for CSR hierarchies of
complex matrices, a fixed GMRES polynomial on the device.
"""
import copy

import numpy

from .. import backend
from . import grid, products, sparse, stencil

DENSE_LIMIT = 4096
HOST_INVERSE = 512      # dense inverses up to this order are formed on the host


def dense_inverse(A, xp):
    """The inverse of the dense matrix A (on the host or on ``xp``'s device), on ``xp``, in double:
    by LU; where that fails, for a singular (pure Neumann or periodic) operator, the pseudo-inverse:
    where every row sums to zero and the constants span both null spaces, (A + J)^-1 - J with
    J = 1 1^T / n (one LU more), else by an SVD on the host (an order of magnitude more than LU)."""
    return dense_inverse_queued(A, xp)()


def dense_inverse_queued(A, xp):
    """``dense_inverse``, returned as a function that finishes it: on the GPU the Cholesky path
    (_spd_inverse, a chain of about a hundred small solver kernels at the AMG's coarse size) is
    queued on a second stream (backend.fork) and nothing waits for it until the function is
    called, so the host may set up the smoothers meanwhile; the LU and SVD fallbacks run then,
    where it fails."""
    target = xp
    if A.shape[0] <= HOST_INVERSE and backend.array_module(A) is numpy:
        xp = numpy          # a small inverse is faster on the host than a device solver's round trips
    d = xp.asarray(A, dtype=numpy.result_type(A.dtype, numpy.float64))
    n = d.shape[0]
    stream, join = backend.fork(xp)
    with stream:
        eye = xp.eye(n)
        spd, ok = _spd_inverse(d, eye, xp)

    def finish():
        join()
        inv = spd if spd is not None and bool(ok) else _checked_inverse(d, eye, xp)
        if inv is None and rows_sum_to_zero(d):
            J = xp.full((n, n), 1.0 / n)
            inv = _checked_inverse(d + J, eye - J, xp, shift=J)
        if inv is None:
            inv = numpy.linalg.pinv(backend.to_host(A))
        return target.asarray(inv)
    return finish


def rows_sum_to_zero(A):
    """Whether every row of A (dense, on either device, or SciPy sparse) sums to zero, relative to
    its largest entry: the constants are in its null space (pure Neumann, periodic)."""
    return A.shape[0] > 0 and float(abs(A.sum(axis=1)).max()) <= 1e-12 * float(abs(A).max())


def _spd_inverse(d, eye, xp):
    """(d^-1 = L^-T L^-1 from the Cholesky factor L of a real d, whether it holds): a 0-d boolean
    array, true where d is symmetric to rounding and d X is the identity to 1e-8 (not so for a d
    that is not positive definite, whose factor has NaNs); on the GPU nothing waits for it. Cholesky
    and one triangular solve take about 0.6 of LU's time on a GPU at the AMG's coarse size, and the
    coarse matrices of symmetric positive definite problems are. (None, False) for a complex or empty
    d, and on the host, where LU (NumPy's) costs little at these sizes and SciPy's triangular solve
    would import scipy.linalg, a tenth of a second at a process's first setup."""
    if d.dtype.kind == "c" or not d.size or not backend.is_gpu(xp):
        return None, False
    from cupyx.scipy.linalg import solve_triangular
    symmetric = xp.abs(d - d.T).max() <= 1e-12 * xp.abs(d).max()
    try:
        Y = solve_triangular(xp.linalg.cholesky(d), eye, lower=True)
    except numpy.linalg.LinAlgError:
        return None, False
    inv = Y.T @ Y
    return inv, symmetric & _inverts(d, inv, eye, xp)


def _inverts(d, inv, product, xp):
    """Whether d inv is ``product`` to 1e-8, a 0-d boolean array (nothing waits for it; the check
    every dense inverse here passes; a NaN or Inf in inv fails it, as the comparison with NaN is
    false)."""
    return xp.abs(d @ inv - product).max() <= 1e-8


def _checked_inverse(d, product, xp, shift=0.0):
    """X = d^-1 - shift by LU, where d X is ``product`` to 1e-8 (else None)."""
    try:
        inv = xp.linalg.inv(d) - shift
    except numpy.linalg.LinAlgError:
        return None
    return inv if bool(_inverts(d - shift, inv, product, xp)) else None


def sparse_lu(A):
    """A solve by SciPy's sparse LU of the host CSR matrix A (a function of a host vector); where
    every row sums to zero (a pure Neumann or periodic operator, singular), of A bordered by the
    constants, [[A, 1], [1^T, 0]], whose solution is the mean-free one, the pseudo-inverse's for a
    consistent right-hand side."""
    import scipy.sparse
    import scipy.sparse.linalg
    n = A.shape[0]
    if rows_sum_to_zero(A):
        e = scipy.sparse.csr_matrix(numpy.ones((n, 1), A.dtype))
        lu = scipy.sparse.linalg.splu(scipy.sparse.bmat([[A, e], [e.T, None]]).tocsc())
        return lambda f: lu.solve(numpy.append(f, 0.0).astype(lu.U.dtype))[:n]
    lu = scipy.sparse.linalg.splu(A.tocsc())
    return lu.solve


class DirectSolve:
    def __init__(self, op):
        self.op = op
        self.xp = op.xp
        self.n = op.box.size
        # on the host a sparse LU beyond a few hundred unknowns: the dense inverse's setup is cubic
        # (a grid that does not coarsen far: odd periodic axes, -pc_gmg_levels 1), its GEMV no faster
        dense = self.n <= (DENSE_LIMIT if backend.is_gpu(self.xp) else HOST_INVERSE)
        A = op.to_dense() if dense else None
        if A is not None:
            self.inv = dense_inverse(A, self.xp).astype(op.dtype)
            self.out = self.xp.zeros(self.n, op.dtype)
            self.lu = None
        else:
            self.inv = None
            self.lu = sparse_lu(op.to_scipy())

    def solve(self, u, f):
        """u (padded; interior overwritten) = A^-1 f."""
        ui = grid.interior(u)
        if self.inv is not None:
            products.gemv(self.out, self.inv, f.reshape(-1))
            ui[...] = self.out.reshape(ui.shape)
        else:
            x = self.lu(backend.to_host(f).reshape(-1).astype(numpy.result_type(f.dtype, numpy.float64)))
            ui[...] = backend.to_namespace(x.reshape(ui.shape).astype(self.op.dtype), self.xp)
        return u

    def describe(self):
        kind = "dense inverse" if self.inv is not None else "sparse LU (host)"
        return f"direct solve ({kind}), {self.n} unknowns"


class PolynomialSolve:
    """The coarsest stencil level (multigrid.py) by CSRPolynomialSolve on its assembled matrix:
    pcplugins.ShiftedLaplace's stencil levels, whose coarsest grid (replicated on every rank under
    MPI) is too large for the dense inverse."""
    inv = None

    def __init__(self, op, degree=16):
        A = op.to_scipy()
        self.n = A.shape[0]
        self.poly = CSRPolynomialSolve(A.astype(numpy.complex128), sparse.module(op.xp).csr_matrix(A), op.xp, degree)

    def solve(self, u, f):
        """u (padded; interior overwritten) = p(A) f."""
        ui = grid.interior(u)
        ui[...] = self.poly.solve(f.reshape(-1)).reshape(ui.shape)
        return u

    def describe(self):
        return self.poly.describe()


class CSRDirectSolve:
    """The coarsest level of a CSR hierarchy (pcplugins.AMG, pcplugins.ShiftedLaplace): up to
    DENSE_LIMIT unknowns the dense inverse (``dense_inverse``, on the level's device), each solve
    one GEMV into a preallocated array (capturable in a CUDA graph); beyond, a sparse LU on the
    host. The inverse is computed in double and kept in ``dtype``. With ``wait=False`` the dense
    inverse is only queued (dense_inverse_queued): call ``finish()`` before the first solve."""

    def __init__(self, A, xp, dtype=None, wait=True):
        self.xp = xp
        self.n = A.shape[0]
        self.dtype = numpy.dtype(dtype or A.dtype)
        self.inv = self.lu = self._queued = None
        if self.n <= DENSE_LIMIT:
            # densified where A lives: a dense matrix built on the host and uploaded would be most
            # of a GPU AMG setup
            self._queued = dense_inverse_queued(sparse.dense(A, xp), xp)
            self.out = xp.zeros(self.n, self.dtype)
            if wait:
                self.finish()
        else:
            host = sparse.to_host(A)
            self.lu = sparse_lu(host)
            self.lu_dtype = host.dtype

    def finish(self):
        """Wait for the queued dense inverse (nothing to do where there is none)."""
        if self._queued is not None:
            self.inv, self._queued = self._queued().astype(self.dtype), None
        return self

    @property
    def capturable(self):
        """Whether a CUDA graph may capture the solve (the dense inverse's GEMV; not the host LU)."""
        return self.inv is not None

    def transposed(self, matrix):
        """The solve of A^T: the dense inverse transposed, or a sparse LU of A^T (``matrix()``:
        A^T, asked for only then)."""
        if self.inv is None:
            return CSRDirectSolve(matrix(), self.xp, self.dtype)
        t = copy.copy(self.finish())
        t.inv, t.out = self.xp.ascontiguousarray(self.inv.T), self.xp.zeros(self.n, self.dtype)
        return t

    def solve(self, f):
        """A^-1 f: with the dense inverse an array of this solve's own, which the next solve
        overwrites (a cycle reads it before then: one copy fewer a visit); else a new array."""
        if self.inv is not None:
            return products.gemv(self.out, self.inv, f)
        x = self.lu(backend.to_host(f).astype(self.lu_dtype))
        return backend.to_namespace(x.astype(self.dtype), self.xp)

    def describe(self):
        kind = "dense inverse" if self.inv is not None else "sparse LU (host)"
        return f"direct solve ({kind}), {self.n} unknowns"


class CSRPolynomialSolve:
    """The coarsest level by a fixed polynomial in A: the GMRES polynomial of degree ``degree``,
    applied through its roots, the harmonic Ritz values of ``degree`` Arnoldi steps from a fixed
    pseudo-random vector, in Leja order (Loe and Morgan, "Toward efficient polynomial
    preconditioning for GMRES", Numer. Linear Algebra Appl. 29 (2022)). It is a linear operator (the
    same polynomial for every right-hand side, so a non-flexible Krylov method may use it) and on
    the GPU ``degree`` row kernels and ``degree`` small updates, no host transfer: it serves
    coarsest grids too large for the dense inverse, where a sparse LU on the host would dominate
    the cycle (the shifted-Laplace coarsest grid, k h = 2.5, has (N/4 + 1)^2 unknowns). ``A_double``
    is the matrix in double for the setup (its Arnoldi steps run on the host); ``A`` the level's
    matrix on its device, in the cycle's precision."""

    def __init__(self, A_double, A, xp, degree=16):
        self.A, self.xp, self.degree = A, xp, degree
        self.dtype = numpy.dtype(A.dtype)
        if self.dtype.kind != "c":
            raise ValueError("the polynomial coarse solve needs complex arithmetic (its roots are complex)")
        host = sparse.to_host(A_double)
        self.roots = harmonic_ritz_values(host, degree)

    def solve(self, f):
        """p(A) f with 1 - A p(A) the GMRES polynomial (a new array)."""
        y = self.xp.zeros_like(f)
        p = f.copy()
        last = len(self.roots) - 1
        for i, theta in enumerate(self.roots):
            c = self.dtype.type(1.0 / theta)
            if i < last:
                _poly_step(y, p, products.spmv(self.A, p, self.xp), c)
            else:
                y += c * p
        return y

    def describe(self):
        return (f"GMRES polynomial of degree {self.degree} (harmonic Ritz roots, Leja order), "
                f"{self.A.shape[0]} unknowns")


class GatheredStencilSolve:
    """The coarsest level's solve where that level is still distributed (a one-level hierarchy
    under MPI: a grid too small to coarsen, or -pc_gmg_levels 1). The coarsest solve must be of the
    whole problem whatever the rank count, or each rank would solve its own part alone: the
    operator's coefficients are gathered onto every rank once, each right-hand side at every
    visit, and every rank solves the whole grid (``make(op)``) and keeps its own part."""

    def __init__(self, op, comm, level, make):
        box, whole, xp = op.box, op.box.whole(), op.xp
        comm.expect_gather(level, box)
        coefs = op.coefs if op.constant else [comm.gather(level, c, box, xp.zeros(whole.shape, op.dtype))
                                              for c in op.coefs]
        self.inner = make(stencil.StencilOperator(whole, op.offsets, coefs, xp, op.dtype))
        self.comm, self.level, self.box = comm, level, box
        self.f = xp.zeros(whole.shape, op.dtype)
        self.u = xp.zeros(whole.padded_shape, op.dtype)
        self.own = tuple(slice(s, s + n) for s, n in zip(box.start, box.shape))

    def solve(self, u, f):
        self.comm.gather(self.level, f, self.box, self.f)
        self.inner.solve(self.u, self.f)
        grid.interior(u)[...] = grid.interior(self.u)[self.own]
        return u

    def describe(self):
        return self.inner.describe() + ", the whole level gathered onto every rank"


class GatheredRowsSolve:
    """The last level of a distributed hierarchy, gathered: its whole matrix on every rank, where
    ``make(matrix)`` builds what solves it (by default a direct solve; kcycle.py passes a serial
    hierarchy that continues the coarsening); each visit gathers the right-hand side (one
    allgather) and keeps this rank's rows of the result."""

    def __init__(self, A, xp, make=None):
        self.A = A
        self.inner = (make or (lambda M: CSRDirectSolve(M, xp)))(A.gathered())
        self.gather = A.comm.gather_rows(A.starts, xp)
        self.lo, self.hi = int(A.starts[A.comm.rank]), int(A.starts[A.comm.rank + 1])

    @property
    def capturable(self):
        """Whether a CUDA graph may capture the solve: the gather stays on the device and so does
        the solve of the gathered level."""
        return self.A.comm.capturable and self.inner.capturable

    def solve(self, f):
        return self.inner.solve(self.gather(f))[self.lo:self.hi].copy()

    def transposed(self, matrix):
        """The solve of the gathered A^T (``matrix()``: it, gathered; collective): the inner
        solve's transpose."""
        t = copy.copy(self)
        t.inner = self.inner.transposed(matrix)
        return t

    def describe(self):
        return self.inner.describe() + f", gathered onto each of {self.A.comm.size} ranks"


def _poly_step(y, p, ap, c):
    """y += c p; p -= c A p (one kernel on the GPU)."""
    if backend.array_module(y) is numpy:
        y += c * p
        p -= c * ap
        return
    sparse.elementwise("poly_step", "T ap, T c", "T y, T p", "y += c * p; p -= c * ap")(ap, c, y, p)


def harmonic_ritz_values(A, m, seed=7):
    """The m harmonic Ritz values of A (SciPy, complex or real) from m Arnoldi steps started at a
    fixed pseudo-random vector, in Leja order (each next root the farthest, in product of
    distances, from those before it: keeps the product of linear factors well conditioned)."""
    n = A.shape[0]
    m = min(m, n)
    rng = numpy.random.default_rng(seed)
    V = numpy.zeros((n, m + 1), complex)
    H = numpy.zeros((m + 1, m), complex)
    v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    V[:, 0] = v / numpy.linalg.norm(v)
    for j in range(m):
        w = A @ V[:, j]
        for _ in range(2):                                  # twice Gram-Schmidt: orthogonal to rounding
            h = V[:, :j + 1].conj().T @ w
            w -= V[:, :j + 1] @ h
            H[:j + 1, j] += h
        H[j + 1, j] = numpy.linalg.norm(w)
        if H[j + 1, j] <= 1e-14 * abs(H[:j + 1, j]).max():   # invariant subspace: the Ritz values are exact
            m = j + 1
            break
        V[:, j + 1] = w / H[j + 1, j]
    Hm = H[:m, :m]
    e = numpy.zeros(m)
    e[-1] = 1.0
    theta = numpy.linalg.eigvals(Hm + abs(H[m, m - 1]) ** 2 * numpy.outer(numpy.linalg.solve(Hm.conj().T, e), e))
    order = [int(numpy.argmax(abs(theta)))]
    rest = [i for i in range(len(theta)) if i != order[0]]
    while rest:
        score = [numpy.log(abs(theta[i] - theta[order]) + 1e-300).sum() for i in rest]
        order.append(rest.pop(int(numpy.argmax(score))))
    return theta[order]
