"""The PC's matrix: which one, its checks, and its CSR arrays, through petsc4py or, for what
petsc4py does not bind (device CSR, the blocks of an MPIAIJ matrix), through libpetsc by ctypes."""
import numpy
from petsc4py import PETSc

from .. import backend
from ..core import grid
from .errors import error


def pc_matrix(pc, who="the PC"):
    """The matrix a PC is built from (its Pmat, else its Amat)."""
    A, P = pc.getOperators()
    M = P if P is not None and P.handle else A
    if M is None or not M.handle or M.getSize()[0] < 0:
        raise error(f"{who} has no operator (none was set, or PCReset/KSPReset released it): call "
                    "KSPSetOperators before KSPSetUp/KSPSolve")
    return M


def operator_matrix(pc, box, who="pcplugins.GMG"):
    M = pc_matrix(pc, who)
    m, n = M.getSize()
    if m != n:
        raise error(f"{who}: the operator must be square, it is {m} x {n}")
    if m != box.global_size:
        raise error(f"{who}: the operator has {m} rows but the DMDA grid {grid.shape_name(box)} has "
                    f"{box.global_size} points; an operator on part of the grid (a reduced-space SNESVI's "
                    "inactive points, say) takes pcplugins.AMG")
    return M


def is_aij(M):
    """Whether M is of PETSc's AIJ kinds (seqaij, mpiaij, aijcusparse, aijperm, ...), whose rows
    are the CSR the PCs read: "aij" in the name alone would take BAIJ and SBAIJ too."""
    return M.getType().startswith(("seqaij", "mpiaij"))


# assembled kinds MatConvert turns into AIJ by copying their entries (a shell or Python matrix
# would be applied to every unit vector: refused instead)
CONVERTIBLE = ("baij", "sell", "dense", "densecuda", "nest")


def convertible(M):
    """Whether M is of a kind other than AIJ that MatConvert copies into AIJ (CONVERTIBLE)."""
    return not is_aij(M) and M.getType().endswith(CONVERTIBLE)


def as_aij(pc, M, who):
    """(M, "") where M is AIJ, else (M converted to AIJ by MatConvert, a note for -ksp_view): BAIJ,
    SBAIJ (both triangles then), SELL, dense, nest; a named error for other kinds. The copy is
    composed on the PC, so the arrays read from it live as long as the hierarchy built on them (the
    next setup replaces it)."""
    kind = M.getType()
    if is_aij(M):
        return M, ""
    if not convertible(M):
        raise error(f"{who} needs an assembled matrix: AIJ (seqaij, mpiaij, aijcusparse) or a kind PETSc "
                    f"converts to it ({', '.join(CONVERTIBLE)}); the operator is of type '{kind}'")
    if kind == "nest":            # MatConvert reads the blocks by MatGetRow
        rows, cols = M.getNestSize()
        for i, j in ((i, j) for i in range(rows) for j in range(cols)):
            B = M.getNestSubMatrix(i, j)
            if B and not (is_aij(B) or B.getType().endswith(CONVERTIBLE[:-1])):
                raise error(f"{who} reads a nest matrix's blocks, and block ({i}, {j}) is of type "
                            f"'{B.getType()}', whose entries cannot be read; give the KSP an assembled "
                            "preconditioning matrix: KSPSetOperators(ksp, A, P)")
    A = M.convert(PETSc.Mat.Type.AIJ, PETSc.Mat())      # a new matrix: without ``out`` petsc4py converts M itself
    pc.compose("pcplugins_aij", A)
    return A, f", converted from {kind} to AIJ (MatConvert: a copy at each setup)"


def scalar_is_complex():
    return numpy.dtype(PETSc.ScalarType).kind == "c"


def operator_is_symmetric(pc, declared):
    """Whether the PC's operator is symmetric: a declared Laplacian is; an AIJ matrix is asked
    (MatIsSymmetric, collective, to a tolerance relative to its largest entry); any other
    matrix is taken as not symmetric."""
    if declared:
        return True
    M = pc_matrix(pc)
    if "sbaij" in M.getType():
        return True
    if not is_aij(M):
        return False
    tol = 1e-12 * max(M.norm(PETSc.NormType.INFINITY), 1e-300)
    if M.getComm().getSize() == 1:
        return bool(M.isSymmetric(tol))
    # MatIsSymmetric of an MPIAIJ matrix answers each rank for the pairs it compares, unreduced
    # (ksp ex53's one asymmetric pair: True on one rank, False on the other, and a collective
    # then run by some ranks only): ||A - A^T|| instead, the same on every rank
    D = M.transpose(PETSc.Mat())
    D.axpy(-1.0, M, PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN)
    symmetric = D.norm(PETSc.NormType.INFINITY) <= tol
    D.destroy()
    return bool(symmetric)


def aij_csr(pc, xp, comm=None):
    """The PC's operator on ``xp`` and where it was read from; checked: square, AIJ, real. On one
    rank a CSR matrix (sparse.csr): aijcusparse matrices are read on the device (``_device_csr``)
    when ``xp`` is CuPy, without a trip through the host. On several ranks (``comm``, a CSRComm)
    this rank's rows as a distributed.Rows, from PETSc's two blocks (``_mpiaij_rows``), else
    through MatGetValuesCSR."""
    from ..core import distributed, sparse
    M = pc_matrix(pc)
    m, n = M.getSize()
    if m != n:
        raise error(f"pcplugins.AMG: the operator must be square, it is {m} x {n}")
    M, converted = as_aij(pc, M, "pcplugins.AMG")
    parallel = M.getComm().getSize() > 1
    if parallel and tuple(M.getOwnershipRange()) != tuple(M.getOwnershipRangeColumn()):
        raise error("pcplugins.AMG: the matrix's column layout must match its row layout "
                    f"(rows {M.getOwnershipRange()}, columns {M.getOwnershipRangeColumn()} on this rank)")
    if parallel and backend.is_gpu(xp) and comm.allmin(M.getLocalSize()[0]) == 0:
        # the host path takes empty ranks (tests/petsc/test_amg.py); the device kernels' launches
        # have not been run with empty arrays
        raise error("pcplugins.AMG: a rank owns no rows of the matrix, which the GPU path does not take; use "
                    "fewer ranks, a layout that gives every rank rows, or -pc_amg_device cpu")
    device = backend.is_gpu(xp) and "cusparse" in M.getType()
    if parallel:
        rows = _mpiaij_rows(M, xp, comm, device)
        if rows is not None:
            where = "diagonal block's device CSR" if device else "host CSR"
            return rows, f"PETSc's diagonal and off-diagonal blocks (MatMPIAIJGetSeqAIJ, {where}), rows " \
                         f"distributed over {comm.size} ranks{converted}"
    csr = _device_csr(M.handle, M.getLocalSize()[0], M) if device and not parallel else None
    source = "device CSR (MatSeqAIJGetCSRAndMemType, no host copy)"
    if csr is None:
        csr = M.getValuesCSR()
        source = "MatGetValuesCSR (host)"
    indptr, indices, data = csr
    if parallel:
        return distributed.Rows.from_csr(indptr, indices, data, comm, xp), \
            source + f", rows distributed over {comm.size} ranks{converted}"
    return sparse.csr(indptr, indices, data, n, xp, numpy.dtype(PETSc.ScalarType)), source + converted


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
            lib.PetscObjectComposeFunction_Private.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            lib.PetscObjectCompose.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            for f in ("MatGetRowIJ", "MatRestoreRowIJ", "MatSeqAIJGetArrayRead", "MatSeqAIJRestoreArrayRead"):
                getattr(lib, f)
            _PETSC_LIB = lib
        except (OSError, AttributeError, KeyError):
            _PETSC_LIB = False
    return _PETSC_LIB or None


def _petsc_int():
    import ctypes
    return ctypes.c_int64 if numpy.dtype(PETSc.IntType).itemsize == 8 else ctypes.c_int32


def _device_csr(handle, nrows, owner, copy=True):
    """(indptr, indices, values) of the seqaijcusparse matrix ``handle`` (``nrows`` rows) as CuPy
    copies of PETSc's device CSR, through MatSeqAIJGetCSRAndMemType. None when unavailable.
    ``owner``: the petsc4py object that keeps the matrix alive while it is read. ``copy=False``:
    views of PETSc's arrays instead, for a reader done with them before the matrix changes."""
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
        a = cupy.ndarray((count,), dtype, cupy.cuda.MemoryPointer(mem, 0))
        return a.copy() if copy else a

    indptr = view(ii, nrows + 1, it)
    nnz = int(indptr[-1])
    return indptr, view(jj, nnz, it), view(aa, nnz, st)


def _mpiaij_parts(M, device=False, entries=False):
    """PETSc's two blocks of this rank's rows of an mpiaij(cusparse) matrix (MatMPIAIJGetSeqAIJ):
    the diagonal block (indptr, local column indices, values), from its device CSR as CuPy arrays
    when ``device`` and it is there, else host copies; the off-diagonal block as host copies, its
    columns indexing ``colmap`` (the sorted global indices, int64). None when unavailable (not an
    MPIAIJ matrix, or libpetsc not reachable by ctypes). (The device CSR of the off-diagonal block
    is stored with compressed rows, so it is read on the host; its rows are the few on the rank's
    boundary.) ``entries``: the off-diagonal block as (rows, columns, values) of its entries
    (``_host_csr``)."""
    import ctypes
    lib = _petsc_lib()
    if lib is None or not M.getType().startswith("mpiaij"):
        return None
    pint = _petsc_int()
    n = M.getLocalSize()[0]
    Ad, Ao, colmap = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    m, nghost = pint(), pint()
    if (lib.MatMPIAIJGetSeqAIJ(ctypes.c_void_p(M.handle), ctypes.byref(Ad), ctypes.byref(Ao), ctypes.byref(colmap))
            or lib.MatGetSize(Ao, ctypes.byref(m), ctypes.byref(nghost))):
        return None
    own = _device_csr(Ad.value, n, M) if device and "cusparse" in M.getType() else None
    if own is None:
        own = _host_csr(lib, Ad, n)
    ghost = _host_csr(lib, Ao, n, entries)
    if own is None or ghost is None:
        return None
    cmap = numpy.zeros(0, numpy.int64)
    if nghost.value:
        cmap = numpy.ctypeslib.as_array(ctypes.cast(colmap, ctypes.POINTER(pint)), shape=(nghost.value,))
        cmap = cmap.astype(numpy.int64)
    return own, ghost, cmap


def mpiaij_blocks(M, xp):
    """This rank's rows of an mpiaij(cusparse) matrix as PETSc stores them, on ``xp``: the diagonal
    block (indptr, local column indices, values), read from its device CSR when ``xp`` is CuPy and
    the matrix is on the GPU, and the off-diagonal block's stored entries (local rows, global
    columns, values): only the rows on the rank's boundary have any, so its row pointer, as long
    as the rank's rows, stays on the host. None when unavailable (``_mpiaij_parts``)."""
    parts = _mpiaij_parts(M, backend.is_gpu(xp), entries=True)
    if parts is None:
        return None
    own, (rows, gj, gv), cmap = parts
    to = backend.to_namespace
    return tuple(to(a, xp) for a in own), (to(rows, xp), to(cmap[gj], xp), to(gv, xp))


def _mpiaij_rows(M, xp, comm, device=False):
    """This rank's rows of an mpiaij(cusparse) matrix as a distributed.Rows, from PETSc's two
    blocks (``_mpiaij_parts``): the diagonal block read on the device with ``device`` (``xp`` CuPy,
    the matrix aijcusparse), the off-diagonal one from the host as its entries (a row pointer as
    long as the rank's rows would be most of the copy), made a CSR matrix on ``xp``. None when
    unavailable; every rank then takes the other path."""
    from ..core import distributed, sparse
    parts = _mpiaij_parts(M, device, entries=True)
    if comm.allmin(int(parts is not None)) == 0:
        return None
    (i, j, v), (gi, gj, gv), ghosts = parts
    n = M.getLocalSize()[0]
    to = backend.to_namespace
    real_or_complex = lambda v: v.astype(numpy.result_type(v.dtype, numpy.float64))    # noqa: E731
    own = sparse.module(xp).csr_matrix((to(real_or_complex(v), xp), to(j.astype(numpy.int32), xp),
                                        to(i.astype(numpy.int32), xp)), shape=(n, n))
    ghost = distributed.csr_of_triplets(real_or_complex(gv), gi, gj, (n, len(ghosts)), xp)
    return distributed.Rows(own, ghost, ghosts, distributed.starts_of(n, comm), comm, xp)


def _host_csr(lib, B, n, entries=False):
    """Copies of the host CSR arrays of the seqaij matrix handle ``B`` (n rows), or None. With
    ``entries`` the row of each entry in place of the row pointer, taken from PETSc's own (for an
    off-diagonal block with entries in a few of its rows only, a pass over it, not a copy)."""
    import ctypes
    pint = _petsc_int()
    rows, ia, ja, done = pint(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
    aa = ctypes.c_void_p()
    args = (B, pint(0), ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(rows), ctypes.byref(ia), ctypes.byref(ja),
            ctypes.byref(done))
    if lib.MatGetRowIJ(*args) or not done.value or rows.value != n:
        return None
    try:
        i = numpy.ctypeslib.as_array(ctypes.cast(ia, ctypes.POINTER(pint)), shape=(n + 1,))
        if entries:
            filled = numpy.flatnonzero(i[1:] != i[:-1])
            i = numpy.repeat(filled, i[filled + 1] - i[filled])
            nnz = i.size
        else:
            i = i.copy()
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

