"""Run under mpiexec by test_mpi.py: solve one model problem and save (on rank 0) the solution in
natural ordering, the iteration count and the converged reason.

    mpiexec -n P python tests/mpi_solve.py OUT.npz n dim convention jump [PETSc options]
"""
import sys

import petsc4py

out, n, dim, convention, jump = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
petsc4py.init([sys.argv[0]] + sys.argv[6:])
from petsc4py import PETSc  # noqa: E402

import numpy  # noqa: E402

from conftest import petsc_solve  # noqa: E402  (tests/, beside this script; adds examples/ to the path)
from problems import natural_array, poisson_system  # noqa: E402

da, A, b = poisson_system(n, dim, convention, jump=jump)
# pcplugins.GMG unless the options choose the PC (-pc_type bjacobi with pcplugins.AMG blocks)
gmg = "-pc_type" not in sys.argv
ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG" if gmg else None, rtol=1e-8, max_it=200)
u = natural_array(da, x)
levels = replicated = 0
if gmg:
    ctx = ksp.getPC().getPythonContext()
    levels, replicated = len(ctx.mg.levels), sum(lev.replicated for lev in ctx.mg.levels)
if PETSc.COMM_WORLD.getRank() == 0:
    numpy.savez(out, u=u, its=ksp.getIterationNumber(), reason=int(ksp.getConvergedReason()),
                levels=levels, replicated=replicated)
