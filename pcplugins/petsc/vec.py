"""Views of PETSc Vecs as arrays: CuPy on the GPU (no copy), NumPy on the host."""
import contextlib

import numpy
from petsc4py import PETSc

from .. import backend


def vec_is_cuda(vec):
    return "cuda" in vec.getType()


@contextlib.contextmanager
def vec_array(vec, mode="r"):
    """Yield the local part of ``vec`` as a 1-D array sharing its memory.

    ``mode`` is 'r' (read), 'w' (write) or 'rw'. CUDA Vecs give a CuPy array (DLPack, no copy);
    host Vecs a NumPy array. PCPYTHON's input vector is locked read-only: ask for 'r'.
    """
    if vec_is_cuda(vec):
        cupy = backend.cupy
        if cupy is None:
            raise RuntimeError("a CUDA Vec reached pcplugins but CuPy is not installed")
        dtype = numpy.dtype(PETSc.ScalarType)
        if dtype.kind != "c":
            yield cupy.from_dlpack(vec.toDLPack(mode))
            # DLPack views need no restore: PETSc's device array stays valid while the Vec lives,
            # and writes through it mark the device copy as the current one (toDLPack's mode).
            return
        # petsc4py's DLPack export refuses complex scalars: view the raw device pointer instead,
        # between VecCUDAGetArray[Read|Write] and its restore
        ptr = vec.getCUDAHandle(mode)
        try:
            n = vec.getLocalSize()
            mem = cupy.cuda.UnownedMemory(ptr, n * dtype.itemsize, vec)
            yield cupy.ndarray(n, dtype, cupy.cuda.MemoryPointer(mem, 0))
        finally:
            vec.restoreCUDAHandle(ptr, mode)
    else:
        with vec.getBuffer(readonly=(mode == "r")) as a:  # VecGetArray[Read] ... Restore
            yield a
