"""What every pcplugins PC shares with PETSc: failure reasons and -ksp_view output."""
from petsc4py import PETSc


def set_failed(pc, failed):
    if failed:
        pc.setFailedReason(PETSc.PC.FailedReason.SUBPC_ERROR)


def view_lines(viewer, lines):
    if viewer is None:
        viewer = PETSc.Viewer.STDOUT()
    if viewer.getType() != "ascii":
        return
    viewer.pushASCIITab()
    for ln in lines:
        viewer.printfASCII(ln + "\n")
    viewer.popASCIITab()

