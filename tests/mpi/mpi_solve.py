"""Run under mpiexec by test_mpi.py: solve one model problem and save (on rank 0) the solution in
natural ordering, the iteration count and the converged reason.

    mpiexec -n P python tests/mpi/mpi_solve.py OUT.npz n|NXxNYxNZ dim convention jump [PETSc options]

Poisson (poisson_system) with CG and pcplugins.GMG (``convention`` periodic: the interior
convention, periodic along every axis; periodic_x: along x only); with ``convention`` convection, upwind
convection-diffusion at cell Peclet number ``jump`` (convection_system) with GMRES and
pcplugins.GMG (or the PC the options choose); with ``convention`` neumann_vertex or neumann_cell,
the pure Neumann Laplacian (neumann_system) with CG and pcplugins.GMG; or with ``convention``
helmholtz MP1 on (n + 1)^dim points with k = ``jump`` (helmholtz_system) with right-preconditioned
Bi-CGSTAB and pcplugins.ShiftedLaplace; with ``convention`` rowcoef, PETSc's ksp ex29 rows with rho
= ``jump`` (row_coefficient_system), with GMRES and pcplugins.GMG (or the PC the options choose);
with ``convention`` mirrored, ts ex15's Neumann rows (neumann_rows_system, shift ``jump``), likewise.
"""
import os
import sys

import petsc4py

out, n, dim, convention, jump = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
n = tuple(int(m) for m in n.split("x")) if "x" in n else int(n)      # "33x33x7": points along x, y, z
petsc4py.init([sys.argv[0]] + sys.argv[6:])
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from conftest import amg_galerkin_error, petsc_solve  # noqa: E402  (tests/conftest.py; adds examples/ to the path)
from problems import (  # noqa: E402
    convection_system,
    helmholtz_system,
    natural_array,
    neumann_rows_system,
    neumann_system,
    poisson_system,
    row_coefficient_system,
)

# -test_pair_min_size N: relax_pair's sweeps on levels of N points or more (fused.PAIR_MIN_SIZE),
# so that small grids take the distributed sweep's path (the faces between the ranks first)
if PETSc.Options().getInt("test_pair_min_size", -1) >= 0:
    from pcplugins.core import fused
    fused.PAIR_MIN_SIZE = PETSc.Options().getInt("test_pair_min_size")
# pcplugins.GMG / ShiftedLaplace unless the options choose the PC (bjacobi with pcplugins.AMG blocks)
mg = "-pc_type" not in sys.argv
if convention == "helmholtz":
    da, A, b = helmholtz_system(n, jump, dim=dim)
    ksp, x = petsc_solve(da, A, b, {"pc_sl_k": jump, "ksp_pc_side": "right"}, "bcgs",
                         pc="pcplugins.ShiftedLaplace", rtol=1e-6, max_it=200)
elif convention == "convection":
    da, A, b = convection_system(n, dim, jump)
    ksp, x = petsc_solve(da, A, b, None, "gmres", pc="pcplugins.GMG" if mg else None, rtol=1e-8, max_it=200)
elif convention == "rowcoef":               # ksp ex29's rows, -rho = jump
    da, A, b = row_coefficient_system(n, dim, jump)
    ksp, x = petsc_solve(da, A, b, None, "gmres", pc="pcplugins.GMG" if mg else None, rtol=1e-8, max_it=200)
elif convention == "mirrored":              # ts ex15's Neumann rows at scale 1, the interior's 1/h^2; shift = jump
    da, A, b = neumann_rows_system(n, dim, jump)
    ksp, x = petsc_solve(da, A, b, None, "gmres", pc="pcplugins.GMG" if mg else None, rtol=1e-8, max_it=200)
elif convention.startswith("neumann"):      # neumann_vertex, neumann_cell: the null space attached
    da, A, b = neumann_system(n, dim, convention.split("_")[1])
    ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", rtol=1e-8, max_it=200)
elif convention.startswith("periodic"):
    da, A, b = poisson_system(n, dim, "interior", jump=jump,
                              periodic=[convention == "periodic" or a == 0 for a in range(dim)])
    ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", rtol=1e-8, max_it=200)
else:
    da, A, b = poisson_system(n, dim, convention, jump=jump)
    ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG" if mg else None, rtol=1e-8, max_it=200)
if PETSc.Options().getBool("test_negate", False):     # the same system negated (negative definite)
    A.scale(-1.0)
    b.scale(-1.0)
    ksp.solve(b, x)
u = natural_array(da, x)
levels = replicated = axis_levels = 0
galerkin_error = -1.0
transport = graph = view = ""
pc = ksp.getPC()
if mg:
    ctx = pc.getPythonContext()
    levels, replicated = len(ctx.mg.levels), sum(getattr(lev, "replicated", False) for lev in ctx.mg.levels)
    # coarse levels of an even axis (stencil.AxisLaplacian)
    axis_levels = sum(hasattr(lev.op, "tail") for lev in getattr(ctx.mg, "levels", []))
    comm = getattr(ctx, "comm", None) or getattr(ctx, "_comm", None)
    transport = getattr(comm, "transport", "")
    graphs = getattr(ctx, "_graphs", None)        # its note, once a cycle was captured
    graph = graphs.note if graphs is not None and graphs.graphs else ""
    view = "\n".join(ctx.describe())
elif pc.getType() == "python" and pc.getPythonType() == "pcplugins.AMG":
    galerkin_error = amg_galerkin_error(pc.getPythonContext().mg)
    levels = len(pc.getPythonContext().mg.levels)
    transport = pc.getPythonContext().comm.transport or ""
    view = "\n".join(pc.getPythonContext().describe())
if PETSc.COMM_WORLD.getRank() == 0:
    numpy.savez(out, u=u, its=ksp.getIterationNumber(), reason=int(ksp.getConvergedReason()),
                levels=levels, replicated=replicated, galerkin_error=galerkin_error, axis_levels=axis_levels,
                transport=transport, graph=graph, view=view)
