"""Operators of a structured level as stencils: (A u)(i) = sum_k c_k(i) u(i + o_k).

Two kinds, one code: *constant* coefficients (each c_k a number: the matrix-free 5/7-point
Laplacian of the paper, no stored matrix) and *variable* coefficients (each c_k an array over the
level: any assembled scalar star or box operator, 5/7/9/27 points, and the Galerkin coarse
operators). Offsets are in {-1, 0, 1}^d. Entries that couple to points outside the level's
global grid are zero: the Dirichlet values are eliminated; along a periodic axis the neighbour
beyond one end is the other end, read from the halo that the ghost update wraps.
"""
import functools
import itertools

import numpy

from .. import backend
from . import grid, kernels


class StencilOperator:
    def __init__(self, box, offsets, coefs, xp, dtype=numpy.float64):
        self.box, self.xp, self.dtype = box, xp, numpy.dtype(dtype)
        self.offsets = [tuple(int(v) for v in o) for o in offsets]
        self.constant = all(numpy.isscalar(c) for c in coefs)
        if self.constant:
            self.coefs = [float(c) for c in coefs]
        else:
            self.coefs = [xp.asarray(c, dtype=self.dtype) if not numpy.isscalar(c)
                          else xp.full(box.shape, c, dtype=self.dtype) for c in coefs]
        zero = (0,) * box.dim
        if zero not in self.offsets:
            raise ValueError("stencil has no diagonal entry")
        self.kdiag = self.offsets.index(zero)
        self.diag = self.coefs[self.kdiag]
        if self.constant and not abs(self.diag) > 0:
            raise ValueError(f"diagonal of the operator must be nonzero, got {self.diag}")
        self.invdiag = 1.0 / self.diag

    # -- stencil terms on a lattice ---------------------------------------------------------------
    def _coef(self, k, lat):
        c = self.coefs[k]
        return c if self.constant else grid.view(c, lat)

    def terms(self, u_pad, lat, skip_diag=False):
        cs, us = [], []
        for k, o in enumerate(self.offsets):
            if skip_diag and k == self.kdiag:
                continue
            cs.append(self._coef(k, lat))
            us.append(grid.view(u_pad, lat, o, padded=True))
        return cs, us

    def apply(self, out, u_pad, lat=None):
        """out = (A u) on ``lat`` (whole level by default); ``out`` unpadded, same lattice shape."""
        lat = lat or grid.full_lattice(self.box)
        cs, us = self.terms(u_pad, lat)
        return kernels.lincomb(out, cs, us)

    def residual(self, out, f, u_pad, lat=None):
        """out = f - A u."""
        lat = lat or grid.full_lattice(self.box)
        cs, us = self.terms(u_pad, lat)
        return kernels.residual(out, f, cs, us)

    def diag_on(self, lat):
        return self._coef(self.kdiag, lat)

    def invdiag_on(self, lat):
        return self.invdiag if self.constant else grid.view(self.invdiag, lat)

    @property
    def nnz_per_row(self):
        return len(self.offsets)

    def stored_values(self):
        return 0 if self.constant else len(self.coefs) * self.box.size

    # -- conversions ------------------------------------------------------------------------------
    def coef_arrays(self):
        """Coefficients as arrays over the level (zero where the neighbour is outside the grid)."""
        coefs = [numpy.full(1, c, self.dtype) if self.constant else c for c in self.coefs]
        return inside_planes(self.box, self.offsets, coefs, self.xp, self.dtype)

    def to_dense(self):
        """The (global, serial) level as a dense NumPy matrix, for small coarse solves."""
        n = self.box.size
        A = numpy.zeros((n, n), numpy.result_type(self.dtype, numpy.float64))
        rows, cols, vals = self._entries()
        A[rows, cols] = vals        # each (row, column) pair comes from one offset only
        return A

    def to_scipy(self):
        """The (global, serial) level as a SciPy sparse matrix, for the coarse solve and tests."""
        import scipy.sparse
        rows, cols, vals = self._entries()
        return scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(self.box.size, self.box.size))

    def _entries(self):
        """(rows, columns, values) of the level's matrix, on the host; a periodic axis couples its
        ends. All offsets at once: the coarsest level of a Galerkin hierarchy has 27."""
        box, d = self.box, self.box.dim
        shape, periodic = (numpy.asarray(v).reshape((1, d) + (1,) * d) for v in (box.shape, box.periodic))
        q = numpy.indices(box.shape)[None] + numpy.asarray(self.offsets).reshape((-1, d) + (1,) * d)
        q = numpy.where(periodic, q % shape, q)
        inside = ((q >= 0) & (q < shape)).all(axis=1)
        k, *i = numpy.nonzero(inside)
        cols = numpy.ravel_multi_index([q[:, a][inside] for a in range(d)], box.shape)
        C = numpy.asarray(self.host_coefs(), self.dtype)      # K numbers, or K arrays
        return numpy.ravel_multi_index(i, box.shape), cols, C[k] if self.constant else C[inside]

    def host_coefs(self):
        """The coefficients on the host (numbers where constant), in one copy from the GPU."""
        if self.constant or not backend.is_gpu(self.xp):
            return self.coefs
        return list(backend.to_host(self.xp.stack(self.coefs)))


def inside_slices(box, offset):
    """The points of the local box whose neighbour at ``offset`` lies inside the global grid (every
    point along a periodic axis): a rectangle, as one slice per axis."""
    return tuple(slice(0, n) if p else slice(min(n, max(0, -o - s)), max(0, min(n, m - o - s)))
                 for o, s, n, m, p in zip(offset, box.start, box.shape, box.global_shape, box.periodic))


def inside_mask(box, offset, xp):
    """1 where point i + offset lies inside the global grid, else 0 (over the local box), made on
    ``xp`` (made on the host and copied, it would dominate a GPU setup)."""
    mask = xp.zeros(box.shape)
    mask[inside_slices(box, offset)] = 1
    return mask


def inside_planes(box, offsets, coefs, xp, dtype):
    """The coefficients (arrays over the box, or broadcast to it) zeroed where the neighbour lies
    outside the global grid, as the planes of one ``dtype`` array, which the class statistics and
    the fused kernels take as they are (separate arrays they would copy into one)."""
    planes = xp.zeros((len(coefs),) + tuple(box.shape), dtype)
    for plane, o, c in zip(planes, offsets, coefs):
        inside = inside_slices(box, o)
        plane[inside] = xp.broadcast_to(xp.asarray(c), box.shape)[inside]
    return list(planes)


def box_offsets(dim):
    return list(itertools.product((-1, 0, 1), repeat=dim))


def star_offsets(dim):
    return list(_star_offsets(dim))


@functools.lru_cache(maxsize=None)
def _star_offsets(dim):        # a setup builds a stencil per level: worked out once
    return tuple(o for o in box_offsets(dim) if sum(abs(v) for v in o) <= 1)


def laplacian(box, weights, xp, dtype=numpy.float64):
    """Constant-coefficient star stencil: ``weights[a]`` couples neighbours along axis a (< 0),
    the diagonal is minus their sum (twice per axis)."""
    offsets, coefs = [], []
    diag = 0.0
    for o in star_offsets(box.dim):
        if not any(o):
            continue
        a = [abs(v) for v in o].index(1)
        offsets.append(o)
        coefs.append(weights[a])
        diag -= weights[a]
    offsets.append((0,) * box.dim)
    coefs.append(diag)
    return StencilOperator(box, offsets, coefs, xp, dtype)


class AxisLaplacian(StencilOperator):
    """The constant-coefficient Laplacian rediscretized on a grid that is uniform along each axis
    but for its last cell: a coarse level of a grid with an even number of points per axis.

    Along axis a the points are H apart and the last one lies r_a H from the far boundary
    (0 < r_a <= 1; the first lies H from the near one). The operator is the symmetric
    finite-volume form with lumped mass, sum_a (prod_{b != a} D_b) K_a, each factor a 1D matrix
    along its axis: K_a couples neighbours by ``weights[a]`` (< 0) and the last point to the
    boundary by weights[a] / r_a, D_b is 1 but at the last point, (1 + r_b) / 2. It is
    R A P of the finer level with its linear P and R = P^T / 2^c (grid.py) exactly along each
    axis, the mass lumped across axes (the 2^d + 1-point rediscretization of the uniform
    levels is the case r = 1); ``ratios`` evolve by :func:`coarse_ratio`. Still a star stencil,
    so red-black smoothing and the fused kernels apply; the coefficients are stored, and the
    fused kernels take only the per-axis numbers (:meth:`tail`)."""

    def __init__(self, box, weights, ratios, xp, dtype=numpy.float64):
        # StencilOperator's attributes, the coefficient arrays made on first use: the fused
        # kernels need only tail(), and a setup builds one such level per coarsening
        self.box, self.xp, self.dtype = box, xp, numpy.dtype(dtype)
        self.weights = [float(w) for w in weights]
        self.ratios = [float(r) for r in ratios]
        d = box.dim
        self.offsets = [tuple(v if b == a else 0 for b in range(d)) for a in range(d) for v in (-1, 1)]
        self.offsets.append((0,) * d)
        self.constant = False
        self.kdiag = 2 * d

    @functools.cached_property
    def coefs(self):
        return self._coef_arrays(self.xp)

    def host_coefs(self):
        if "coefs" in self.__dict__:
            return super().host_coefs()
        # made on the host: the coarsest level's dense matrix would otherwise wait on a dozen
        # small device arrays and their copies back
        return self._coef_arrays(numpy)

    def _coef_arrays(self, xp):
        box, d = self.box, self.box.dim
        mass, kdiag = [], []
        for a, (w, r, (L, kl, ml)) in enumerate(zip(self.weights, self.ratios, self.tail())):
            shape = [1] * d
            shape[a] = -1
            m, k = xp.ones(box.shape[a], self.dtype), xp.full(box.shape[a], -2 * w, self.dtype)
            if 0 <= L < box.shape[a]:
                m[L], k[L] = ml, kl
            mass.append(m.reshape(shape))
            kdiag.append(k.reshape(shape))
        coefs, diag = [], 0
        for a in range(d):
            m = 1
            for b in range(d):
                if b != a:
                    m = m * mass[b]
            # views of one small array each: the couplings take no memory
            coefs += [xp.broadcast_to(self.weights[a] * m, box.shape)] * 2
            diag = diag + m * kdiag[a]
        return coefs + [xp.ascontiguousarray(xp.broadcast_to(diag, box.shape))]

    @property
    def diag(self):
        return self.coefs[self.kdiag]

    @functools.cached_property
    def invdiag(self):
        return 1.0 / self.diag

    def stored_values(self):
        """The arrays made so far: the diagonal with the coefficients, and its inverse."""
        return self.box.size * sum(k in self.__dict__ for k in ("coefs", "invdiag"))

    def tail(self):
        """Per axis: (local index of the grid's last point, its K diagonal, its D), the numbers
        that set the operator apart from the constant stencil."""
        box = self.box
        return [(box.global_shape[a] - 1 - box.start[a], -w * (1 + 1 / r), (1 + r) / 2)
                for a, (w, r) in enumerate(zip(self.weights, self.ratios))]


def coarse_ratio(m, r):
    """The last cell's ratio r' on the coarse axis of an axis of ``m`` points whose last cell is
    r H (coarse point k on fine 2k+1): an odd m leaves a fine point between the last coarse point
    and the boundary (r' = (1 + r) / 2), an even m does not (r' = r / 2); the coarse spacing is 2H."""
    return (1 + r) / 2 if m % 2 else r / 2


def laplacian_weights(op):
    """Axis weights if ``op`` is a constant star stencil with zero row sum, else None."""
    if not op.constant:
        return None
    w = [None] * op.box.dim
    for c, o in zip(op.coefs, op.offsets):
        if not any(o):
            continue
        if sum(abs(v) for v in o) != 1:
            if c != 0.0:
                return None
            continue
        a = [abs(v) for v in o].index(1)
        if w[a] is None:
            w[a] = c
        elif w[a] != c:
            return None
    if any(v is None or not v < 0 for v in w):
        return None
    if abs(op.diag + 2 * sum(w)) > 1e-12 * abs(op.diag):
        return None
    return w


def _stats(box, offsets, coefs, xp, tol):
    """[(any nonzero, least, largest value where the neighbour exists)] per offset, on the host."""
    stats = []
    for o, c in zip(offsets, coefs):
        if c.size == 0:                  # a rank without points
            stats.append(xp.asarray([0.0, numpy.inf, -numpy.inf]))
            continue
        nonzero = backend.any_flag(c != 0).astype(numpy.float64)
        if tol is None:
            stats.append(xp.stack([nonzero, nonzero, nonzero]))
            continue
        inside = c[inside_slices(box, o)]
        if backend.is_gpu(xp) and not inside.flags.c_contiguous:
            # CuPy reduces a strided array to one value in a single thread block, a contiguous
            # one device-wide
            inside = xp.ascontiguousarray(inside)
        if inside.size == 0:             # no point of the box has this neighbour
            stats.append(xp.stack([nonzero, xp.asarray(numpy.inf), xp.asarray(-numpy.inf)]))
            continue
        stats.append(xp.stack([nonzero, inside.min().astype(numpy.float64), inside.max().astype(numpy.float64)]))
    return backend.to_host(xp.stack(stats)) if stats else numpy.zeros((0, 3))


# compress's statistics in one batch up to this many points (GPU): on small levels the launches
# set the pace, on large ones the batch's extra passes over memory do
BATCHED_STATS_SIZE = 2 ** 18


def _stats_batched(box, offsets, coefs, xp, tol):
    """_stats for all offsets at once on the GPU (a few launches in place of ten per offset): the
    points whose neighbour exists as the product of one mask per axis."""
    d = box.dim
    C = xp.stack([xp.broadcast_to(xp.asarray(c), box.shape) for c in coefs])

    def over_points(X, reduce):
        # axis by axis from the last: CuPy gives each output of a reduction one thread block, so
        # the first passes keep many outputs and only the last few points' worth meet in one
        while X.ndim > 1:
            X = reduce(X, axis=-1)
        return X

    nonzero = over_points((C != 0).view(numpy.int8), xp.max).astype(numpy.float64)
    if tol is None:
        return xp.stack([nonzero] * 3, axis=1)
    inside = None
    for a in range(d):
        m = numpy.zeros((len(offsets), box.shape[a]), bool)
        for k, o in enumerate(offsets):
            m[k, inside_slices(box, o)[a]] = True
        shape = [len(offsets)] + [1] * d
        shape[a + 1] = box.shape[a]
        m = xp.asarray(m).reshape(shape)
        inside = m if inside is None else inside & m
    lo = over_points(xp.where(inside, C, numpy.inf), xp.min).astype(numpy.float64)
    hi = over_points(xp.where(inside, C, -numpy.inf), xp.max).astype(numpy.float64)
    return xp.stack([nonzero, lo, hi], axis=1)


def _stats_by_class(box, offsets, coefs):
    """_stats from the class statistics of detect.class_stats (one kernel for every offset on the
    GPU): its three classes together are the points whose neighbour lies inside the grid, all of
    them on a grid without periodic axes; any nonzero there is any nonzero at all, since the
    coefficients coupling outside the grid are zero."""
    from . import detect  # detect reads stencils from matrices, so it imports this module
    cls = detect.class_stats(box, offsets, coefs)
    return numpy.stack([cls[:, :, 0].max(axis=1), cls[:, :, 1].min(axis=1), cls[:, :, 2].max(axis=1)], axis=1)


def compress(box, offsets, coefs, xp, dtype, tol=0.0, comm=None, nonzero=None):
    """A StencilOperator with all-zero offsets dropped and constant arrays turned into numbers.

    ``coefs`` are arrays over the box; entries coupling outside the grid must already be zero.
    A coefficient counts as constant when it is the same (to ``tol``, relative) at every point
    whose neighbour exists; ``tol=None`` (and complex coefficients) keeps stored coefficients.
    With ``comm`` (comm.Comm) the decisions are global, so every rank builds the same kind
    of operator. ``nonzero``: whether each array has a nonzero, where the caller knows (tol None).
    """
    allmin = comm.allmin if comm is not None else (lambda x: x)
    if numpy.dtype(dtype).kind == "c":
        tol = None                       # complex coefficients stay stored
    # per offset, brought to the host at once: any nonzero and (constants looked for) the least and largest value
    if tol is None and (nonzero is not None or backend.is_gpu(xp) and box.size and coefs):
        from . import detect  # stored coefficients: only which offsets have a nonzero
        stats = [(nz, 0, 0) for nz in nonzero] if nonzero is not None else detect.nonzero_stats(coefs)
    elif backend.is_gpu(xp) and box.size and coefs and not any(box.periodic) and numpy.dtype(dtype).kind == "f":
        stats = _stats_by_class(box, offsets, coefs)
    elif backend.is_gpu(xp) and 0 < box.size <= BATCHED_STATS_SIZE and coefs:
        stats = backend.to_host(_stats_batched(box, offsets, coefs, xp, tol))
    else:
        stats = _stats(box, offsets, coefs, xp, tol)
    keep_o, keep_c, consts = [], [], []
    for o, c, (nz, lo, hi) in zip(offsets, coefs, stats):
        if any(o) and not -allmin(-int(nz)):
            continue
        keep_o.append(o)
        keep_c.append(c)
        if tol is None:
            consts.append(None)
            continue
        lo, hi = allmin(float(lo)), -allmin(-float(hi))
        if lo > hi:                      # no point of the grid has this neighbour
            consts.append(0.0)
        else:
            consts.append(lo if hi - lo <= tol * max(abs(lo), abs(hi)) else None)
    if all(v is not None for v in consts):
        return StencilOperator(box, keep_o, consts, xp, dtype)
    if any(getattr(c, "dtype", dtype) != dtype for c in keep_c):
        # one array of planes, which the fused kernels take as it is (fused_stored.coefficient_planes)
        block = xp.empty((len(keep_c),) + tuple(box.shape), dtype)
        for plane, c in zip(block, keep_c):
            plane[...] = c
        keep_c = list(block)
    return StencilOperator(box, keep_o, keep_c, xp, dtype)
