"""Multigrid for the complex shifted Laplacian (Erlangga, Oosterlee, Vuik; Knibbe, Oosterlee, Vuik).

On a square (cube) grid of n points per axis in DMDA order (x fastest), on SciPy or cupyx CSR
matrices (complex):

- coarsening by 2 per axis that keeps the boundary: with the boundary nodes as unknowns
  (absorbing boundary, n = 2^j + 1) coarse node J is fine node 2J, and an even n adds a virtual
  coarse node on fine node n, past the grid (grid.Box's ``virtual_end``); with interior unknowns
  only (Dirichlet, n = 2^j - 1) coarse J is fine 2J + 1;
- prolongation P bilinear (trilinear in 3D), or in 2D with the boundary nodes as unknowns de Zeeuw's
  matrix-dependent prolongation (``transfer.dezeeuw_prolongation``, the paper's); restriction R the
  transpose of the bilinear one (full weighting up to a factor, which does not change the
  correction); Galerkin coarse matrices R M P (9-point; 27-point in 3D);
- damped 4-colour (8-colour in 3D) Gauss-Seidel (omega 0.9, the paper's), colours by the parity of
  the grid indices;
- V, W or F cycles (the paper: one F-cycle), a dense inverse or a GMRES polynomial on the coarsest grid.

Coarsening stops before a grid would have k h > ``max_kh`` (2.5): with bilinear prolongation a
coarser grid spoils the correction (the F-cycle diverges on MP1 once the coarsest grid reaches
k h = 5). The coarsest grid then grows with k (N/4 + 1 points per axis at k h = 0.625): a dense
inverse up to AUTO_DIRECT unknowns, beyond that a fixed GMRES polynomial of degree 16
(coarse.CSRPolynomialSolve), which keeps the Bi-CGSTAB counts of the exact solve
(tests/petsc/test_shifted_laplace.py) and keeps the cycle on the GPU. The paper instead coarsens
further and smooths on its coarsest grid; that diverges here, because damped Gauss-Seidel on M is
not convergent at k h = 2.5 and coarser grids spoil the correction with bilinear,
collapsed-stencil and de Zeeuw's prolongation alike (docs/shiftedlaplace.md).

``StencilMG`` runs the same method on multigrid.py's stencil levels instead, so it runs on any
number of ranks (the levels of a distributed DMDA, a ghost update after each colour, the small
levels gathered): the same coarsening (grids that keep their ends for the absorbing boundary),
the same prolongation (bilinear, or de Zeeuw's as transfer.MatrixDependent), Galerkin coarse
stencils (by probing), colours in the same order and a direct coarsest solve (a dense inverse or
the same polynomial), so one application agrees with ShiftedLaplaceMG's to rounding.
"""
import numpy

from .. import backend
from . import coarse, grid, multigrid, smoothers, sparse, transfer
from .cycle import CSRLevel, Cycle

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
        self.prolongation, self.keep_boundary = prolongation, keep_boundary
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
            P1, nc = transfer.prolongation_1d(n, keep_boundary)
            h *= 2
            if nc < 3 or kmax * h > max_kh:
                break
            P1 = sp.csr_matrix(P1)
            P = P1
            for _ in range(dim - 1):
                P = sp.kron(P, P1, format="csr")
            R = P.T.tocsr()                     # full weighting (up to a factor)
            if prolongation == "dezeeuw":
                P = transfer.dezeeuw_prolongation(A, n, xp)
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
        if self.keep_boundary and any(lev.points % 2 == 0 for lev in self.levels[:-1]):
            sizes += "; an even grid coarsens through a virtual last coarse point"
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

    @property
    def on_device_only(self):
        """Every level and the coarsest solve on the GPU, exchanges that never wait for the host
        (comm.Comm)."""
        coarse = self.mg.levels[-1].coarse_solve
        host_lu = getattr(getattr(coarse, "inner", coarse), "lu", None) is not None
        return backend.is_gpu(self.mg.xp) and not self.mg.host_levels and self.mg.comm.capturable and not host_lu

    def free(self):
        self.mg.free()
        self.levels = []

    def cycle(self, f):
        """One cycle for M u = f (this rank's points, flat) from u = 0; a new flat array."""
        u = self.mg.cycle(f.reshape(self.mg.fine_box.shape).astype(self.dtype, copy=False))
        return grid.interior(u).ravel()

    def describe(self):
        prec = "complex64" if self.dtype == numpy.complex64 else "complex128"
        virtual = any(lev.box.virtual_end and any(k and m % 2 == 0 for k, m in zip(lev.box.keep_ends,
                                                                                     lev.box.global_shape))
                      for lev in self.levels[:-1])
        return ([f"stencil levels (multigrid.py) in {prec}, {_prolongation_name(self.prolongation)} "
                 "prolongation, Galerkin coarse stencils, "
                 f"omega {self.omega:g}" + ("; an even grid coarsens through a virtual last coarse point"
                                            if virtual else "")]
                + self.mg.describe())
