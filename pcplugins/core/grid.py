"""Structured grids of one multigrid level: the local box, sub-lattices and the coarsening rule.

Arrays are in C order with the x index fastest, exactly like a DMDA's natural ordering: a 2D
level has shape (ny, nx), a 3D level (nz, ny, nx). Every work array carries a halo of one point
on each side ("padded" arrays, shape n+2 per axis): the halo holds ghost values from
neighbouring ranks under MPI and zeros (eliminated Dirichlet values) on the physical boundary,
so the kernels need no boundary cases.

Coarsening rule (vertex-centred, as in the papers): along an axis of m unknowns, coarse point k
sits on fine point 2k+1, so the coarse axis has m // 2 points; m = 2^j - 1 gives the uniform
hierarchy 2^j - 1 -> 2^(j-1) - 1, an even m leaves a shorter last cell at the far end (width h
on a coarse spacing of 2h; stencil.AxisLaplacian and transfer.Transfer's omegas follow it).
Grids whose end points are unknowns too (``keep_ends``: the absorbing boundary of
pcplugins.ShiftedLaplace) put coarse point k on fine point 2k instead, so m = 2^j + 1 gives
2^(j-1) + 1 points and the ends stay on every level; ``keep_ends`` is per axis (a Neumann
condition on the faces across one axis, Dirichlet values eliminated across another). An even m
with kept ends leaves the last point beyond the last coarse point; with ``virtual_end`` (the
absorbing boundary of pcplugins.ShiftedLaplace) the coarse axis takes one more point, a virtual
one on fine point m, one cell beyond the grid: m/2 + 1 coarse points, an odd count from there on
(64 -> 33 -> 17), and the last fine point between two coarse points as any other. With linear
interpolation its coarse space is that of a coarsening that keeps both end points (the span of
the same columns), which the stencil lattices (coarse k on fine 2k) could not hold. An axis is
coarsened while it has at least 3 points; axes that cannot be coarsened are kept
(semi-coarsening), and coarsening stops when no axis can be coarsened, when the coarse grid has
at most ``coarse_size`` unknowns, or at ``levels``.
Under MPI a rank owning fine points [s, e) owns coarse points [s // 2, e // 2) (with
``keep_ends`` [(s + 1) // 2, (e + 1) // 2)): coarse and fine partitions nest, and colours come
from global indices, so iterates do not depend on the ranks.
A ``periodic`` axis (a DMDA's DM_BOUNDARY_PERIODIC) has no boundary: its halo holds the grid's
other end (comm.Comm's ghost update wraps it), and coarse point k sits on fine point 2k as with
``keep_ends``, so an even m gives m/2 coarse points of twice the spacing and the last fine point
lies between the last coarse point and the first one, wrapped: the uniform periodic hierarchy. It
is coarsened while m is even and the coarse axis keeps at least 3 points (a wrapped neighbour is
then never the point's other neighbour); an odd periodic axis is kept (semi-coarsening).
"""
import itertools
import math


class Box:
    """The part of a global grid that one rank owns.

    ``global_shape`` and ``start`` are global (array-axis order), ``shape`` local.
    """

    def __init__(self, global_shape, start=None, shape=None, keep_ends=False, virtual_end=False, periodic=False):
        self.global_shape = tuple(int(m) for m in global_shape)
        self.virtual_end = bool(virtual_end)
        # one flag per axis (a single bool: the same on every axis)
        self.periodic = _per_axis(periodic, len(self.global_shape))
        # a periodic axis places its coarse points as one that keeps its ends
        self.keep_ends = tuple(k or p for k, p in zip(_per_axis(keep_ends, len(self.global_shape)), self.periodic))
        self.start = tuple(start) if start is not None else (0,) * len(self.global_shape)
        self.shape = tuple(shape) if shape is not None else self.global_shape

    @property
    def dim(self):
        return len(self.global_shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def global_size(self):
        return math.prod(self.global_shape)

    @property
    def padded_shape(self):
        return tuple(n + 2 for n in self.shape)

    def rank_faces(self):
        """Bit 2a (2a + 1) set where this box's first (last) points along axis a border another
        rank's part of the grid or wrap round (a periodic axis): its halo there is ghost values."""
        return sum((p or s > 0) << 2 * a | (p or s + n < m) << 2 * a + 1
                   for a, (s, n, m, p) in enumerate(zip(self.start, self.shape, self.global_shape, self.periodic)))

    def coarsenable(self):
        """Which axes the coarsening rule allows to coarsen."""
        return tuple(m % 2 == 0 and m >= 6 if p else m >= 3 for m, p in zip(self.global_shape, self.periodic))

    def coarse_range(self, s, e, axis, m=None):
        """The coarse points on fine points [s, e) of the coarsened axis ``axis`` of ``m`` points
        (this box's by default); with ``virtual_end`` the rank owning an even axis's last point
        owns the virtual coarse point beyond it."""
        if not self.keep_ends[axis]:
            return s // 2, e // 2
        m = self.global_shape[axis] if m is None else m
        return (s + 1) // 2, (m // 2 + 1 if self.virtual_end and e == m else (e + 1) // 2)

    def virtual_axes(self, coarsened):
        """The coarsened axes whose coarse grid has a virtual last point that this rank owns."""
        return tuple(bool(c and k and self.virtual_end and m % 2 == 0 and s + n == m)
                     for c, k, m, s, n in zip(coarsened, self.keep_ends, self.global_shape, self.start, self.shape))

    def coarsen(self, axes):
        """The coarse box (coarse point k on fine point 2k+1, or 2k, along each axis in ``axes``)."""
        gs, st, sh = [], [], []
        for a in range(self.dim):
            m, s, n = self.global_shape[a], self.start[a], self.shape[a]
            if axes[a]:
                gs.append(self.coarse_range(0, m, a)[1])
                lo, hi = self.coarse_range(s, s + n, a)
                st.append(lo)
                sh.append(hi - lo)
            else:
                gs.append(m)
                st.append(s)
                sh.append(n)
        return Box(gs, st, sh, self.keep_ends, self.virtual_end, self.periodic)

    def whole(self):
        """The whole global grid as one rank's box (a replicated level)."""
        return Box(self.global_shape, keep_ends=self.keep_ends, virtual_end=self.virtual_end, periodic=self.periodic)

    def __repr__(self):
        return f"Box(global={self.global_shape}, start={self.start}, shape={self.shape})"


def _per_axis(flag, dim):
    """One bool per axis from a bool or a sequence of them."""
    return tuple(bool(k) for k in flag) if isinstance(flag, (tuple, list)) else (bool(flag),) * dim


class CoarseningError(ValueError):
    """More levels asked for than the grid allows: ``levels`` is how many it allows."""

    def __init__(self, message, levels):
        super().__init__(message)
        self.levels = levels


def dims3(shape):
    """A shape as three dimensions, (1, ny, nx) for a 2D (ny, nx): the CUDA kernels' grid."""
    return (1,) * (3 - len(shape)) + tuple(shape)


def shape_name(box):
    """The grid's size as PETSc prints a DMDA's, x first: 9x5x3."""
    return "x".join(str(m) for m in reversed(box.global_shape))


# the default coarsest grid: at most this many unknowns. Its dense inverse is formed in setup at
# a cost cubic in its order, so an order in the hundreds (6^3, 15^2) outweighs one more coarsening,
# whose work is a few small launches per cycle (docs/gmg.md)
COARSE_SIZE = 64


def hierarchy_boxes(fine, levels=None, coarse_size=COARSE_SIZE):
    """Boxes of all levels, finest first, and for each coarsening the coarsened axes."""
    boxes, axes_list = [fine], []
    while levels is None or len(boxes) < levels:
        box = boxes[-1]
        axes = box.coarsenable()
        if not any(axes):
            break
        if levels is None and box.global_size <= coarse_size:
            break
        coarse = box.coarsen(axes)
        boxes.append(coarse)
        axes_list.append(axes)
    if levels is not None and len(boxes) < levels:
        short = boxes[-1]
        why = ("has no axis to coarsen (one of at least 3 points; a periodic one of an even number, at least 6)"
               if any(short.periodic) else "has fewer than 3 points along every axis and cannot be coarsened")
        raise CoarseningError(f"{levels} levels asked for, but the {shape_name(fine)} grid has {len(boxes)}: "
                              f"its coarsest grid, {shape_name(short)}, {why}", len(boxes))
    return boxes, axes_list


# --- sub-lattices ------------------------------------------------------------------------------
# A lattice is a tuple of (start, step, count) per axis in local, unpadded coordinates.

def full_lattice(box):
    return tuple((0, 1, n) for n in box.shape)


def parity_lattice(box, parity):
    """Points whose grid index along each axis has the given parity (0 or 1).

    The grid index counts the eliminated boundary point as 0 (global index + 1), as the papers
    do: then parity (0, .., 0) holds the points shared with the coarse grid, and the natural
    colour order (0,0), (0,1), (1,0), (1,1) is the one that reproduces Feng et al.'s Table 5.
    On grids that keep their ends the grid index is the global index (the same property).
    """
    lat = []
    for p, s, n, keep in zip(parity, box.start, box.shape, box.keep_ends):
        first = (p - s - (0 if keep else 1)) % 2
        lat.append((first, 2, max(0, (n - first + 1) // 2)))
    return tuple(lat)


def face_lattices(box, disjoint=False):
    """The points of the box's faces, a lattice per face (the two faces of an axis with one point
    are one); ``disjoint``: each point in one lattice (an axis's faces leave out the points on the
    faces of the axes before it), for updates in place."""
    lats = []
    for a, n in enumerate(box.shape):
        for first in sorted({0, n - 1}) if n else ():
            lat = tuple((first, 1, 1) if b == a else (1, 1, m - 2) if disjoint and b < a else (0, 1, m)
                        for b, m in enumerate(box.shape))
            if all(c > 0 for _, _, c in lat):
                lats.append(lat)
    return lats


def global_face_indices(box, axis):
    """The local indices along ``axis`` of the global grid's two faces across it that lie in the
    box (none, one or two)."""
    n, s, m = box.shape[axis], box.start[axis], box.global_shape[axis]
    return sorted({i - s for i in (0, m - 1) if s <= i < s + n})


def global_inner_slice(box, axis):
    """The box's indices along ``axis`` without the global grid's faces."""
    n, s, m = box.shape[axis], box.start[axis], box.global_shape[axis]
    return slice(1 if s == 0 else 0, n - 1 if s + n == m else n)


def lattice_empty(lat):
    return any(c <= 0 for _, _, c in lat)


def view(a, lat, offset=None, padded=False):
    """The view of array ``a`` on lattice ``lat`` shifted by ``offset`` (padded arrays: +1 halo);
    the lattice indexes ``a``'s last axes, so a batch of arrays (leading axes) gives a batch of views."""
    pad = 1 if padded else 0
    if offset is None:
        offset = (0,) * len(lat)
    return a[(Ellipsis,) + tuple(slice(pad + o + s, pad + o + s + st * (c - 1) + 1, st)
                                 for (s, st, c), o in zip(lat, offset))]


def interior(a):
    """The owned points of a padded array."""
    return a[tuple(slice(1, -1) for _ in range(a.ndim))]


def colours(box, kind):
    """Colour classes of the multicolour smoothers, each a list of parity lattices.

    'multicolor': 2^d colours (4 in 2D, 8 in 3D), one parity lattice each: valid for star and box
    stencils alike. 'redblack': 2 colours by the parity of i+j(+k): valid for star stencils.
    """
    parities = list(itertools.product((0, 1), repeat=box.dim))
    if kind == "multicolor":
        groups = [[p] for p in parities]
    elif kind == "redblack":
        groups = [[p for p in parities if sum(p) % 2 == c] for c in (0, 1)]
    else:
        raise ValueError(kind)
    # A colour with no points on this rank stays (as an empty list): every rank must do the same
    # number of ghost updates.
    out = []
    for g in groups:
        lats = [parity_lattice(box, p) for p in g]
        out.append([lat for lat in lats if not lattice_empty(lat)])
    return out
