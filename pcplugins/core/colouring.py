"""Colours for the Gauss-Seidel smoother of the CSR hierarchies, and the order of unknowns that
makes each colour a slice on the host.

``colour_graph`` colours any matrix graph (Jones-Plassmann with hashed priorities, first-fit
colours); ``colour_order`` renumbers a host hierarchy colour by colour.
"""
import numpy

from .. import backend
from . import aggregation, sparse

ROUNDS_PER_CHECK = 4


def colour_graph(A, xp, max_colours=None):
    """Colours of the graph of A + A^T (no two neighbours share one): Jones-Plassmann, each round
    colouring the unknowns whose hashed priority beats all uncoloured neighbours, each with the
    smallest colour none of its coloured neighbours has (Jones and Plassmann 1993, with
    first-fit colours: a 5-point grid takes 4 to 5 colours where a new colour per round took 16 to
    18, and a Gauss-Seidel sweep is a kernel a colour). The colours its neighbours hold are a
    bit mask per unknown (64 colours; an unknown with all 64 taken gets the last, shared with a
    neighbour). On the GPU a round is two kernels over A's entries and unknowns (_rounds_gpu),
    on the host NumPy on the shrinking set of uncoloured edges (_rounds_host): the same colours.
    With ``max_colours``, where there are more than three times as many colours they fold back
    (colour mod max_colours): neighbours may then share a colour, which CSRColourGS's l1 diagonal
    keeps convergent, but an improper colour costs it two kernels and a scatter instead of one,
    so folding pays only where the colours are many."""
    n = A.shape[0]
    i = xp.arange(n)
    prio = (aggregation.hash_edge(i, i, xp) << 32) + i      # distinct (a float priority could tie)
    colour = (_rounds_gpu if backend.is_gpu(xp) else _rounds_host)(A, prio, xp)
    k = int(colour.max()) + 1 if n else 0
    return colour % max_colours if max_colours is not None and k > 3 * max_colours else colour


def _rounds_host(A, prio, xp):
    """Jones-Plassmann on the host. An unknown takes its colour once every neighbour of higher
    priority has one, and its lower neighbours are still uncoloured then (it beats them), so its
    first-fit colour reads its higher neighbours' colours alone. Each unknown counts its
    uncoloured higher neighbours; a round colours those at zero, then walks their lower
    neighbours (a CSR list of them) to mark the colour taken and count one down: each edge of
    A + A^T is read once in all, not once a round."""
    n = A.shape[0]
    # the pattern of A + A^T (SciPy's sum, in C); row v keeps its lower neighbours
    G = sparse.module(xp).csr_matrix((xp.ones(A.nnz, numpy.int8), A.indices, A.indptr), shape=A.shape)
    G = (G + G.T).tocsr()
    r, c = sparse.rows_of(G, xp), G.indices.astype(numpy.int32)
    down = prio[c] < prio[r]
    lower = c[down]
    start = xp.concatenate([xp.zeros(1, numpy.int64), xp.cumsum(xp.bincount(r[down], minlength=n))])
    higher = xp.bincount(lower, minlength=n)      # uncoloured higher neighbours
    colour = xp.full(n, -1, numpy.int32)
    taken = xp.zeros(n, numpy.uint64)             # bit k: a higher neighbour has colour k
    one = numpy.uint64(1)
    left = n
    while left:
        now = xp.flatnonzero((higher == 0) & (colour < 0))
        left -= now.size
        t = taken[now]
        bit = ~t & (t + one)                      # the lowest clear bit alone (0: all 64 set)
        colour[now] = xp.where(bit == 0, 63, xp.log2(xp.maximum(bit, one).astype(numpy.float64))).astype(numpy.int32)
        # the lower neighbours of the unknowns coloured now, each with that colour
        count = start[now + 1] - start[now]
        at = xp.repeat(start[now] - xp.cumsum(count) + count, count) + xp.arange(int(count.sum()))
        below = lower[at]
        xp.bitwise_or.at(taken, below, xp.left_shift(one, xp.repeat(colour[now], count).astype(numpy.uint64)))
        higher -= xp.bincount(below, minlength=n)
    return colour


def _rounds_gpu(A, prio, xp):
    n = A.shape[0]
    rows = sparse.rows_of(A, xp)
    colour = xp.full(n, -1, numpy.int32)
    taken = xp.zeros(n, numpy.uint64)
    beaten = xp.zeros(n, numpy.int8)
    # each stored a_ij, both ways: between uncoloured unknowns the lower priority is beaten; a
    # coloured end marks its colour taken at the other (again each round: an idempotent OR)
    edges = sparse.elementwise(
        "jp_edges", "int32 r, int32 c, raw int32 colour, raw int64 prio", "raw int8 beaten, raw uint64 taken",
        "int a = colour[r], b = colour[c];"
        "if (r != c) { if (a < 0 && b < 0) { if (prio[c] > prio[r]) beaten[r] = 1; else beaten[c] = 1; }"
        "else if (a < 0) atomicOr(&taken[r], 1ull << b); else if (b < 0) atomicOr(&taken[c], 1ull << a); }")
    pick = sparse.elementwise(
        "jp_pick", "uint64 t", "int32 colour, int8 beaten",
        "if (colour < 0) { if (!beaten) colour = (~t) ? __ffsll((long long)(~t)) - 1 : 63; beaten = 0; }")
    cols = A.indices.astype(numpy.int32, copy=False)
    # the host checks for uncoloured unknowns every ROUNDS_PER_CHECK rounds: a round after the
    # last colours nothing, and each check waits for the device
    while backend.any_true(colour < 0):
        for _ in range(ROUNDS_PER_CHECK):
            edges(rows, cols, colour, prio, beaten, taken)
            pick(taken, colour, beaten)
    return colour


def colour_order(mats, aggs, signs, colours, transfers, members):
    """The host hierarchy renumbered so that each level's unknowns come colour by colour: a colour
    of Gauss-Seidel is then a slice of the level's vectors, and a sweep reads and writes them in
    place instead of gathering and scattering its rows (on the host those index operations cost
    as much as the colour's product). Level k's unknowns are taken in the stable order of
    ``colours[k]`` (a level without colours, the coarsest among them, keeps its order); the
    matrices, aggregates, signs, prolongations (``transfers[k]``, a CSR matrix where ``aggs[k]``
    is None) and restrictions (``members[k]``, sparse.members' form, or None) follow; a level of
    several ranks (distributed.Rows, its aggregates and restrictions this rank's) renumbers its
    own rows, collectively.
    Returns them renumbered and each level's order (None: kept; the cycle's input is f[orders[0]])."""
    orders = [None if c is None else numpy.argsort(c, kind="stable") for c in colours]
    inverse = []
    for o in orders:
        q = None
        if o is not None:
            q = numpy.empty_like(o)
            q[o] = numpy.arange(o.size, dtype=o.dtype)
        inverse.append(q)
    # rows gathered, columns relabelled (each row's entries stay in their order: a product does
    # not need them sorted, and a restriction sums its members in the order it was made)
    new_mats = [M if o is None else M.renumbered(o, q) if hasattr(M, "renumbered") else moved(M, o, q)
                for M, o, q in zip(mats, orders, inverse)]
    new_aggs, new_signs, new_transfers, new_members = [], [], [], []
    for k, (agg, sign, P, R) in enumerate(zip(aggs, signs, transfers, members)):
        o, q = orders[k], inverse[k + 1]
        if agg is not None:
            agg = agg if o is None else agg[o]
            new_aggs.append(agg if q is None else q[agg].astype(agg.dtype))
        else:
            new_aggs.append(None)
        new_signs.append(sign if sign is None or o is None else sign[o])
        new_transfers.append(None if P is None else moved(P, o, q))          # fine rows, coarse columns
        new_members.append(None if R is None else moved(R, orders[k + 1], inverse[k]))   # the other way
    new_colours = [c if o is None else c[o] for c, o in zip(colours, orders)]
    return new_mats, new_aggs, new_signs, new_colours, new_transfers, new_members, orders


def moved(M, rows, columns):
    """The CSR matrix M with its rows in the order ``rows`` and column j renamed ``columns[j]``
    (either None: kept)."""
    M = M if rows is None else M[rows]
    return M if columns is None else _relabel(M, columns)


def _relabel(M, q):
    """The CSR matrix M with column j renamed q[j]."""
    return type(M)((M.data, q[M.indices].astype(M.indices.dtype), M.indptr), shape=M.shape)
