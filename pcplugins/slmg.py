"""Multigrid for the complex shifted Laplacian (Erlangga, Oosterlee, Vuik; Knibbe, Oosterlee, Vuik).

On a square n x n grid in DMDA order (x fastest), on SciPy or cupyx CSR matrices (complex):

- coarsening by 2 per axis that keeps the boundary: with the boundary nodes as unknowns
  (absorbing boundary, n = 2^j + 1) coarse node J is fine node 2J; with interior unknowns only
  (Dirichlet, n = 2^j - 1) coarse J is fine 2J + 1;
- bilinear prolongation P (the paper uses de Zeeuw's matrix-dependent prolongation, which we have
  not implemented), restriction P^T (full weighting up to a factor, which does not change the
  correction), Galerkin coarse matrices P^T M P (9-point);
- damped 4-colour Gauss-Seidel (omega 0.9, the paper's), colours by the parity of (x, y);
- V, W or F cycles (the paper: one F-cycle), a direct solve on the coarsest grid.

Coarsening stops before a grid would have k h > ``max_kh`` (2.5): with bilinear prolongation a
coarser grid spoils the correction (the F-cycle diverged on MP1 at N = 128 with a 17^2 coarsest
grid, k h = 5, and converged at 0.26 per cycle with 65^2). The coarsest grid then grows with k
(N/4 + 1 points per axis at k h = 0.625), solved by a dense inverse up to 4096 unknowns and a sparse
LU on the host beyond.
"""
import numpy
import scipy.sparse

from . import backend, coarse, smoothers, sparse


def prolongation_1d(n, keep_boundary):
    """The 1D linear interpolation from the coarse grid to n points, and the coarse size."""
    if keep_boundary:
        nc = (n + 1) // 2
        fine_of = 2 * numpy.arange(nc)
    else:
        nc = (n - 1) // 2
        fine_of = 2 * numpy.arange(nc) + 1
    rows, cols, vals = [fine_of], [numpy.arange(nc)], [numpy.ones(nc)]
    for s in (-1, 1):
        f = fine_of + s
        ok = (f >= 0) & (f < n)
        rows.append(f[ok])
        cols.append(numpy.arange(nc)[ok])
        vals.append(numpy.full(int(ok.sum()), 0.5))
    P = scipy.sparse.csr_matrix((numpy.concatenate(vals), (numpy.concatenate(rows), numpy.concatenate(cols))),
                                shape=(n, nc))
    return P, nc


def _colours(n):
    y, x = numpy.divmod(numpy.arange(n * n), n)
    return (2 * (y % 2) + x % 2).astype(numpy.int32)


class ShiftedLaplaceMG:
    def __init__(self, M, n, xp, kmax, keep_boundary=True, cycle="f", omega=0.9, pre=1, post=1, max_kh=2.5,
                 dtype=numpy.complex128):
        """M: the fine matrix as SciPy CSR (the Galerkin products run on the host in double, each
        level is then stored in ``dtype``, complex64 for mixed precision, on ``xp``)."""
        if cycle not in ("v", "w", "f"):
            raise ValueError(f"unknown cycle {cycle!r} (v, w or f)")
        self.xp, self.cycle_kind, self.pre, self.post = xp, cycle, pre, post
        self.omega, self.max_kh = omega, max_kh
        self.dtype = numpy.dtype(dtype)
        sp = sparse.module(xp)
        A = M.tocsr()
        self.levels = []
        while True:
            Ad = A.astype(self.dtype)
            lev = _Level(sp.csr_matrix(Ad) if backend.is_gpu(xp) else Ad, n)
            self.levels.append(lev)
            P1, nc = prolongation_1d(n, keep_boundary)
            h_coarse = 1.0 / (nc - 1) if keep_boundary else 1.0 / (nc + 1)
            if nc < 3 or kmax * h_coarse > max_kh:
                break
            P = scipy.sparse.kron(P1, P1, format="csr")
            Ac = (P.T @ A @ P).tocsr()
            lev.P = sp.csr_matrix(P.astype(self.dtype)) if backend.is_gpu(xp) else P.astype(self.dtype)
            lev.R = lev.P.T.tocsr()
            lev.smoother = smoothers.CSRColourGS(lev.A, xp.asarray(_colours(n)), xp, omega)
            A, n = Ac, nc
        self.coarse = coarse.CSRDirectSolve(A, xp, self.dtype)

    def cycle(self, f):
        """One cycle for M u = f from u = 0 (a new array, in the hierarchy's precision)."""
        return self._cycle(0, f.astype(self.dtype, copy=False), self.cycle_kind)

    def _cycle(self, k, f, kind):
        if k == len(self.levels) - 1:
            return self.coarse.solve(f)
        lev = self.levels[k]
        u = self.xp.zeros_like(f)
        lev.smoother.smooth(u, f, self.pre, zero_guess=True)
        rc = lev.R @ (f - lev.A @ u)
        nxt = self.levels[k + 1].A
        if kind == "v":
            ec = self._cycle(k + 1, rc, "v")
        elif kind == "w":
            ec = self._cycle(k + 1, rc, "w")
            ec += self._cycle(k + 1, rc - nxt @ ec, "w")
        else:                              # F: an F-cycle, then a V-cycle, on the coarser level
            ec = self._cycle(k + 1, rc, "f")
            ec += self._cycle(k + 1, rc - nxt @ ec, "v")
        u += lev.P @ ec
        lev.smoother.smooth(u, f, self.post, reverse=True)
        return u

    def describe(self):
        sizes = " -> ".join(f"{lev.n}^2" for lev in self.levels)
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        return [f"{self.cycle_kind.upper()}-cycle in {prec}, {len(self.levels)} levels ({sizes}), bilinear prolongation, "
                f"Galerkin coarse matrices, 4-colour Gauss-Seidel omega {self.omega:g} ({self.pre}, {self.post}), "
                "coarsest grid solved directly"]


class _Level:
    def __init__(self, A, n):
        self.A, self.n = A, n
        self.P = self.R = self.smoother = None
