"""The stencil of a matrix on a structured grid, read from its CSR arrays (natural ordering: x
fastest, one box, as a DMDA on one rank numbers its points).

``stencil_of_csr(indptr, cols, vals, shape, dtype)`` returns the offsets present (in
stencil.box_offsets order, the diagonal always) and one coefficient array over the grid per
offset: A[i, i + o] at point i. A stored zero is no coupling (DMCreateMatrix preallocates the
whole stencil pattern with explicit zeros), except on the diagonal. Entries coupling points more
than one apart along some axis, and NaN or Inf values, are reported (``Found.wide``,
``Found.nonfinite``) rather than stored.

On the GPU two small kernels do it, one thread per row: ``csr_offsets`` gathers which offsets
occur, ``csr_scatter`` writes each entry into its offset's array (for up to SCATTER_STATS_MAX
offsets ``csr_scatter_stats`` does, and takes the arrays' class statistics in the same pass); the NumPy twin (any array
module) does the same with whole-array index arithmetic, in steps (``entry_slots``,
``couplings``, ``slots_present``, ``scatter``) that petsc/dmda.py also takes for a matrix split
over ranks. tests/gpu/test_kernels.py compares the kernels with the twin.

``class_stats`` sums up the coefficient arrays by the boundary class of each (row, neighbour)
pair, and ``constant_read`` decides from those few numbers what the arrays' own tests (the
identity layer of ``petsc.dmda.dirichlet_layer``, the Neumann faces, ``stencil.compress``) would
decide where the stencil is constant: a constant stencil read from a matrix then needs no pass
over the arrays beyond one (kernel ``class_stats``, or its twin).
"""
import dataclasses

import numpy

from .. import backend, kernels
from . import grid, stencil

# the boundary classes of a (row, neighbour) pair (class_stats)
INNER, TO_LAYER, LAYER = 0, 1, 2


@dataclasses.dataclass
class Found:
    offsets: list
    coefs: list
    wide: bool = False         # an entry couples points more than one apart
    nonfinite: bool = False    # a NaN or Inf value
    stats: numpy.ndarray = None   # class_stats of the coefficients, where the reading kernel took them


def _kernel(name, dim, index, value, **defines):
    return kernels.module("csrstencil", DIM=dim, IDX={"int32": "int", "int64": "long long"}[index],
                          T={"float64": "double", "float32": "float"}[value], **defines).get_function(name)


# offsets present up to which one kernel writes the coefficient arrays and takes their class
# statistics (csr_scatter_stats keeps the statistics in registers): star stencils, the 2D box
SCATTER_STATS_MAX = 9


def kernels_apply(indptr, cols, vals):
    """Whether the GPU kernels take these arrays (CuPy, 32/64-bit indices, real double values)."""
    return (backend.is_gpu(backend.array_module(vals)) and vals.dtype == numpy.float64
            and indptr.dtype == cols.dtype and indptr.dtype.name in ("int32", "int64"))


def stencil_of_csr(indptr, cols, vals, shape, dtype):
    """Found(offsets, coefs, wide, nonfinite) of the CSR matrix on the grid ``shape`` (array-axis
    order, natural ordering); with ``wide`` or ``nonfinite`` the coefficients are not made."""
    if kernels_apply(indptr, cols, vals):
        return _stencil_gpu(indptr, cols, vals, tuple(shape), numpy.dtype(dtype))
    return stencil_of_csr_twin(indptr, cols, vals, tuple(shape), numpy.dtype(dtype))


def _stencil_gpu(indptr, cols, vals, shape, dtype):
    cp = backend.cupy
    d, (n0, n1, n2) = len(shape), grid.dims3(shape)
    nrows = n0 * n1 * n2
    centre = (3 ** d - 1) // 2
    flags = cp.zeros(3, numpy.uint32)
    blocks, block = (max(1, -(-nrows // 256)),), (256,)
    common = [numpy.int64(nrows), numpy.int32(n1), numpy.int32(n2)]
    _kernel("csr_offsets", d, indptr.dtype.name, "float64")(
        blocks, block, (indptr, cols, vals, *common, numpy.int32(centre), flags))
    bits, wide, bad = (int(v) for v in backend.to_host(flags))
    if wide or bad:
        return Found([], [], bool(wide), bool(bad))
    present = [s for s in range(3 ** d) if bits >> s & 1 or s == centre]
    offsets = [stencil.box_offsets(d)[s] for s in present]
    if len(present) <= SCATTER_STATS_MAX and all(m >= 3 for m in shape[1:]):
        # one pass: the planes (every value written) and their class statistics
        coefs = cp.empty((len(present), nrows), dtype)
        strides = numpy.array([n1 * n2, n2, 1][3 - d:])
        diff = cp.asarray(numpy.array([numpy.dot(o, strides) for o in offsets], numpy.int64))
        offs = cp.asarray(numpy.array([(0,) * (3 - d) + o for o in offsets], numpy.int32))
        partial = cp.empty((len(present), min(blocks[0], 2048), 3, 3))
        _kernel("csr_scatter_stats", d, indptr.dtype.name, dtype.name, K=len(present))(
            (partial.shape[1],), block, (indptr, cols, vals, *(numpy.int32(v) for v in (n0, n1, n2)), diff, offs,
                                         coefs, partial))
        return Found(offsets, [c.reshape(shape) for c in coefs], stats=_merge_blocks(partial))
    compact = numpy.full(3 ** d, -1, numpy.int32)
    compact[present] = numpy.arange(len(present), dtype=numpy.int32)
    coefs = cp.zeros((len(present), nrows), dtype)
    _kernel("csr_scatter", d, indptr.dtype.name, dtype.name)(
        blocks, block, (indptr, cols, vals, *common, cp.asarray(compact), coefs))
    return Found(offsets, [c.reshape(shape) for c in coefs])


def stencil_of_csr_twin(indptr, cols, vals, shape, dtype):
    """stencil_of_csr by whole-array index arithmetic, on the arrays' own module."""
    xp = backend.array_module(vals)
    nonfinite = not backend.all_true(xp.isfinite(vals))
    rows, slot, far = entry_slots(indptr, cols, shape)
    wide = backend.any_true(far & (vals != 0))
    if wide or nonfinite:
        return Found([], [], bool(wide), bool(nonfinite))
    keep = couplings(slot, far, vals, len(shape))
    rows, slot, vals = rows[keep], slot[keep], vals[keep]
    return Found(*scatter(rows, slot, vals, slots_present(slot, len(shape)), shape, dtype))


def natural_positions(index, shape):
    """Grid positions (one array per axis) of indices in natural order on the grid ``shape``."""
    return list(backend.array_module(index).unravel_index(index, tuple(shape)))


def entry_slots(indptr, cols, shape, start=None, col_positions=None):
    """Per stored entry of CSR rows over a box ``shape`` in natural order (starting at grid point
    ``start``): its row, its slot (index in stencil.box_offsets of the offset to its column) and
    whether the column lies more than one apart along some axis (``far``; its slot is then
    meaningless). ``col_positions``: the columns' grid positions where the columns are not in
    the box's natural order (a matrix split over ranks); by default they are."""
    xp = backend.array_module(cols)
    d = len(shape)
    if xp is numpy and col_positions is None and not any(start or ()) and all(m >= 3 for m in shape[1:]):
        return _entry_slots_by_difference(indptr, cols, shape)
    start = start or (0,) * d
    if xp is numpy:
        rows = numpy.repeat(numpy.arange(indptr.size - 1), numpy.diff(indptr))
    else:          # CuPy's repeat takes no array of counts
        rows = xp.searchsorted(indptr, xp.arange(cols.size), side="right") - 1
    if col_positions is None:
        col_positions = natural_positions(cols.astype(numpy.int64), shape)
    row_positions = natural_positions(rows.astype(numpy.int64), shape)
    slot = xp.zeros(cols.size, dtype=numpy.int64)
    far = xp.zeros(cols.size, dtype=bool)
    for a in range(d):
        off = col_positions[a] - (row_positions[a] + start[a])
        far |= xp.abs(off) > 1
        slot += (off + 1) * 3 ** (d - 1 - a)
    return rows, slot, far


def _entry_slots_by_difference(indptr, cols, shape):
    """entry_slots on the host for a matrix in the box's natural order, from the difference column
    - row: with at least 3 points along every axis but the slowest, the 3^d offsets have distinct
    differences, so a table lookup gives each entry's slot. A column can have wrapped around (the
    difference of an offset whose neighbour lies outside the grid) only in a row on the grid's
    faces, so only those rows' entries are checked by grid position. 32-bit indices where they
    fit: the passes over the entries are the cost."""
    d = len(shape)
    nrows = indptr.size - 1
    itype = numpy.int32 if nrows < 2 ** 31 - 1 else numpy.int64
    rows = numpy.repeat(numpy.arange(nrows, dtype=itype), numpy.diff(indptr))
    strides = [int(numpy.prod(shape[a + 1:])) for a in range(d)]
    offsets = numpy.array(stencil.box_offsets(d))
    diffs = offsets @ numpy.array(strides)
    reach = int(numpy.abs(diffs).max())
    table = numpy.full(2 * reach + 3, -1, numpy.int8)      # -1 also at both ends: beyond the reach
    table[diffs + reach + 1] = numpy.arange(len(offsets))
    diff = cols.astype(itype) - rows
    numpy.clip(diff, -reach - 1, reach + 1, out=diff)
    diff += reach + 1
    slot = table[diff]
    far = slot < 0
    slot[far] = 0
    face = numpy.zeros(shape, bool)
    for a in range(d):
        face[(slice(None),) * a + (0,)] = face[(slice(None),) * a + (-1,)] = True
    edge = numpy.flatnonzero(face.ravel()[rows])
    row_pos = numpy.unravel_index(rows[edge], shape)
    wrapped = numpy.zeros(edge.size, bool)
    for a in range(d):
        p = row_pos[a] + offsets[slot[edge], a]
        wrapped |= (p < 0) | (p >= shape[a])
    far[edge[wrapped]] = True
    return rows, slot, far


def couplings(slot, far, vals, dim):
    """Indices of the entries that are couplings: not far, and nonzero or on the diagonal (a
    stored zero is no coupling)."""
    xp = backend.array_module(vals)
    return xp.flatnonzero(~far & ((vals != 0) | (slot == (3 ** dim - 1) // 2)))


def slots_present(slot, dim):
    """The slots that occur, with the diagonal's always: a sorted list."""
    xp = backend.array_module(slot)
    counts = backend.to_host(xp.bincount(slot, minlength=3 ** dim))
    return sorted(set(numpy.flatnonzero(counts).tolist()) | {(3 ** dim - 1) // 2})


def scatter(rows, slot, vals, present, shape, dtype):
    """(offsets, coefficient arrays over ``shape``) of the couplings (rows, slot, vals), one array
    per slot of ``present`` (a row holds each column once)."""
    xp = backend.array_module(vals)
    d = len(shape)
    compact = numpy.full(3 ** d, -1, numpy.int64)
    compact[present] = numpy.arange(len(present))
    coefs = xp.zeros((len(present), int(numpy.prod(shape))), dtype=dtype)
    coefs[xp.asarray(compact)[slot], rows] = vals
    offsets = stencil.box_offsets(d)
    return [offsets[s] for s in present], [c.reshape(shape) for c in coefs]


def class_stats(box, offsets, coefs):
    """Per offset and boundary class of the (row, neighbour) pairs of the rank's ``box``: (any
    nonzero, least, largest value) of the coefficient arrays ``coefs``, a (K, 3, 3) float64 host
    array (least > largest where a class has no pair). Classes: INNER a row off the global grid's
    outer layer with its neighbour off it too, TO_LAYER such a row with its neighbour on the layer,
    LAYER a row on the layer with its neighbour inside the grid (a neighbour beyond the grid has no
    class). One kernel on the GPU, for every offset and class at once."""
    xp = backend.array_module(coefs[0]) if coefs else numpy
    if backend.is_gpu(xp) and coefs[0].dtype.name in ("float64", "float32") and box.size:
        return _class_stats_gpu(box, offsets, coefs)
    return class_stats_twin(box, offsets, coefs)


def _class_stats_gpu(box, offsets, coefs):
    cp = backend.cupy
    d, K = box.dim, len(offsets)
    n, s, m = grid.dims3(box.shape), (0,) * (3 - d) + tuple(box.start), grid.dims3(box.global_shape)
    planes = cp.stack([cp.ascontiguousarray(c) for c in coefs]) if not _one_array(coefs) else coefs[0].base
    offs = cp.asarray(numpy.array([(0,) * (3 - d) + tuple(o) for o in offsets], numpy.int32))
    blocks = min(n[0] * n[1], 1024)
    partial = cp.empty((K, blocks, 3, 3))
    _kernel("class_stats", d, "int32", planes.dtype.name)(
        (blocks, K), (256,), (planes, *(numpy.int32(v) for v in (*n, *s, *m)), offs, partial))
    return _merge_blocks(partial)


def _merge_blocks(partial):
    """class_stats from the kernels' per-block statistics (K, blocks, 3, 3), on the host."""
    xp = backend.array_module(partial)
    nz, lo, hi = partial[..., 0].max(axis=1), partial[..., 1].min(axis=1), partial[..., 2].max(axis=1)
    return backend.to_host(xp.stack([nz, lo, hi], axis=-1))


def _one_array(coefs):
    """Whether ``coefs`` are the consecutive planes of one C-contiguous (K, ...) array."""
    base = coefs[0].base
    return (base is not None and base.flags.c_contiguous and base.shape[0] == len(coefs)
            and base.size == len(coefs) * coefs[0].size
            and all(c.data.ptr == base[k].data.ptr for k, c in enumerate(coefs)))


def class_stats_twin(box, offsets, coefs):
    """class_stats by whole-array masks, on the arrays' own module."""
    xp = backend.array_module(coefs[0]) if coefs else numpy
    out = numpy.empty((len(offsets), 3, 3))
    out[:] = (0.0, numpy.inf, -numpy.inf)
    g = [numpy.arange(s, s + n) for s, n in zip(box.start, box.shape)]
    for k, (o, c) in enumerate(zip(offsets, coefs)):
        row_layer = _any_axis([(x == 0) | (x == m - 1) for x, m in zip(g, box.global_shape)])
        nb_layer = _any_axis([(x + v == 0) | (x + v == m - 1) for x, v, m in zip(g, o, box.global_shape)])
        nb_out = _any_axis([(x + v < 0) | (x + v >= m) for x, v, m in zip(g, o, box.global_shape)])
        masks = {INNER: ~row_layer & ~nb_layer, TO_LAYER: ~row_layer & nb_layer, LAYER: row_layer & ~nb_out}
        for cls, mask in masks.items():
            v = xp.asarray(c)[xp.asarray(mask)]
            if v.size:
                out[k, cls] = backend.to_host(xp.stack([xp.any(v != 0).astype(numpy.float64),
                                                        v.min().astype(numpy.float64), v.max().astype(numpy.float64)]))
    return out


def _any_axis(flags):
    """The or of one 1D flag array per axis, broadcast over the grid."""
    d = len(flags)
    out = numpy.zeros([len(f) for f in flags], bool)
    for a, f in enumerate(flags):
        out |= f.reshape([-1 if b == a else 1 for b in range(d)])
    return out


@dataclasses.dataclass
class ConstantRead:
    """A constant stencil read from a matrix, as constant_read finds it."""
    layer: bool             # identity rows on the global grid's outer layer (eliminated)
    offsets: list           # the operator on the unknowns' grid: offsets and their constants
    consts: list
    keep_ends: tuple        # per axis: Neumann-type rows on both faces (grid.Box keep_ends)
    elim: list = None       # with a layer: the interior rows' constants at every offset read
    layer_diagonal: float = None


def constant_read(box, offsets, stats, dtype, tol=0.0):
    """The constant stencil that the arrays behind ``stats`` (class_stats of every rank, a list)
    hold, or None where they do not hold one (or where a check fails: the arrays' own tests then
    report it). It decides what dirichlet_layer, the Neumann-face test and stencil.compress
    decide on the arrays: the layer where every row on the outer layer is a positive diagonal
    alone; constants over the pairs whose neighbour is an unknown (tolerance ``tol``, relative);
    offsets without a nonzero there dropped; the Neumann axes (without a layer) from the face rows'
    sums, taken in ``dtype`` and the offsets' order as the arrays' test takes them."""
    d = box.dim
    centre = offsets.index((0,) * d)
    parts = numpy.stack(stats)
    stats = numpy.stack([parts[..., 0].max(axis=0), parts[..., 1].min(axis=0), parts[..., 2].max(axis=0)], axis=-1)

    def over(k, classes):
        s = stats[k, list(classes)]
        return s[:, 0].max() > 0, s[:, 1].min(), s[:, 2].max()

    def const(lo, hi):
        if lo > hi:                          # no pair of these classes
            return 0.0
        return float(lo) if hi - lo <= tol * max(abs(lo), abs(hi)) else None

    layer = (all(m >= 3 for m in box.global_shape) and stats[centre, LAYER, 1] > 0
             and not any(stats[k, LAYER, 0] for k in range(len(offsets)) if k != centre))
    unknowns = (INNER,) if layer else (INNER, TO_LAYER, LAYER)
    keep_o, consts = [], []
    for k, o in enumerate(offsets):
        nonzero, lo, hi = over(k, unknowns)
        if any(o) and not nonzero:
            continue
        keep_o.append(o)
        consts.append(const(lo, hi))
    if any(c is None for c in consts) or not consts[keep_o.index((0,) * d)] > 0:
        return None
    if not layer:
        return ConstantRead(False, keep_o, consts, _constant_neumann_axes(box, keep_o, consts, dtype))
    elim = [const(*over(k, (INNER, TO_LAYER))[1:]) for k in range(len(offsets))]
    bdiag = const(*stats[centre, LAYER, 1:])
    if any(c is None for c in elim) or bdiag is None:
        return None
    return ConstantRead(True, keep_o, consts, (False,) * d, elim, bdiag)


def neumann_axes(box, masked, d, comm):
    """Per axis, whether the rows on both grid faces across it (edges and corners left out)
    annihilate the constants (row sum zero to rounding), as a Neumann or natural boundary
    condition on vertex-centred unknowns gives; a Dirichlet condition eliminated from the
    interior rows leaves a positive row sum there. Collective (comm.Comm)."""
    xp = backend.array_module(d)
    inner = [grid.global_inner_slice(box, b) for b in range(box.dim)]
    flags = []                       # per axis and face of the global grid on this rank: any bad row
    for a in range(box.dim):
        for at in grid.global_face_indices(box, a):
            sl = tuple(slice(at, at + 1) if b == a else inner[b] for b in range(box.dim))
            rows = sum(m[sl] for m in masked)
            if rows.size:
                flags.append((a, backend.any_flag(xp.abs(rows) > 1e-10 * xp.abs(d[sl]))))
    bad = backend.to_host(xp.stack([f for _, f in flags])) if flags else []
    found = [int(box.global_shape[a] >= 3 and not any(v for (b, _), v in zip(flags, bad) if b == a))
             for a in range(box.dim)]
    return tuple(comm.allmin(v) == 1 for v in found)


def _constant_neumann_axes(box, offsets, consts, dtype):
    """Per axis: whether the rows on both faces across it (edges and corners left out) sum to
    zero (to 1e-10 of the diagonal), for a constant stencil."""
    d, t = box.dim, numpy.dtype(dtype).type
    diag = abs(t(consts[offsets.index((0,) * d)]))
    found = []
    for a in range(d):
        rows = all(box.global_shape[b] >= 3 for b in range(d) if b != a)   # the faces have rows
        sums = []
        for missing in (-1, 1):              # the face whose rows have no neighbour at o[a] = missing
            total = t(0)
            for o, c in zip(offsets, consts):
                if o[a] != missing:
                    total = total + t(c)
            sums.append(total)
        found.append(box.global_shape[a] >= 3 and (not rows or all(abs(v) <= 1e-10 * diag for v in sums)))
    return tuple(found)
