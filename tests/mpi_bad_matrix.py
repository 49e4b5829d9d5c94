"""Run under mpiexec by test_mpi.py: pcplugins.AMG on a distributed 1D Laplacian spoiled on the last
rank only (``negative``: a negative diagonal, ``nan``: a NaN entry). Every rank must stop with the
error, none may hang in a collective the others never reach.

    mpiexec -n P python tests/mpi_bad_matrix.py negative|nan
"""
import sys

import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

comm = PETSc.COMM_WORLD
n = 40
A = PETSc.Mat().createAIJ((n, n), nnz=3, comm=comm)
lo, hi = A.getOwnershipRange()
for i in range(lo, hi):
    A[i, i] = 2.0
    if i > 0:
        A[i, i - 1] = -1.0
    if i < n - 1:
        A[i, i + 1] = -1.0
if comm.getRank() == comm.getSize() - 1:
    if sys.argv[1] == "negative":
        A[hi - 1, hi - 1] = -1.0
    else:
        A[hi - 1, hi - 2] = float("nan")
A.assemble()
ksp = PETSc.KSP().create(comm=comm)
ksp.setOperators(A)
ksp.getPC().setType("python")
ksp.getPC().setPythonType("pcplugins.AMG")
ksp.setFromOptions()
b, x = A.createVecs()
b.set(1.0)
ksp.solve(b, x)
