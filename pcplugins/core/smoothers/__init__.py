"""Smoothers: one protocol, a factory for the stencil levels (``make``) and one for CSR levels
(``make_csr``).

Every smoother has ``smooth(u, f, sweeps, [exchange,] reverse=False, zero_guess=False)``, which
improves ``u`` for ``A u = f`` in place, and ``describe()``; the CSR smoothers return the result,
which may be a new array (l1-Jacobi sweeps out of place, one kernel a sweep). On stencil levels
``u`` is padded with its ghosts current on entry and ``exchange(u)`` refreshes them (a DMDA ghost
update under MPI, nothing in serial), called after every colour so that the iterates do not
depend on the number of ranks. ``reverse=True`` runs the colours in the opposite order (the
post-smoother reverses the pre-smoother, which keeps the cycle symmetric for CG);
``zero_guess=True`` starts from u = 0 whatever ``u`` holds.

- ``stencil``: multicolour Gauss-Seidel, weighted Jacobi and Chebyshev on stencil operators
  (HostColourGS: the Gauss-Seidel of stored coefficients on the host, by SciPy CSR products);
- ``lines``: zebra line Gauss-Seidel and ADI (anisotropic problems);
- ``csr``: the same methods on CSR levels, and their hybrid form across ranks;
- RedBlack (redblack.py): red-black Gauss-Seidel as fused CUDA kernels (the fast path);
  fused_stored.StoredGS: multicolour Gauss-Seidel of stored stencils, a CUDA kernel per colour.
"""
import numpy

from .. import fused, fused_stored
from .csr import CSRChebyshev, CSRColourGS, CSRHybrid, CSRL1Jacobi
from .lines import LineGS
from .redblack import RedBlack
from .stencil import (
    Chebyshev,
    ColourGS,
    HostColourGS,
    Jacobi,
    _noop,
    asymmetry,
    capped_lambda_max,
    chebyshev_steps,
    estimate_lambda_max,
    gershgorin,
    lanczos_lambda_max,
)

__all__ = ["CSRChebyshev", "CSRColourGS", "CSRHybrid", "CSRL1Jacobi", "Chebyshev", "ColourGS", "HostColourGS", "Jacobi",
           "LineGS", "RedBlack", "asymmetry", "capped_lambda_max", "chebyshev_steps", "estimate_lambda_max",
           "gershgorin", "lanczos_lambda_max", "make", "make_csr"]


def make_csr(kind, A, xp, colours=None, rows=None, M=None, cells=None, members=None):
    """The smoother ``kind`` (gs, l1jacobi, chebyshev) of a CSR level ``A`` (this rank's own rows
    and columns): ``colours`` the row colours of Gauss-Seidel, ``rows`` the distributed.Rows A
    belongs to on several ranks (Gauss-Seidel and l1-Jacobi then sweep in their hybrid form, the
    ghost couplings in the l1 diagonal; Chebyshev is the global polynomial), ``M`` the storage of
    the products, ``cells`` and ``members`` the level's aggregates and their rows (CSRColourGS's
    cell layout)."""
    extra = rows.ghost_l1() if rows else None
    if kind == "gs":
        smoother = CSRColourGS(A, colours, xp, extra=extra, M=M, cells=cells, members=members)
    elif kind == "l1jacobi":
        smoother = CSRL1Jacobi(A, xp, extra=extra, M=M)
    else:
        return CSRChebyshev(A, xp, rows=rows, M=M)
    return CSRHybrid(smoother, rows) if rows else smoother


def make(kind, op, omega=None, fused_level=None, scratch=None, faces=0, exchange=_noop, dot=None, allsum=None,
         allmax=None):
    """The smoother ``kind`` (multigrid.SMOOTHERS) of a stencil level ``op``: the one factory of
    the geometric hierarchy. ``omega`` None: 1 for Gauss-Seidel and lines, 2/3 for Jacobi;
    ``fused_level``: the level's fused.Laplacian where the fast path applies (red-black then runs
    fused, ``scratch`` a padded work array that lets it sweep both colours in one pass, ``faces``
    the faces of a distributed level's box that border other ranks: RedBlack), or its
    fused_stored.Stored (multicolour Gauss-Seidel then runs a kernel per colour);
    ``exchange``, ``dot`` (a global inner product), ``allsum`` and ``allmax`` (global sums and
    maxima of host numbers) for Chebyshev's eigenvalue estimate and its cap (capped_lambda_max)."""
    gs_omega = 1.0 if omega is None else omega
    if isinstance(fused_level, fused.Laplacian) and kind == "redblack":
        return RedBlack(fused_level, gs_omega, scratch=scratch, faces=faces)
    if kind in ("redblack", "multicolor"):
        if kind == "redblack" and any(sum(abs(v) for v in o) > 1 for o in op.offsets):
            kind = "multicolor"   # red-black is not a valid colouring of a box stencil
        if isinstance(fused_level, fused_stored.Stored):
            return fused_stored.StoredGS(fused_level, kind, gs_omega, whole=not faces)
        if op.xp is numpy and not op.constant:     # stored coefficients on the host: SciPy CSR products
            return HostColourGS(op, kind, gs_omega)
        return ColourGS(op, kind, gs_omega)
    if kind.startswith("line_") or kind == "adi":
        d = op.box.dim
        if kind == "adi":
            axes = tuple(range(d))[::-1]                     # x lines first
        else:
            axis = d - 1 - "xyz".index(kind[-1])             # array axis of the named direction
            if axis < 0:
                raise ValueError(f"smoother {kind} needs a {d + 1}D grid")
            axes = (axis,)
        return LineGS(op, axes, gs_omega)
    if kind == "jacobi":
        return Jacobi(op, 2.0 / 3.0 if omega is None else omega)
    bound = gershgorin(op)
    return Chebyshev(op, capped_lambda_max(estimate_lambda_max(op, exchange, dot), allmax(bound) if allmax else bound,
                                           lambda: asymmetry(op, allsum)))
