"""Run under mpiexec by test_mpi.py: an input that is wrong on one rank only. Every rank must stop
with the message (one PETSc error each), none may wait for ever in a collective the others left.

    mpiexec -n P python tests/mpi/mpi_bad_input.py CASE

AMG on a 2D 5-point Laplacian, 20 x 20, rows split by PETSc, with vertex coordinates composed on
the PC: ``coords_rank0`` (on rank 0 only), ``coords_length`` (one entry short on the last rank),
``coords_nan`` (a NaN on the last rank). ShiftedLaplace on the MP1 problem: ``wavenumber_length``
(the field one entry short on the last rank), ``wavenumber_rank0`` (the field on rank 0 only).
"""
import sys

import petsc4py

petsc4py.init(sys.argv[:1])
import os  # noqa: E402

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import pcplugins  # noqa: E402

from problems import helmholtz_system  # noqa: E402

comm = PETSc.COMM_WORLD
rank, last = comm.getRank(), comm.getSize() - 1
case = sys.argv[1]
ksp = PETSc.KSP().create(comm=comm)
pc = ksp.getPC()
pc.setType("python")
if case.startswith("coords"):
    m = 20
    A = PETSc.Mat().createAIJ((m * m, m * m), nnz=5, comm=comm)
    lo, hi = A.getOwnershipRange()
    for i in range(lo, hi):
        x, y = i % m, i // m
        A[i, i] = 4.0
        for nx, ny in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)):
            if 0 <= nx < m and 0 <= ny < m:
                A[i, ny * m + nx] = -1.0
    A.assemble()
    ksp.setOperators(A)
    ksp.setType("cg")
    pc.setPythonType("pcplugins.AMG")
    rows = numpy.arange(lo, hi)
    xy = numpy.stack([rows % m, rows // m], axis=1).astype(float)
    if case == "coords_length" and rank == last:
        xy = xy[:-1]
    if case == "coords_nan" and rank == last:
        xy[0, 0] = numpy.nan
    if case != "coords_rank0" or rank == 0:
        pcplugins.set_coordinates(pc, xy)
    b, x = A.createVecs()
else:
    da, A, b = helmholtz_system(16, 10.0, dim=2)
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    ksp.setType("bcgs")
    pc.setPythonType("pcplugins.ShiftedLaplace")
    k = numpy.full(17 * 17, 10.0)
    if case == "wavenumber_length" and rank == last:
        k = k[:-1]
    if case != "wavenumber_rank0" or rank == 0:
        pcplugins.set_wavenumber(pc, k)
    x = b.duplicate()
b.set(1.0)
ksp.setFromOptions()
ksp.solve(b, x)
PETSc.Sys.Print(f"solved: {ksp.getIterationNumber()} iterations")
