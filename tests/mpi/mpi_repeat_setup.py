"""Run under mpiexec by test_mpi.py on a GPU (ranks whose kernels run at the same time): three KSPs
one after another on one system, each set up anew, with the device transport. The later ones take
the mailbox arenas the earlier ones gave back to the communicator (no new IPC mapping) and give
the first one's solution; a fourth, after rank 0's pool lost an arena, maps new ones on every
rank and gives it too. Prints "ok" on rank 0 when every check holds.

    mpiexec -n P python tests/mpi/mpi_repeat_setup.py gmg|amg
"""
import os
import sys

import petsc4py

petsc4py.init(sys.argv[:1] + ["-mat_type", "aijcusparse"])
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pcplugins.petsc import mailbox, mpi  # noqa: E402

from conftest import petsc_solve, true_relative_residual  # noqa: E402
from problems import poisson_system  # noqa: E402

which = sys.argv[1]
counts = {"arenas": 0, "reused": 0}
new_arena, take = mailbox.Mailboxes._new_arena, mailbox._Arenas.take


def counted_new_arena(self, nbytes):
    counts["arenas"] += 1
    return new_arena(self, nbytes)


def counted_take(self, i):
    counts["reused"] += 1
    return take(self, i)


mailbox.Mailboxes._new_arena, mailbox._Arenas.take = counted_new_arena, counted_take
with_pc = {"gmg": ("pcplugins.GMG", {"pc_gmg_ghost_transport": "device", "pc_gmg_gather_size": 0}),
           "amg": ("pcplugins.AMG", {"pc_amg_ghost_transport": "device", "pc_amg_gather_size": 0})}[which]
da, A, b = poisson_system(33, 3, "petsc", jump=2.0)
first, seen = None, []
for k in range(3):
    before = dict(counts)
    ksp, x = petsc_solve(da, A, b, with_pc[1], "cg", pc=with_pc[0], rtol=1e-8, max_it=100)
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) < 1e-7
    seen.append((counts["arenas"] - before["arenas"], counts["reused"] - before["reused"]))
    if first is None:
        first = x.copy()
    else:
        d = x.copy()
        d.axpy(-1.0, first)
        assert d.norm() <= 1e-12 * first.norm(), (k, d.norm() / first.norm())
    ksp.destroy()
# the first setup maps new arenas; each later one reuses every arena it needs
assert seen[0][0] >= 1 and seen[0][1] == 0, seen
assert all(n >= 1 and n == r for n, r in seen[1:]), seen
# pools that differ between the ranks (rank 0's first free arena gone): the ranks agree to map new
# ones, and the solution stays (a rank reusing alone would pair its collectives with the others'
# different ones: a hang, which the run's timeout turns into a failure)
pool = mailbox._pool(mpi.Collective(PETSc.PC().create(comm=PETSc.COMM_WORLD)))
if PETSc.COMM_WORLD.getRank() == 0:
    pool.free.pop(0)
before = dict(counts)
ksp, x = petsc_solve(da, A, b, with_pc[1], "cg", pc=with_pc[0], rtol=1e-8, max_it=100)
d = x.copy()
d.axpy(-1.0, first)
assert d.norm() <= 1e-12 * first.norm() and counts["arenas"] > before["arenas"], (d.norm(), counts, before)
PETSc.Sys.Print("ok", seen)
