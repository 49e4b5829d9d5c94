"""Smoothed aggregation: standard aggregates from a distance-2 maximal independent set, and the
tentative prolongation smoothed by damped Jacobi (``-pc_amg_agg_nsmooths``, GAMG's name).

Vanek, Mandel, Brezina, "Algebraic multigrid by smoothed aggregation for second and fourth order
elliptic problems", Computing 56 (1996), Section 3: an aggregate is a root and the nodes strongly
coupled to it; the tentative prolongation P_tent interpolates the near null space exactly on
each aggregate (nullspace.tentative), and the prolongation is P = (I - omega D^-1 A) P_tent with
omega = 4 / (3 rho(D^-1 A)), whose columns overlap their neighbours' aggregates: the coarse
space then approximates smooth errors to higher order than the piecewise-constant one of the
unsmoothed aggregation (kcycle.py), at the price of wider coarse stencils (P^T A P).

The aggregation is the parallel form of Bell, Dalton, Olson, "Exposing fine-grained parallelism
in algebraic multigrid methods", SIAM J. Sci. Comput. 34 (2012), Section 4.2: the roots are a
maximal independent set of distance 2 of the strength graph (MIS(2), Luby's rounds: an undecided
node whose key (state, hash) is the largest within distance 2 joins the set, one within distance
2 of a member leaves it), so the roots' neighbourhoods are disjoint; each root takes its
neighbours, and the nodes at distance 2 join their strongest neighbour's aggregate. Every step
is a maximum over the rows of the graph (sparse.row_max), the same on NumPy and CuPy.
"""
import numpy

from .. import backend
from . import aggregation, sparse

# auto() smooths the prolongation only for a matrix this close to symmetric
# (Frobenius norms of A - A^T over A + A^T): upwind convection-diffusion at cell Peclet number 0.1
# is at 0.02-0.03, where smoothed aggregation needs a third to a half of the unsmoothed W-cycle's
# FGMRES iterations; at 0.3 (0.06-0.09) it needs more than the unsmoothed one in 2D (47 to 31)
ASYMMETRY = 0.05
# ... and whose positive off-diagonal entries carry at most this fraction of the off-diagonal
# weight: smoothed aggregation interpolates the constant, which is no near null vector where
# couplings are positive (D A D for D = diag(+-1)); the pairwise prolongation takes their signs
POSITIVE = 0.1
# ... unless the constant is a near null vector all the same: the rows' sums keep at most this
# share of their weight (constant_residual). PETSc's ksp ex3 (a Q1 element with positive corner
# couplings, rows that sum to zero, boundary rows zeroed by MatZeroRows) is at 1e-16: smoothed
# aggregation took 26, 27, 31 cg iterations at 32^2 to 128^2 elements, the signed pairwise one 27,
# 54, 92. D A D (A the 5-point Laplacian on 127^2, D = -1 on a random share of the unknowns, else 1)
# is at 0.043, 0.098, 0.18, 0.33 for 2, 5, 10, 20% (the M-matrix itself at 0.004): the signed
# pairwise W-cycle took 17 cg iterations on each, smoothed aggregation 39, 56, 75, 99
CONSTANT = 0.02
# diagonal_scaling() takes D^-1 A for a nonsymmetric A where that multiplies the asymmetry by
# this at most (PETSc's ksp ex29 with -rho 1000 at 129^2: 0.049 -> 0, its boundary rows left out)
DIAGONAL_GAIN = 0.5
# states of the MIS(2) rounds, ordered so that a member's key beats every undecided node's and an
# undecided node's beats every excluded one's
OUT, UNDECIDED, ROOT = 0, 1, 2
_STATE = float(2 ** 33)         # the state's weight in a key: above any hash (< 2^32); exact in float64


def strong_graph(A, theta, xp):
    """The strength graph of A for aggregation: aggregation.strength's symmetrized
    |a_ij| / sqrt(|a_ii a_jj|) without the couplings weaker than ``theta`` and the diagonal.
    Symmetric, so that the roots' neighbourhoods of the MIS(2) are disjoint."""
    S = aggregation.strength(A, xp)
    keep = (S.data > 0) & (S.data >= theta)
    return S if bool(keep.all()) else sparse.kept(S, keep, xp)


def _hash(n, xp):
    """A key for each of n nodes: MurmurHash3's 32-bit finalizer of its number, a bijection of the
    32-bit integers (distinct keys, no random state, the same on both devices) that scatters
    neighbouring numbers (a multiplicative hash leaves a grid's numbering in long monotone runs,
    and Luby's rounds then grow with them), plus 1 (> 0)."""
    x = xp.arange(n, dtype=numpy.uint64)
    mask = numpy.uint64(0xFFFFFFFF)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        x ^= x >> numpy.uint64(shift)
        x = (x * numpy.uint64(mult)) & mask
    x ^= x >> numpy.uint64(16)
    return x.astype(numpy.float64) + 1.0


def _neighbour_max(own, rows, key, xp):
    """The largest of ``own`` (the rows' own keys) and ``key`` over each row's entries of the
    CSR rows ``rows`` (a row block of the strength graph: the nodes' strong neighbours)."""
    return xp.maximum(own, sparse.row_max(key[rows.indices], rows, xp))


def _rows(S, rows):
    """The CSR rows ``rows`` (ascending) of S: S itself where they are all of them."""
    return S if rows.size == S.shape[0] else S[rows]


def mis(S, xp, distance=2):
    """The roots of the aggregates: a maximal independent set of ``distance`` (1 or 2) of the
    graph of S's entries (a boolean per node). Nodes coupled to nothing are never roots
    (they stay out of every aggregate: nullspace.tentative gives them empty rows).
    Each round reads the rows of the undecided nodes only (and, at distance 2, of their
    neighbours): after the first rounds few are left, and the graph's other rows are final."""
    n = S.shape[0]
    state = xp.where(S.indptr[1:] > S.indptr[:-1], UNDECIDED, OUT).astype(numpy.float64)
    h = _hash(n, xp)
    key = state * _STATE + h
    live = xp.flatnonzero(state == UNDECIDED)
    while live.size:
        Su = _rows(S, live)
        near = key
        if distance == 2:                 # the neighbours' largest keys over their own neighbours
            mark = xp.zeros(n, bool)
            mark[Su.indices] = True
            nbrs = xp.flatnonzero(mark)
            near = key.copy()
            near[nbrs] = _neighbour_max(key[nbrs], _rows(S, nbrs), key, xp)
        mine = key[live]
        top = _neighbour_max(mine, Su, near, xp)
        root = top == mine
        out = ~root & (top >= ROOT * _STATE)
        state[live] = xp.where(root, ROOT, xp.where(out, OUT, UNDECIDED))
        key[live] = state[live] * _STATE + h[live]
        live = live[~(root | out)]
    return state == ROOT


def aggregates(S, xp, distance=2):
    """Aggregates of the strength graph S (strong_graph) about the roots of ``mis(S, distance)``:
    (agg, nc), agg[i] the aggregate of node i (numbered in the order of their roots), -1 for the
    nodes coupled to nothing. Distance 2 (aggressive; GAMG's on its finest level): the standard
    aggregates of a root and its neighbours, the nodes between them joining their strongest
    neighbour's; distance 1: each node joins its strongest root (all are next to one), for the
    wide coarse stencils of smoothed aggregation, where distance 2 would coarsen too fast."""
    n = S.shape[0]
    root = mis(S, xp, distance)
    ids = xp.cumsum(root) - 1
    nc = int(ids[-1]) + 1 if n else 0
    agg = xp.where(root, ids, -1).astype(numpy.int64)
    rows = sparse.rows_of(S, xp)
    # a root's neighbours (at distance 2 none is next to two roots: they are 3 apart)
    at = sparse.row_argmax(xp.where(root[S.indices], S.data, 0.0), S, xp, rows)
    agg = xp.where((agg < 0) & (at >= 0), agg[xp.maximum(at, 0)], agg)
    # the rest (2 from a root: maximality) join their strongest neighbour's aggregate
    free = agg < 0
    at = sparse.row_argmax(xp.where(free[rows] & (agg[S.indices] >= 0), S.data, 0.0), S, xp, rows)
    agg = xp.where(free & (at >= 0), agg[xp.maximum(at, 0)], agg)
    return agg.astype(numpy.int32), nc


def mirrored(A, xp):
    """(A, t): A in canonical form (sorted, no duplicates) and, where its pattern is symmetric, the
    values of A^T in the order of A's entries (t[k] = a_ji for A's entry k = (i, j)), else None:
    one transpose instead of the sums A - A^T and A + A^T."""
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    T = A.T.tocsr()
    T.sort_indices()
    same = A.nnz == T.nnz and bool((A.indptr == T.indptr).all()) and bool((A.indices == T.indices).all())
    return A, (T.data if same else None)


def measures(A, xp, ghost=None, allsum=None):
    """(asymmetry, positive share) of A, what ``auto`` decides by: ||A - A^T||_F / ||A + A^T||_F
    (0 symmetric, 1 skew) and the share of the off-diagonal weight (sum of |a_ij|, i != j) in
    positive entries, for a matrix of positive diagonal (pcs/amg.py checks it; 0 for an M-matrix).
    On several ranks A is this rank's own block, ``ghost`` its block of other ranks' columns and
    ``allsum`` the global sum: both are ratios of sums over the ranks (the asymmetry's over the
    own blocks), the same on every rank."""
    sums = numpy.array(_asymmetry_sums(A, xp) + _positive_sums(A, xp, ghost))
    k2, s2, positive, total = allsum(sums) if allsum else sums
    return _ratio(k2, s2), (float(positive / total) if total > 0 else 0.0)


def asymmetry(A, xp, allsum=None):
    """||A - A^T||_F / ||A + A^T||_F (``measures``' first), on several ranks of the own blocks
    (``allsum`` the global sum), the same on every rank."""
    return _ratio(*(allsum(numpy.array(_asymmetry_sums(A, xp))) if allsum else _asymmetry_sums(A, xp)))


def _ratio(k2, s2):
    """||A - A^T||_F / ||A + A^T||_F from _asymmetry_sums' squares (0 for a zero matrix)."""
    return float(numpy.sqrt(k2 / s2)) if s2 else 0.0


def _asymmetry_sums(A, xp, scale=None, pair=None, rows=None, keep=None):
    """(||S A - (S A)^T||_F^2, ||S A + (S A)^T||_F^2), S = diag(``scale``) (None: the identity),
    over the entries ``keep`` flags (None: all). Where A's pattern is symmetric the entries are
    compared in place (mirrored; ``pair``: its result, where made already); ``rows``:
    sparse.rows_of of the pair's matrix, where made already."""
    A, mirror = pair or mirrored(A, xp)
    if rows is None and scale is not None:
        rows = sparse.rows_of(A, xp)
    if mirror is not None:
        a, t = A.data, mirror
        if scale is not None:               # (S A)_ij = s_i a_ij against (S A)_ji = s_j a_ji
            a, t = a * scale[rows], t * scale[A.indices]
        K, S = a - t, a + t
        if keep is not None:
            K, S = K * keep, S * keep
    else:
        if scale is not None or keep is not None:
            A = A.copy()
            if scale is not None:
                A.data *= scale[rows]
            if keep is not None:
                A.data *= keep
        K, S = (A - A.T).tocsr().data, (A + A.T).tocsr().data
    return _squares(K, xp), _squares(S, xp)


def _squares(v, xp):
    """sum |v_k|^2, one pass (no |v| and |v|^2 arrays)."""
    return float(xp.vdot(v, v).real) if v.size else 0.0


def diagonal_scaling(A, d, xp, base=None, allsum=None):
    """(D^-1 or None, asymmetry before, after) for a matrix A of diagonal ``d`` whose rows are
    scaled by ``base`` already (None: not): D^-1 = 1 / d where S A (S = diag(base)) is not
    symmetric and D^-1 A is at least 1 / DIAGONAL_GAIN times as close to symmetric, by
    ||X - X^T||_F / ||X + X^T||_F over the couplings of rows that are more than their diagonal
    (PETSc's identity rows of boundary values, and the couplings to them, are eliminable; they
    would count as asymmetry either way). A matrix whose rows each carry a coefficient,
    (-rho_i (Laplacian u)_i, PETSc's ksp ex29 with -rho), is nonsymmetric where the coefficient
    jumps; its Galerkin coarse matrices P^T A P make a cycle that diverges (ex29 at 129^2,
    rho 1000: one Richardson step multiplied the residual by 1.5e4), where D^-1 A is the
    Laplacian but for its boundary rows and the cycle of D^-1 A, applied to D^-1 x, converges.
    Upwind convection-diffusion keeps its own rows (a constant diagonal changes no ratio). On
    several ranks A is this rank's own block and ``allsum`` the global sum, as in ``measures``."""
    pair = mirrored(A, xp)
    inverse = 1 / xp.where(d != 0, d, 1)
    lone = sparse.l1_norms(A, xp) - xp.abs(d) == 0
    rows = sparse.rows_of(pair[0], xp)                  # both measures' rows and entries kept, once
    keep = ~(lone[rows] | lone[pair[0].indices])        # the couplings of neither a lone row nor column
    sums = numpy.array(_asymmetry_sums(A, xp, base, pair, rows, keep) +
                       _asymmetry_sums(A, xp, inverse, pair, rows, keep))
    k0, s0, k1, s1 = allsum(sums) if allsum else sums
    before, after = _ratio(k0, s0), _ratio(k1, s1)
    return (inverse if before > 1e-12 and after <= DIAGONAL_GAIN * before else None), before, after


def _positive_sums(A, xp, ghost=None):
    """(positive, all) off-diagonal weight of A, and of its ghost block (several ranks) too."""
    d = A.diagonal().real
    data = A.data.real
    total = float(xp.abs(A.data).sum() - xp.abs(d).sum())
    positive = float(data[data > 0].sum() - d[d > 0].sum())
    if ghost is not None and ghost.nnz:
        g = ghost.data.real
        total, positive = total + float(xp.abs(ghost.data).sum()), positive + float(g[g > 0].sum())
    return positive, total


def constant_residual(A, xp, ghost=None, allsum=None):
    """How far the constant is from a null vector of A's rows: sum_i |(A 1)_i| / sum_i (|A| 1)_i
    over the rows that couple to others (an identity row of a boundary value neither cancels nor
    counts). 0 where every such row sums to zero. On several ranks A is this rank's own block,
    ``ghost`` its block of other ranks' columns and ``allsum`` the global sum."""
    sums = A @ xp.ones(A.shape[1], A.dtype)
    weight = sparse.l1_norms(A, xp)
    if ghost is not None and ghost.nnz:
        sums = sums + ghost @ xp.ones(ghost.shape[1], ghost.dtype)
        weight = weight + sparse.l1_norms(ghost, xp)
    coupled = weight > xp.abs(A.diagonal())
    parts = numpy.array([float(xp.abs(sums[coupled]).sum()), float(weight[coupled].sum())])
    kept, total = allsum(parts) if allsum else parts
    return float(kept / total) if total > 0 else 0.0


def gershgorin(A, xp, ghost=None):
    """Gershgorin's bound on the eigenvalues of D^-1 A: the largest row sum of |a_ij| / |a_ii|
    (with ``ghost``, a rank's block of other ranks' columns, its couplings too; this rank's rows
    only). Exact for the Laplacian's interior rows, an upper bound for any A; 1 for no rows."""
    d = xp.abs(A.diagonal())
    s = sparse.l1_norms(A, xp)
    if ghost is not None and ghost.nnz:
        s = s + sparse.l1_norms(ghost, xp)
    return float((s / xp.where(d > 0, d, 1.0)).max()) if s.size else 1.0


def smooth(A, P, xp, omega=4.0 / 3.0):
    """The smoothed prolongation (I - omega / rho D^-1 A) P (Vanek, Mandel, Brezina, Section 3),
    rho Gershgorin's bound (gershgorin). CSR, its explicit zeros dropped."""
    return _jacobi_step(P, A @ P, A.diagonal(), gershgorin(A, xp), omega, xp)


def smooth_rows(A, P, omega=4.0 / 3.0):
    """smooth() on several ranks: ``A`` a distributed.Rows, ``P`` this rank's rows of the
    prolongation with global coarse columns (a host CSR matrix, as the result). The product takes
    the other ranks' couplings with the rows of P they own (Rows.ghost_rows), so the smoothed
    columns reach across the ranks' boundary as on one rank (the iterations stay those of one
    rank: a P kept local, those couplings lumped onto the diagonal, left the boundary with the
    piecewise-constant interpolation of unsmoothed aggregation), and rho is the bound over every
    rank's rows."""
    own, ghost = sparse.to_host(A.own), sparse.to_host(A.ghost)
    return _jacobi_step(P, own @ P + ghost @ A.ghost_rows(P), own.diagonal(),
                        A.comm.allmax(gershgorin(own, numpy, ghost)), omega, numpy)


def _jacobi_step(P, AP, d, rho, omega, xp):
    """P - omega / rho D^-1 (A P) for the product ``AP`` and A's diagonal ``d`` (CSR, explicit zeros
    dropped): smooth's and smooth_rows' step."""
    AP = AP.tocsr()
    AP.data *= ((omega / rho) / xp.where(d != 0, d, 1))[sparse.rows_of(AP, xp)]
    S = (P - AP).tocsr()
    return sparse.kept(S, S.data != 0, xp)


def auto(A, xp, aggregation, coords, system, ghost=None, allsum=None):
    """(nsmooths, why) for -pc_amg_agg_nsmooths unset (kcycle.AggregationMG): one smoothing step on
    the host (on the GPU only for positive couplings on rows that sum to zero: _positive_rows_residual)
    for a real matrix without a near null space (a scalar one, or a system of components), nearly
    symmetric (ASYMMETRY) and of negative couplings (POSITIVE) or with the constant a near null
    vector all the same (CONSTANT), with the aggregation mis, or auto without coordinates (with them
    auto takes the auxiliary grid, unsmoothed); else none. ``coords``: whether there are
    coordinates; ``system``: None (a scalar matrix), "near null" (a system with a near null space)
    or "components" (a system without; smoothed on the host only). A system of components
    unsmoothed took more iterations at every refinement (ksp ex55, 2D elasticity without
    coordinates, 32^2 to 256^2 elements: 30, 35, 43, 47 under cg; smoothed 23, 25, 28, 31, GAMG's
    22, 24, 26, 29), one with its rigid body modes GAMG's. On several ranks A is this
    rank's own block, ``ghost`` its block of other ranks' columns and ``allsum`` the global sum
    (``measures``), so every rank decides alike."""
    gpu = backend.is_gpu(xp)
    off = ("vertex coordinates (the auxiliary grid's unsmoothed W-cycle is faster on the host)"
           if coords and aggregation == "auto" else
           f"-pc_amg_aggregation {aggregation}" if aggregation not in ("auto", "mis") else
           "a complex matrix" if A.dtype.kind == "c" else
           "a system with a near null space (unsmoothed, its tentative prolongation takes GAMG's iterations)"
           if system == "near null" else None)
    residual = None               # constant_residual, where positive couplings make it matter
    if gpu and off is None and system is None:      # a system of components: unsmoothed on the GPU
        residual = _positive_rows_residual(A, xp, ghost, allsum)
    if gpu and (residual is None or residual > CONSTANT):
        off = "the GPU (its unsmoothed setup is several times faster)"
    if off is not None:
        return 0, f"unsmoothed: {off}"
    asym, positive = measures(A, xp, ghost, allsum)
    if asym > ASYMMETRY:
        return 0, f"unsmoothed: |A - A^T| / |A + A^T| = {asym:.2g} > {ASYMMETRY:g}"
    if residual is None:
        residual = constant_residual(A, xp, ghost, allsum) if positive > POSITIVE else 0.0
    if residual > CONSTANT:
        return 0, (f"unsmoothed: positive couplings carry {positive:.2g} of the off-diagonal weight "
                   f"(> {POSITIVE:g}) and the rows' sums {residual:.2g} of their weight (> {CONSTANT:g}: the "
                   "constant is no near null vector; the pairwise prolongation follows the couplings' signs)")
    how = "-pc_amg_aggregation mis" if coords else "no coordinates"
    signs = (f", positive couplings {positive:.2g} of the off-diagonal weight but rows that sum to "
             f"{residual:.2g} of theirs" if positive > POSITIVE else "")
    return 1, f"smoothed: {'GPU' if gpu else 'host'}, {how}, |A - A^T| / |A + A^T| = {asym:.2g}{signs}"


def _positive_rows_residual(A, xp, ghost=None, allsum=None):
    """constant_residual(A) where A has positive couplings (POSITIVE), else None: the GPU smooths
    where that is at most CONSTANT (rows that sum to zero). The signed pairwise W-cycle's count
    grows with the grid there; on an H200, ksp ex3's matrix (problems.zero_sum_q1) took 236 cg
    iterations at 256^2 elements and did not converge in 400 at 512^2 (the K-cycle under fgmres
    neither), smoothed aggregation 51 and 61, in less time (98 against 191 ms at 256^2). The
    positive share first: a few reductions."""
    parts = numpy.array(_positive_sums(A, xp, ghost))
    positive, total = allsum(parts) if allsum else parts
    return constant_residual(A, xp, ghost, allsum) if total > 0 and positive / total > POSITIVE else None
