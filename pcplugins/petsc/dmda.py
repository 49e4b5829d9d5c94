"""The grid of a PC's DMDA, and a stencil operator read from an assembled DMDA matrix: offsets,
coefficients, the boundary convention (identity rows on the outer layer, as PETSc's DMDA
tutorials write it) and a declared Laplacian's weights."""
import numpy
from petsc4py import PETSc

from .. import backend
from ..core import csrstencil, detect, grid, stencil
from ..core.stencil import box_offsets
from .errors import error
from .mat import _device_csr, is_aij, mpiaij_blocks


def pc_dm(pc):
    """The DM of the PC (KSPSetDM), else the DM of its matrix (a matrix from DMCreateMatrix knows
    its DMDA, MatGetDM, even where the application never calls KSPSetDM), else None."""
    dm = pc.getDM()
    if dm is not None and dm.handle:
        return dm
    try:
        A, P = pc.getOperators()
        for M in (P, A):
            if M is not None and M.handle:
                dm = M.getDM()
                if dm is not None and dm.handle:
                    return dm
    except (PETSc.Error, AttributeError):
        pass
    return None


def _fieldsplit_hint(pc, dm, who):
    """What to do with a DMDA of several fields: PCFIELDSPLIT's options for this PC on each field's
    block (the prefixes PCFIELDSPLIT gives them: a field's name, else its number), or AMG."""
    prefix = pc.getOptionsPrefix() or ""
    splits = [f"{prefix}fieldsplit_{dm.getFieldName(i) or i}_" for i in range(dm.getDof())]
    return (f"use PCFIELDSPLIT, whose blocks get a dof 1 DMDA each for this PC: -{prefix}pc_type fieldsplit "
            f"-{splits[0]}pc_type python -{splits[0]}pc_python_type {who}, and the same for "
            f"{', '.join(splits[1:])}; or pcplugins.AMG, which aggregates a point's unknowns together")


def dmda_box(pc, dof=1, who="pcplugins.GMG", periodic=False):
    """The Box of this rank's part of the PC's DMDA, in array-axis order (z, y, x); the DMDA must
    have ``dof`` fields, and may have periodic (and mirror) boundaries where ``periodic``."""
    dm = pc_dm(pc)
    if dm is None:
        raise error(f"{who} needs a DMDA: call KSPSetDM (ksp.setDM(da)) before KSPSetUp"
                    + ("; for operators without a grid use pcplugins.AMG" if dof == 1 else ""))
    if dm.getType() != "da":
        raise error(f"{who} needs a DMDA, but the DM attached to the PC is of type '{dm.getType()}'")
    if dm.getDof() != dof:
        raise error(f"{who} supports scalar problems (DMDA dof 1), the DMDA has dof {dm.getDof()}: "
                    + _fieldsplit_hint(pc, dm, who) if dof == 1
                    else f"{who} needs a DMDA with dof {dof}, this one has dof {dm.getDof()}")
    dim = dm.getDim()
    if dim not in (2, 3):
        raise error(f"{who} supports 2D and 3D DMDAs, this one is {dim}D"
                    + ("; pcplugins.AMG takes any grid's assembled matrix" if dof == 1 else ""))
    boundary_types(dm, who, periodic)
    sizes = dm.getSizes()[:dim][::-1]
    ranges = dm.getRanges()[:dim][::-1]
    return dm, grid.Box(sizes, [r[0] for r in ranges], [r[1] - r[0] for r in ranges], periodic=periodic_axes(dm))


def periodic_axes(dm):
    """Per axis of the DMDA, in array-axis order (z, y, x), whether it is periodic."""
    return tuple(b == PETSc.DM.BoundaryType.PERIODIC for b in dm.getBoundaryType()[:dm.getDim()])[::-1]


def boundary_types(dm, who, periodic=False):
    """Checks the DMDA's boundary type along each axis, which must be none, or where
    ``periodic`` also periodic or mirror (its mirrored couplings are in the assembled matrix's
    rows, which a reader of the matrix takes as they are); else a PETSc error that names the axes
    and points to pcplugins.AMG."""
    B = PETSc.DM.BoundaryType
    kinds = dm.getBoundaryType()[:dm.getDim()]
    accepted = (B.NONE, B.PERIODIC, B.MIRROR) if periodic else (B.NONE,)
    if any(b not in accepted for b in kinds):
        names = {B.NONE: "none", B.PERIODIC: "periodic", B.MIRROR: "mirror", B.GHOSTED: "ghosted", B.TWIST: "twist"}
        found = ", ".join(f"{names.get(b, b)} along {'xyz'[a]}" for a, b in enumerate(kinds) if b not in accepted)
        listed = ", ".join(names[b] for b in accepted)
        raise error(f"{who} supports the DMDA boundary type{'s' if periodic else ''} {listed}; this DMDA's is "
                    f"{found}: use pcplugins.AMG, which takes the assembled matrix whatever the grid's boundary")


def square_dmda(pc, dof, who):
    """(n, dim) for the PC's DMDA, which must be 2D or 3D with n points along every axis and
    ``dof`` fields."""
    dm = pc_dm(pc)
    if dm is None or dm.getType() != "da":
        raise error(f"{who} needs a 2D or 3D DMDA: call KSPSetDM (ksp.setDM(da)) before KSPSetUp; "
                    "for a matrix without a grid use pcplugins.AMG")
    dim = dm.getDim()
    if dim not in (2, 3):
        raise error(f"{who} supports 2D and 3D DMDAs, this one is {dim}D")
    boundary_types(dm, who)
    sizes = dm.getSizes()[:dim]
    if len(set(sizes)) != 1:
        raise error(f"{who} needs a square (cubic) grid, the DMDA is {' x '.join(map(str, sizes))}")
    if dm.getDof() != dof:
        form = ("complex scalars: one complex unknown per point (dof 1)" if dof == 1 else
                "a real PETSc: the real-equivalent form, real and imaginary parts interleaved (dof 2)")
        raise error(f"{who}: with {form}; the DMDA has dof {dm.getDof()}")
    return sizes[0], dim


def rank_boxes(dm):
    """Every rank's box of a DMDA, in rank order (PETSc numbers rank i + m (j + n k) along x, y,
    z; its global ordering is rank by rank, each rank's points in natural order)."""
    dim = dm.getDim()
    counts = [numpy.asarray(c) for c in dm.getOwnershipRanges()[:dim]]       # x, y, z
    starts = [numpy.concatenate([[0], numpy.cumsum(c)[:-1]]) for c in counts]
    boxes = []
    for coords in numpy.ndindex(*[len(c) for c in reversed(counts)]):         # (k, j, i)
        ijk = coords[::-1]
        st = [int(starts[a][ijk[a]]) for a in range(dim)][::-1]
        sh = [int(counts[a][ijk[a]]) for a in range(dim)][::-1]
        boxes.append(grid.Box(dm.getSizes()[:dim][::-1], st, sh))
    return boxes


def _grid_positions(index, boxes, xp):
    """Grid positions (one array per axis) of PETSc global indices on a DMDA with ``boxes``."""
    if len(boxes) == 1:      # natural ordering: no per-entry rank to look up
        return csrstencil.natural_positions(index, boxes[0].shape)
    offsets = numpy.concatenate([[0], numpy.cumsum([b.size for b in boxes])[:-1]])
    r = xp.searchsorted(xp.asarray(offsets), index, side="right") - 1
    rest = index - xp.asarray(offsets)[r]
    pos = [None] * boxes[0].dim
    for a in reversed(range(boxes[0].dim)):
        n = xp.asarray(numpy.array([b.shape[a] for b in boxes]))[r]
        pos[a] = rest % n + xp.asarray(numpy.array([b.start[a] for b in boxes]))[r]
        rest = rest // n
    return pos


def stencil_from_aij(M, box, dm, xp, dtype, mpi, who="pcplugins.GMG"):
    """Offsets present in an assembled DMDA operator, their coefficient arrays on this rank's
    box, and the arrays' class statistics where the reading kernel took them (else None). The
    index work runs in ``xp``: on the GPU for a 17M-row matrix it takes a fraction of a second
    instead of the host's many seconds; on one rank an aijcusparse matrix is read from PETSc's
    device CSR."""
    if not is_aij(M):
        raise error(f"{who} reads assembled AIJ matrices; the operator is '{M.getType()}' "
                    "(declare -pc_gmg_operator laplacian for a matrix-free operator)")
    nonfinite = f"{who}: the operator has NaN or Inf entries"
    wide = (f"{who}: the operator couples grid points more than one apart (nonzero entries); "
            "supported are stencils of width 1 (5/7/9/27-point): use pcplugins.AMG for others")
    if mpi.size == 1:            # natural ordering, one box: core.csrstencil (GPU kernels or twin)
        # an aijcusparse matrix is read on the device, in place; getValuesCSR walks the host copy
        csr = _device_csr(M.handle, M.getSize()[0], M, copy=False) \
            if backend.is_gpu(xp) and M.getType() == "seqaijcusparse" else None
        indptr, cols, vals = csr if csr is not None else (xp.asarray(a) for a in M.getValuesCSR())
        found = csrstencil.stencil_of_csr(indptr, cols, vals, box.shape, dtype, periods(box))
        if found.nonfinite or found.wide:
            raise error(nonfinite if found.nonfinite else wide)
        return found.offsets, found.coefs, found.stats
    # a matrix split over ranks: columns anywhere in PETSc's rank-by-rank ordering, and the
    # decisions taken together, so every rank builds the same stencil (its collectives follow it)
    blocks = mpiaij_blocks(M, xp)
    if mpi.allmin(int(blocks is not None)) == 1:
        return _stencil_from_blocks(*blocks, box, xp, dtype, mpi, rank_boxes(dm), nonfinite, wide)
    indptr, cols, vals = (xp.asarray(a) for a in M.getValuesCSR())
    if mpi.allmin(int(backend.all_true(xp.isfinite(vals)))) == 0:
        raise error(nonfinite)
    rows, slot, far = csrstencil.entry_slots(indptr, cols, box.shape, box.start,
                                             _grid_positions(cols.astype(numpy.int64), rank_boxes(dm), xp),
                                             periods(box))
    if mpi.allmin(-int(backend.any_true(far & (vals != 0)))) < 0:
        raise error(wide)
    keep = csrstencil.couplings(slot, far, vals, box.dim)
    rows, slot, vals = rows[keep], slot[keep], vals[keep]
    present = sorted(set().union(*mpi.allgather(set(csrstencil.slots_present(slot, box.dim)))))
    return (*csrstencil.scatter(rows, slot, vals, present, box.shape, dtype), None)


def _stencil_from_blocks(own, ghost, box, xp, dtype, mpi, boxes, nonfinite, wide):
    """stencil_from_aij from PETSc's two blocks of this rank's rows. The diagonal block is this
    rank's box in natural order, so it is read as one rank reads its matrix (core.csrstencil: the
    GPU kernels, on PETSc's device CSR in place); the off-diagonal block's few entries (rows on the
    rank's boundary, global columns) are placed by their grid positions and written into the same
    arrays. An axis the box spans whole keeps its period (its wrap couplings are the rank's own)."""
    d = box.dim
    spans = tuple(p if n == m else 0 for p, n, m in zip(periods(box), box.shape, box.global_shape))
    found = csrstencil.stencil_of_csr(*own, box.shape, dtype, spans)
    rows, cols, vals = ghost
    bad = found.nonfinite or not backend.all_true(xp.isfinite(vals))
    if mpi.allmin(-int(bad)) < 0:
        raise error(nonfinite)
    rows, slot, far = csrstencil.entry_slots(None, cols, box.shape, box.start,
                                             _grid_positions(cols.astype(numpy.int64), boxes, xp), periods(box),
                                             rows=rows)
    if mpi.allmin(-int(found.wide or backend.any_true(far & (vals != 0)))) < 0:
        raise error(wide)
    keep = csrstencil.couplings(slot, far, vals, d)
    rows, slot, vals = rows[keep], slot[keep], vals[keep]
    offsets = stencil.box_offsets(d)
    mine = {offsets.index(tuple(o)): c for o, c in zip(found.offsets, found.coefs)}
    theirs = csrstencil.slots_present(slot, d)
    present = sorted(set().union(*mpi.allgather(set(mine) | set(theirs))))
    coefs = [mine[s] if s in mine else xp.zeros(box.shape, dtype) for s in present]
    host_slot = backend.to_host(slot)
    for s in theirs:
        at = xp.asarray(numpy.flatnonzero(host_slot == s))
        if at.size:               # a point's coupling to another rank's point: not in its own block
            coefs[present.index(s)].reshape(-1)[rows[at]] = vals[at]
    return [offsets[s] for s in present], coefs, None


def periods(box):
    """Per axis the number of points of a periodic axis, else 0 (csrstencil.entry_slots)."""
    return tuple(m if p else 0 for m, p in zip(box.global_shape, box.periodic))


def axis_names(box, flags):
    """The names of the axes whose flag (one per array axis, z first) is set, x first: 'x, z'."""
    return ", ".join("xyz"[box.dim - 1 - a] for a in reversed(range(box.dim)) if flags[a])


def negative_everywhere(d, mpi):
    """Is the diagonal ``d`` negative at every unknown, on every rank (a negative definite operator,
    div(k grad u) = -f, whose PC the PCs build from -A: dmdapc.NEGATED)?"""
    return mpi.allmax(float(d.max()) if d.size else -1.0) < 0


def check_positive_diagonal(d, box, shift, mpi, who):
    """A PETSc error on every rank where the diagonal ``d`` over this rank's ``box`` is not positive
    somewhere, naming the first such grid point (``shift``: the box's offset in the DMDA, 1 where
    the outer layer was eliminated)."""
    bad = None
    if not backend.all_true(d > 0):
        xp = backend.array_module(d)
        k = int(backend.to_host(xp.flatnonzero((d <= 0).ravel())[0]))
        at = numpy.unravel_index(k, box.shape)
        point = [s + i + shift for s, i in zip(box.start, at)][::-1]
        ijk = "i, j, k" if box.dim == 3 else "i, j"
        bad = (f"{who} needs a positive diagonal; the row of grid point ({ijk}) = "
               f"({', '.join(map(str, point))}) has diagonal {float(d.ravel()[k]):g}")
    mpi.check(bad)


def constant_stencil(box, offsets, coefs, dtype, mpi, stats=None):
    """The constant stencil (detect.ConstantRead) that the coefficient arrays of an assembled
    operator hold, decided on every rank alike; None where they hold none. ``stats``: the arrays'
    class statistics where they are known already (one rank). On the host a diagonal that varies
    over the interior rows is seen first, by two reductions over one array."""
    if stats is not None and mpi.size == 1:
        return detect.constant_read(box, offsets, [stats], dtype)
    xp = backend.array_module(coefs[0])
    if xp is numpy:
        d = coefs[offsets.index((0,) * box.dim)][tuple(grid.global_inner_slice(box, a) for a in range(box.dim))]
        if mpi.allmax(int(d.size > 0 and d.min() != d.max())):
            return None
    stats = mpi.allgather(detect.class_stats(box, offsets, coefs))
    return detect.constant_read(box, offsets, stats, dtype)


def check_interior(mgbox, mpi, who):
    """Every rank must own interior unknowns once the identity layer is eliminated: a rank whose
    part of the DMDA is boundary points only stops every rank, with the partition to change."""
    empty = [r for r, n in enumerate(mpi.allgather(mgbox.size)) if n == 0]
    if empty:
        raise error(
            f"{who}: rank{'s' if len(empty) > 1 else ''} {', '.join(map(str, empty))} of "
            f"{mpi.size} own{'s' if len(empty) == 1 else ''} only boundary points (the identity rows "
            "on the grid's outer layer), no interior unknown: use fewer ranks, or a DMDA partition "
            "(-da_processors_x/y/z, DMDASetOwnershipRanges) that gives every rank an interior point")


def face_mask(box, axis, xp=numpy):
    """True on the two faces of the global grid across ``axis`` (over this rank's box)."""
    g = numpy.arange(box.start[axis], box.start[axis] + box.shape[axis])
    edge = (g == 0) | (g == box.global_shape[axis] - 1)
    sh = [1] * box.dim
    sh[axis] = -1
    return xp.broadcast_to(xp.asarray(edge.reshape(sh)), box.shape)


def layer_mask(box, xp=numpy):
    """True on the outer layer of the global grid (over this rank's box), built on ``xp`` from one
    small factor per axis (no full-size host array to upload)."""
    on_layer = xp.zeros(box.shape, dtype=bool)
    for a in range(box.dim):
        on_layer |= face_mask(box, a, xp)
    return on_layer


def global_faces(box):
    """Index tuples of the faces of the global grid that this rank's box holds (each a view of an
    array over the box); none where the box is empty."""
    if box.size == 0:
        return []
    return [tuple(end if b == a else slice(None) for b in range(box.dim))
            for a in range(box.dim)
            for end, on in ((0, box.start[a] == 0), (-1, box.start[a] + box.shape[a] == box.global_shape[a])) if on]


def dirichlet_layer(box, offsets, coefs, mpi, stats=None):
    """True when every row on the outer layer of the global grid is an identity-like row (only a
    diagonal entry, of one sign over the layer: negative in a matrix negated whole): PETSc's DMDA
    tutorial convention (ex45), where the boundary values are kept as unknowns with scaled
    identity rows. Collective: every rank gets the same answer. Reads the faces of the global grid
    that this rank's box holds (views), not a mask over the whole box, and waits for the device
    once; on one rank with the arrays' class statistics (``stats``, stencil_from_aij's) it reads
    those instead."""
    if any(m < 3 for m in box.global_shape):
        return False
    if stats is not None and mpi.size == 1:
        return detect.identity_layer(box, offsets, stats)
    xp = backend.array_module(coefs[0])
    counts = [xp.zeros((), numpy.int64) for _ in range(3)]     # couplings, diagonals <= 0, >= 0
    for o, c in zip(offsets, coefs):
        for face in global_faces(box):
            if any(o):
                counts[0] = counts[0] + xp.count_nonzero(c[face])
            else:
                counts[1] = counts[1] + xp.count_nonzero(c[face] <= 0)
                counts[2] = counts[2] + xp.count_nonzero(c[face] >= 0)
    bad, nonpositive, nonnegative = (mpi.allsum(int(v)) for v in backend.to_host(xp.stack(counts)))
    return bad == 0 and min(nonpositive, nonnegative) == 0


def layer_diagonal_range(box, d, mpi, stats=None):
    """(least, largest) diagonal ``d`` on the outer layer of the global grid, over every rank; on
    one rank from the diagonal's class statistics over the layer's rows (``stats``) where given."""
    if stats is not None and mpi.size == 1:
        return float(stats[1]), float(stats[2])
    faces = [d[f] for f in global_faces(box)]
    return (mpi.allmin(min((float(f.min()) for f in faces), default=numpy.inf)),
            mpi.allmax(max((float(f.max()) for f in faces), default=-numpy.inf)))


def sample_laplacian(M, box, dm, mpi):
    """For a declared Laplacian: axis weights, boundary convention and the boundary rows' value
    from two rows of an AIJ matrix (the first grid point and an interior one, read by the ranks that
    own them), or the finite-difference -Laplacian with h = 1/(m+1) for a matrix-free operator.
    Returns (weights, layer, boundary diagonal)."""
    d = box.dim
    if M is None or not is_aij(M):
        return [-float((m + 1) ** 2) for m in box.global_shape], False, None
    boxes = rank_boxes(dm)
    offsets = numpy.concatenate([[0], numpy.cumsum([b.size for b in boxes])])
    lo, hi = M.getOwnershipRange()
    # the central point of the widest rank's box, whose neighbours that rank owns too (a column
    # of another rank's makes PETSc build the off-process column map of an MPIAIJ matrix, a
    # pass over all its off-process columns, for one MatGetValues), two points or more from
    # the grid's boundary
    widest = max(boxes, key=lambda b: min(b.shape))
    centre = (tuple(s + n // 2 for s, n in zip(widest.start, widest.shape)) if min(widest.shape) >= 5
              else tuple(m // 2 for m in box.global_shape))
    def index(point):
        """PETSc's global index of a grid point: its rank's offset and its place in that box."""
        r = next(k for k, b in enumerate(boxes) if all(s <= p < s + n for p, s, n in zip(point, b.start, b.shape)))
        return int(offsets[r] + numpy.ravel_multi_index(tuple(p - s for p, s in zip(point, boxes[r].start)),
                                                        boxes[r].shape))
    found = {}
    for name, point in (("corner", (0,) * d), ("centre", centre)):
        row = index(point)
        if lo <= row < hi:
            # the row's entries in the 3^d points around it, by MatGetValues: MatGetRow on a
            # parallel matrix first scans every row for the longest
            near = [o for o in box_offsets(d)
                    if all(0 <= p + q < m for p, q, m in zip(point, o, box.global_shape))]
            cols = [index(tuple(p + q for p, q in zip(point, o))) for o in near]
            vals = M.getValues([row], cols).ravel()
            found[name] = [(o, float(v)) for o, v, c in zip(near, vals, cols) if v != 0 or c == row]
    merged = {}
    for part in mpi.allgather(found):
        merged.update(part)
    corner, central = merged["corner"], merged["centre"]
    layer = len(corner) == 1
    w = [None] * d
    for off, v in central:
        if sum(abs(o) for o in off) == 1:
            w[[abs(o) for o in off].index(1)] = v
    if any(v is None for v in w):
        raise error("-pc_gmg_operator laplacian: the matrix's central row is not a 5/7-point stencil")
    return w, layer, corner[0][1] if layer else None


def interior_box(box):
    """The box without the global outer layer."""
    gs = tuple(m - 2 for m in box.global_shape)
    st, sh = [], []
    for s, n, m in zip(box.start, box.shape, box.global_shape):
        lo, hi = max(s, 1), min(s + n, m - 1)
        st.append(lo - 1)
        sh.append(max(0, hi - lo))
    return grid.Box(gs, st, sh)

