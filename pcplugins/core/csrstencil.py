"""The stencil of a matrix on a structured grid, read from its CSR arrays (natural ordering: x
fastest, one box, as a DMDA on one rank numbers its points).

``stencil_of_csr(indptr, cols, vals, shape, dtype)`` returns the offsets present (in
stencil.box_offsets order, the diagonal always) and one coefficient array over the grid per
offset: A[i, i + o] at point i. A stored zero is no coupling (DMCreateMatrix preallocates the
whole stencil pattern with explicit zeros), except on the diagonal. Entries coupling points more
than one apart along some axis, and NaN or Inf values, are reported (``Found.wide``,
``Found.nonfinite``) rather than stored.

On the GPU two small kernels do it, one thread per row: ``csr_offsets`` gathers which offsets
occur, ``csr_scatter`` writes each entry into its offset's array; the NumPy twin (any array
module) does the same with whole-array index arithmetic, in steps (``entry_slots``,
``couplings``, ``slots_present``, ``scatter``) that petsc/dmda.py also takes for a matrix split
over ranks. tests/test_gpu.py compares the kernels with the twin.
"""
import dataclasses
import functools

import numpy

from .. import backend
from . import grid, stencil


@dataclasses.dataclass
class Found:
    offsets: list
    coefs: list
    wide: bool = False         # an entry couples points more than one apart
    nonfinite: bool = False    # a NaN or Inf value


_SOURCE = r"""
// Row r of the grid (n0, n1, n2) in natural order; its entries' columns decoded the same way.
// A 2D grid is (1, n1, n2). slot = 9 (o0 + 1) + 3 (o1 + 1) + (o2 + 1) in 3D, 3 (o1 + 1) + (o2 + 1) in 2D.
__device__ __forceinline__ int entry_slot(long r0, long r1, long r2, long c, int n1, int n2, bool* wide)
{
    long c2 = c % n2, rest = c / n2, c1 = rest % n1, c0 = rest / n1;
    long o0 = c0 - r0, o1 = c1 - r1, o2 = c2 - r2;
    if (o0 < -1 || o0 > 1 || o1 < -1 || o1 > 1 || o2 < -1 || o2 > 1) { *wide = true; return -1; }
#if DIM == 3
    return (int)(9 * (o0 + 1) + 3 * (o1 + 1) + (o2 + 1));
#else
    return (int)(3 * (o1 + 1) + (o2 + 1));
#endif
}

// flags[0]: bit s set when offset s occurs; flags[1]: 1 on an entry too far; flags[2]: 1 on NaN/Inf.
// One atomic per warp and flag (the warp's bits or-ed first).
extern "C" __global__ void csr_offsets(const IDX* __restrict__ indptr, const IDX* __restrict__ cols,
                                       const double* __restrict__ vals, long nrows, int n1, int n2,
                                       int centre, unsigned* flags)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned bits = 0, far = 0, bad = 0;
    if (r < nrows) {
        long r2 = r % n2, rest = r / n2, r1 = rest % n1, r0 = rest / n1;
        for (IDX j = indptr[r]; j < indptr[r + 1]; ++j) {
            double v = vals[j];
            if (!isfinite(v)) bad = 1;
            bool wide = false;
            int s = entry_slot(r0, r1, r2, (long)cols[j], n1, n2, &wide);
            if (wide) { if (v != 0) far = 1; continue; }
            if (v != 0 || s == centre) bits |= 1u << s;
        }
    }
    bits = __reduce_or_sync(0xffffffffu, bits);
    far = __reduce_or_sync(0xffffffffu, far);
    bad = __reduce_or_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0) {
        if (bits) atomicOr(flags, bits);
        if (far) atomicOr(flags + 1, 1u);
        if (bad) atomicOr(flags + 2, 1u);
    }
}

// coefs[compact[s] * nrows + r] = value of row r's entry at offset s (coefs zeroed before).
extern "C" __global__ void csr_scatter(const IDX* __restrict__ indptr, const IDX* __restrict__ cols,
                                       const double* __restrict__ vals, long nrows, int n1, int n2,
                                       const int* __restrict__ compact, T* __restrict__ coefs)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrows) return;
    long r2 = r % n2, rest = r / n2, r1 = rest % n1, r0 = rest / n1;
    for (IDX j = indptr[r]; j < indptr[r + 1]; ++j) {
        bool wide = false;
        int s = entry_slot(r0, r1, r2, (long)cols[j], n1, n2, &wide);
        if (!wide && compact[s] >= 0) coefs[compact[s] * nrows + r] = (T)vals[j];
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernel(name, dim, index, value):
    defines = {"DIM": dim, "IDX": {"int32": "int", "int64": "long long"}[index],
               "T": {"float64": "double", "float32": "float"}[value]}
    code = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE
    return backend.cupy.RawModule(code=code).get_function(name)


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
    compact = numpy.full(3 ** d, -1, numpy.int32)
    compact[present] = numpy.arange(len(present), dtype=numpy.int32)
    coefs = cp.zeros((len(present), nrows), dtype)
    _kernel("csr_scatter", d, indptr.dtype.name, dtype.name)(
        blocks, block, (indptr, cols, vals, *common, cp.asarray(compact), coefs))
    offsets = stencil.box_offsets(d)
    return Found([offsets[s] for s in present], [c.reshape(shape) for c in coefs])


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
    pos, rest = [None] * len(shape), index
    for a in reversed(range(len(shape))):
        pos[a], rest = rest % shape[a], rest // shape[a]
    return pos


def entry_slots(indptr, cols, shape, start=None, col_positions=None):
    """Per stored entry of CSR rows over a box ``shape`` in natural order (starting at grid point
    ``start``): its row, its slot (index in stencil.box_offsets of the offset to its column) and
    whether the column lies more than one apart along some axis (``far``; its slot is then
    meaningless). ``col_positions``: the columns' grid positions where the columns are not in
    the box's natural order (a matrix split over ranks); by default they are."""
    xp = backend.array_module(cols)
    d = len(shape)
    start = start or (0,) * d
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
