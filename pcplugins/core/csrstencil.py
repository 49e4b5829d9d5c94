"""The stencil of a matrix on a structured grid, read from its CSR arrays (natural ordering: x
fastest, one box, as a DMDA on one rank numbers its points).

``stencil_of_csr(indptr, cols, vals, shape, dtype)`` returns the offsets present (in
stencil.box_offsets order, the diagonal always) and one coefficient array over the grid per
offset: A[i, i + o] at point i. A stored zero is no coupling (DMCreateMatrix preallocates the
whole stencil pattern with explicit zeros), except on the diagonal. Entries coupling points more
than one apart along some axis, and NaN or Inf values, are reported (``Found.wide``,
``Found.nonfinite``) rather than stored.

On the GPU small kernels do it, one thread per row: ``csr_offsets`` gathers which offsets occur,
``csr_scatter`` writes each entry into its offset's array. For up to SCATTER_STATS_MAX offsets
``csr_scatter_stats`` writes the arrays and takes their class statistics in the same pass; it is
tried first with the offsets of the grid's central row and reports any entry at another offset, so
a matrix whose rows all have the central row's offsets (a DMDA's stencil) is read in one pass. The
NumPy twin (any array module) does the same with whole-array index arithmetic, in steps
(``entry_slots``, ``couplings``, ``slots_present``, ``scatter``) that petsc/dmda.py also takes for
a matrix split over ranks. tests/gpu/test_kernels.py compares the kernels with the twin. The
class statistics (``Found.stats``) are core/detect.py's, whose kernel this module loads too
(``kernel``, ``merge_blocks``).
"""
import dataclasses

import numpy

from .. import backend, kernels
from . import grid, stencil


@dataclasses.dataclass
class Found:
    offsets: list
    coefs: list
    wide: bool = False         # an entry couples points more than one apart
    nonfinite: bool = False    # a NaN or Inf value
    stats: numpy.ndarray = None   # detect.class_stats of the coefficients, where the kernel took them


def kernel(name, dim, index, value, **defines):
    """Kernel ``name`` of kernels/csrstencil.cu for ``dim`` dimensions, ``index`` (int32, int64)
    CSR indices and ``value`` (float64, float32) coefficients."""
    return kernels.module("csrstencil", DIM=dim, IDX={"int32": "int", "int64": "long long"}[index],
                          T={"float64": "double", "float32": "float"}[value], **defines).get_function(name)


# offsets present up to which one kernel writes the coefficient arrays and takes their class
# statistics (csr_scatter_stats keeps the statistics in registers): star stencils, the 2D box
SCATTER_STATS_MAX = 9


def merge_blocks(partial):
    """The class statistics (detect.class_stats) from the kernels' per-block ones (K, blocks, 3,
    3), on the host."""
    xp = backend.array_module(partial)
    nz, lo, hi = partial[..., 0].max(axis=1), partial[..., 1].min(axis=1), partial[..., 2].max(axis=1)
    return backend.to_host(xp.stack([nz, lo, hi], axis=-1))


def _strides(shape):
    """Index steps per axis of the natural ordering on ``shape``: the column difference of an
    offset o is o @ strides."""
    return numpy.array([int(numpy.prod(shape[a + 1:])) for a in range(len(shape))], numpy.int64)


def kernels_apply(indptr, cols, vals):
    """Whether the GPU kernels take these arrays (CuPy, 32/64-bit indices, real double values)."""
    return (backend.is_gpu(backend.array_module(vals)) and vals.dtype == numpy.float64
            and indptr.dtype == cols.dtype and indptr.dtype.name in ("int32", "int64"))


def stencil_of_csr(indptr, cols, vals, shape, dtype, periods=None):
    """Found(offsets, coefs, wide, nonfinite) of the CSR matrix on the grid ``shape`` (array-axis
    order, natural ordering); with ``wide`` or ``nonfinite`` the coefficients are not made.
    ``periods``: per axis the number of points of a periodic axis (its ends are neighbours), else
    0; a periodic grid is read by the twin."""
    if kernels_apply(indptr, cols, vals) and not any(periods or ()):
        return _stencil_gpu(indptr, cols, vals, tuple(shape), numpy.dtype(dtype))
    return stencil_of_csr_twin(indptr, cols, vals, tuple(shape), numpy.dtype(dtype), periods)


def _stencil_gpu(indptr, cols, vals, shape, dtype):
    cp = backend.cupy
    d, (n0, n1, n2) = len(shape), grid.dims3(shape)
    nrows = n0 * n1 * n2
    centre = (3 ** d - 1) // 2
    if all(m >= 3 for m in shape):
        # the offsets of the central row (it has every neighbour) are tried first, in one pass that
        # also checks them; any entry elsewhere, or NaN, and the pass below decides
        found = _scatter_stats(indptr, cols, vals, shape, dtype, _central_slots(indptr, cols, vals, shape))
        if found is not None:
            return found
    flags = cp.zeros(3, numpy.uint32)
    blocks, block = (max(1, -(-nrows // 256)),), (256,)
    common = [numpy.int64(nrows), numpy.int32(n1), numpy.int32(n2)]
    kernel("csr_offsets", d, indptr.dtype.name, "float64")(
        blocks, block, (indptr, cols, vals, *common, numpy.int32(centre), flags))
    bits, wide, bad = (int(v) for v in backend.to_host(flags))
    if wide or bad:
        return Found([], [], bool(wide), bool(bad))
    present = [s for s in range(3 ** d) if bits >> s & 1 or s == centre]
    if all(m >= 3 for m in shape[1:]):
        found = _scatter_stats(indptr, cols, vals, shape, dtype, present)
        if found is not None:
            return found
    compact = numpy.full(3 ** d, -1, numpy.int32)
    compact[present] = numpy.arange(len(present), dtype=numpy.int32)
    coefs = cp.zeros((len(present), nrows), dtype)
    kernel("csr_scatter", d, indptr.dtype.name, dtype.name)(
        blocks, block, (indptr, cols, vals, *common, cp.asarray(compact), coefs))
    return Found([stencil.box_offsets(d)[s] for s in present], [c.reshape(shape) for c in coefs])


def _central_slots(indptr, cols, vals, shape):
    """The slots of the nonzero entries of the grid's central row, with the diagonal's."""
    d = len(shape)
    strides = _strides(shape)
    row = int(numpy.dot([m // 2 for m in shape], strides))
    lo, hi = (int(v) for v in backend.to_host(indptr[row:row + 2]))
    c, v = (backend.to_host(a[lo:hi]) for a in (cols, vals))
    diffs = numpy.array(stencil.box_offsets(d)) @ strides
    return sorted({int(s) for s in numpy.flatnonzero(numpy.isin(diffs, c[v != 0] - row))} | {(3 ** d - 1) // 2})


def _scatter_stats(indptr, cols, vals, shape, dtype, present):
    """Found with the class statistics, from one pass of csr_scatter_stats over the slots
    ``present``; None where they are too many for it, or the pass finds an entry beyond them, a
    column wrapped around the grid or a NaN (the offsets' pass then decides). Slots without a
    nonzero value, other than the diagonal, are dropped, as csr_offsets drops them."""
    cp = backend.cupy
    d, (n0, n1, n2) = len(shape), grid.dims3(shape)
    nrows, K = n0 * n1 * n2, len(present)
    if K > SCATTER_STATS_MAX:
        return None
    offsets = [stencil.box_offsets(d)[s] for s in present]
    coefs = cp.empty((K, nrows), dtype)
    diff = cp.asarray(numpy.array(offsets) @ _strides(shape))
    offs = cp.asarray(numpy.array([(0,) * (3 - d) + o for o in offsets], numpy.int32))
    partial = cp.empty((K, min(-(-nrows // 256), 2048), 3, 3))
    flags = cp.zeros(3, numpy.uint32)
    kernel("csr_scatter_stats", d, indptr.dtype.name, dtype.name, K=K)(
        (partial.shape[1],), (256,), (indptr, cols, vals, *(numpy.int32(v) for v in (n0, n1, n2)), diff, offs,
                                      coefs, partial, flags))
    if backend.to_host(flags).any():
        return None
    stats = merge_blocks(partial)
    keep = [k for k, o in enumerate(offsets) if not any(o) or stats[k, :, 0].any()]
    return Found([offsets[k] for k in keep], [coefs[k].reshape(shape) for k in keep], stats=stats[keep])


def stencil_of_csr_twin(indptr, cols, vals, shape, dtype, periods=None):
    """stencil_of_csr by whole-array index arithmetic, on the arrays' own module."""
    xp = backend.array_module(vals)
    nonfinite = not backend.all_true(xp.isfinite(vals))
    rows, slot, far = entry_slots(indptr, cols, shape, periods=periods)
    wide = backend.any_true(far & (vals != 0))
    if wide or nonfinite:
        return Found([], [], bool(wide), bool(nonfinite))
    keep = couplings(slot, far, vals, len(shape))
    rows, slot, vals = rows[keep], slot[keep], vals[keep]
    return Found(*scatter(rows, slot, vals, slots_present(slot, len(shape)), shape, dtype))


def natural_positions(index, shape):
    """Grid positions (one array per axis) of indices in natural order on the grid ``shape``."""
    return list(backend.array_module(index).unravel_index(index, tuple(shape)))


def entry_slots(indptr, cols, shape, start=None, col_positions=None, periods=None, rows=None):
    """Per stored entry of CSR rows over a box ``shape`` in natural order (starting at grid point
    ``start``): its row, its slot (index in stencil.box_offsets of the offset to its column) and
    whether the column lies more than one apart along some axis (``far``; its slot is then
    meaningless). ``col_positions``: the columns' grid positions where the columns are not in
    the box's natural order (a matrix split over ranks); by default they are. ``periods``: per
    axis the global number of points of a periodic axis, else 0: a column m - 1 apart along it
    is the neighbour across the wrap. ``rows``: the entries' rows, given instead of ``indptr``."""
    xp = backend.array_module(cols)
    d = len(shape)
    periods = periods or (0,) * d
    if (xp is numpy and rows is None and col_positions is None and not any(start or ())
            and all(m >= 3 for m in shape[1:])):
        return _entry_slots_by_difference(indptr, cols, shape, periods)
    start = start or (0,) * d
    if rows is None and xp is numpy:
        rows = numpy.repeat(numpy.arange(indptr.size - 1), numpy.diff(indptr))
    elif rows is None:          # CuPy's repeat takes no array of counts
        rows = xp.searchsorted(indptr, xp.arange(cols.size), side="right") - 1
    if col_positions is None:
        col_positions = natural_positions(cols.astype(numpy.int64), shape)
    row_positions = natural_positions(rows.astype(numpy.int64), shape)
    slot = xp.zeros(cols.size, dtype=numpy.int64)
    far = xp.zeros(cols.size, dtype=bool)
    for a in range(d):
        off = _wrapped(col_positions[a] - (row_positions[a] + start[a]), periods[a], xp)
        far |= xp.abs(off) > 1
        slot += (off + 1) * 3 ** (d - 1 - a)
    return rows, slot, far


def _wrapped(off, period, xp):
    """Position differences along an axis, those across a periodic axis's wrap (m - 1 apart) as the
    neighbours they are."""
    if period < 3:
        return off
    return xp.where(off == period - 1, -1, xp.where(off == 1 - period, 1, off))


def _entry_slots_by_difference(indptr, cols, shape, periods):
    """entry_slots on the host for a matrix in the box's natural order, from the difference column
    - row: with at least 3 points along every axis but the slowest, the 3^d offsets have distinct
    differences, so a table lookup gives each entry's slot. A column can have wrapped around (the
    difference of an offset whose neighbour lies outside the grid, or a neighbour across a periodic
    axis's wrap) only in a row on the grid's faces, so only those rows' entries are placed again by
    grid position. 32-bit indices where they fit: the passes over the entries are the cost."""
    d = len(shape)
    nrows = indptr.size - 1
    itype = numpy.int32 if nrows < 2 ** 31 - 1 else numpy.int64
    rows = numpy.repeat(numpy.arange(nrows, dtype=itype), numpy.diff(indptr))
    strides = _strides(shape)
    offsets = numpy.array(stencil.box_offsets(d))
    diffs = offsets @ strides
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
    col_pos = numpy.unravel_index(cols[edge], shape)
    slot[edge] = 0
    far[edge] = False
    for a in range(d):
        off = _wrapped(col_pos[a].astype(itype) - row_pos[a], periods[a], numpy)
        far[edge] |= numpy.abs(off) > 1
        slot[edge] += ((off + 1) * 3 ** (d - 1 - a)).astype(slot.dtype)
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
