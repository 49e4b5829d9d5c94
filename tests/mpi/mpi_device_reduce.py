"""Run under mpiexec by test_mpi.py on a GPU (ranks whose kernels run at the same time: a GPU
each, or MPS): petsc.csrcomm.CSRComm's device collectives against their host twins. Prints "ok" on
every rank that found no difference, a description of the first difference otherwise.

    mpiexec -n P python tests/mpi/mpi_device_reduce.py

``allsum_array`` (mailbox.DeviceAllsum, one kernel): sums of 1 to 8 values, float64, float32 and
complex128, 20 rounds in a row (the counters go on), must give on every rank the bits of the
ranks' values added in rank order on the host. ``gather_rows`` (a DeviceGather of rows): uneven
parts, rank 1 with none, must give the concatenation.
"""
import sys

import petsc4py

petsc4py.init(sys.argv[:1])
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

from pcplugins import backend  # noqa: E402
from pcplugins.petsc import csrcomm  # noqa: E402

cp = backend.cupy
comm = PETSc.COMM_WORLD
rank, size = comm.getRank(), comm.getSize()
pc = PETSc.PC().create(comm=comm)
c = csrcomm.CSRComm(pc, "device")
starts = numpy.concatenate([[0], numpy.cumsum([0 if r == 1 else 2 * r + 3 for r in range(size)])]).astype(numpy.int64)
c.halo(numpy.zeros(0, numpy.int64), starts, cp)      # a halo of no ghosts decides the transport
c.prepare()
problems = []
if c.transport != "device" or not c.capturable:
    problems.append(f"transport {c.transport}, capturable {c.capturable}")
rng = numpy.random.default_rng(rank)
for dtype in (numpy.float64, numpy.float32, numpy.complex128):
    for k in range(20):
        n = 1 + k % 8
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
        if numpy.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(n)
        x = x.astype(dtype)
        got = c.allsum_array(cp.asarray(x)).get()
        parts = c.allgather(x)
        want = parts[0].copy()
        for p in parts[1:]:
            want = want + p
        if got.dtype != want.dtype or got.tobytes() != want.tobytes():
            problems.append(f"allsum {numpy.dtype(dtype).name} round {k}: {got} against {want}")
        if any(g.tobytes() != got.tobytes() for g in c.allgather(got)):
            problems.append(f"allsum {numpy.dtype(dtype).name} round {k}: the ranks differ")
gather = c.gather_rows(starts, cp)
for dtype in (numpy.float64, numpy.int64):
    part = (numpy.arange(starts[rank + 1] - starts[rank]) + 100 * rank).astype(dtype)
    got = gather(cp.asarray(part)).get()
    want = numpy.concatenate(c.allgather(part))
    if not numpy.array_equal(got, want):
        problems.append(f"gather_rows {numpy.dtype(dtype).name}: {got} against {want}")
if not c.mailboxes.check():
    problems.append("a mailbox wait timed out")
backend.synchronize(cp)
c.free()
print(f"rank {rank}: " + ("ok" if not problems else problems[0]), flush=True)
sys.exit(1 if problems else 0)
