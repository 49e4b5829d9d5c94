"""Objects an application attaches to the PC (PetscObjectCompose): vertex coordinates for AMG's
auxiliary grid and rigid body modes (also through PETSc's PCSetCoordinates), a wavenumber field
for ShiftedLaplace."""
import ctypes
import math
import traceback

import numpy
from petsc4py import PETSc

from .. import backend
from . import mat, vec
from .dmda import pc_dm
from .errors import error
from .mat import pc_matrix

COMPOSED = "the coordinates given to the PC (PCSetCoordinates, pcplugins.set_coordinates or a Vec \"coordinates\")"


def amg_coordinates(pc, n, xp, bs=1):
    """Vertex coordinates for auxiliary-grid aggregation, as (``xp`` array n x dim, where from), or
    (None, why not). Sources in order: a Vec composed on the PC as "coordinates" (block size =
    dimension; PCSetCoordinates (accept_set_coordinates) and pcplugins.set_coordinates do it, and C
    codes can PetscObjectCompose it), then the
    coordinates of a DMDA attached to the PC (its index grid when it has none). A matrix of block
    size ``bs`` > 1 may have them one row a node (n / bs rows; a DMDA of ``bs`` dof has them so).
    A Vec's values go to ``xp`` straight from its array and are checked there (a host copy and
    check of millions of points would be a large part of a GPU setup)."""
    v = _composed_vec(pc, "coordinates")
    if v is not None:
        dim = v.getBlockSize()
        if dim not in (2, 3):
            raise error(f"pcplugins.AMG: the coordinates Vec composed on the PC has block size {dim}; "
                        "it must be the dimension, 2 or 3")
        rows = v.getLocalSize() // dim
        if rows * dim != v.getLocalSize() or (rows != n and (bs == 1 or rows * bs != n)):
            nodes = f" (or {n // bs}, one a node of the block size {bs})" if bs > 1 else ""
            raise error(f"pcplugins.AMG: the coordinates Vec has {v.getLocalSize()} entries; the matrix "
                        f"has {n} rows, so {dim}D coordinates need {n * dim}{nodes}")
        return _finite_coordinates(v, rows, dim, xp), COMPOSED
    dm = pc_dm(pc)
    if dm is not None and dm.getType() == "da":
        dim, dof = dm.getDim(), dm.getDof()
        if dof not in (1, bs) or math.prod(dm.getSizes()[:dim]) * dof != pc_matrix(pc).getSize()[0]:
            return None, "the PC's DMDA does not match the matrix (dof or size)"
        points = n // dof
        cv = dm.getCoordinates()
        if cv is not None and cv.handle and cv.getLocalSize() == points * dim:
            return _finite_coordinates(cv, points, dim, xp), "the coordinates of the PC's DMDA"
        # this rank's points (x fastest), as the DMDA orders the matrix's rows, made where they
        # are used (on the GPU, no host array of 3 values a point to copy up)
        ranges = dm.getRanges()[:dim][::-1]
        idx = xp.indices([e - s for s, e in ranges], dtype=numpy.float64).reshape(dim, -1)[::-1].T
        return xp.ascontiguousarray(idx + xp.asarray([float(s) for s, _ in ranges][::-1])), \
            "the index grid of the PC's DMDA"
    return None, "no coordinates (none composed on the PC, no DMDA)"


def near_null_space(M, xp):
    """The near null space attached to the matrix (MatSetNearNullSpace), this rank's rows as an
    ``xp`` array n x m (real), or None."""
    nsp = M.getNearNullSpace()
    if not nsp.handle:
        return None
    cols = [numpy.asarray(v.getArray(readonly=True)) for v in nsp.getVecs()]
    if nsp.hasConstant():
        cols.insert(0, numpy.ones(M.getLocalSize()[0]))
    if not cols:
        return None
    B = numpy.column_stack(cols)
    if numpy.iscomplexobj(B):
        if numpy.any(B.imag):
            raise error("pcplugins.AMG: the matrix's near null space (MatSetNearNullSpace) has complex vectors; "
                        "aggregation takes real ones (rigid body modes, constants)")
        B = B.real
    if not numpy.isfinite(B).all():
        raise error("pcplugins.AMG: the matrix's near null space (MatSetNearNullSpace) contains NaN or Inf")
    return backend.to_namespace(numpy.ascontiguousarray(B, dtype=numpy.float64), xp)


def _finite_coordinates(v, n, dim, xp):
    """The values of the coordinates Vec ``v`` as an n x dim float64 ``xp`` array (a copy): from
    a CUDA Vec's device array on the GPU (no host trip), else from its host array."""
    if vec.vec_is_cuda(v) and backend.is_gpu(xp):
        with vec.vec_array(v, "r") as a:
            c = a.real.reshape(n, dim).astype(numpy.float64)         # a copy (real parts: complex PETSc)
    else:
        c = numpy.asarray(v.getArray(readonly=True)).real.reshape(n, dim).astype(numpy.float64, copy=False)
        c = backend.upload(c) if backend.is_gpu(xp) else c.copy()
    if not backend.all_true(xp.isfinite(c)):
        raise error("pcplugins.AMG: the coordinates contain NaN or Inf")
    return c


def compose_coordinates(pc, coords):
    """Attach vertex coordinates (n x dim; under MPI those of this rank's rows) to the PC for
    pcplugins.AMG: a NumPy array as a host Vec, a CuPy array as a CUDA Vec (copied on the device;
    the setup then reads them where they are, as it reads a matrix already on the device)."""
    device = backend.array_module(coords) is not numpy
    c = coords if device else numpy.ascontiguousarray(coords, dtype=numpy.float64)
    if c.ndim != 2 or c.shape[1] not in (2, 3):
        raise error(f"pcplugins.set_coordinates: coordinates must be an n x 2 or n x 3 array, got shape {c.shape}")
    if device:
        v = PETSc.Vec().create(comm=PETSc.COMM_SELF)
        v.setSizes(c.size, bsize=c.shape[1])
        v.setType(PETSc.Vec.Type.SEQCUDA)
        with vec.vec_array(v, "w") as a:
            a[...] = c.ravel()
    else:
        v = PETSc.Vec().createWithArray(c.ravel().copy(), bsize=c.shape[1], comm=PETSc.COMM_SELF)
    pc.compose("coordinates", v)
    return v


def accept_set_coordinates(pc, on=True):
    """PETSc's PCSetCoordinates (GAMG's way of passing vertex coordinates; ksp ex55 uses it) calls
    the function composed on the PC as "PCSetCoordinates_C", and does nothing where there is none,
    as on any Python PC. pcplugins.AMG composes one (``on``; off at PCDestroy, after which the PC
    may take another type) that composes a copy of the coordinates as the Vec "coordinates", as
    pcplugins.set_coordinates does. Returns False where libpetsc cannot be loaded through ctypes."""
    lib = mat._petsc_lib()
    if lib is None:
        return False
    if not _SET_COORDINATES:            # one callback for every PC (PETSc passes the PC), kept for good
        pint = ctypes.c_int64 if numpy.dtype(PETSc.IntType).itemsize == 8 else ctypes.c_int32
        preal = ctypes.c_double if numpy.dtype(PETSc.RealType).itemsize == 8 else ctypes.c_float
        _SET_COORDINATES.append(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, pint, pint,
                                                 ctypes.POINTER(preal))(_set_coordinates))
    fn = ctypes.cast(_SET_COORDINATES[0], ctypes.c_void_p) if on else None
    return lib.PetscObjectComposeFunction_Private(pc.handle, b"PCSetCoordinates_C", fn) == 0


_SET_COORDINATES = []
_ERR_PYTHON = 101       # PETSC_ERR_PYTHON: what petsc4py returns for a Python exception


def _set_coordinates(pc, dim, nloc, coords):
    """PCSetCoordinates_C (accept_set_coordinates): ``nloc`` points of ``dim`` coordinates each,
    interlaced, in PETSc's array (freed by the caller after the call: copied here)."""
    try:
        n = max(dim, 0) * max(nloc, 0)
        values = numpy.ctypeslib.as_array(coords, (n,)).astype(numpy.float64) if n else numpy.zeros(0)
        v = PETSc.Vec().createSeq(n, bsize=max(dim, 1), comm=PETSc.COMM_SELF)
        v.setArray(values)
        return mat._petsc_lib().PetscObjectCompose(pc, b"coordinates", v.handle)
    except Exception:              # a callback from C: the traceback on stderr, PETSc's error code back
        traceback.print_exc()
        return _ERR_PYTHON


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

