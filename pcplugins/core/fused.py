"""Fused CUDA kernels for the fast path: the constant-coefficient 5/7-point Laplacian (any axis
weights) with red-black Gauss-Seidel (the smoother: smoothers/redblack.py) and (bi/tri)linear
transfers.

The generic code builds each step from strided sub-lattice views (one ElementwiseKernel per
parity lattice and per transfer class, each indexing many strided arrays). Here each step is one
kernel over the contiguous padded array that computes its indices once:

=================  =====================================================================
kernel             NumPy twin (the generic code, compared with it in tests/gpu/test_kernels.py)
=================  =====================================================================
``relax_colour``   one colour of ``smoothers.ColourGS(op, 'redblack')``
``relax_pair``     one sweep of it, both colours, out of place (3D)
``relax_face``     its first colour on the faces between ranks (then relax_pair the rest)
``residual``       ``StencilOperator.residual``
``restrict_fw``    ``transfer.Transfer(..., 'linear').restrict`` (full weighting)
``prolong_add``    ``transfer.Transfer(..., 'linear').prolong_add``
``homg_iterate``   one iteration of ``homg.HOMG`` (its CuPy/NumPy expressions)
=================  =====================================================================

The red-black kernel runs one thread per point of the colour (two per x-pair), so a sweep reads
the array once; it, the residual and the boundary elimination take ROWS rows a thread (more
loads in flight: float32 needs it to reach the bandwidth), the prolongation a 2 x 2 block of
points. Colours and transfer phases come from global indices, exactly as in grid.py and
transfer/linear.py, so the kernels work on any rank's box. Nothing here allocates: a cycle made of
these kernels can be captured in a CUDA graph.
"""

import numpy

from .. import backend, kernels
from . import grid

HOMG_ROWS = 8       # rows of x per block of homg_iterate (defined for the kernel source in _module)


def homg_iteration(out, u, f_level, l, weights, diag, scale):
    """out = one HOMG iteration on the level of stride ``l`` from ``u`` (whole padded grids;
    ``f_level`` the level's compact right-hand side, boundary included): homg.HOMG's twin."""
    contiguous(out, u, f_level)
    dim, t = u.ndim, u.dtype.type
    N, K = grid.dims3(u.shape), grid.dims3(f_level.shape)
    w = [t(0)] * (3 - dim) + [t(v) for v in weights]
    args = [out, u, f_level, *i32(*N, *K, l), *w, t(diag), t(1.0 / (l * l)), t(scale)]
    launch(dim, u.dtype, "homg_iterate", (N[0], -(-N[1] // HOMG_ROWS), N[2]), args)
    return out


def cubic_upsample(fine_pad, coarse_pad):
    """fine_pad = cubic interpolation of coarse_pad (both padded, fine = 2 coarse + 1 per axis)."""
    contiguous(fine_pad, coarse_pad)
    N, K = grid.dims3(fine_pad.shape), grid.dims3(coarse_pad.shape)
    launch(fine_pad.ndim, fine_pad.dtype, "cubic_upsample", N, [fine_pad, coarse_pad, *i32(*N, *K)])
    return fine_pad


# Rows of the grid each thread of relax_colour, residual, copy_inside and eliminate takes, per
# precision: benchmarks/gmg_kernels.py -rows measures the choices. set_rows changes them (before
# a setup).
ROWS = {"float64": 1, "float32": 2}
_ROW_KERNELS = ("relax_colour", "residual", "copy_inside", "eliminate")


# relax_pair's tile: PAIR_X x PAIR_ROWS points of (i2, i1) a block at most (pair_tile narrows it
# to fit a row), marching along i0 through enough planes that the launch is one wave of the
# blocks the SMs hold at once, at least PAIR_MIN_PLANES (a block reads 4 planes more than it
# writes). A block waits on the latency of each plane's loads and barriers, so the more blocks an
# SM holds the faster a sweep goes: the kernel is compiled for PAIR_MINB blocks of the widest tile
# an SM (as many threads for a narrower one), as many as fit without spilling.
# benchmarks/gmg_kernels.py measures the choices; the kernel source takes them from here (_module).
PAIR_X = 64
PAIR_ROWS = {"float64": 8, "float32": 8}
PAIR_MINB = {"float64": 4, "float32": 6}
PAIR_MIN_PLANES = 8
# Levels of fewer points sweep a colour a kernel: a block of relax_pair reads 4 planes more than
# it writes and works on whole tiles, so on small levels the two colour kernels are faster.
PAIR_MIN_SIZE = 1 << 20


def set_rows(dtype, rows=None, pair_rows=None, pair_minb=None):
    """Rows a thread of the row kernels takes, relax_pair's tile height and the blocks an SM it is
    compiled for (benchmarks, tests)."""
    dtype = numpy.dtype(dtype).name
    if pair_minb is not None:
        PAIR_MINB[dtype] = int(pair_minb)
    if rows is not None:
        ROWS[dtype] = int(rows)
    if pair_rows is not None:
        if 5 * (PAIR_X + 4) * (int(pair_rows) + 4) * numpy.dtype(dtype).itemsize > 48 * 1024:
            raise ValueError(f"relax_pair with {pair_rows} rows in {dtype} needs more than 48 KiB of shared memory")
        PAIR_ROWS[dtype] = int(pair_rows)
    _CONFIGS.clear()
    _WAVES.clear()


def _module(dim, dtype, tail, width=PAIR_X, minb=None):
    """fused.cu for (dim, dtype, tail) with the current ROWS, PAIR_ROWS and PAIR_MINB (or
    ``minb``), and relax_pair's tiles ``width`` wide."""
    dtype = numpy.dtype(dtype).name
    minb = minb or (_pair_minb(dtype, width) if dim == 3 else PAIR_MINB[dtype])
    return kernels.module("fused", T=kernels.CTYPES[numpy.dtype(dtype)], DIM=dim, HOMG_ROWS=HOMG_ROWS,
                          ROWS=ROWS[dtype], PAIR_X=width, PAIR_ROWS=PAIR_ROWS[dtype], PAIR_MINB=minb,
                          TAIL=int(tail))


def _pair_minb(dtype, width):
    """Blocks an SM relax_pair with tiles ``width`` wide is compiled for: PAIR_MINB for the widest
    tile; for a narrower one as many threads, or the most blocks below that which compile with no
    local memory (the same code on other tile sizes may need a register more)."""
    if width == PAIR_X:
        return PAIR_MINB[dtype]
    key = (dtype, width, PAIR_MINB[dtype], PAIR_ROWS[dtype])
    if key not in _MINBS:
        minb = max(1, PAIR_MINB[dtype] * PAIR_X // width)
        while minb > 1 and _module(3, dtype, False, width, minb).get_function("relax_pair").local_size_bytes:
            minb -= 1
        _MINBS[key] = minb
    return _MINBS[key]


_MINBS = {}


def _kernel(dim, dtype, name, tail=False, width=PAIR_X):
    return _module(dim, dtype, tail, width).get_function(name)


def launch(dim, dtype, name, shape3, args, tail=False, width=PAIR_X):
    """One kernel on a grid over ``shape3`` = (n0, n1, nx): x threads, blockIdx.y, blockIdx.z.
    A cycle is a hundred or more launches whose host time adds up (it is the whole cost of a
    CUDA graph's capture), so each configuration is worked out once. ``tail``: the kernel built
    for stencil.AxisLaplacian levels (TAIL in the source), which takes their numbers last;
    ``width``: relax_pair's tile width (pair_tile)."""
    key = (dim, dtype, name, shape3, tail, width)
    cfg = _CONFIGS.get(key)
    if cfg is None:
        cfg = _CONFIGS[key] = _configure(dim, dtype, name, shape3, tail, width)
    if cfg:
        cfg[0](cfg[1], cfg[2], args)


_CONFIGS = {}


def _configure(dim, dtype, name, shape3, tail=False, width=PAIR_X):
    """(kernel, grid, block) for launch, or () for an empty grid."""
    n0, n1, nx = shape3
    if nx <= 0 or n1 <= 0 or n0 <= 0:
        return ()
    dtype = numpy.dtype(dtype).name
    kernel = _kernel(dim, dtype, name, bool(tail), width)
    if name.startswith("relax_pair"):   # shape3 is the grid: (chunks of planes, tiles along i1, i2)
        return kernel, (nx, n1, n0), _pair_block(dtype, width)
    # at most 128 threads a block, as few blocks as that allows, the threads spread evenly over
    # them (257 points: 3 blocks of 96, not 2 of 128 and one with a single thread)
    blocks = -(-nx // 128)
    block = 32 * -(-nx // (32 * blocks))
    if name in _ROW_KERNELS:
        n1 = -(-n1 // ROWS[dtype])
    return kernel, (blocks, n1, n0), (block,)


def pair_tile(n2, dtype):
    """relax_pair's tile width for rows of ``n2`` points: the even width of at most PAIR_X whose
    tiles across a row launch the fewest warps, each weighted by the columns its tile reads
    (width + 4); the widest of equals. A row of 200 takes five tiles of 40 (25 warps of 32 busy
    threads) where tiles of 64 launch 32 warps, 7 of them idle."""
    rows = PAIR_ROWS[numpy.dtype(dtype).name]

    def cost(w):
        return -(-n2 // w) * -(-(w // 2) * rows // 32) * (w + 4) / w
    return min(range(PAIR_X, 31, -2), key=cost)


def pair_planes(shape3, dtype):
    """(planes a block of relax_pair marches through, its launch grid as launch's shape3, the
    tile width)."""
    n0, n1, n2 = shape3
    dtype = numpy.dtype(dtype).name
    width = pair_tile(n2, dtype)
    t1, t2 = -(-n1 // PAIR_ROWS[dtype]), -(-n2 // width)
    planes = max(PAIR_MIN_PLANES, -(-n0 // max(1, pair_wave(dtype, width) // (t1 * t2))))
    return planes, (-(-n0 // planes), t1, t2), width


def _pair_block(dtype, width=PAIR_X):
    """relax_pair's thread block: an x-pair of the tile a thread, width / 2 by PAIR_ROWS."""
    return width // 2, PAIR_ROWS[dtype]


def pair_wave(dtype, width=PAIR_X):
    """Blocks of relax_pair with tiles ``width`` wide that the current device's SMs hold at once."""
    dtype = numpy.dtype(dtype).name
    key = (dtype, width, backend.device_id(backend.cupy))
    if key not in _WAVES:
        tx, ty = _pair_block(dtype, width)
        _WAVES[key] = backend.resident_blocks(_kernel(3, dtype, "relax_pair", width=width), tx * ty)
    return _WAVES[key]


_WAVES = {}


def i32(*v):
    return [numpy.int32(x) for x in v]


def contiguous(*arrays):
    for a in arrays:
        if not a.flags.c_contiguous:
            raise ValueError("fused kernels need C-contiguous arrays")


def supported(xp, dtype):
    return backend.is_gpu(xp) and numpy.dtype(dtype).name in ("float64", "float32")


_NO_LAST = -5     # a TAIL kernel's "last index" on an axis that has no short last cell: matches no point


def _tail_args(op):
    """stencil.AxisLaplacian's numbers in the TAIL kernels' order (L0..2, k0..2, m0..2; a 2D
    level's axis 0 has no last point), or [] for a constant stencil."""
    if not hasattr(op, "tail"):
        return []
    t = op.dtype.type
    tail = [(_NO_LAST, 0.0, 1.0)] * (3 - op.box.dim) + op.tail()
    return i32(*(L for L, _, _ in tail)) + [t(k) for _, k, _ in tail] + [t(m) for _, _, m in tail]


class Laplacian:
    """Fused residual of a star stencil of axis ``weights`` (< 0): constant, or a stencil.AxisLaplacian (tail)."""

    def __init__(self, op, weights):
        self.op, self.box, self.dim, self.dtype = op, op.box, op.box.dim, op.dtype
        t = self.dtype.type
        self.weights = [t(0)] * (3 - self.dim) + [t(v) for v in weights]
        self.tail = _tail_args(op)
        self.coefs = self.weights + [t(0.0 if self.tail else op.diag)]
        self._shape3 = grid.dims3(self.box.shape)
        self._sizes = i32(*self._shape3)
        self._flags = {(a, b): i32(a, b) for a in (0, 1) for b in (0, 1)}

    def residual(self, out, f, u_pad):
        """out = f - A u; ``out`` and ``f`` each unpadded or padded (then their interior is used)."""
        contiguous(out, f, u_pad)
        padded = self.box.padded_shape
        flags = self._flags[out.shape == padded, f.shape == padded]
        launch(self.dim, self.dtype, "residual", self._shape3,
                [out, f, u_pad, *self._sizes, *flags, *self.coefs, *self.tail], bool(self.tail))
        return out


def eliminate(f, x, y, c, weights=(0.0, 0.0, 0.0), yb=None):
    """PETSc's DMDA convention, ``x`` and ``y`` (float64) over the grid with its outer layer (f's padded
    shape): y = c x on the layer (y inside untouched; ``c`` a number, or an array of x's shape in f's
    precision), the same into ``yb`` (f's precision) where given, and f = x_I - A_IB y_B in one pass, A_IB
    the constant star of 3 axis ``weights`` (axis 0 first; zeros: f = x_I, for a stored stencil's residual)."""
    scalar = numpy.isscalar(c)
    given = [a for a in (yb, None if scalar else c) if a is not None]
    contiguous(f, x, y, *given)
    if {x.dtype, y.dtype} != {numpy.dtype(numpy.float64)} or any(a.dtype != f.dtype for a in given) or any(
            a.shape != x.shape for a in [y] + given) or not scalar and any(weights):
        raise TypeError(f"eliminate: x, y float64, f, yb, c {f.dtype} of x's shape, c a number with weights; got "
                        f"{x.dtype}, {y.dtype}, {f.dtype}")
    (n0, n1, n2), null = grid.dims3(f.shape), numpy.uint64(0)
    args = [y, null if yb is None else yb, f, x, null if scalar else c, *i32(n0, n1, n2),
            numpy.float64(c if scalar else 0.0), *(numpy.float64(w) for w in weights)]
    launch(f.ndim, f.dtype, "eliminate", (n0 + 2 if f.ndim == 3 else 1, n1 + 2, n2 + 2), args)
    return f


def copy_inside(y, u_pad):
    """y (float64) = u_pad (the cycle's precision, y's padded shape) inside the layer, after ``eliminate``."""
    contiguous(y, u_pad)
    if y.dtype != numpy.float64 or y.shape != u_pad.shape:
        raise TypeError(f"copy_inside: y float64 and u of one shape; got {y.dtype} {y.shape}, {u_pad.shape}")
    shape3 = grid.dims3(tuple(n - 2 for n in y.shape))
    launch(y.ndim, u_pad.dtype, "copy_inside", shape3, [y, u_pad, *i32(*shape3)])
    return y


class LinearTransfer:
    """Full-weighting restriction and (bi/tri)linear prolongation, one kernel each."""

    def __init__(self, twin, dtype=numpy.float64):
        """``twin``: the generic ``transfer.Transfer`` of kind 'linear' (its boxes, phases and
        omegas: with omegas, the TAIL kernels, which take the last coarse points and omegas)."""
        self.fine, self.coarse = twin.fine, twin.coarse
        if any(twin.virtual):
            raise ValueError("fused.LinearTransfer: no kernel for a virtual last coarse point (grid.Box.virtual_end)")
        self.dim = self.fine.dim
        pad = 3 - self.dim
        flags = i32(*((0,) * pad + tuple(int(c) for c in twin.coarsened)), *((0,) * pad + tuple(twin.phase)))
        self.tail = twin.omegas is not None
        if self.tail:
            last = [self.coarse.global_shape[a] - 1 - self.coarse.start[a] if w is not None else _NO_LAST
                    for a, w in enumerate(twin.omegas)]
            omegas = [0.5 if w is None else w for w in twin.omegas]
            t = numpy.dtype(dtype).type
            flags += i32(*([_NO_LAST] * pad + last)) + [t(w) for w in [0.5] * pad + omegas]
        fine3, coarse3 = grid.dims3(self.fine.shape), grid.dims3(self.coarse.shape)
        self._restrict = coarse3, [*i32(*coarse3, *fine3[1:]), *flags]
        # prolong_add: a thread a 2 x 2 block of (i1, i2) whose first point is coincident along a
        # coarsened axis, so may lie before the points written; those are the owned ones and the
        # halo on the twin's faces (fill_halo), an axis of the 3D view per bit pair
        self.fills_halo, halo = twin.fills_halo, twin.faces << 2 * pad
        c3, ph3 = grid.dims3(twin.coarsened), grid.dims3(twin.phase)
        lo = [-(halo >> 2 * a & 1) for a in range(3)]
        hi = [n + (halo >> 2 * a + 1 & 1) for a, n in enumerate(fine3)]
        first = [l - ((l - ph) & 1) if c else l for l, c, ph in zip(lo, c3, ph3)]
        blocks = [-(-(h - f) // 2) for h, f in zip(hi[1:], first[1:])]
        self._prolong = (hi[0] - lo[0], *blocks), [*i32(*fine3, *coarse3[1:], halo), *flags]

    def restrict(self, coarse_out, fine_pad):
        contiguous(coarse_out, fine_pad)
        shape3, args = self._restrict
        launch(self.dim, fine_pad.dtype, "restrict_fw", shape3, [coarse_out, fine_pad, *args], self.tail)
        return coarse_out

    def prolong_add(self, fine_pad, coarse_pad):
        contiguous(fine_pad, coarse_pad)
        shape3, args = self._prolong
        launch(self.dim, fine_pad.dtype, "prolong_add", shape3, [fine_pad, coarse_pad, *args], self.tail)
        return fine_pad
