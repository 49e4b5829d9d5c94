"""Run under mpiexec by test_mpi.py: PCApplyTranspose of pcplugins.AMG on several ranks.

    mpiexec -n P python tests/mpi/mpi_transpose.py nx ny|ex53 n [PETSc options]

problems.convection_box((nx, ny), cell Peclet 3), or ksp ex53's matrix of n rows (one asymmetric
pair, a_{0, n-1}, its two rows on the first and the last rank), split by PETSc's rows;
``-test_lone_rows``: four grid lines of the box made rows of their diagonal alone. Prints
the largest difference between PCApplyTranspose's columns and the transpose of PCApply's (both
built column by column, gathered on rank 0), relative to the largest entry, and how far B is from
B^T (``matrix: difference D asymmetry S levels L``); then KSPSolveTranspose's iterations and the
true relative residual of A^T x = b (``solve: N iterations, residual R``).
"""
import os
import sys

import numpy
import petsc4py

petsc4py.init(sys.argv[3:])
from petsc4py import PETSc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "examples"), os.path.join(HERE, "..")]
import meshes  # noqa: E402
from conftest import pc_matrices  # noqa: E402
from problems import convection_box, ex53_matrix  # noqa: E402

comm = PETSc.COMM_WORLD
if sys.argv[1] == "ex53":
    A = ex53_matrix(int(sys.argv[2]))
else:
    A = convection_box((int(sys.argv[1]), int(sys.argv[2])), 3.0,
                       complex_part=numpy.dtype(PETSc.ScalarType).kind == "c")
n = A.shape[0]
if PETSc.Options().getBool("test_lone_rows", False):
    # grid lines y = 0, 4, ny / 2 and the last made lone rows (their diagonal alone), the others
    # still coupled to them: lone unknowns among other ranks' ghost columns (rows.py)
    nx, ny = int(sys.argv[1]), int(sys.argv[2])
    y = numpy.arange(n) // nx
    lone = numpy.isin(y, [0, 4, ny // 2, ny - 1])
    A = (A - A.multiply(lone[:, None]) + A.multiply(numpy.diag(lone).astype(float) * 1.0)).tocsr()
    A.eliminate_zeros()
M = meshes.petsc_matrix(A, comm=comm)          # -mat_type from the options, aij by default
ksp = PETSc.KSP().create(comm=comm)
ksp.setOperators(M)
ksp.setType("gmres")
ksp.getPC().setType("python")
ksp.getPC().setPythonType("pcplugins.AMG")
ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
ksp.setTolerances(rtol=1e-8, max_it=200)
ksp.setFromOptions()
ksp.setUp()
pc = ksp.getPC()
x, y = M.createVecs()
lo, hi = x.getOwnershipRange()
if n <= 400:
    B, T = (numpy.concatenate(comm.tompi4py().allgather(X)) for X in pc_matrices(pc))
    scale = abs(B).max()
    PETSc.Sys.Print(f"matrix: difference {abs(T - B.T).max() / scale:.3e} asymmetry {abs(B - B.T).max() / scale:.3e} "
                    f"levels {len(pc.getPythonContext().mg.levels)}")
rhs = numpy.random.default_rng(4).random(n)
b = x.duplicate()
b.setArray(rhs[lo:hi])
x.set(0.0)
ksp.solveTranspose(b, x)
xs = numpy.concatenate(comm.tompi4py().allgather(x.getArray()))
res = numpy.linalg.norm(rhs - A.T @ xs) / numpy.linalg.norm(rhs)
PETSc.Sys.Print(f"solve: {ksp.getIterationNumber()} iterations, residual {res:.3e}")
