"""The GPU PETSc chose for this rank's vectors."""
from petsc4py import PETSc

from .. import backend
from .vec import vec_array


def use_petsc_device(M):
    """Make CuPy work on the GPU PETSc chose for this rank's vectors (PETSc spreads ranks over
    the node's GPUs, CuPy would start on device 0). Returns the device id."""
    if "cuda" in (M.getVecType() or "") or "cusparse" in M.getType():
        # a one-entry CUDA Vec says where PETSc allocates (no full-size Vec to malloc)
        x = PETSc.Vec().create(PETSc.COMM_SELF)
        x.setSizes(1)
        x.setType("cuda")
        with vec_array(x, "r") as a:
            dev = a.device.id
        x.destroy()
    else:                              # host vectors with -pc_gmg_device gpu: PETSc's rule
        dev = M.getComm().getRank() % backend.cupy.cuda.runtime.getDeviceCount()
    backend.cupy.cuda.Device(dev).use()
    return dev

