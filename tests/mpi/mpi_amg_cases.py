"""Run under mpiexec by test_mpi.py: pcplugins.AMG on a distributed 1D Laplacian.

    mpiexec -n P python tests/mpi/mpi_amg_cases.py negative|nan|resetup|floating [nsmooths gather_size]

``negative``, ``nan``: the matrix spoiled on the last rank only (a negative diagonal, a NaN entry);
every rank must stop with the error, none may hang in a collective the others never reach.
``resetup``: three solves with new diagonal values (each sets the PC up again), then PCReset;
prints per solve the iterations and how many neighbourhood communicators are held, then the
count after the reset (the old hierarchy's must be freed, not accumulate).
``floating``: problems.floating_part(64) (a floating Neumann chain on the last rank) under cg to
1e-8, -pc_amg_agg_nsmooths and -pc_amg_gather_size from the arguments; prints the iterations and
the true relative residual.
"""
import os
import sys

import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

comm = PETSc.COMM_WORLD
case = sys.argv[1]
if case == "floating":
    import numpy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
    from problems import floating_part
    F, z = floating_part(64)
    A = PETSc.Mat().createAIJ(F.shape, nnz=5, comm=comm)
    lo, hi = A.getOwnershipRange()
    F = F[lo:hi]
    A.setValuesCSR(F.indptr, F.indices, F.data)
    A.assemble()
    f = numpy.random.default_rng(1).random(z.size)
    f -= (z @ f) * z
    b, x = A.createVecs()
    b.setArray(f[lo:hi])
    options = PETSc.Options()
    options["pc_amg_agg_nsmooths"], options["pc_amg_gather_size"] = sys.argv[2], sys.argv[3]
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.setTolerances(rtol=1e-8)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.getPC().setType("python")
    ksp.getPC().setPythonType("pcplugins.AMG")
    ksp.setFromOptions()
    ksp.solve(b, x)
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    PETSc.Sys.Print(f"floating: {ksp.getIterationNumber()} iterations, residual {r.norm() / b.norm():.3e}")
    sys.exit(0)
n = 200 if case == "resetup" else 40
A = PETSc.Mat().createAIJ((n, n), nnz=3, comm=comm)
lo, hi = A.getOwnershipRange()


def fill(diagonal):
    for i in range(lo, hi):
        A[i, i] = diagonal
        if i > 0:
            A[i, i - 1] = -1.0
        if i < n - 1:
            A[i, i + 1] = -1.0
    if case != "resetup" and comm.getRank() == comm.getSize() - 1:
        if case == "negative":
            A[hi - 1, hi - 1] = -1.0
        else:
            A[hi - 1, hi - 2] = float("nan")
    A.assemble()


fill(2.0)
ksp = PETSc.KSP().create(comm=comm)
ksp.setOperators(A)
ksp.setType("fcg")
pc = ksp.getPC()
pc.setType("python")
pc.setPythonType("pcplugins.AMG")
options = PETSc.Options()
options["pc_amg_gather_size"] = 0
options["pc_amg_coarse_size"] = 5
ksp.setFromOptions()
b, x = A.createVecs()
b.set(1.0)
for diagonal in ((2.0, 2.5, 3.0) if case == "resetup" else (2.0,)):
    fill(diagonal)
    ksp.setOperators(A)
    ksp.solve(b, x)
    PETSc.Sys.Print(f"solve: {ksp.getIterationNumber()} iterations, reason {int(ksp.getConvergedReason())}, "
                    f"{len(pc.getPythonContext().comm._neighbourhoods)} communicators")
pc.reset()
PETSc.Sys.Print(f"after reset: {len(pc.getPythonContext().comm._neighbourhoods)} communicators")
