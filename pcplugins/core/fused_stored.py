"""Fused CUDA kernels of stored-coefficient stencil levels: the assembled variable-coefficient
fine level and the Galerkin coarse levels (9/27-point) of the operator-dependent hierarchy.

The generic code (``StencilOperator.residual``, ``smoothers.ColourGS``) forms each step from
strided views, one per stencil term and sub-lattice, in one ElementwiseKernel per sub-lattice:
a 27-point colour sweep is a few hundred views made in Python each time, and the launches' host
time, not the GPU, sets the pace of the coarse levels. Here the coefficients are one array of K
planes and each step is one kernel (kernels/stored.cu) that reads a point's whole row:

=================  =====================================================================
kernel             NumPy twin (compared with it in tests/gpu/test_kernels.py)
=================  =====================================================================
``stored_residual``  ``StencilOperator.residual``
``stored_colour``    one colour of ``smoothers.ColourGS`` (red-black or 2^d colours)
``stored_sweeps``    whole sweeps of ``smoothers.ColourGS`` in one block (small levels)
``blackbox_rap``     ``galerkin.stencil_product`` (setup: R A P with black box transfers)
``blackbox_class``   ``transfer.BlackBox._class`` (setup: one class of its weights)
``blackbox_columns``  ``transfer.BlackBox._columns`` (setup: P's columns from the weights)
``blackbox_restrict``  ``transfer.BlackBox.restrict`` (lattice sums over P's columns)
``blackbox_prolong_add``  ``transfer.BlackBox.prolong_add``
=================  =====================================================================

Colours come from global grid indices exactly as grid.colours makes them, so the kernels work on
any rank's box, and the smoother refreshes the ghosts after each colour as ColourGS does.
Nothing here allocates: a cycle of these kernels can be captured in a CUDA graph.
"""
import itertools

import numpy

from .. import backend, kernels
from . import grid, stencil

# galerkin_product splits each coarse point's sums over 9 threads on 3D coarse grids smaller than
# this: there the kernel's few threads, each a long chain of loads, leave the GPU idle
SPLIT_RAP_SIZE = 2 ** 17
# StoredGS sweeps a level of at most this many points, whole on this rank, in one block of
# BLOCK_THREADS, all its colours in one launch: there a colour's kernel costs its launch, not its
# work (the 15^3 and 7^3 levels of a 255^3 grid)
BLOCK_SWEEPS_SIZE = 4096
BLOCK_THREADS = 512


def _launch(kernel, shape3, args):
    n0, n1, nx = shape3
    if min(shape3) <= 0:
        return
    blocks = -(-nx // 128)
    block = 32 * -(-nx // (32 * blocks))
    kernel((blocks, n1, n0), (block,), args)


def _module(dtype, dim, k, coefficients=None, **defines):
    """stored.cu for values of ``dtype`` and coefficients (and transfer columns) of ``coefficients``
    (default ``dtype``)."""
    return kernels.module("stored", T=kernels.CTYPES[numpy.dtype(dtype)],
                          TS=kernels.CTYPES[numpy.dtype(coefficients or dtype)], DIM=dim, K=k, **defines)


def galerkin_product(op, T, cbox, dtype):
    """{coarse offset: array}: R A P of the fine StencilOperator ``op`` (on the GPU) and the
    transfer.BlackBox ``T`` (its weight_planes), one thread per coarse point, each array zero
    where the neighbour lies outside the coarse grid; the twin is galerkin.stencil_product."""
    xp, d = op.xp, op.box.dim
    A = coefficient_planes(op, dtype)
    W = xp.asarray(T.weight_planes, dtype)
    offsets = stencil.box_offsets(d)
    # small 3D levels: 9 threads a coarse point, their partial sums added after (a 2D point's
    # sums are short already)
    parts = 9 if d == 3 and cbox.size < SPLIT_RAP_SIZE else 1
    # one thread a point writes the planes of one array (detect.class_stats and compress take them
    # as they are), nine write nine sets of planes
    out = xp.empty(((parts,) if parts > 1 else ()) + (len(offsets),) + cbox.shape, dtype)
    # blackbox_rap takes its offsets and coarsened axes as compile-time constants
    pad = (0,) * (3 - d)
    ax = pad + tuple(int(c) for c in T.coarsened)
    offs = ",".join(str(v) for o in op.offsets for v in pad + tuple(o))
    kernel = _module(dtype, d, len(op.offsets), OFFS=offs, AX0=ax[0], AX1=ax[1], AX2=ax[2]).get_function(
        "blackbox_rap")
    i32 = [numpy.int32(v) for v in (*grid.dims3(op.box.shape), *grid.dims3(cbox.shape),
                                     *([0] * (3 - d) + list(T.phase)))]
    c0, c1, c2 = grid.dims3(cbox.shape)
    _launch(kernel, (c0 * parts, c1, c2), [out, A, W, *i32, numpy.dtype(dtype).type(T.rscale), numpy.int32(parts)])
    return dict(zip(offsets, out.sum(axis=0) if parts > 1 else out))


def coefficient_planes(op, dtype):
    """The operator's coefficients as one array of planes, constants broadcast (not masked): the
    array they already are where they lie as consecutive planes of one (a Galerkin product's
    output, a Stored level's), else a copy."""
    xp, c = op.xp, op.coefs
    shape, itemsize = op.box.shape, numpy.dtype(dtype).itemsize
    if not op.constant and all(a.dtype == dtype and a.shape == shape and a.flags.c_contiguous
                               and a.data.ptr == c[0].data.ptr + k * a.size * itemsize for k, a in enumerate(c)):
        return xp.ndarray((len(c),) + shape, dtype, memptr=c[0].data)     # the memory stays referenced
    return xp.stack([xp.broadcast_to(xp.asarray(a, dtype), shape) for a in c])


def offset_table(op):
    """The operator's offsets as the kernels take them: 3 ints each, axis 0 first."""
    return op.xp.asarray([[0] * (3 - op.box.dim) + list(o) for o in op.offsets], numpy.int32)


def blackbox_class(planes, A, offs, box, lat, B):
    """transfer.BlackBox's weights of the class B (axes) on its lattice ``lat`` (slices of padded
    indices) into ``planes`` (the 2^d weight planes), from the coefficient planes ``A`` and their
    ``offs``: one thread per point of the class."""
    d, pad = box.dim, 3 - box.dim
    st = [1] * pad + [s.start for s in lat]
    sp = [1] * pad + [s.step or 1 for s in lat]
    m = [1] * pad + [len(range(s.start, s.stop, s.step or 1)) for s in lat]
    bmask = sum(1 << (2 - pad - a) for a in B)
    kernel = _module(planes.dtype, d, A.shape[0]).get_function("blackbox_class")
    i32 = [numpy.int32(v) for v in (*grid.dims3(box.shape), *st, *sp, *m, bmask)]
    _launch(kernel, tuple(m), [planes, A, offs, *i32])


def blackbox_columns(T):
    """transfer.BlackBox's columns (its ``_columns``, the twin) from its weight planes: one kernel
    for every plane, one thread per padded coarse point."""
    W = T.weight_planes
    d, pad = T.fine.dim, 3 - T.fine.dim
    cols = backend.array_module(W).empty((len(T.w),) + T.coarse.padded_shape, W.dtype)
    kernel = _module(W.dtype, d, 1).get_function("blackbox_columns")
    i32 = [numpy.int32(v) for v in (*grid.dims3(T.fine.shape), *grid.dims3(T.coarse.shape),
                                     *([0] * pad + [int(c) for c in T.coarsened]), *([0] * pad + list(T.phase)))]
    _launch(kernel, grid.dims3(T.coarse.padded_shape), [cols, W, *i32])
    return cols


class Stored:
    """The fused residual of a stored StencilOperator ``op`` (not constant), from a copy of its
    coefficients split by parity (kernels/stored.cu) that the level's smoother (StoredGS) reads
    too; ``coefficients``: that copy's value type (default the operator's; float32 under a
    float64 cycle halves the bytes a sweep moves, the sums staying in float64)."""

    def __init__(self, op, coefficients=None):
        xp = op.xp
        self.op, self.box, self.dim, self.dtype = op, op.box, op.box.dim, op.dtype
        if op.constant:
            raise ValueError("fused_stored.Stored: the operator has constant coefficients")
        self.coefficients = numpy.dtype(coefficients or op.dtype)
        self.shape3 = grid.dims3(self.box.shape)
        h = [(n + 1) // 2 for n in self.shape3]
        C = coefficient_planes(op, op.dtype).reshape((-1,) + self.shape3)
        self.split = xp.zeros((C.shape[0], 2, 2, 2, *h), self.coefficients)
        for q in itertools.product((0, 1), repeat=3):
            part = C[(slice(None),) + tuple(slice(v, None, 2) for v in q)]
            self.split[(slice(None), *q) + tuple(slice(0, m) for m in part.shape[1:])] = part
        P1 = self.box.shape[-1] + 2
        P0 = (self.box.shape[-2] + 2) * P1
        self.delta = xp.asarray([(o[-3] * P0 if self.dim == 3 else 0) + o[-2] * P1 + o[-1] for o in op.offsets],
                                numpy.int32)
        self._module = module = _module(self.dtype, self.dim, len(op.offsets), self.coefficients)
        self._residual = module.get_function("stored_residual")
        self._colour = module.get_function("stored_colour")
        self._sizes = [numpy.int32(n) for n in self.shape3]
        self._flags = {(a, b): [numpy.int32(a), numpy.int32(b)] for a in (0, 1) for b in (0, 1)}

    def stored_values(self):
        """The split copy's values (the operator counts its own)."""
        return self.split.size

    def residual(self, out, f, u_pad):
        """out = f - A u; ``out`` and ``f`` each unpadded or padded (then their interior is used)."""
        padded = self.box.padded_shape
        flags = self._flags[out.shape == padded, f.shape == padded]
        _launch(self._residual, self.shape3, [out, f, u_pad, self.split, self.delta, *self._sizes, *flags])
        return out


class StoredGS:
    """Multicolour Gauss-Seidel (SOR for omega != 1) on a Stored level, a kernel per colour:
    'redblack' (star stencils) or 'multicolor' (2^d colours); fused twin of smoothers.ColourGS.
    ``whole``: the level lies whole on this rank (no ghosts to refresh between colours): one of at
    most BLOCK_SWEEPS_SIZE points then sweeps in one block (stored_sweeps), the same updates in
    the same order."""

    def __init__(self, stored, kind="multicolor", omega=1.0, whole=False):
        self.stored, self.kind, self.omega = stored, kind, omega
        box, t = stored.box, stored.dtype.type
        n0, n1, n2 = stored.shape3
        sizes = stored._sizes
        tail = [numpy.int32(stored.op.kdiag), t(omega)]
        split = stored.split
        self._launches = []          # per colour: (grid shape, arguments after u and f)
        if kind == "redblack":
            base = sum(s + (0 if keep else 1) for s, keep in zip(box.start, box.keep_ends))
            for c in (0, 1):
                flags = [numpy.int32(0), numpy.int32(0), numpy.int32((c + base) % 2), numpy.int32(1)]
                self._launches.append(((n0, n1, (n2 + 1) // 2), [split, stored.delta, *sizes, *flags, *tail]))
        elif kind == "multicolor":
            for lats in grid.colours(box, "multicolor"):
                if not lats:
                    self._launches.append(None)       # an empty colour still refreshes the ghosts
                    continue
                first = [s for s, _, _ in lats[0]]
                counts = [c for _, _, c in lats[0]]
                first3 = [0] * (3 - self.stored.dim) + first
                counts3 = [1] * (3 - self.stored.dim) + counts
                flags = [numpy.int32(v) for v in first3] + [numpy.int32(0)]
                self._launches.append((tuple(counts3), [split, stored.delta, *sizes, *flags, *tail]))
        else:
            raise ValueError(f"fused_stored.StoredGS: unknown colouring {kind!r}")
        self._block = None           # stored_sweeps' colour table and arguments after u and f
        if whole and 0 < box.size <= BLOCK_SWEEPS_SIZE:
            colours = [args[5:9] for _, args in filter(None, self._launches)]
            table = stored.op.xp.asarray([[int(v) for v in c] for c in colours], numpy.int32)
            self._sweeps = stored._module.get_function("stored_sweeps")
            self._block = [split, stored.delta, *sizes, table, numpy.int32(len(colours))], tail

    def smooth(self, u, f, sweeps, exchange=lambda u: u, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        if self._block is not None:
            head, tail = self._block
            self._sweeps((1,), (BLOCK_THREADS,), [u, f, *head, numpy.int32(sweeps), numpy.int32(reverse), *tail])
            exchange(u)
            return u
        order = self._launches[::-1] if reverse else self._launches
        kernel = self.stored._colour
        for _ in range(sweeps):
            for launch in order:
                if launch is not None:
                    shape3, args = launch
                    _launch(kernel, shape3, [u, f, *args])
                exchange(u)
        return u

    def describe(self):
        name = "red-black" if self.kind == "redblack" else f"{2 ** self.stored.dim}-colour"
        w = "" if self.omega == 1.0 else f", omega {self.omega:g}"
        c = "" if self.stored.coefficients == self.stored.dtype else f", {self.stored.coefficients.name} coefficients"
        how = "every colour in one fused kernel" if self._block is not None else "fused kernel per colour"
        return f"{name} Gauss-Seidel{w} ({how}{c})"


class BlackBoxTransfer:
    """transfer.BlackBox's restriction and prolongation, one kernel each, from its ``columns``
    (the generic transfer is a lattice sum per class of fine points: 27 terms and 8 classes in
    3D, launches that set the pace of every level but the finest). ``k``: the number of offsets
    of the fine level's stencil, whose stored.cu module holds the kernels; ``coefficients``: the
    columns' value type, as Stored's (a narrower type: a copy of the twin's columns)."""

    def __init__(self, twin, k, dtype, coefficients=None):
        self.twin, self.kind, self.fine, self.coarse = twin, twin.kind, twin.fine, twin.coarse
        self.dim, self.dtype = twin.fine.dim, numpy.dtype(dtype)
        ts = numpy.dtype(coefficients or dtype)
        self.columns = twin.columns if twin.columns.dtype == ts else twin.columns.astype(ts)
        module = _module(self.dtype, self.dim, k, ts)
        self._restrict = module.get_function("blackbox_restrict")
        self._prolong = module.get_function("blackbox_prolong_add")
        pad = 3 - self.dim
        self._sizes = [numpy.int32(v) for v in (*grid.dims3(self.fine.shape), *grid.dims3(self.coarse.shape),
                                                *([0] * pad + [int(c) for c in twin.coarsened]),
                                                *([0] * pad + list(twin.phase)))]
        self._rscale = self.dtype.type(twin.rscale)

    def stored_values(self):
        return self.twin.stored_values() + (self.columns.size if self.columns is not self.twin.columns else 0)

    def restrict(self, coarse_out, fine_pad):
        """coarse_out (unpadded, contiguous) = R r, from a padded fine array with current ghosts."""
        _launch(self._restrict, grid.dims3(self.coarse.shape),
                [coarse_out, self.columns, fine_pad, *self._sizes, self._rscale])
        return coarse_out

    def prolong_add(self, fine_pad, coarse_pad):
        """fine (interior of padded) += P e, from a padded coarse array with current ghosts."""
        _launch(self._prolong, grid.dims3(self.fine.shape), [fine_pad, self.columns, coarse_pad, *self._sizes])
        return fine_pad
