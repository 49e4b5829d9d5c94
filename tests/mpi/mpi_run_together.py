"""Run under mpiexec by test_mpi.py: mailbox.run_together's decisions with the GPUs, MPS and
neighbours of each rank given (no GPU needed; the probe replaced by a collective that fails when
some rank skips it). Every rank prints its answer and whether it probed.

    mpiexec -n P python tests/mpi/mpi_run_together.py GPUS MPS MEASURE TOGETHER

GPUS: each rank's GPU ("a,b,b"); MPS: whether each rank sees MPS ("1,0,1"); MEASURE: 0 or 1 (the
device transport asked for); TOGETHER: each rank's own probe answer ("1,1,0"). The ranks form a
chain: rank r's peers are r - 1 and r + 1.
"""
import sys
import types

import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

from pcplugins.petsc import mailbox, mpi  # noqa: E402

comm = PETSc.COMM_WORLD
rank, size = comm.getRank(), comm.getSize()
gpus, mps, measure, together = (sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3] == "1",
                                sys.argv[4].split(","))
pc = PETSc.PC().create(comm=comm)
collective = mpi.Collective(pc)
probed = []


def concurrent(owner, peers, barrier):
    # the probe is collective: every rank must be in it, or the allgather pairs with another rank's
    # different collective and the run fails or hangs
    assert owner.collective.allgather("probe") == ["probe"] * size
    barrier()
    probed.append(True)
    return together[rank] == "1", 1e-5


mailbox.concurrent = concurrent
mailbox.mps_running = lambda: mps[rank] == "1"
peers = [p for p in (rank - 1, rank + 1) if 0 <= p < size]
answer, seconds = mailbox.run_together(types.SimpleNamespace(collective=collective), peers, measure=measure,
                                       gpu=gpus[rank])
print(f"rank {rank}: together {answer} probed {bool(probed)}", flush=True)
