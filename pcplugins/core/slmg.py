"""Multigrid for the complex shifted Laplacian (Erlangga, Oosterlee, Vuik; Knibbe, Oosterlee, Vuik).

On a square (cube) grid of n points per axis in DMDA order (x fastest), on SciPy or cupyx CSR
matrices (complex):

- coarsening by 2 per axis that keeps the boundary: with the boundary nodes as unknowns
  (absorbing boundary, n = 2^j + 1) coarse node J is fine node 2J; with interior unknowns only
  (Dirichlet, n = 2^j - 1) coarse J is fine 2J + 1;
- prolongation P bilinear (trilinear in 3D), or in 2D with the boundary nodes as unknowns de Zeeuw's
  matrix-dependent prolongation (``dezeeuw_prolongation``, the paper's); restriction R the
  transpose of the bilinear one (full weighting up to a factor, which does not change the
  correction); Galerkin coarse matrices R M P (9-point; 27-point in 3D);
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
correction with bilinear, collapsed-stencil and de Zeeuw's prolongation alike: with de Zeeuw's a
fourth level made the F-cycle on M grow by 21 per cycle at N = 64 and Bi-CGSTAB need 25 and 107
iterations at N = 64, 128, against 9 and 18 with three levels).

``StencilMG`` runs the same method on multigrid.py's stencil levels instead, so it runs on any
number of ranks (the levels of a distributed DMDA, a ghost update after each colour, the small
levels gathered): the same coarsening (grids that keep their ends for the absorbing boundary),
the same prolongation (bilinear, or de Zeeuw's as transfer.MatrixDependent), Galerkin coarse
stencils (by probing), colours in the same order and a direct coarsest solve (a dense inverse or
the same polynomial), so one application agrees with ShiftedLaplaceMG's to rounding.
"""
import numpy
import scipy.sparse

from .. import backend
from . import coarse, grid, multigrid, smoothers, sparse, transfer
from .cycle import CSRLevel, Cycle


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


def dezeeuw_prolongation(A, n, xp=numpy):
    """De Zeeuw's matrix-dependent prolongation on the grid of n x n points (the boundary nodes
    unknowns, coarse node J at fine node 2J; for an even n the last column and row of nodes have a
    coarse neighbour on one side only and take its value), from A's 9-point (or 5-point) stencils, in the
    complex form of Erlangga, Oosterlee and Vuik: |.| is the modulus.

    A fine node between two coarse nodes along x takes the weights d_w / (d_w + d_e) and
    d_e / (d_w + d_e) from its west and east neighbours, with d_w = max(|a_nw + a_w + a_sw|,
    |a_nw|, |a_sw|) the strength of its west column (along y: its north and south rows;
    transfer.dezeeuw_weights, which the stencil levels' transfer.MatrixDependent uses too). A node in
    the middle of a coarse cell makes its own row of A P vanish: its value is -(sum of its
    neighbours' a_j e_j) / a_c, the neighbours' e_j being the coarse values and the interpolated
    edge values. For the constant-coefficient Laplacian it is bilinear interpolation. A is a CSR
    matrix of ``xp`` (SciPy or cupyx) with no duplicate entries; so is the result (n^2 x nc^2)."""
    sp = sparse.module(xp)
    N = n * n
    nc = (n + 1) // 2
    rows = sparse.rows_of(A, xp).astype(numpy.int64)
    cols = A.indices.astype(numpy.int64)
    dy, dx = cols // n - rows // n, cols % n - rows % n
    near = (abs(dx) <= 1) & (abs(dy) <= 1)
    S = xp.zeros((3, 3, N), dtype=A.dtype)          # S[dy + 1, dx + 1, row]
    S[dy[near] + 1, dx[near] + 1, rows[near]] = A.data[near]
    j, i = xp.divmod(xp.arange(N), n)
    r, c, v = [], [], []

    def add(p, jj, ii, w):                           # row p, coarse node at fine (jj, ii), weight w
        r.append(p), c.append((jj // 2) * nc + ii // 2), v.append(w)

    p = xp.nonzero((j % 2 == 0) & (i % 2 == 0))[0]   # coarse nodes: injection
    add(p, j[p], i[p], xp.ones(p.shape[0], A.dtype))
    p = xp.nonzero((j % 2 == 0) & (i % 2 == 1) & (i + 1 < n))[0]   # between west and east coarse nodes
    w_w, w_e = transfer.dezeeuw_weights(*([S[a, side, p] for a in range(3)] for side in (0, 2)), xp)
    add(p, j[p], i[p] - 1, w_w)
    add(p, j[p], i[p] + 1, w_e)
    p = xp.nonzero((j % 2 == 1) & (i % 2 == 0) & (j + 1 < n))[0]   # between south and north coarse nodes
    w_s, w_n = transfer.dezeeuw_weights(*([S[side, a, p] for a in range(3)] for side in (0, 2)), xp)
    add(p, j[p] - 1, i[p], w_s)
    add(p, j[p] + 1, i[p], w_n)
    # an even n leaves the last column (row) with no coarse node beyond it: those boundary nodes
    # take their one coarse neighbour's value (the last cell is half a coarse cell)
    p = xp.nonzero((j % 2 == 0) & (i == n - 1) & (i % 2 == 1))[0]
    add(p, j[p], i[p] - 1, xp.ones(p.shape[0], A.dtype))
    p = xp.nonzero((j == n - 1) & (j % 2 == 1) & (i % 2 == 0))[0]
    add(p, j[p] - 1, i[p], xp.ones(p.shape[0], A.dtype))
    P = sp.coo_matrix((xp.concatenate(v).astype(A.dtype), (xp.concatenate(r), xp.concatenate(c))),
                      shape=(N, nc * nc)).tocsr()
    # cell centres: (A P) vanishes on their rows; they couple only to non-centre nodes
    centre = (j % 2 == 1) & (i % 2 == 1)
    D = A.diagonal()
    off = A - sp.diags(D)
    scale = xp.where(centre, -1.0 / xp.where(centre, D, 1.0), 0.0).astype(A.dtype)
    return (P + sp.diags(scale) @ (off @ P)).tocsr()


AUTO_DIRECT = 2048    # 'auto' coarsest solve: the dense inverse up to this many unknowns


def _coarse_kind(coarse_solve, unknowns):
    """The coarsest solve both hierarchies use: 'auto' is the dense inverse up to AUTO_DIRECT
    unknowns and the GMRES polynomial beyond (the 33^2 coarsest grid of the 2^j + 1 grids stays
    direct; a dense complex inverse grows as the cube of the unknowns, and the polynomial leaves
    the counts within one of the exact solve)."""
    if coarse_solve != "auto":
        return coarse_solve
    return "direct" if unknowns <= AUTO_DIRECT else "polynomial"


def _colours(n, dim, keep_boundary):
    """2^dim colours by the parities of the grid indices: no two neighbours of a 9-point (27-point)
    Galerkin stencil share one. Indexed and numbered as grid.colours does (the eliminated
    Dirichlet boundary point is index 0; the x parity fastest), so the stencil levels smooth in
    the same order."""
    index = numpy.indices((n,) * dim).reshape(dim, -1) + (0 if keep_boundary else 1)
    return sum((index[a] % 2) << (dim - 1 - a) for a in range(dim)).astype(numpy.int32)


class ShiftedLaplaceMG:
    def __init__(self, M, n, xp, kmax, keep_boundary=True, cycle="f", omega=0.9, pre=1, post=1, max_kh=2.5,
                 dtype=numpy.complex128, coarse_solve="auto", degree=16, dim=2, prolongation="bilinear"):
        """M: the fine matrix as a CSR matrix of ``xp`` (or SciPy's, moved to the GPU). The
        Galerkin products run on ``xp`` in double; each level is then stored in ``dtype``
        (complex64 for mixed precision).
        ``coarse_solve``: 'direct' (dense inverse up to coarse.DENSE_LIMIT unknowns, sparse LU on
        the host beyond), 'polynomial' (a GMRES polynomial of ``degree``) or 'auto' (direct up to
        AUTO_DIRECT unknowns, the polynomial beyond)."""
        if cycle not in ("v", "w", "f"):
            raise ValueError(f"unknown cycle {cycle!r} (v, w or f)")
        if coarse_solve not in ("auto", "direct", "polynomial"):
            raise ValueError(f"unknown coarse solve {coarse_solve!r} (auto, direct or polynomial)")
        if prolongation not in ("bilinear", "dezeeuw"):
            raise ValueError(f"unknown prolongation {prolongation!r} (bilinear or dezeeuw)")
        if prolongation == "dezeeuw" and (dim != 2 or not keep_boundary):
            raise ValueError("de Zeeuw's prolongation is built for 2D grids with the boundary nodes as unknowns")
        self.prolongation = prolongation
        self.xp, self.cycle_kind, self.pre, self.post = xp, cycle, pre, post
        self.omega, self.max_kh, self.dim = omega, max_kh, dim
        self.dtype = numpy.dtype(dtype)
        sp = sparse.module(xp)
        A = sp.csr_matrix(M) if backend.is_gpu(xp) and not sp.issparse(M) else M.tocsr()
        self.levels = []
        # the grid spacing doubles with each coarsening (an even number of points leaves a
        # shorter last cell, not a coarser spacing), as StencilMG counts it
        h = 1.0 / (n - 1) if keep_boundary else 1.0 / (n + 1)
        while True:
            lev = CSRLevel(A.astype(self.dtype), xp)
            lev.points = n                      # per axis
            self.levels.append(lev)
            P1, nc = prolongation_1d(n, keep_boundary)
            h *= 2
            if nc < 3 or kmax * h > max_kh:
                break
            P1 = sp.csr_matrix(P1)
            P = P1
            for _ in range(dim - 1):
                P = sp.kron(P, P1, format="csr")
            R = P.T.tocsr()                     # full weighting (up to a factor)
            if prolongation == "dezeeuw":
                P = dezeeuw_prolongation(A, n, xp)
            Ac = (R @ A @ P).tocsr()            # Galerkin, in double, on the level's device
            lev.P, lev.R = P.astype(self.dtype), R.astype(self.dtype)
            lev.smoother = smoothers.CSRColourGS(lev.A, xp.asarray(_colours(n, dim, keep_boundary)), xp, omega)
            A, n = Ac, nc
        if _coarse_kind(coarse_solve, A.shape[0]) == "direct":
            self.coarse = coarse.CSRDirectSolve(A, xp, self.dtype)
        else:
            self.coarse = coarse.CSRPolynomialSolve(A, self.levels[-1].A, xp, degree)
        # the paper's F-cycle visits the coarsest grid twice, as W does
        self._cycle = Cycle(self.levels, self.coarse, cycle, pre, post, xp, revisit_coarsest=True)

    @property
    def on_device_only(self):
        """True when a cycle never waits for the host (it may then be captured as a CUDA graph)."""
        return getattr(self.coarse, "lu", None) is None

    def cycle(self, f):
        """One cycle for M u = f from u = 0 (a new array, in the hierarchy's precision)."""
        return self._cycle(f.astype(self.dtype, copy=False))

    def describe(self):
        sizes = " -> ".join(f"{lev.points}^{self.dim}" for lev in self.levels)
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        return [f"{self.cycle_kind.upper()}-cycle in {prec}, {len(self.levels)} levels ({sizes}), "
                f"{_prolongation_name(self.prolongation)} prolongation, "
                f"Galerkin coarse matrices, {2 ** self.dim}-colour Gauss-Seidel omega {self.omega:g} "
                f"({self.pre}, {self.post})",
                f"coarsest grid: {self.coarse.describe()}"]


def _prolongation_name(kind):
    return "de Zeeuw's matrix-dependent" if kind == "dezeeuw" else "bilinear"


class StencilMG:
    """ShiftedLaplaceMG's interface (``cycle`` on flat arrays, ``describe``) over a
    multigrid.Multigrid on the stencil operator ``op`` of M (complex), distributed through
    ``comm`` (comm.Comm). Coarsening stops as in ShiftedLaplaceMG, before k h > ``max_kh``
    (h doubles per level; ``h`` is the finest level's), and the coarsest solve is chosen the same
    way (``coarse_solve`` 'auto': the dense inverse up to AUTO_DIRECT unknowns, else the
    polynomial)."""
    on_device_only = False

    def __init__(self, op, kmax, h, comm=None, cycle="f", omega=0.9, pre=1, post=1, max_kh=2.5,
                 coarse_solve="auto", degree=16, event=None, prolongation="bilinear"):
        boxes = grid.hierarchy_boxes(op.box.whole(), None, 0)[0]
        levels = 1
        while levels < len(boxes) and kmax * h * 2 ** levels <= max_kh:
            levels += 1
        options = multigrid.Options(levels=levels, cycle=cycle, pre=pre, post=post, smoother="multicolor",
                                    omega=omega, coarse_operator="galerkin",
                                    coarse_solve=_coarse_kind(coarse_solve, boxes[levels - 1].size),
                                    coarse_degree=degree, fused=False,
                                    transfer="dezeeuw" if prolongation == "dezeeuw" else "linear")
        self.mg = multigrid.Multigrid(op, options, comm, event)
        self.dtype, self.levels, self.omega, self.prolongation = op.dtype, self.mg.levels, omega, prolongation

    def free(self):
        self.mg.free()
        self.levels = []

    def cycle(self, f):
        """One cycle for M u = f (this rank's points, flat) from u = 0; a new flat array."""
        u = self.mg.cycle(f.reshape(self.mg.fine_box.shape).astype(self.dtype, copy=False))
        return grid.interior(u).ravel()

    def describe(self):
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        return ([f"stencil levels (multigrid.py) in {prec}, {_prolongation_name(self.prolongation)} "
                 "prolongation, Galerkin coarse stencils, "
                 f"omega {self.omega:g}"]
                + self.mg.describe())
