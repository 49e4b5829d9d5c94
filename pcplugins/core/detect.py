"""What a stencil read from a matrix is: its coefficient arrays summed up by the boundary class of
each (row, neighbour) pair (``class_stats``), and the constant stencil those few numbers show
(``constant_read``), decided as the arrays' own tests decide it: the identity layer of
``petsc.dmda.dirichlet_layer``, the Neumann faces (``neumann_axes``), ``stencil.compress``. A
constant stencil read from a matrix then needs no pass over the arrays beyond the one that makes
the statistics (kernel ``class_stats`` in kernels/csrstencil.cu, loaded by core/csrstencil.py, or
its twin here; the reading kernel ``csr_scatter_stats`` takes them as it goes). And rows that are
each a multiple of one constant stencil (``row_scaled``), read as D^-1 A.
"""
import dataclasses

import numpy

from .. import backend
from . import csrstencil, grid

# the boundary classes of a (row, neighbour) pair
INNER, TO_LAYER, LAYER = 0, 1, 2
# mirror_scaled's tolerance on symmetry and on a row's ratios: finite-difference Jacobians (PETSc's
# coloured ones, ts ex15 -Jtype 2) are symmetric to about 1e-8 of their entries
MIRROR_TOL = 1e-6


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
    csrstencil.kernel("class_stats", d, "int32", planes.dtype.name)(
        (blocks, K), (256,), (planes, *(numpy.int32(v) for v in (*n, *s, *m)), offs, partial))
    return csrstencil.merge_blocks(partial)


def nonzero_stats(coefs):
    """Per offset (any nonzero, 0, 0), a (K, 3) host array, as stencil.compress reads stored
    coefficients (no search for constants): one reduction over the planes where they lie as one
    array (a Galerkin product's), one transfer."""
    xp = next((backend.array_module(c) for c in coefs if not numpy.isscalar(c)), numpy)
    if _one_array(coefs):
        counts = xp.count_nonzero(coefs[0].base.reshape(len(coefs), -1), axis=1)
    else:                                 # separate arrays, or numbers
        counts = xp.stack([xp.count_nonzero(xp.asarray(c)) for c in coefs])
    nonzero = backend.to_host(counts) > 0
    return numpy.stack([nonzero, numpy.zeros(len(coefs)), numpy.zeros(len(coefs))], axis=1)


def _one_array(coefs):
    """Whether ``coefs`` are the consecutive planes of one C-contiguous (K, ...) array."""
    base = getattr(coefs[0], "base", None)
    return (base is not None and base.flags.c_contiguous and base.shape[0] == len(coefs)
            and base.size == len(coefs) * coefs[0].size
            and all(getattr(c, "base", None) is base and _address(c) == _address(base[k]) for k, c in enumerate(coefs)))


def _address(a):
    return a.data.ptr if backend.is_gpu(backend.array_module(a)) else a.__array_interface__["data"][0]


def class_stats_twin(box, offsets, coefs):
    """class_stats by whole-array masks, on the arrays' own module."""
    xp = backend.array_module(coefs[0]) if coefs else numpy
    out = numpy.empty((len(offsets), 3, 3))
    out[:] = (0.0, numpy.inf, -numpy.inf)
    g = [numpy.arange(s, s + n) for s, n in zip(box.start, box.shape)]
    row_layer = _any_axis([(x == 0) | (x == m - 1) for x, m in zip(g, box.global_shape)])
    for k, (o, c) in enumerate(zip(offsets, coefs)):
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

    layer = identity_layer(box, offsets, stats)
    unknowns = (INNER,) if layer else (INNER, TO_LAYER, LAYER)
    keep_o, consts = [], []
    for k, o in enumerate(offsets):
        nonzero, lo, hi = over(k, unknowns)
        if any(o) and not nonzero:
            continue
        keep_o.append(o)
        consts.append(const(lo, hi))
    # a diagonal of either sign: a negative one is a negative definite operator, which the PC negates
    if any(c is None for c in consts) or not abs(consts[keep_o.index((0,) * d)]) > 0:
        return None
    if not layer:
        return ConstantRead(False, keep_o, consts, _constant_neumann_axes(box, keep_o, consts, dtype))
    elim = [const(*over(k, (INNER, TO_LAYER))[1:]) for k in range(len(offsets))]
    bdiag = const(*stats[centre, LAYER, 1:])
    if any(c is None for c in elim) or bdiag is None:
        return None
    return ConstantRead(True, keep_o, consts, (False,) * d, elim, bdiag)


def identity_layer(box, offsets, stats):
    """Whether every row on the global grid's outer layer is a diagonal alone, of one sign over the
    layer (the test of petsc.dmda.dirichlet_layer), from class statistics merged over the ranks."""
    centre = offsets.index((0,) * box.dim)
    return bool(all(m >= 3 for m in box.global_shape) and (stats[centre, LAYER, 1] > 0 or stats[centre, LAYER, 2] < 0)
                and not any(stats[k, LAYER, 0] for k in range(len(offsets)) if k != centre))


def varying_offsets(offsets, stats, layer):
    """Which offsets have a nonzero over the pairs whose neighbour is an unknown (the INNER pairs
    where the outer layer is eliminated, else every class), where the kept ones are not all
    constant there: stencil.compress (tolerance 0) then keeps the arrays and drops the offsets
    without one, as these flags say; None where they are all constant (compress decides)."""
    s = stats[:, [INNER] if layer else [INNER, TO_LAYER, LAYER]]
    nonzero, lo, hi = s[:, :, 0].max(axis=1) > 0, s[:, :, 1].min(axis=1), s[:, :, 2].max(axis=1)
    kept = [k for k, o in enumerate(offsets) if nonzero[k] or not any(o)]
    return None if all(hi[k] <= lo[k] for k in kept) else [bool(v) for v in nonzero]


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


def row_scaled(box, offsets, coefs, comm, stats=None):
    """(coefficient arrays, D^-1 or None): those of D^-1 A and the inverse diagonal D^-1 (an array
    over the box) where A's rows are multiples of one constant stencil's, ``rho_i`` times it
    (PETSc's ksp ex29 with -rho: -rho_i (Laplacian u)_i), that is where the diagonal varies over
    the interior rows and every coupling over it is a fixed fraction of the row's diagonal; else
    the arrays as they are and None. Such an A is nonsymmetric where rho jumps, and its Galerkin
    hierarchy fails (ex29 at 129^2, rho 1e5: GMRES broke down at 60 iterations); D^-1 A is a
    constant stencil (its identity rows of boundary values 1), whose fast path the PC takes, applied
    to D^-1 x. A symmetric A cannot qualify (a_ij = a_ji with fixed fractions makes the diagonal
    constant), so no symmetric operator loses its symmetry. Decided alike on every rank of
    ``comm``. ``stats``: the arrays' class statistics where known (one rank), in which a constant
    diagonal is seen without a pass over the arrays."""
    centre = offsets.index((0,) * box.dim)
    if stats is not None and comm.size == 1 and stats[centre, INNER, 1] == stats[centre, INNER, 2]:
        return coefs, None
    inner = tuple(grid.global_inner_slice(box, a) for a in range(box.dim))
    d = coefs[centre]
    di = d[inner]
    if not comm.allmax(int(di.size > 0 and float(di.min()) != float(di.max()))) or not comm.allmin(
            int(not di.size or float(abs(di).min()) > 0)):
        return coefs, None
    ratios = []
    for o, c in zip(offsets, coefs):
        r = c[inner] / di
        lo, hi = (float(r.min()), float(r.max())) if r.size else (numpy.inf, -numpy.inf)
        lo, hi = comm.allmin(lo), comm.allmax(hi)
        if hi - lo > 1e-12 * max(abs(lo), abs(hi), 1.0):
            return coefs, None
        ratios.append(lo)
    xp = backend.array_module(d)
    d = xp.where(d != 0, d, 1)
    scaled = [c / d for c in coefs]            # identity rows of boundary values: exactly 1
    for c, r in zip(scaled, ratios):           # the interior rows: one stencil, to the last bit
        c[inner] = r
    return scaled, 1 / d.astype(numpy.float64)


def mirror_scaled(box, offsets, coefs, comm, stats=None):
    """(coefficient arrays, D^-1 or None): those of D^-1 A and D^-1 = m where the rows on the grid's
    outer layer are m_i times rows whose couplings into the interior mirror their neighbours'
    couplings back (PETSc's ts ex15 with -boundary 1: Neumann rows u_b - u_i = 0 beside interior
    rows 1/h^2 (-Laplacian u) + a u, so m_b = 1/h^2), and the interior rows are symmetric among
    themselves; else the arrays as they are and None. D^-1 A is then symmetric but for one-way
    couplings (ex15's corners, u_c - u_diagonal = 0), and so is the Galerkin hierarchy of R = P^T,
    whose coarse rows sum fine rows: summed at their scales, A's Neumann rows vanish beside the
    interior's (ex15's matrix at 129^2: GMRES broke down at 60 iterations; D^-1 A's: 4). Decided
    alike on every rank of ``comm``; a layer row whose neighbour is on another rank keeps m = 1.
    ``stats`` (one rank): where they show every ratio 1, nothing to look at (_mirrors_alike)."""
    centre = offsets.index((0,) * box.dim)
    if stats is not None and comm.size == 1 and all(_mirrors_alike(stats, offsets, k) for k in range(len(offsets))
                                                    if k != centre):
        return coefs, None
    xp = backend.array_module(coefs[centre])
    inner = xp.zeros(box.shape, bool)
    inner[tuple(grid.global_inner_slice(box, a) for a in range(box.dim))] = True
    lo, hi = xp.full(box.shape, numpy.inf), xp.full(box.shape, -numpy.inf)
    symmetric = True
    for k, o in enumerate(offsets):
        back = tuple(-x for x in o)
        if k == centre or back not in offsets:
            continue
        row = tuple(slice(max(0, -x), n - max(0, x)) for x, n in zip(o, box.shape))      # p, with p + o in the box
        col = tuple(slice(max(0, x), n + min(0, x)) for x, n in zip(o, box.shape))       # p + o
        c, mirror = coefs[k][row].astype(numpy.float64), coefs[offsets.index(back)][col]
        both = (c != 0) & (mirror != 0) & inner[col]
        r = mirror / xp.where(c != 0, c, 1.0)
        symmetric &= not backend.any_true(both & inner[row] & (abs(r - 1) > MIRROR_TOL))
        layer = both & ~inner[row]
        lo[row] = xp.minimum(lo[row], xp.where(layer, r, numpy.inf))
        hi[row] = xp.maximum(hi[row], xp.where(layer, r, -numpy.inf))
    has = lo <= hi
    m = xp.where(has, lo, 1.0)
    fits = backend.all_true(~has | ((hi - lo <= MIRROR_TOL * abs(hi)) & (lo > 0)))
    if not comm.allmin(int(symmetric and fits)) or not comm.allmax(int(backend.any_true(abs(m - 1) > 1e-12))):
        return coefs, None
    return [c * m.astype(c.dtype) for c in coefs], m


def _mirrors_alike(stats, offsets, k):
    """From the class statistics: no layer row couples into the interior along offset k, or all
    such couplings and all their mirrors (interior rows' couplings to the layer along -k) are one
    value: every ratio mirror_scaled would take along k is 1."""
    if not stats[k, LAYER, 0]:
        return True
    back = tuple(-x for x in offsets[k])
    if back not in offsets:
        return False
    (_, lo, hi), (_, mlo, mhi) = stats[k, LAYER], stats[offsets.index(back), TO_LAYER]
    return lo == hi == mlo == mhi
