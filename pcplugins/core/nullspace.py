"""Systems of PDEs in aggregation AMG: aggregates of nodes, and the tentative prolongation of a
near null space.

A matrix of block size b (PETSc's MatSetBlockSize: b unknowns per node, stored node by node, as
linear elasticity's displacement components) is coarsened by its nodes: the node graph has the
Frobenius norms of the b x b blocks (``node_graph``), and an aggregate takes all b unknowns of its
nodes. The prolongation then interpolates a near null space B (n x m: the rigid body modes of
elasticity, MatSetNearNullSpace; by default the b unit vectors of the components) exactly on each
aggregate: the tentative prolongator of smoothed aggregation (Vanek, Mandel, Brezina, "Algebraic
multigrid by smoothed aggregation for second and fourth order elliptic problems", Computing 56
(1996), eq. (3.4)-(3.6)), unsmoothed as in our aggregation AMG, or smoothed (smoothed.py). On aggregate J with rows
B_J of B, the QR factorization B_J = Q_J R_J gives P's block Q_J (columns J m .. J m + m - 1) and
the coarse near null space's block R_J, so P B_c = B: every coarse level has m unknowns per node.

Where B is the components' unit vectors, Q_J is piecewise constant per component (scaled by
1/sqrt(size)), so ``component_aggregates`` gives the same coarse space as an aggregate array of the
unknowns (cycle.CSRLevel's ``agg``: the gather and member-sum transfers, ELL coarse levels).
Aggregates never cross ranks, so P is local on several ranks too (distributed.Rows forms P^T A P).
Nodes that the matching leaves alone join a neighbour's aggregate (``join_singletons``) and nodes
coupled to nothing join none (``drop_isolated``): either would otherwise stall the coarsening.
"""
import numpy

from .. import backend
from . import aggregation, auxgrid, colouring, distributed, smoothed, sparse

# a column of an aggregate's B_J whose part orthogonal to the previous columns is below this
# fraction of its norm is dependent on them (an aggregate of too few nodes for m modes): its
# coarse unknown gets no fine support (a zero column of P), and an identity row in A_c
DEPENDENT = 1e-8
# a Galerkin coupling below this fraction of sqrt(|c_ii c_jj|) is rounding left by a cancellation
CANCELLED = 1e-12


def node_graph(A, bs, xp):
    """The node matrix of A (block size ``bs``): entry (I, J) the Frobenius norm of block A_IJ, a
    nonnegative CSR matrix of n / bs rows (aggregation.pairwise takes it as it takes a scalar
    matrix: the strength |c_IJ| / sqrt(c_II c_JJ))."""
    if bs == 1:
        return abs(A)
    rows = sparse.rows_of(A, xp) // bs
    cols = A.indices // bs
    nn = A.shape[0] // bs
    v = xp.abs(A.data) ** 2
    C = sparse.module(xp).coo_matrix((v.astype(numpy.float64), (rows, cols)), shape=(nn, nn)).tocsr()
    C.sum_duplicates()
    C.data = xp.sqrt(C.data)
    return C


def node_colours(graph, bs, xp, max_colours):
    """Gauss-Seidel colours of the unknowns from a colouring of their node graph (``node_graph``):
    unknown i takes (the colour of node i // bs) bs + i % bs, folded as colouring.colour_graph
    folds. A proper colouring of the unknowns, found on a graph bs^2 times smaller."""
    c = colouring.colour_graph(graph, xp)
    i = xp.arange(graph.shape[0] * bs, dtype=numpy.int32)
    colour = (c[i // bs] * bs + i % bs).astype(numpy.int32)
    k = (int(c.max()) + 1) * bs if c.size else 0
    return colour % max_colours if k > 3 * max_colours else colour


def join_singletons(agg, graph, xp):
    """The aggregates ``agg`` of the nodes of ``graph`` (node_graph) with every node left alone
    moved into the aggregate of its strongest neighbour that is not alone (when it has one):
    returns (agg, nc). The matching's mutual proposals leave many nodes alone on the dense node
    graphs of coarse system levels (6 unknowns a node, tens of neighbours), and a level of
    singletons stalls the coarsening far above the coarse size."""
    n = graph.shape[0]
    alone = xp.bincount(agg, minlength=int(agg.max()) + 1 if n else 0)[agg] == 1
    rows, cols = sparse.rows_of(graph, xp), graph.indices
    w = xp.where((rows != cols) & ~alone[cols] & alone[rows], graph.data, 0.0)
    best = sparse.row_argmax(w, graph, xp, rows)
    return _renumber(xp.where(best >= 0, agg[xp.maximum(best, 0)], agg), xp)


def drop_isolated(agg, graph, xp, ghost=None, bs=1):
    """``agg`` with the nodes that couple to no other node (Dirichlet rows kept as identity rows:
    PETSc's ksp ex56) in aggregate -1, the others renumbered: returns (agg, nc). Such a node would
    be an aggregate of its own on every level, its m modes on b unknowns leaving m - b identity
    rows, and stall the coarsening; its smoother solves it exactly (smoothed aggregation leaves
    them out the same way). On several ranks ``ghost`` (the level's block of other ranks' columns,
    ``bs`` unknowns a node) counts too."""
    rows = sparse.rows_of(graph, xp)
    coupled = xp.bincount(rows, weights=((rows != graph.indices) & (graph.data > 0)).astype(numpy.float64),
                          minlength=graph.shape[0]) > 0
    if ghost is not None and ghost.nnz:         # several ranks: couplings to other ranks' nodes count
        g = sparse.rows_of(ghost, xp) // bs
        coupled |= xp.bincount(g, weights=(ghost.data != 0).astype(numpy.float64), minlength=graph.shape[0]) > 0
    return _renumber(xp.where(coupled, agg, -1), xp)


def _renumber(agg, xp):
    """The aggregate numbers of ``agg`` made consecutive from 0 in their order, -1 (no aggregate)
    kept: (agg, nc)."""
    keys, inverse = xp.unique(agg, return_inverse=True)
    unassigned = int(keys.size > 0 and int(keys[0]) < 0)
    return (inverse.ravel() - unassigned).astype(numpy.int32), int(keys.size) - unassigned


def component_aggregates(agg, bs):
    """The aggregates of the unknowns from those of the nodes: unknown i (node i // bs, component
    i % bs) goes to coarse unknown agg[i // bs] bs + i % bs."""
    xp = backend.array_module(agg)
    i = xp.arange(agg.shape[0] * bs, dtype=numpy.int32)
    return (agg[i // bs] * bs + i % bs).astype(numpy.int32)


def rigid_body_modes(coords, xp):
    """The rigid body modes of linear elasticity at the nodes ``coords`` (n x dim, dim 2 or 3), as
    an (n dim) x m array, unknowns node by node (PETSc's MatNullSpaceCreateRigidBody): the dim
    translations and the rotations (1 in 2D, 3 in 3D), about the centroid."""
    n, dim = coords.shape
    x = coords - backend.column_reduce(coords, "mean") if n else coords      # a rank may hold no nodes
    m = 3 if dim == 2 else 6
    B = xp.zeros((n, dim, m))
    for a in range(dim):
        B[:, a, a] = 1.0
    # rotation about axis (a, b): u_a = -x_b, u_b = x_a
    planes = [(0, 1)] if dim == 2 else [(0, 1), (1, 2), (0, 2)]
    for k, (a, b) in enumerate(planes):
        B[:, a, dim + k] = -x[:, b]
        B[:, b, dim + k] = x[:, a]
    return B.reshape(n * dim, m)


def tentative(agg, nc, B, bs, xp):
    """The tentative prolongation of the node aggregates ``agg`` (node -> aggregate, ``nc``
    aggregates; -1: the node is in none, its rows of P are empty) for the near null space B
    ((n bs) x m): returns (P, Bc, empty): P the (n bs) x (nc m) CSR matrix with m entries a row,
    P B_c = B (Vanek, Mandel, Brezina, eq. (3.6)); Bc the coarse near null space ((nc m) x m);
    ``empty`` the coarse unknowns with no fine support (a dependent column of an aggregate: too
    few nodes for m modes), or None. Each aggregate's QR is a modified Gram-Schmidt over its m
    columns, batched over the aggregates (padded to the largest)."""
    N, m = B.shape
    owner = agg[xp.arange(N) // bs]                    # the aggregate of each unknown
    live = xp.nonzero(owner >= 0)[0]                   # a node of aggregate -1 is left out
    owner, B = owner[live], B[live]
    order = xp.argsort(owner, kind="stable") if xp is numpy else xp.argsort(owner)
    counts = xp.bincount(owner, minlength=nc)
    start = xp.concatenate([xp.zeros(1, counts.dtype), xp.cumsum(counts)[:-1]])
    width = int(counts.max()) if owner.size else 0
    slot = xp.empty(owner.shape[0], numpy.int64)
    slot[order] = xp.arange(owner.shape[0]) - start[owner[order]]  # the unknown's row within its aggregate
    V = xp.zeros((nc, width, m))
    V[owner, slot] = B
    R = xp.zeros((nc, m, m))
    dead = xp.zeros((nc, m), bool)
    for c in range(m):
        v = V[:, :, c]
        size = xp.sqrt((v * v).sum(axis=1))
        for d in range(c):
            r = (V[:, :, d] * v).sum(axis=1)
            R[:, d, c] = r
            v = v - r[:, None] * V[:, :, d]
        norm = xp.sqrt((v * v).sum(axis=1))
        dead[:, c] = norm <= DEPENDENT * size
        R[:, c, c] = xp.where(dead[:, c], 0.0, norm)
        V[:, :, c] = xp.where(dead[:, c, None], 0.0, v / xp.where(dead[:, c], 1.0, norm)[:, None])
    cols = (owner[:, None] * m + xp.arange(m)).astype(numpy.int32)
    data = V[owner, slot]
    per_row = xp.zeros(N, numpy.int32)
    per_row[live] = m
    indptr = xp.concatenate([xp.zeros(1, numpy.int32), xp.cumsum(per_row).astype(numpy.int32)])
    P = sparse.module(xp).csr_matrix((data.ravel(), cols.ravel(), indptr), shape=(N, nc * m))
    empty = xp.nonzero(dead.ravel())[0]
    return P, R.reshape(nc * m, m), (empty if empty.size else None)


def galerkin(A, P, empty, xp, R=None):
    """P^T A P (CSR), with an identity row and column for each coarse unknown in ``empty`` (no fine
    support: P's column is zero, so that row of P^T A P is zero, and the restricted residual there
    always is; 1 on the diagonal keeps the smoothers' and the coarse solve's division defined).
    ``R``: P^T as a CSR matrix, where the caller has it (SciPy's product of a transposed CSR
    matrix goes through CSC, at twice the cost)."""
    R = P.T.tocsr() if R is None else R
    C = (R @ (A @ P)).tocsr()
    if empty is not None:
        nc = C.shape[0]
        d = xp.zeros(nc, C.dtype)
        d[empty] = 1.0
        C = (C + sparse.module(xp).diags(d, format="csr")).tocsr()
    C.sum_duplicates()
    # couplings that cancel to rounding (smoothed prolongations overlap) are dropped: stored, they
    # would be edges of the colouring's graph on one device and not on the other
    d = xp.abs(C.diagonal())
    rows = sparse.rows_of(C, xp)
    return sparse.kept(C, xp.abs(C.data) > CANCELLED * xp.sqrt(d[rows] * d[C.indices]), xp)


def system_levels(A, xp, bs, B, coords, stop, method, theta, max_levels, comm=None, nsmooths=0, threshold=0.0,
                  aggressive=1):
    """The levels of a system down to ``stop`` unknowns (kcycle.AggregationMG's): nodes of ``bs``
    unknowns aggregated, by ``method``: the aux grid's cells (``coords`` one row a node),
    pairwise matchings of the node graph (strength threshold ``theta``) or standard aggregates
    (``mis``: smoothed.aggregates, couplings weaker than ``threshold`` dropped);
    with a near null space B (n x m) each level's prolongation is its tentative prolongation
    (level k + 1 has m unknowns a node), without one the aggregates of the nodes' components.
    ``nsmooths`` > 0: the tentative prolongation smoothed that many times (smoothed.smooth; the
    components' unit vectors are B where there is none); on several ranks by the whole rows
    (smoothed.smooth_rows), so that P and R = P^T reach other ranks' unknowns (distributed.Transfer,
    the Galerkin product by Rows.galerkin_overlapping).
    On several ranks (``comm``; A a distributed.Rows) the aggregates are each rank's own, so an
    unsmoothed P is local and the Galerkin product exchanges the ghost columns' rows of P.
    Returns (mats, aggs, sizes, graphs, restrictions, transfers, coarsest): mats, aggs and sizes
    as the scalar paths build them, ``graphs[k]`` level k's node graph and block size (what
    ``node_colours`` colours its unknowns by, for the levels that smooth by Gauss-Seidel),
    ``transfers[k]`` level k's prolongation (a CSR matrix; None where ``aggs[k]`` is it) and
    ``restrictions[k]`` its transpose (CSR; None where ``aggs[k]`` is given), and
    the last level's (block size, near null space), which a gathered continuation takes."""
    parallel = comm is not None
    own = (lambda M: M.own) if parallel else (lambda M: M)
    # mis leaves the nodes coupled to nothing (identity rows of boundary values) in no aggregate
    # (-1): the tentative prolongation of the components gives them empty rows (GAMG's way), where
    # aggregates of the components would have no coarse unknown to send them to
    if (nsmooths or method == "mis") and B is None:
        B = xp.tile(xp.eye(bs), (own(A).shape[0] // bs, 1)) if bs > 1 else xp.ones((own(A).shape[0], 1))
    m = bs if B is None else B.shape[1]
    if method == "auxgrid":
        node_aggs, node_sizes, *_ = auxgrid.auxgrid(coords, xp, max(1, stop // m), max_levels, comm)
    mats, aggs, sizes, transfers, restrictions, graphs = [A], [], [own(A).shape[0]], [], [], []
    while mats[-1].shape[0] > stop and len(mats) < max_levels:      # global sizes on several ranks
        k = len(mats) - 1
        graph = node_graph(own(mats[-1]), bs, xp)
        if method == "auxgrid":
            if k >= len(node_aggs):
                break
            agg, nc = node_aggs[k], node_sizes[k + 1]
        elif method == "mis":
            agg, nc = smoothed.aggregates(smoothed.strong_graph(graph, threshold, xp), xp,
                                          2 if k < aggressive else 1)
            if (comm.allsum(nc) if parallel else nc) == 0:
                break
        else:
            found = aggregation.pairwise(graph, xp, 1, 2, theta, comm=comm)[0]
            if not found:
                break
            agg, nc = join_singletons(found[0], graph, xp)
            if B is not None:
                agg, nc = drop_isolated(agg, graph, xp, mats[-1].ghost if parallel else None, bs)
        Bc, R = None, None
        if B is None:
            agg = component_aggregates(agg, bs)
            Ac, P = (mats[-1].galerkin(agg, nc * bs) if parallel else
                     sparse.galerkin(mats[-1], agg, nc * bs, xp)), None
        else:
            P, Bc, empty = tentative(agg, nc, B, bs, xp)
            if parallel and nsmooths:
                P = distributed.global_columns(P, distributed.starts_of(P.shape[1], comm), comm.rank)
                for _ in range(nsmooths):
                    P = smoothed.smooth_rows(mats[-1], P)
                Ac, P, R = mats[-1].galerkin_overlapping(P, nc * m, empty, CANCELLED)
            else:
                for _ in range(nsmooths):
                    P = smoothed.smooth(mats[-1], P, xp)
                R = P.T.tocsr()
                Ac = galerkin(own(mats[-1]), P, empty, xp, R)
                if parallel:
                    Ac = mats[-1].galerkin_prolongation(P, Ac)
            agg = None
        if Ac.shape[0] > 0.9 * mats[-1].shape[0]:     # coarsening has stalled: stop here
            break
        graphs.append((graph, bs))
        if Bc is not None:                            # the coarse level: m unknowns a node
            B, bs = Bc, m
        mats.append(Ac)
        aggs.append(agg)
        transfers.append(P)
        restrictions.append(R)
        sizes.append(own(Ac).shape[0])
    return mats, aggs, sizes, graphs, restrictions, transfers, (bs, B)
