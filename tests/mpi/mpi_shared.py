"""Run under mpiexec by test_mpi.py: what PCs keep on their communicator between setups
(petsc.mpi.Collective.shared and remembered). Prints "ok" on rank 0 when every check holds.

    mpiexec -n P python tests/mpi/mpi_shared.py
"""
import sys

import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

from pcplugins.petsc import mpi  # noqa: E402

comm = PETSc.COMM_WORLD
rank, size = comm.getRank(), comm.getSize()
first, second = PETSc.PC().create(comm=comm), PETSc.PC().create(comm=comm)
a, b = mpi.Collective(first), mpi.Collective(second)
# PETSc's objects on one communicator share its inner communicator, and so what it keeps
assert a.shared() is b.shared()
calls = []


def probe():
    calls.append(1)
    return a.allsum(1)        # collective: a rank computing alone would wait for ever


assert a.remembered("probe", probe) == size and len(calls) == 1
first.destroy()               # the answer outlives the PC that asked
assert b.remembered("probe", probe) == size and len(calls) == 1
# a key only some ranks know: every rank computes again, none waits alone
if rank == 0:
    b.shared()[("mine", rank)] = "stale"
assert b.remembered(("mine", rank), probe) == size and len(calls) == 2

# a communicator of its own keeps its own, and closes what it kept when it is freed
closed = []


class Kept:
    def close(self):
        closed.append(1)


sub = comm.tompi4py().Dup()
pc = PETSc.PC().create(comm=PETSc.Comm(sub))
c = mpi.Collective(pc)
assert c.shared() is not b.shared()
c.remembered("kept", Kept)
pc.destroy()
del c
sub.Free()
# PETSc holds its inner communicator until its last object is gone; it is freed by then
PETSc.garbage_cleanup(PETSc.Comm(comm))
assert closed == [1], closed
PETSc.Sys.Print("ok")
