"""Aggregates of the auxiliary structured grid of Wang, Hu, Cohen and Xu (section 3), and the colours
of its Gauss-Seidel smoother: data-parallel (whole-array operations on NumPy or CuPy).

A quadtree (2D) or octree (3D) of square (cubic) cells over the bounding box of the vertex
coordinates, of depth L (``depth``: about 2^dim vertices per leaf cell). The fine aggregates are
the vertices in one leaf cell; every coarser level aggregates the 2x2 (2x2x2) children of a cell.
Empty cells make no unknown. Colours come with the grid: the parity of a cell's indices (4 colours
in 2D, 8 in 3D), each fine vertex taking its cell's colour (the paper colours aggregates on the
finest level). Cells are numbered by their Morton (Z-order) keys, in which a cell's parent is a
shift: the vertices are sorted once, and every coarser level's aggregates are runs of consecutive
unknowns. Pairwise aggregation, for matrices without coordinates, is aggregation.py.
"""
import math

import numpy

from .. import backend
from . import sparse


def depth(n, dim):
    """The auxiliary grid's depth L: the one whose leaf cells hold closest to 2^dim vertices on
    average (4 in 2D, 8 in 3D, in the log scale). The paper's rule, the largest L with
    2^(dim L) < n, means the same when n is a power of 2^dim but gives about one vertex per cell,
    and no coarsening, when n is just above one (129^3)."""
    return max(0, round(math.log2(max(n, 1)) / dim) - 1)


def auxgrid(coords, xp, coarse_size, max_levels, comm=None):
    """Aggregates from vertex coordinates (n x dim array on ``xp``).

    Returns (aggs, sizes, colours, members): aggs[k] maps the unknowns of level k to those of
    level k+1, sizes[k] is the number of unknowns of level k, colours[k] the smoother colours of
    level k, members[k] the restriction P^T of aggs[k] (sparse.members).
    On several ranks (``comm``, distributed.py) ``coords`` are this rank's vertices: the grid
    covers the global bounding box, its depth follows the global count, and an aggregate is the
    vertices of one cell on one rank (so aggregates never cross ranks); sizes are this rank's.
    """
    n, dim = coords.shape
    total = (lambda v: v) if comm is None else comm.allsum
    if n:
        lo, hi = backend.column_reduce(coords, "min"), backend.column_reduce(coords, "max")
    else:                                # a rank that owns no vertices
        lo, hi = xp.full(dim, numpy.inf), xp.full(dim, -numpy.inf)
    if comm is not None:
        lo = xp.asarray([comm.allmin(float(v)) for v in lo])
        hi = xp.asarray([comm.allmax(float(v)) for v in hi])
    # cubic cells (the bounding box's longest side over 2^L): cells of the box's own proportions
    # would make anisotropic aggregates on an elongated domain (4 x 2 x 2 vertices where the box
    # is twice as long as wide) and cost iterations; the depth counts only the cells the box fills,
    # over the axes it extends along
    width = numpy.asarray(backend.to_host(hi - lo), numpy.float64)
    span = float(width.max())
    span = span if numpy.isfinite(span) and span > 0 else 1.0
    extends = width > 1e-12 * span
    fill = float(numpy.prod(width[extends] / span)) if extends.any() else 1.0
    L = depth(total(n) / fill, max(int(extends.sum()), 1))
    key = morton(coords, lo, span, L, xp)        # each vertex's leaf cell
    mask = 2 ** dim - 1                          # a key's lowest bits: the parities of its cell's indices
    aggs, sizes, colours, members = [], [n], [(key & mask).astype(numpy.int32)], []
    while L > 0 and total(sizes[-1]) > coarse_size and len(sizes) < max_levels:
        # the vertices' keys sorted once; from then on each level's unknowns are cells in key
        # order, and their parents' keys (key >> dim) come sorted too
        agg, keys, R = _cells(key, xp, ordered=len(sizes) > 1)
        aggs.append(agg)
        members.append(R)
        sizes.append(int(keys.shape[0]))
        colours.append((keys & mask).astype(numpy.int32))
        key = keys >> dim
        L -= 1
    return aggs, sizes, colours, members


def morton(coords, lo, span, L, xp):
    """The Morton (Z-order) key of each vertex's leaf cell on the grid of 2^L cubic cells of side
    ``span`` / 2^L from ``lo`` a side: the bits of the cell's indices interleaved, bit b of axis a at
    b dim + a, so that a cell's parent has the key key >> dim and sorted keys have sorted parents.
    32-bit where dim L < 31 (they sort faster). On the GPU one kernel (morton_key), its twin the
    NumPy expression: the same floating-point steps, so the same cells."""
    n, dim = coords.shape
    dtype = numpy.int32 if dim * L < 31 else numpy.int64
    m = 2 ** L
    if backend.is_gpu(xp) and n:
        key = xp.empty(n, dtype)
        sparse.elementwise("morton_key", "raw float64 x, raw float64 lo, float64 span, int32 m, int32 L, int32 dim",
                           "K key",
                           "K k = 0;"
                           "for (int a = 0; a < dim; ++a) {"
                           "  double c = floor((x[i * dim + a] - lo[a]) / span * m);"
                           "  long long j = c < 0 ? 0 : c > m - 1 ? m - 1 : (long long) c;"
                           "  for (int b = 0; b < L; ++b) k |= (K) ((j >> b) & 1) << (b * dim + a);"
                           "}"
                           "key = k")(xp.ascontiguousarray(coords, numpy.float64), lo.astype(numpy.float64),
                                      float(span), numpy.int32(m), numpy.int32(L), numpy.int32(dim), key)
        return key
    cell = xp.clip(xp.floor((coords - lo) / span * m).astype(numpy.int64), 0, m - 1)
    key = xp.zeros(n, numpy.int64)
    for b in range(L):
        for a in range(dim):
            key |= ((cell[:, a] >> b) & 1) << (b * dim + a)
    return key.astype(dtype)


def _cells(key, xp, ordered=False):
    """The aggregates of the cell keys (agg[i]: the rank of key[i] among the distinct keys), the
    distinct keys in order, and R = P^T as ``sparse.members(agg)`` makes it: all from one stable
    sort of the keys, whose order is the members' order too (agg is monotone in the key), or none
    where the keys are ``ordered`` already (each aggregate a run of consecutive unknowns)."""
    n = key.shape[0]
    if ordered:
        order, sorted_key = None, key
    else:
        order = xp.argsort(key, kind="stable") if not backend.is_gpu(xp) else xp.argsort(key)
        order = order.astype(numpy.int32)
        sorted_key = key[order]
    if backend.is_gpu(xp) and n:
        return _cells_gpu(sorted_key, order, n, xp)
    first = xp.empty(n, bool)                  # the first unknown of each aggregate, in key order
    first[:1] = True
    xp.not_equal(sorted_key[1:], sorted_key[:-1], out=first[1:])
    ids = xp.cumsum(first, dtype=numpy.int32) - 1
    if order is None:
        agg, order = ids, xp.arange(n, dtype=numpy.int32)
    else:
        agg = xp.empty(n, numpy.int32)
        agg[order] = ids
    starts = xp.flatnonzero(first).astype(numpy.int32)
    indptr = xp.concatenate([starts, xp.full(1, n, numpy.int32)])
    return agg, sorted_key[starts], sparse.member_lists(order, indptr, n, xp)


def _cells_gpu(sorted_key, order, n, xp):
    """_cells' numbering on the GPU: the first unknown of each aggregate flagged (one kernel), the
    flags' running sum, then agg, the aggregates' starts and their keys in one kernel, where the
    NumPy expressions above (the twin) take a dozen launches."""
    first = xp.empty(n, numpy.int32)
    sparse.elementwise("cells_first", "raw K key", "raw int32 first",
                       "first[i] = i == 0 || key[i] != key[i - 1]")(sorted_key, first, size=n)
    ids = xp.cumsum(first, dtype=numpy.int32)
    nc = int(ids[-1])
    if order is None:
        order = xp.arange(n, dtype=numpy.int32)
    agg, indptr, keys = xp.empty(n, numpy.int32), xp.empty(nc + 1, numpy.int32), xp.empty(nc, sorted_key.dtype)
    sparse.elementwise("cells_number", "raw int32 ids, raw int32 order, raw K key, int32 n",
                       "raw int32 agg, raw int32 indptr, raw K keys",
                       "const int a = ids[i] - 1; agg[order[i]] = a;"
                       "if (i == 0 || key[i] != key[i - 1]) { indptr[a] = i; keys[a] = key[i]; }"
                       "if (i == n - 1) indptr[a + 1] = n")(ids, order, sorted_key, numpy.int32(n), agg, indptr, keys,
                                                            size=n)
    return agg, keys, sparse.member_lists(order, indptr, n, xp)


def centroids(coords, agg, nc, xp):
    """The mean coordinates of each aggregate's vertices (``agg`` maps vertices to 0..nc-1): where
    an aux grid over coarse unknowns places them."""
    count = xp.maximum(xp.bincount(agg, minlength=nc), 1)
    return xp.stack([xp.bincount(agg, weights=coords[:, a], minlength=nc) / count
                     for a in range(coords.shape[1])], axis=1)
