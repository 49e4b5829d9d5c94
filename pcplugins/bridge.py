"""The only module that touches PETSc: options, DMDA and Mat introspection, Vec views, log events,
-help and -ksp_view output, and errors raised as PETSc errors.

Everything numerical is delegated to the array core (grid, stencil, multigrid, ...), which never
sees a PETSc object.
"""
import time

import numpy
from petsc4py import PETSc

from . import backend, grid, stencil


class PCPluginError(RuntimeError):
    """A user-facing error; petsc4py turns an exception in a Python PC into a PETSc error."""


def error(msg):
    return PCPluginError(msg)


# -- options -------------------------------------------------------------------------------------

class Option:
    def __init__(self, name, kind, default, help, choices=None):
        self.name, self.kind, self.default, self.help, self.choices = name, kind, default, help, choices


def read_options(pc, table, title):
    """Read ``table`` (a list of Option) from the options database under the PC's prefix;
    print them for -help; reject unknown values with a message naming the option."""
    prefix = pc.getOptionsPrefix() or ""
    opts = PETSc.Options(prefix)
    if PETSc.Options().hasName("help"):
        lines = [f"{title} options -------------------------------------------------"]
        for o in table:
            d = "" if o.default is None else o.default
            ch = f" (choose one of) {' '.join(o.choices)}" if o.choices else ""
            lines.append(f"  -{prefix}{o.name} <{d}>: {o.help}{ch}")
        PETSc.Sys.Print("\n".join(lines), comm=pc.getComm())
    values = {}
    for o in table:
        if not opts.hasName(o.name):
            values[o.name.split("_", 2)[-1]] = o.default
            continue
        try:
            v = {"int": opts.getInt, "real": opts.getReal, "bool": opts.getBool,
                 "str": opts.getString}[o.kind](o.name)
        except (PETSc.Error, KeyError, ValueError, TypeError):
            raise error(f"option -{prefix}{o.name}: cannot read the value as {o.kind}") from None
        if o.choices and v is not None:
            v = str(v).lower()
            if v not in o.choices:
                raise error(f"option -{prefix}{o.name}: unknown value '{v}'; "
                            f"expected one of {', '.join(o.choices)}")
        values[o.name.split("_", 2)[-1]] = v
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

def dmda_box(pc):
    """The Box of this rank's part of the PC's DMDA, in array-axis order (z, y, x)."""
    dm = pc.getDM()
    if dm is None or not dm.handle:
        raise error("pcplugins.GMG needs a DMDA: call KSPSetDM (ksp.setDM(da)) before KSPSetUp; "
                    "for operators without a grid use pcplugins.AMG")
    if dm.getType() != "da":
        raise error(f"pcplugins.GMG needs a DMDA, but the DM attached to the PC is of type '{dm.getType()}'")
    if dm.getDof() != 1:
        raise error(f"pcplugins.GMG supports scalar problems (DMDA dof 1), the DMDA has dof {dm.getDof()}")
    dim = dm.getDim()
    if dim not in (2, 3):
        raise error(f"pcplugins.GMG supports 2D and 3D DMDAs, this one is {dim}D")
    if any(b != PETSc.DM.BoundaryType.NONE for b in dm.getBoundaryType()[:dim]):
        raise error("pcplugins.GMG does not support periodic or ghosted DMDA boundaries yet")
    if pc.getComm().getSize() > 1:
        raise error("pcplugins.GMG runs on one MPI rank in this version (parallel runs: issue 7)")
    sizes = dm.getSizes()[:dim][::-1]
    ranges = dm.getRanges()[:dim][::-1]
    return dm, grid.Box(sizes, [r[0] for r in ranges], [r[1] - r[0] for r in ranges])


# -- the operator ---------------------------------------------------------------------------------

def operator_matrix(pc, box):
    A, P = pc.getOperators()
    M = P if P is not None and P.handle else A
    m, n = M.getSize()
    if m != n:
        raise error(f"the operator must be square, it is {m} x {n}")
    if m != box.global_size:
        gs = "x".join(str(v) for v in reversed(box.global_shape))
        raise error(f"the operator has {m} rows but the DMDA grid {gs} has {box.global_size} points")
    return M


def is_aij(M):
    return "aij" in M.getType()


def stencil_from_aij(M, box, xp, dtype):
    """Offsets present in an assembled DMDA operator and their coefficient arrays on this rank's
    box (serial: PETSc's ordering is the natural one). The index work runs in ``xp``: on the GPU
    for a 17M-row matrix it takes a fraction of a second instead of the host's many seconds."""
    if not is_aij(M):
        raise error(f"pcplugins.GMG reads assembled AIJ matrices; the operator is '{M.getType()}' "
                    "(declare -pc_gmg_operator laplacian for a matrix-free operator)")
    indptr, cols, vals = (xp.asarray(a) for a in M.getValuesCSR())
    d = box.dim
    nrows = box.size
    if not bool(xp.all(xp.isfinite(vals))):
        raise error("the operator has NaN or Inf entries")
    rows = xp.searchsorted(indptr, xp.arange(cols.size), side="right") - 1
    slot = xp.zeros(cols.size, dtype=numpy.int64)
    rest_r, rest_c = rows, cols.astype(numpy.int64)
    for a in reversed(range(d)):          # unravel rows (local box) and columns (global grid)
        n, m = box.shape[a], box.global_shape[a]
        off = rest_c % m - (rest_r % n + box.start[a])
        rest_r, rest_c = rest_r // n, rest_c // m
        if off.size and int(xp.abs(off).max()) > 1:
            raise error("the operator couples grid points more than one apart: pcplugins.GMG "
                        "supports stencil width 1 (5/7/9/27-point stencils)")
        slot += (off + 1) * 3 ** (d - 1 - a)
    present = numpy.flatnonzero(backend.to_host(xp.bincount(slot, minlength=3 ** d)))
    present = sorted(set(present.tolist()) | {(3 ** d - 1) // 2})     # the diagonal always
    compact = numpy.zeros(3 ** d, dtype=numpy.int64)
    compact[present] = numpy.arange(len(present))
    coefs = xp.zeros((len(present), nrows), dtype=dtype)
    coefs[xp.asarray(compact)[slot], rows] = vals       # an AIJ row holds each column once
    offsets = stencil.box_offsets(d)
    return [offsets[k] for k in present], [c.reshape(box.shape) for c in coefs]


def layer_mask(box, xp=numpy):
    """True on the outer layer of the global grid (over this rank's box)."""
    on_layer = numpy.zeros(box.shape, dtype=bool)
    for a in range(box.dim):
        g = numpy.arange(box.start[a], box.start[a] + box.shape[a])
        edge = (g == 0) | (g == box.global_shape[a] - 1)
        sh = [1] * box.dim
        sh[a] = -1
        on_layer |= edge.reshape(sh)
    return xp.asarray(on_layer)


def dirichlet_layer(box, offsets, coefs):
    """True when every row on the outer layer of the global grid is an identity-like row (only a
    diagonal entry): PETSc's DMDA tutorial convention (ex45), where the boundary values are kept
    as unknowns with scaled identity rows."""
    if any(m < 3 for m in box.global_shape):
        return False
    on_layer = layer_mask(box, backend.array_module(coefs[0]))
    if not bool(on_layer.any()):
        return False
    for o, c in zip(offsets, coefs):
        if any(o):
            if bool((c[on_layer] != 0).any()):
                return False
        elif bool((c[on_layer] <= 0).any()):
            return False
    return True


def sample_laplacian(M, box):
    """For a declared Laplacian: axis weights and boundary convention from two rows of an AIJ
    matrix (row 0 and a central row), or the finite-difference -Laplacian with h = 1/(m+1) for a
    matrix-free operator."""
    d = box.dim
    if M is not None and is_aij(M):
        c0, v0 = M.getRow(0)
        layer = len(c0) == 1
        centre = tuple(m // 2 for m in box.global_shape)
        row = int(numpy.ravel_multi_index(centre, box.global_shape))
        cols, vals = M.getRow(row)
        w = [None] * d
        strides = [int(numpy.prod(box.global_shape[a + 1:])) for a in range(d)]
        for c, v in zip(cols, vals):
            delta = int(c) - row
            for a in range(d):
                if abs(delta) == strides[a]:
                    w[a] = float(v)
        if any(v is None for v in w):
            raise error("-pc_gmg_operator laplacian: the matrix's central row is not a 5/7-point stencil")
        return w, layer
    shape = box.global_shape
    return [-float((m + 1) ** 2) for m in shape], False


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


def vec_is_cuda(v):
    return backend.vec_is_cuda(v)


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


def cuda_device_of(vec):
    """The CUDA device PETSc put ``vec`` on (None for host Vecs)."""
    if not backend.vec_is_cuda(vec):
        return None
    return backend.cupy.from_dlpack(vec.toDLPack("r")).device.id
