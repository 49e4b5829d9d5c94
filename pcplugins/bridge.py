"""The only module that touches PETSc: options, DMDA and Mat introspection, Vec views, log events,
-help and -ksp_view output, and errors raised as PETSc errors.

Everything numerical is delegated to the array core (grid, stencil, multigrid, ...), which never
sees a PETSc object.
"""
import functools
import math
import time

import numpy
from petsc4py import PETSc

from . import backend, grid, multigrid, stencil


class PCPluginError(RuntimeError):
    """A user-facing error; petsc4py turns an exception in a Python PC into a PETSc error."""


PCPluginError.__module__ = "pcplugins"      # as PETSc prints it: pcplugins.PCPluginError: message


def error(msg):
    return PCPluginError(msg)


def user_errors(method):
    """For the PCs' entry points (setFromOptions, setUp, apply, ...): a PCPluginError, which is
    about the user's input, reaches PETSc without the Python frames it passed through, so PETSc's
    error shows the message and one frame, not a traceback of our internals. With the option
    -pcplugins_traceback the whole traceback stays, for debugging. Other exceptions (our bugs) keep
    theirs."""
    @functools.wraps(method)
    def entry(self, *args):
        try:
            return method(self, *args)
        except PCPluginError as e:
            if PETSc.Options().getBool("pcplugins_traceback", False):
                raise
            raise e.with_traceback(None) from None
    return entry


# -- options -------------------------------------------------------------------------------------

class Option:
    """One entry of a PC's options table: ``kind`` int, real, bool or str; ``choices`` for
    strings; ``lo``/``hi`` the valid range of a number (inclusive, ``open`` names the ends that
    are excluded: "lo", "hi" or "lohi"). Reals must be finite."""

    def __init__(self, name, kind, default, help, choices=None, lo=None, hi=None, open=""):
        self.name, self.kind, self.default, self.help, self.choices = name, kind, default, help, choices
        self.lo, self.hi, self.open = lo, hi, open

    @property
    def key(self):
        """The name inside the PC: the option's name without its first two words (pc_gmg_)."""
        return self.name.split("_", 2)[-1]

    def range_text(self):
        if self.lo is None and self.hi is None:
            return ""
        lo = "-inf" if self.lo is None else f"{self.lo:g}"
        hi = "inf" if self.hi is None else f"{self.hi:g}"
        return ("(" if "lo" in self.open or self.lo is None else "[") + f"{lo}, {hi}" + \
            (")" if "hi" in self.open or self.hi is None else "]")

    def in_range(self, v):
        if self.kind == "real" and not math.isfinite(v):
            return False
        lo_ok = self.lo is None or (v > self.lo if "lo" in self.open else v >= self.lo)
        hi_ok = self.hi is None or (v < self.hi if "hi" in self.open else v <= self.hi)
        return lo_ok and hi_ok


def read_options(pc, table, title):
    """Read ``table`` (a list of Option) from the options database under the PC's prefix;
    print them for -help (current values and valid ranges); reject unknown values and values out
    of range with a message naming the option, the value and what is accepted. The options
    database is the same on every rank, so every rank stops together."""
    prefix = pc.getOptionsPrefix() or ""
    opts = PETSc.Options(prefix)
    values = {}
    for o in table:
        if not opts.hasName(o.name):
            values[o.key] = o.default
            continue
        try:
            v = {"int": opts.getInt, "real": opts.getReal, "bool": opts.getBool,
                 "str": opts.getString}[o.kind](o.name)
        except (PETSc.Error, KeyError, ValueError, TypeError):
            raise error(f"{title}: option -{prefix}{o.name}: cannot read the value as {o.kind}") from None
        if o.choices and v is not None:
            v = str(v).lower()
            if v not in o.choices:
                raise error(f"{title}: option -{prefix}{o.name}: unknown value '{v}'; "
                            f"expected one of {', '.join(o.choices)}")
        if o.kind in ("int", "real") and not o.in_range(v):
            rng = o.range_text()
            raise error(f"{title}: option -{prefix}{o.name}: {v:g} is out of range; the value must be "
                        + ("a finite number" if not rng else
                           f"{'finite and ' if o.kind == 'real' else ''}in {rng}"))
        values[o.key] = v
    if values.get("pre") == 0 and values.get("post") == 0:
        names = [o.name for o in table if o.key in ("pre", "post")]
        raise error(f"{title}: options -{prefix}{names[0]} and -{prefix}{names[1]} are both 0: a cycle "
                    "without smoothing is no multigrid; give at least one sweep")
    if PETSc.Options().hasName("help"):
        lines = [f"{title} options -------------------------------------------------"]
        for o in table:
            cur = values[o.key]
            cur = "" if cur is None else (int(cur) if o.kind == "bool" else cur)
            ch = f" (choose one of) {' '.join(o.choices)}" if o.choices else ""
            rng = f" (range {o.range_text()})" if o.range_text() else ""
            lines.append(f"  -{prefix}{o.name} <{cur}>: {o.help}{ch}{rng}")
        PETSc.Sys.Print("\n".join(lines), comm=pc.getComm())
    return values


# -- log events ----------------------------------------------------------------------------------

_events = {}


def event(name):
    """A context manager timing ``name`` as a PETSc log event (GPU work synchronised only when
    PETSc logging is on, so timings are right under -log_view and free otherwise)."""
    ev = _events.get(name)
    if ev is None:
        ev = _events[name] = PETSc.Log.Event(name)
    return _Timed(ev)


class _Timed:
    xp = numpy

    def __init__(self, ev):
        self.ev = ev

    def __enter__(self):
        if PETSc.Log.isActive():
            backend.synchronize(_Timed.xp)
        self.ev.begin()

    def __exit__(self, *exc):
        if PETSc.Log.isActive():
            backend.synchronize(_Timed.xp)
        self.ev.end()


def set_event_namespace(xp):
    _Timed.xp = xp


# -- the grid from the DM ------------------------------------------------------------------------

def dmda_box(pc, dof=1, who="pcplugins.GMG"):
    """The Box of this rank's part of the PC's DMDA, in array-axis order (z, y, x); the DMDA must
    have ``dof`` fields."""
    dm = pc_dm(pc)
    if dm is None:
        raise error(f"{who} needs a DMDA: call KSPSetDM (ksp.setDM(da)) before KSPSetUp"
                    + ("; for operators without a grid use pcplugins.AMG" if dof == 1 else ""))
    if dm.getType() != "da":
        raise error(f"{who} needs a DMDA, but the DM attached to the PC is of type '{dm.getType()}'")
    if dm.getDof() != dof:
        raise error(f"{who} supports scalar problems (DMDA dof 1), the DMDA has dof {dm.getDof()}" if dof == 1
                    else f"{who} needs a DMDA with dof {dof}, this one has dof {dm.getDof()}")
    dim = dm.getDim()
    if dim not in (2, 3):
        raise error(f"{who} supports 2D and 3D DMDAs, this one is {dim}D")
    if any(b != PETSc.DM.BoundaryType.NONE for b in dm.getBoundaryType()[:dim]):
        raise error(f"{who} does not support periodic or ghosted DMDA boundaries yet")
    sizes = dm.getSizes()[:dim][::-1]
    ranges = dm.getRanges()[:dim][::-1]
    return dm, grid.Box(sizes, [r[0] for r in ranges], [r[1] - r[0] for r in ranges])


# -- the operator ---------------------------------------------------------------------------------

def operator_is_symmetric(pc, declared):
    """Whether the PC's operator is symmetric: a declared Laplacian is; an AIJ matrix is asked
    (MatIsSymmetric, collective, to a tolerance relative to its largest entry); any other
    matrix is taken as not symmetric."""
    if declared:
        return True
    M = pc_matrix(pc)
    if not is_aij(M):
        return False
    return bool(M.isSymmetric(1e-12 * max(M.norm(PETSc.NormType.INFINITY), 1e-300)))


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


def operator_matrix(pc, box, who="pcplugins.GMG"):
    M = pc_matrix(pc, who)
    m, n = M.getSize()
    if m != n:
        raise error(f"{who}: the operator must be square, it is {m} x {n}")
    if m != box.global_size:
        gs = "x".join(str(v) for v in reversed(box.global_shape))
        raise error(f"{who}: the operator has {m} rows but the DMDA grid {gs} has {box.global_size} points")
    return M


def is_aij(M):
    return "aij" in M.getType()


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
    offsets = numpy.concatenate([[0], numpy.cumsum([b.size for b in boxes])[:-1]])
    if len(boxes) == 1:
        r = xp.zeros(index.shape, dtype=numpy.int64)
    else:
        r = xp.searchsorted(xp.asarray(offsets), index, side="right") - 1
    rest = index - xp.asarray(offsets)[r]
    pos = [None] * boxes[0].dim
    for a in reversed(range(boxes[0].dim)):
        n = xp.asarray(numpy.array([b.shape[a] for b in boxes]))[r]
        pos[a] = rest % n + xp.asarray(numpy.array([b.start[a] for b in boxes]))[r]
        rest = rest // n
    return pos


def stencil_from_aij(M, box, dm, xp, dtype, mpi, who="pcplugins.GMG"):
    """Offsets present in an assembled DMDA operator and their coefficient arrays on this rank's
    box. The index work runs in ``xp``: on the GPU for a 17M-row matrix it takes a fraction of a
    second instead of the host's many seconds; on one rank an aijcusparse matrix is read from
    PETSc's device CSR."""
    if not is_aij(M):
        raise error(f"{who} reads assembled AIJ matrices; the operator is '{M.getType()}' "
                    "(declare -pc_gmg_operator laplacian for a matrix-free operator)")
    # one rank's aijcusparse matrix is read on the device; getValuesCSR walks the host copy
    csr = (_device_csr(M.handle, M.getSize()[0], M) if backend.is_gpu(xp) and M.getType() == "seqaijcusparse"
           else None)
    indptr, cols, vals = csr if csr is not None else (xp.asarray(a) for a in M.getValuesCSR())
    d = box.dim
    nrows = box.size
    if mpi.min(int(backend.all_true(xp.isfinite(vals)))) == 0:
        raise error(f"{who}: the operator has NaN or Inf entries")
    rows = xp.searchsorted(indptr, xp.arange(cols.size), side="right") - 1
    # DMCreateMatrix preallocates the whole stencil pattern with explicit zeros: a stored zero is
    # no coupling (the diagonal is kept whatever its value)
    keep = xp.flatnonzero(vals != 0)
    if int(keep.size) != int(vals.size):
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
    slot = xp.zeros(cols.size, dtype=numpy.int64)
    cpos = _grid_positions(cols.astype(numpy.int64), rank_boxes(dm), xp)
    rest_r = rows
    for a in reversed(range(d)):          # rows: this rank's box in natural order
        n = box.shape[a]
        off = cpos[a] - (rest_r % n + box.start[a])
        rest_r = rest_r // n
        if mpi.min(-int(xp.abs(off).max()) if off.size else 0) < -1:
            raise error(f"{who}: the operator couples grid points more than one apart (nonzero entries); "
                        "supported are stencils of width 1 (5/7/9/27-point): use pcplugins.AMG for others")
        slot += (off + 1) * 3 ** (d - 1 - a)
    present = numpy.flatnonzero(backend.to_host(xp.bincount(slot, minlength=3 ** d)))
    # the union over ranks: every rank must build the same stencil (its collectives follow it)
    present = sorted(set().union(*mpi.allgather(set(present.tolist()))) | {(3 ** d - 1) // 2})
    compact = numpy.zeros(3 ** d, dtype=numpy.int64)
    compact[present] = numpy.arange(len(present))
    coefs = xp.zeros((len(present), nrows), dtype=dtype)
    coefs[xp.asarray(compact)[slot], rows] = vals       # an AIJ row holds each column once
    offsets = stencil.box_offsets(d)
    return [offsets[k] for k in present], [c.reshape(box.shape) for c in coefs]


def layer_mask(box, xp=numpy):
    """True on the outer layer of the global grid (over this rank's box), built on ``xp`` from one
    small factor per axis (no full-size host array to upload)."""
    on_layer = xp.zeros(box.shape, dtype=bool)
    for a in range(box.dim):
        g = numpy.arange(box.start[a], box.start[a] + box.shape[a])
        edge = (g == 0) | (g == box.global_shape[a] - 1)
        sh = [1] * box.dim
        sh[a] = -1
        on_layer |= xp.asarray(edge.reshape(sh))
    return on_layer


def dirichlet_layer(box, offsets, coefs, mpi):
    """True when every row on the outer layer of the global grid is an identity-like row (only a
    diagonal entry): PETSc's DMDA tutorial convention (ex45), where the boundary values are kept
    as unknowns with scaled identity rows. Collective: every rank gets the same answer."""
    if any(m < 3 for m in box.global_shape):
        return False
    on_layer = layer_mask(box, backend.array_module(coefs[0]))
    ok = True
    for o, c in zip(offsets, coefs):
        if any(o):
            ok = ok and not backend.any_true(c[on_layer] != 0)
        else:
            ok = ok and not backend.any_true(c[on_layer] <= 0)
    return mpi.min(int(ok)) == 1


def sample_laplacian(M, box, dm, mpi):
    """For a declared Laplacian: axis weights, boundary convention and the boundary rows' value
    from two rows of an AIJ matrix (the first grid point and a central one, read by the ranks that
    own them), or the finite-difference -Laplacian with h = 1/(m+1) for a matrix-free operator.
    Returns (weights, layer, boundary diagonal)."""
    d = box.dim
    if M is None or not is_aij(M):
        return [-float((m + 1) ** 2) for m in box.global_shape], False, None
    boxes = rank_boxes(dm)
    offsets = numpy.concatenate([[0], numpy.cumsum([b.size for b in boxes])])
    lo, hi = M.getOwnershipRange()
    centre = tuple(m // 2 for m in box.global_shape)
    found = {}
    for name, point in (("corner", (0,) * d), ("centre", centre)):
        r = next(k for k, b in enumerate(boxes)
                 if all(s <= p < s + n for p, s, n in zip(point, b.start, b.shape)))
        b = boxes[r]
        row = int(offsets[r] + numpy.ravel_multi_index(
            tuple(p - s for p, s in zip(point, b.start)), b.shape))
        if lo <= row < hi:
            cols, vals = M.getRow(row)
            pos = _grid_positions(numpy.asarray(cols, dtype=numpy.int64), boxes, numpy)
            found[name] = [(tuple(int(pos[a][k]) - point[a] for a in range(d)), float(v))
                           for k, v in enumerate(vals) if v != 0 or cols[k] == row]   # no stored zeros
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


class Collective:
    """The few collectives the bridge needs, on the PC's communicator (mpi4py only in parallel,
    so serial use needs no mpi4py)."""

    def __init__(self, pc):
        self.size, self.rank = pc.getComm().getSize(), pc.getComm().getRank()
        self.mpi = pc.getComm().tompi4py() if self.size > 1 else None

    def min(self, x):
        return self._reduce(x, "MIN")

    def max(self, x):
        return self._reduce(x, "MAX")

    def sum(self, x):
        return x if self.mpi is None else self.mpi.allreduce(x)

    def _reduce(self, x, op):
        if self.mpi is None:
            return x
        from mpi4py import MPI
        return self.mpi.allreduce(x, op=getattr(MPI, op))

    def allgather(self, x):
        return [x] if self.mpi is None else self.mpi.allgather(x)

    def check(self, problem):
        """Raise on every rank when any rank found a ``problem`` (its message; None: none), with
        the message of the lowest such rank: a check that fails on some ranks only must stop all
        of them, or the others wait in the next collective for ever."""
        found = [p for p in self.allgather(problem) if p]
        if found:
            raise error(found[0])

    def agreed(self, fn, *args):
        """``fn(*args)``, with its PCPluginError raised on every rank (``check``)."""
        try:
            out, problem = fn(*args), None
        except PCPluginError as e:
            out, problem = None, str(e)
        self.check(problem)
        return out


class CSRComm(Collective):
    """The communicator of a distributed CSR hierarchy (distributed.py, pcplugins.AMG): host
    collectives and ``halo``, an exchange of the ghost values of a row distribution. Each halo
    holds a neighbourhood communicator; ``free`` releases them (collective: PCSetUp and PCReset
    call it on every rank)."""
    allsum, allmin, allmax = Collective.sum, Collective.min, Collective.max

    def __init__(self, pc):
        super().__init__(pc)
        self.exchanges, self.exchange_time = 0, 0.0
        self._neighbourhoods = []

    def halo(self, ghosts, starts, xp):
        h = _Halo(self, ghosts, starts, xp)
        self._neighbourhoods.append(h.neighbours)
        return h

    def free(self):
        for g in self._neighbourhoods:
            g.Free()
        self._neighbourhoods = []


class _Halo:
    """Values of the global unknowns ``ghosts`` (sorted) from their owners (rank r owns
    [starts[r], starts[r+1])). Set up once: an all-to-all of the requested indices, and a
    neighbourhood (distributed graph) communicator of the ranks this one receives from and sends
    to; then one MPI_Neighbor_alltoallv per call of just those values, so a call costs in the
    number of neighbours, not of ranks. Through the host (our MPICH is not GPU-aware)."""

    def __init__(self, comm, ghosts, starts, xp):
        self.comm, self.xp = comm, xp
        mpi, size = comm.mpi, comm.size
        owner = numpy.searchsorted(starts, ghosts, side="right") - 1
        recv_counts = numpy.bincount(owner, minlength=size).astype(numpy.int64)
        send_counts = numpy.asarray(mpi.alltoall(recv_counts.tolist()), numpy.int64)
        recv_displs = numpy.concatenate([[0], numpy.cumsum(recv_counts)[:-1]])
        send_displs = numpy.concatenate([[0], numpy.cumsum(send_counts)[:-1]])
        wanted = numpy.empty(int(send_counts.sum()), numpy.int64)
        mpi.Alltoallv([numpy.ascontiguousarray(ghosts, numpy.int64), (recv_counts, recv_displs)],
                      [wanted, (send_counts, send_displs)])
        self.send = xp.asarray(wanted - starts[comm.rank])
        self.n = len(ghosts)
        sources, destinations = numpy.nonzero(recv_counts)[0], numpy.nonzero(send_counts)[0]
        self.neighbours = mpi.Create_dist_graph_adjacent(sources.tolist(), destinations.tolist(), reorder=False)
        self.recv = (recv_counts[sources], recv_displs[sources])
        self.sent = (send_counts[destinations], send_displs[destinations])

    def __call__(self, x):
        t = time.perf_counter()
        out = numpy.empty(self.n, x.dtype)
        self.neighbours.Neighbor_alltoallv([numpy.ascontiguousarray(backend.to_host(x[self.send])), self.sent],
                                      [out, self.recv])
        self.comm.exchanges += 1
        self.comm.exchange_time += time.perf_counter() - t
        return backend.to_namespace(out, self.xp)


class DMDAComm(multigrid.Comm):
    """Ghost updates and gathers for the multigrid levels of a distributed DMDA.

    Levels with at most ``gather_size`` points are gathered onto every rank as well: each
    distributed level costs six ghost updates per V-cycle, mostly latency on small levels, while
    the gather costs one allgather per cycle.

    Each distributed level gets its own DMDA (box stencil, width 1) whose ownership ranges nest
    in the finer level's: a rank owning fine points [s, e) along an axis owns coarse points
    [s // 2, e // 2) (grid.py). A level stays distributed while every rank owns points of it;
    below, the levels are replicated (``multigrid.Gathered``). ``exchange`` copies the owned
    values into the level's global Vec, runs DMGlobalToLocal and copies the ghosts back into the
    halo; with CUDA Vecs those copies stay on the GPU (PETSc moves the ghosts through MPI).
    Complex levels under a real PETSc (pcplugins.ShiftedLaplace's real-equivalent form) travel
    as dof-2 DMDAs, real and imaginary parts interleaved.
    """

    def __init__(self, pc, dm, layer, xp, gather_size=0, complex_levels=False, who="pcplugins.GMG"):
        self.gather_size = gather_size            # gather levels with at most this many points
        self.who = who
        self.pairs = complex_levels and not scalar_is_complex()   # complex values as (re, im) pairs
        self.mpi = Collective(pc)
        self.size = self.mpi.size
        self.pcomm = pc.getComm()
        self.xp = xp
        self.dim = dm.getDim()
        self.gpu = backend.is_gpu(xp)
        counts = [numpy.asarray(c) for c in dm.getOwnershipRanges()[:self.dim]][::-1]
        ranges = [[(int(s), int(s + c)) for s, c in zip(numpy.cumsum(cs) - cs, cs)] for cs in counts]
        gshape = tuple(dm.getSizes()[:self.dim][::-1])
        self._ranges = {-1: (gshape, ranges)}
        self._levels = {}
        self._layer = layer
        self.distribute(-1, None)                 # the user's grid, for the boundary elimination
        if layer:
            ranges = [[(max(s, 1) - 1, min(e, m - 1) - 1) for s, e in r] for r, m in zip(ranges, gshape)]
            gshape = tuple(m - 2 for m in gshape)
        self._ranges[0] = (gshape, ranges)
        self.exchanges, self.exchange_time = 0, 0.0

    def distribute(self, level, box):
        if level > 0:
            pshape, pranges = self._ranges[level - 1]
            ranges = [[box.coarse_range(s, e) for s, e in r] if m != pm else r
                      for r, m, pm in zip(pranges, box.global_shape, pshape)]
            self._ranges[level] = (box.global_shape, ranges)
        gshape, ranges = self._ranges[level]
        if level > 0 and math.prod(gshape) <= self.gather_size:
            return False              # small coarse levels: one gather beats many tiny exchanges
        if any(e <= s for r in ranges for s, e in r):
            if level <= 0:
                raise error(f"{self.who}: a rank owns no {'interior ' if self._layer else ''}grid points; "
                            "use fewer ranks or a larger grid")
            return False
        da = PETSc.DMDA().create(dim=self.dim, dof=2 if self.pairs else 1, sizes=gshape[::-1],
                                 proc_sizes=[len(r) for r in ranges][::-1],
                                 ownership_ranges=[[e - s for s, e in r] for r in ranges][::-1],
                                 stencil_type=PETSc.DMDA.StencilType.BOX, stencil_width=1,
                                 comm=self.pcomm, setup=False)
        if self.gpu:
            da.setVecType("cuda")
        da.setUp()
        own = [tuple(r) for r in da.getRanges()[:self.dim]][::-1]
        ghost = [tuple(r) for r in da.getGhostRanges()[:self.dim]][::-1]
        if box is not None and own != [(s, s + n) for s, n in zip(box.start, box.shape)]:
            raise error(f"{self.who}: internal error, level {level} ownership {own} does not "
                        f"match the hierarchy's box {box}")
        sl = tuple(slice(gs - s + 1, ge - s + 1) for (s, _), (gs, ge) in zip(own, ghost))
        shape = tuple(e - s for s, e in own)
        gh_shape = tuple(ge - gs for gs, ge in ghost)
        self._levels[level] = (da, da.createGlobalVec(), da.createLocalVec(), shape, gh_shape, sl)
        return True

    def exchange(self, level, u):
        t = time.perf_counter()
        da, g, loc, shape, gh_shape, sl = self._levels[level]
        with backend.vec_array(g, "w") as ga:
            own = grid.interior(u)
            if self.pairs:
                ga = ga.reshape(shape + (2,))
                ga[..., 0], ga[..., 1] = own.real, own.imag
            else:
                ga.reshape(shape)[...] = own
        da.globalToLocal(g, loc)
        with backend.vec_array(loc, "r") as la:
            if self.pairs:
                la = la.reshape(gh_shape + (2,))
                u[sl] = la[..., 0] + 1j * la[..., 1]
            else:
                u[sl] = la.reshape(gh_shape)
        self.exchanges += 1
        self.exchange_time += time.perf_counter() - t     # wall time: device copies are queued
        return u

    def allsum(self, x):
        return self.mpi.sum(x)

    def allmin(self, x):
        return self.mpi.min(x)

    def gather(self, level, part, part_box, out):
        full = numpy.zeros(out.shape, dtype=out.dtype)
        for start, shape, a in self.mpi.allgather((part_box.start, part_box.shape, backend.to_host(part))):
            full[tuple(slice(s, s + n) for s, n in zip(start, shape))] = a
        out[...] = backend.to_namespace(full, self.xp)
        return out


def interior_box(box):
    """The box without the global outer layer."""
    gs = tuple(m - 2 for m in box.global_shape)
    st, sh = [], []
    for s, n, m in zip(box.start, box.shape, box.global_shape):
        lo, hi = max(s, 1), min(s + n, m - 1)
        st.append(lo - 1)
        sh.append(max(0, hi - lo))
    return grid.Box(gs, st, sh)


# -- vectors --------------------------------------------------------------------------------------

vec_array = backend.vec_array


def set_failed(pc, failed):
    if failed:
        pc.setFailedReason(PETSc.PC.FailedReason.SUBPC_ERROR)


# -- viewing --------------------------------------------------------------------------------------

def view_lines(viewer, lines):
    if viewer is None:
        viewer = PETSc.Viewer.STDOUT()
    if viewer.getType() != "ascii":
        return
    viewer.pushASCIITab()
    for ln in lines:
        viewer.printfASCII(ln + "\n")
    viewer.popASCIITab()


def clock():
    return time.perf_counter()


def use_petsc_device(M):
    """Make CuPy work on the GPU PETSc chose for this rank's vectors (PETSc spreads ranks over
    the node's GPUs, CuPy would start on device 0). Returns the device id."""
    if "cuda" in (M.getVecType() or "") or "cusparse" in M.getType():
        # a one-entry CUDA Vec says where PETSc allocates (no full-size Vec to malloc)
        x = PETSc.Vec().create(PETSc.COMM_SELF)
        x.setSizes(1)
        x.setType("cuda")
        with backend.vec_array(x, "r") as a:
            dev = a.device.id
        x.destroy()
    else:                              # host vectors with -pc_gmg_device gpu: PETSc's rule
        dev = M.getComm().getRank() % backend.cupy.cuda.runtime.getDeviceCount()
    backend.cupy.cuda.Device(dev).use()
    return dev



# -- assembled matrices and coordinates (pcplugins.AMG) --------------------------------------------

def aij_csr(pc, xp, comm=None):
    """The PC's operator on ``xp`` and where it was read from; checked: square, AIJ, real. On one
    rank a CSR matrix (sparse.csr): aijcusparse matrices are read on the device (``_device_csr``)
    when ``xp`` is CuPy, without a trip through the host. On several ranks (``comm``, a CSRComm)
    this rank's rows as a distributed.Rows, from PETSc's two blocks (``_mpiaij_rows``), else
    through MatGetValuesCSR."""
    from . import distributed, sparse
    M = pc_matrix(pc)
    m, n = M.getSize()
    if m != n:
        raise error(f"pcplugins.AMG: the operator must be square, it is {m} x {n}")
    if "aij" not in M.getType():
        raise error(f"pcplugins.AMG needs an assembled AIJ matrix (seqaij, mpiaij, aijcusparse), "
                    f"the operator is of type '{M.getType()}'")
    if scalar_is_complex():
        raise error("pcplugins.AMG supports real PETSc scalars only (this PETSc was configured with "
                    "complex scalars)")
    parallel = M.getComm().getSize() > 1
    if parallel and tuple(M.getOwnershipRange()) != tuple(M.getOwnershipRangeColumn()):
        raise error("pcplugins.AMG: the matrix's column layout must match its row layout "
                    f"(rows {M.getOwnershipRange()}, columns {M.getOwnershipRangeColumn()} on this rank)")
    if parallel and comm.min(M.getLocalSize()[0]) == 0:
        raise error("pcplugins.AMG: a rank owns no rows of the matrix; use fewer ranks")
    device = backend.is_gpu(xp) and "cusparse" in M.getType()
    if parallel:
        rows = _mpiaij_rows(M, xp, comm)
        if rows is not None:
            return rows, f"PETSc's diagonal and off-diagonal blocks (MatMPIAIJGetSeqAIJ, host CSR), rows " \
                         f"distributed over {comm.size} ranks"
    csr = _device_csr(M.handle, M.getLocalSize()[0], M) if device and not parallel else None
    source = "device CSR (MatSeqAIJGetCSRAndMemType, no host copy)"
    if csr is None:
        csr = M.getValuesCSR()
        source = "MatGetValuesCSR (host)"
    indptr, indices, data = csr
    if parallel:
        return distributed.Rows.from_csr(indptr, indices, data, comm, xp), \
            source + f", rows distributed over {comm.size} ranks"
    return sparse.csr(indptr, indices, data, n, xp), source


_PETSC_LIB = None


def _petsc_lib():
    """libpetsc through ctypes, for the few functions petsc4py has no binding for (None when it
    cannot be loaded)."""
    import ctypes
    global _PETSC_LIB
    if _PETSC_LIB is None:
        try:
            import glob
            import os
            import petsc4py
            cfg = petsc4py.get_config()
            base = os.path.join(cfg["PETSC_DIR"], cfg.get("PETSC_ARCH", "") or "", "lib", "libpetsc.so")
            # pip's build installs libpetsc.so as a linker script naming libpetsc.so.X.Y
            lib = ctypes.CDLL(max(glob.glob(base + ".*"), key=len, default=base))
            lib.MatSeqAIJGetCSRAndMemType.argtypes = [ctypes.c_void_p] * 5
            lib.MatMPIAIJGetSeqAIJ.argtypes = [ctypes.c_void_p] * 4
            lib.MatGetSize.argtypes = [ctypes.c_void_p] * 3
            for f in ("MatGetRowIJ", "MatRestoreRowIJ", "MatSeqAIJGetArrayRead", "MatSeqAIJRestoreArrayRead"):
                getattr(lib, f)
            _PETSC_LIB = lib
        except (OSError, AttributeError, KeyError):
            _PETSC_LIB = False
    return _PETSC_LIB or None


def _petsc_int():
    import ctypes
    return ctypes.c_int64 if numpy.dtype(PETSc.IntType).itemsize == 8 else ctypes.c_int32


def _device_csr(handle, nrows, owner):
    """(indptr, indices, values) of the seqaijcusparse matrix ``handle`` (``nrows`` rows) as CuPy
    copies of PETSc's device CSR, through MatSeqAIJGetCSRAndMemType. None when unavailable.
    ``owner``: the petsc4py object that keeps the matrix alive while it is read."""
    import ctypes
    lib = _petsc_lib()
    if lib is None:
        return None
    ii, jj, aa = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    mtype = ctypes.c_int()
    if lib.MatSeqAIJGetCSRAndMemType(ctypes.c_void_p(handle), ctypes.byref(ii), ctypes.byref(jj),
                                     ctypes.byref(aa), ctypes.byref(mtype)):
        return None
    if mtype.value == 0:                          # PETSC_MEMTYPE_HOST: nothing on the device
        return None
    cupy = backend.cupy
    it = numpy.dtype(PETSc.IntType)
    st = numpy.dtype(PETSc.ScalarType)

    def view(ptr, count, dtype):
        if count == 0:
            return cupy.zeros(0, dtype)
        mem = cupy.cuda.UnownedMemory(ptr.value, count * dtype.itemsize, owner)
        return cupy.ndarray((count,), dtype, cupy.cuda.MemoryPointer(mem, 0)).copy()

    indptr = view(ii, nrows + 1, it)
    nnz = int(indptr[-1])
    return indptr, view(jj, nnz, it), view(aa, nnz, st)


def _mpiaij_rows(M, xp, comm):
    """This rank's rows of an mpiaij(cusparse) matrix as a distributed.Rows, from the host CSR of
    PETSc's two blocks (MatMPIAIJGetSeqAIJ: the diagonal block, and the off-diagonal block whose
    columns index the sorted global indices ``colmap``; MatGetRowIJ, MatSeqAIJGetArrayRead), copied
    once to ``xp``. (The device CSR of the off-diagonal block is stored with compressed rows.)
    None when unavailable; every rank then takes the other path."""
    import ctypes
    from . import distributed, sparse
    lib = _petsc_lib()
    pint = _petsc_int()
    n = M.getLocalSize()[0]
    Ad, Ao, colmap = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    ok = lib is not None and not lib.MatMPIAIJGetSeqAIJ(ctypes.c_void_p(M.handle), ctypes.byref(Ad),
                                                        ctypes.byref(Ao), ctypes.byref(colmap))
    m, nghost = pint(), pint()
    ok = ok and not lib.MatGetSize(Ao, ctypes.byref(m), ctypes.byref(nghost))
    blocks = [_host_csr(lib, B, n) for B in (Ad, Ao)] if ok else [None]
    if comm.min(int(all(b is not None for b in blocks))) == 0:
        return None
    nghost = nghost.value
    ghosts = numpy.zeros(0, numpy.int64)
    if nghost:
        ghosts = numpy.ctypeslib.as_array(ctypes.cast(colmap, ctypes.POINTER(pint)), shape=(nghost,))
        ghosts = ghosts.astype(numpy.int64)
    sp = sparse.module(xp)
    to = backend.to_namespace
    own, ghost = (sp.csr_matrix((to(v.astype(numpy.float64), xp), to(j.astype(numpy.int32), xp),
                                 to(i.astype(numpy.int32), xp)), shape=(n, cols))
                  for (i, j, v), cols in zip(blocks, (n, nghost)))
    return distributed.Rows(own, ghost, ghosts, distributed.starts_of(n, comm), comm, xp)


def _host_csr(lib, B, n):
    """Copies of the host CSR arrays of the seqaij matrix handle ``B`` (n rows), or None."""
    import ctypes
    pint = _petsc_int()
    rows, ia, ja, done = pint(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
    aa = ctypes.c_void_p()
    args = (B, pint(0), ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(rows), ctypes.byref(ia), ctypes.byref(ja),
            ctypes.byref(done))
    if lib.MatGetRowIJ(*args) or not done.value or rows.value != n:
        return None
    try:
        i = numpy.ctypeslib.as_array(ctypes.cast(ia, ctypes.POINTER(pint)), shape=(n + 1,)).copy()
        nnz = int(i[-1])
        j = numpy.ctypeslib.as_array(ctypes.cast(ja, ctypes.POINTER(pint)), shape=(nnz,)).copy() if nnz else \
            numpy.zeros(0, numpy.int64)
        if lib.MatSeqAIJGetArrayRead(B, ctypes.byref(aa)):
            return None
        st = numpy.dtype(PETSc.ScalarType)
        v = numpy.frombuffer((ctypes.c_char * (nnz * st.itemsize)).from_address(aa.value), st).copy() if nnz \
            else numpy.zeros(0, st)
        lib.MatSeqAIJRestoreArrayRead(B, ctypes.byref(aa))
        return i, j, v
    finally:
        lib.MatRestoreRowIJ(*args)


def amg_coordinates(pc, n, xp):
    """Vertex coordinates for auxiliary-grid aggregation, as (``xp`` array n x dim, where from), or
    (None, why not). Sources in order: a Vec composed on the PC as "coordinates" (block size =
    dimension; pcplugins.set_coordinates does it, and C codes can PetscObjectCompose it), then the
    coordinates of a DMDA attached to the PC (its index grid when it has none). A Vec's values go
    to ``xp`` straight from its array and are checked there (a host copy and check of 4M 2D
    points took 22 ms of a 100 ms setup on the GPU)."""
    v = _composed_vec(pc, "coordinates")
    if v is not None:
        dim = v.getBlockSize()
        if dim not in (2, 3):
            raise error(f"pcplugins.AMG: the coordinates Vec composed on the PC has block size {dim}; "
                        "it must be the dimension, 2 or 3")
        if v.getLocalSize() != n * dim:
            raise error(f"pcplugins.AMG: the coordinates Vec has {v.getLocalSize()} entries; the matrix "
                        f"has {n} rows, so {dim}D coordinates need {n * dim}")
        return _finite_coordinates(v, n, dim, xp), "the Vec composed on the PC as \"coordinates\""
    dm = pc_dm(pc)
    if dm is not None and dm.getType() == "da":
        dim = dm.getDim()
        if dm.getDof() != 1 or math.prod(dm.getSizes()[:dim]) != pc_matrix(pc).getSize()[0]:
            return None, "the PC's DMDA does not match the matrix (dof or size)"
        cv = dm.getCoordinates()
        if cv is not None and cv.handle and cv.getLocalSize() == n * dim:
            return _finite_coordinates(cv, n, dim, xp), "the coordinates of the PC's DMDA"
        # this rank's points (x fastest), as the DMDA orders the matrix's rows
        ranges = dm.getRanges()[:dim][::-1]
        idx = numpy.indices([e - s for s, e in ranges]).reshape(dim, -1)[::-1].T
        return xp.asarray((idx + [s for s, _ in ranges][::-1]).astype(numpy.float64)), \
            "the index grid of the PC's DMDA"
    return None, "no coordinates (none composed on the PC, no DMDA)"


def _finite_coordinates(v, n, dim, xp):
    """The values of the coordinates Vec ``v`` as an n x dim float64 ``xp`` array (a copy)."""
    c = xp.array(numpy.asarray(v.getArray(readonly=True)).reshape(n, dim), dtype=numpy.float64)
    if not backend.all_true(xp.isfinite(c)):
        raise error("pcplugins.AMG: the coordinates contain NaN or Inf")
    return c


def compose_coordinates(pc, coords):
    """Attach vertex coordinates (n x dim; under MPI those of this rank's rows) to the PC for
    pcplugins.AMG."""
    c = numpy.ascontiguousarray(coords, dtype=numpy.float64)
    if c.ndim != 2 or c.shape[1] not in (2, 3):
        raise error(f"pcplugins.set_coordinates: coordinates must be an n x 2 or n x 3 array, got shape {c.shape}")
    v = PETSc.Vec().createWithArray(c.ravel().copy(), bsize=c.shape[1], comm=PETSc.COMM_SELF)
    pc.compose("coordinates", v)
    return v


# -- pcplugins.ShiftedLaplace ------------------------------------------------------------------------

def scalar_is_complex():
    return numpy.dtype(PETSc.ScalarType).kind == "c"


def square_dmda(pc, dof, who):
    """(n, dim) for the PC's DMDA, which must be 2D or 3D with n points along every axis and
    ``dof`` fields."""
    dm = pc_dm(pc)
    if dm is None or dm.getType() != "da":
        raise error(f"{who} needs a 2D or 3D DMDA: call KSPSetDM (ksp.setDM(da)) before KSPSetUp")
    dim = dm.getDim()
    if dim not in (2, 3):
        raise error(f"{who} supports 2D and 3D DMDAs, this one is {dim}D")
    sizes = dm.getSizes()[:dim]
    if len(set(sizes)) != 1:
        raise error(f"{who} needs a square (cubic) grid, the DMDA is {' x '.join(map(str, sizes))}")
    if dm.getDof() != dof:
        form = ("complex scalars: one complex unknown per point (dof 1)" if dof == 1 else
                "a real PETSc: the real-equivalent form, real and imaginary parts interleaved (dof 2)")
        raise error(f"{who}: with {form}; the DMDA has dof {dm.getDof()}")
    return sizes[0], dim


def _composed_vec(pc, name):
    """The Vec composed on the PC under ``name`` (PetscObjectCompose, from Python or C), or None."""
    v = pc.query(name)
    return v if v is None or isinstance(v, PETSc.Vec) else PETSc.Vec(v)


def composed_real_array(pc, name, n, who="the PC"):
    """The values of a Vec composed on the PC under ``name`` (n entries, real parts), or None."""
    v = _composed_vec(pc, name)
    if v is None:
        return None
    if v.getSize() != n:
        raise error(f"{who}: the Vec \"{name}\" composed on the PC has {v.getSize()} entries, expected {n} "
                    "(one per grid point, the whole grid on every rank)")
    return numpy.array(v.getArray(readonly=True)).real.astype(float)


def compose_wavenumber(pc, k):
    """pcplugins.set_wavenumber: attach a wavenumber field k(x) (one value per grid point in natural
    grid order, x fastest; the whole grid, on every rank) to the PC, as a sequential Vec composed
    under "wavenumber" (C codes can compose one themselves)."""
    v = PETSc.Vec().createWithArray(numpy.ascontiguousarray(k, dtype=PETSc.ScalarType).ravel().copy(),
                                    comm=PETSc.COMM_SELF)
    pc.compose("wavenumber", v)
    return v


def pc_matrix(pc, who="the PC"):
    """The matrix a PC is built from (its Pmat, else its Amat)."""
    A, P = pc.getOperators()
    M = P if P is not None and P.handle else A
    if M is None or not M.handle or M.getSize()[0] < 0:
        raise error(f"{who} has no operator (none was set, or PCReset/KSPReset released it): call "
                    "KSPSetOperators before KSPSetUp/KSPSolve")
    return M
