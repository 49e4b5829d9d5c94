"""Multigrid for the complex shifted Laplacian (Erlangga, Oosterlee, Vuik; Knibbe, Oosterlee, Vuik).

On a square (cube) grid of n points per axis in DMDA order (x fastest), on SciPy or cupyx CSR
matrices (complex):

- coarsening by 2 per axis that keeps the boundary: with the boundary nodes as unknowns
  (absorbing boundary, n = 2^j + 1) coarse node J is fine node 2J; with interior unknowns only
  (Dirichlet, n = 2^j - 1) coarse J is fine 2J + 1;
- bilinear (trilinear) prolongation P (the paper uses de Zeeuw's matrix-dependent prolongation,
  which we have not implemented), restriction P^T (full weighting up to a factor, which does not
  change the correction), Galerkin coarse matrices P^T M P (9-point; 27-point in 3D);
- damped 4-colour (8-colour in 3D) Gauss-Seidel (omega 0.9, the paper's), colours by the parity of
  the grid indices;
- V, W or F cycles (the paper: one F-cycle), a dense inverse or a GMRES polynomial on the coarsest grid.

Coarsening stops before a grid would have k h > ``max_kh`` (2.5): with bilinear prolongation a
coarser grid spoils the correction (the F-cycle diverged on MP1 at N = 128 with a 17^2 coarsest
grid, k h = 5, and converged at 0.26 per cycle with 65^2). The coarsest grid then grows with k
(N/4 + 1 points per axis at k h = 0.625): a dense inverse up to 4096 unknowns, beyond that a fixed
GMRES polynomial of degree 16 (coarse.CSRPolynomialSolve), which left the Bi-CGSTAB counts of the
exact solve unchanged at N = 64, 128, 256 (degree 8 added up to two iterations) and keeps the cycle
on the GPU; the paper instead coarsens further and smooths on its coarsest grid, which diverged
here (damped Gauss-Seidel on M is not convergent at k h = 2.5, and coarser grids spoiled the
correction with bilinear and with collapsed-stencil matrix-dependent prolongation alike).

``StencilMG`` runs the same method on multigrid.py's stencil levels instead, so it runs on any
number of ranks (the levels of a distributed DMDA, a ghost update after each colour, the small
levels gathered): the same coarsening (grids that keep their ends for the absorbing boundary),
bilinear transfers, Galerkin coarse stencils (by probing), colours in the same order and a direct
coarsest solve (a dense inverse or the same polynomial), so one application agrees with
ShiftedLaplaceMG's to rounding.
"""
import numpy
import scipy.sparse

from . import backend, coarse, grid, multigrid, smoothers, sparse


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


def _coarse_kind(coarse_solve, unknowns):
    """The coarsest solve both hierarchies use: 'auto' is the dense inverse up to
    coarse.DENSE_LIMIT unknowns and the GMRES polynomial beyond."""
    if coarse_solve != "auto":
        return coarse_solve
    return "direct" if unknowns <= coarse.DENSE_LIMIT else "polynomial"


def _colours(n, dim, keep_boundary):
    """2^dim colours by the parities of the grid indices: no two neighbours of a 9-point (27-point)
    Galerkin stencil share one. Indexed and numbered as grid.colours does (the eliminated
    Dirichlet boundary point is index 0; the x parity fastest), so the stencil levels smooth in
    the same order."""
    index = numpy.indices((n,) * dim).reshape(dim, -1) + (0 if keep_boundary else 1)
    return sum((index[a] % 2) << (dim - 1 - a) for a in range(dim)).astype(numpy.int32)


class ShiftedLaplaceMG:
    def __init__(self, M, n, xp, kmax, keep_boundary=True, cycle="f", omega=0.9, pre=1, post=1, max_kh=2.5,
                 dtype=numpy.complex128, coarse_solve="auto", degree=16, dim=2):
        """M: the fine matrix as a CSR matrix of ``xp`` (or SciPy's, moved to the GPU). The
        Galerkin products run on ``xp`` in double; each level is then stored in ``dtype``
        (complex64 for mixed precision).
        ``coarse_solve``: 'direct' (dense inverse up to coarse.DENSE_LIMIT unknowns, sparse LU on
        the host beyond), 'polynomial' (a GMRES polynomial of ``degree``) or 'auto' (direct when the
        dense inverse applies, the polynomial otherwise)."""
        if cycle not in ("v", "w", "f"):
            raise ValueError(f"unknown cycle {cycle!r} (v, w or f)")
        if coarse_solve not in ("auto", "direct", "polynomial"):
            raise ValueError(f"unknown coarse solve {coarse_solve!r} (auto, direct or polynomial)")
        self.xp, self.cycle_kind, self.pre, self.post = xp, cycle, pre, post
        self.omega, self.max_kh, self.dim = omega, max_kh, dim
        self.dtype = numpy.dtype(dtype)
        sp = sparse.module(xp)
        A = sp.csr_matrix(M) if backend.is_gpu(xp) and not sp.issparse(M) else M.tocsr()
        self.levels = []
        while True:
            lev = _Level(A.astype(self.dtype), n)
            self.levels.append(lev)
            P1, nc = prolongation_1d(n, keep_boundary)
            h_coarse = 1.0 / (nc - 1) if keep_boundary else 1.0 / (nc + 1)
            if nc < 3 or kmax * h_coarse > max_kh:
                break
            P1 = sp.csr_matrix(P1)
            P = P1
            for _ in range(dim - 1):
                P = sp.kron(P, P1, format="csr")
            R = P.T.tocsr()
            Ac = (R @ A @ P).tocsr()            # Galerkin, in double, on the level's device
            lev.P, lev.R = P.astype(self.dtype), R.astype(self.dtype)
            lev.smoother = smoothers.CSRColourGS(lev.A, xp.asarray(_colours(n, dim, keep_boundary)), xp, omega)
            A, n = Ac, nc
        if _coarse_kind(coarse_solve, A.shape[0]) == "direct":
            self.coarse = coarse.CSRDirectSolve(A, xp, self.dtype)
        else:
            self.coarse = coarse.CSRPolynomialSolve(A, self.levels[-1].A, xp, degree)

    @property
    def on_device_only(self):
        """True when a cycle never waits for the host (it may then be captured as a CUDA graph)."""
        return getattr(self.coarse, "lu", None) is None

    def cycle(self, f):
        """One cycle for M u = f from u = 0 (a new array, in the hierarchy's precision)."""
        return self._cycle(0, f.astype(self.dtype, copy=False), self.cycle_kind)

    def _cycle(self, k, f, kind):
        if k == len(self.levels) - 1:
            return self.coarse.solve(f)
        xp = self.xp
        lev = self.levels[k]
        u = xp.zeros_like(f)
        lev.smoother.smooth(u, f, self.pre, zero_guess=True)
        rc = sparse.spmv(lev.R, sparse.residual(lev.A, f, u, xp), xp)
        nxt = self.levels[k + 1].A
        if kind == "v":
            ec = self._cycle(k + 1, rc, "v")
        else:                              # W: twice; F: an F-cycle, then a V-cycle, on the coarser level
            ec = self._cycle(k + 1, rc, kind)
            ec += self._cycle(k + 1, sparse.residual(nxt, rc, ec, xp), "w" if kind == "w" else "v")
        u += sparse.spmv(lev.P, ec, xp)
        lev.smoother.smooth(u, f, self.post, reverse=True)
        return u

    def describe(self):
        sizes = " -> ".join(f"{lev.n}^{self.dim}" for lev in self.levels)
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        return [f"{self.cycle_kind.upper()}-cycle in {prec}, {len(self.levels)} levels ({sizes}), bilinear prolongation, "
                f"Galerkin coarse matrices, {2 ** self.dim}-colour Gauss-Seidel omega {self.omega:g} ({self.pre}, {self.post})",
                f"coarsest grid: {self.coarse.describe()}"]


class _Level:
    def __init__(self, A, n):
        self.A, self.n = A, n
        self.P = self.R = self.smoother = None


class StencilMG:
    """ShiftedLaplaceMG's interface (``cycle`` on flat arrays, ``describe``) over a
    multigrid.Multigrid on the stencil operator ``op`` of M (complex), distributed through
    ``comm`` (multigrid.Comm). Coarsening stops as in ShiftedLaplaceMG, before k h > ``max_kh``
    (h doubles per level; ``h`` is the finest level's), and the coarsest solve is chosen the same
    way (``coarse_solve`` 'auto': the dense inverse up to coarse.DENSE_LIMIT unknowns, else the
    polynomial)."""
    on_device_only = False

    def __init__(self, op, kmax, h, comm=None, cycle="f", omega=0.9, pre=1, post=1, max_kh=2.5,
                 coarse_solve="auto", degree=16, event=None):
        boxes = grid.hierarchy_boxes(op.box.whole(), None, 0)[0]
        levels = 1
        while levels < len(boxes) and kmax * h * 2 ** levels <= max_kh:
            levels += 1
        options = multigrid.Options(levels=levels, cycle=cycle, pre=pre, post=post, smoother="multicolor",
                                    omega=omega, coarse_operator="galerkin",
                                    coarse_solve=_coarse_kind(coarse_solve, boxes[levels - 1].size),
                                    coarse_degree=degree, fused=False)
        self.mg = multigrid.Multigrid(op, options, comm, event)
        self.dtype, self.levels, self.omega = op.dtype, self.mg.levels, omega

    def cycle(self, f):
        """One cycle for M u = f (this rank's points, flat) from u = 0; a new flat array."""
        u = self.mg.cycle(f.reshape(self.mg.fine_box.shape).astype(self.dtype, copy=False))
        return grid.interior(u).ravel()

    def describe(self):
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        return ([f"stencil levels (multigrid.py) in {prec}, Galerkin coarse stencils, omega {self.omega:g}"]
                + self.mg.describe())
