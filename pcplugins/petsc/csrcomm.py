"""The communicator of a distributed CSR hierarchy (pcplugins.AMG): host collectives, the halo
exchange of a row distribution's ghost values, and their device transport (petsc.mailbox)."""
import time

import numpy

from .. import backend
from . import mailbox
from .errors import error
from .mpi import Collective


class CSRComm(Collective):
    """The communicator of a distributed CSR hierarchy (distributed.py, pcplugins.AMG): host
    collectives, ``halo`` (an exchange of the ghost values of a row distribution),
    ``gather_rows`` and ``allsum_array``. Each halo holds a neighbourhood communicator; ``free``
    releases them and the device transport's mailboxes (collective: PCSetUp and PCReset call it on
    every rank). ``transport`` (GPU arrays): 'host' (MPI through host buffers), 'device'
    (mailbox.DeviceHalo, DeviceGather and DeviceAllsum: CUDA IPC, ordered by counters on the GPU,
    for ranks whose kernels run at the same time; a cycle then never waits for the host and is
    captured whole), 'auto' (device where every rank can map every other's memory and their
    kernels run together, else host)."""
    def __init__(self, pc, transport="host", who="pcplugins.AMG"):
        super().__init__(pc)
        self.exchanges, self.exchange_time = 0, 0.0
        self._neighbourhoods = []
        self.requested, self.transport, self.who = transport, None, who
        self.mailboxes, self._allsum = None, None

    def halo(self, ghosts, starts, xp):
        h = _Halo(self, ghosts, starts, xp)
        self._neighbourhoods.append(h.neighbours)
        if backend.is_gpu(xp) and self._transport() == "device":
            if self.mailboxes is None:
                self.mailboxes = mailbox.Mailboxes(self)
            return _Counted(self, mailbox.DeviceHalo(self.mailboxes, h, self.mpi.alltoall(h.send_displs.tolist())))
        return _Counted(self, h)

    def _transport(self):
        """The transport of the GPU halos, decided at the first one (collective)."""
        if self.transport is None:
            self.transport = "host"
            if self.requested != "host" and not self.remembered("ipc to all", lambda: mailbox.ipc_all(self)):
                if self.requested == "device":
                    raise error(f"{self.who}: ghost transport device: some rank cannot map the others' GPU "
                                "memory through CUDA IPC (ranks on different nodes?); use auto or host")
            elif self.requested == "device":
                self.transport = "device"
            elif self.requested == "auto":
                self.mailboxes = mailbox.Mailboxes(self)
                peers = tuple(r for r in range(self.size) if r != self.rank)
                if not self.remembered(("together", peers, False),
                                       lambda: mailbox.run_together(self.mailboxes, peers))[0]:
                    self.mailboxes.free()           # the probe's arena (its device work is done)
                    self.mailboxes = None
                self.transport = "device" if self.mailboxes is not None else "host"
        return self.transport

    @property
    def capturable(self):
        """Whether a cycle's exchanges, inner products and gathers may be captured in a CUDA
        graph: the device transport, once ``prepare`` has opened what the cycle needs."""
        return self._allsum is not None

    def prepare(self):
        """Open the inner products' mailbox where the halos go device to device (collective)."""
        if self.transport == "device" and self._allsum is None:
            self._allsum = mailbox.DeviceAllsum(self.mailboxes)

    def allsum_array(self, x):
        """The global sums of the few values of the array ``x``, an array of its shape: on the
        device with the device transport (after ``prepare``), else through the host (a wait for
        the device)."""
        if self._allsum is not None:
            return self._allsum(x)
        return backend.to_namespace(numpy.asarray(self.allsum(backend.to_host(x))), backend.array_module(x))

    def gather_rows(self, starts, xp):
        """A callable giving the whole vector, on every rank, from each rank's rows (rank r's are
        [starts[r], starts[r + 1])): device to device with the device transport, else one
        allgather through the host. Collective; opens its mailbox now."""
        if backend.is_gpu(xp) and self.transport == "device":
            boxes = [((int(s),), (int(e - s),)) for s, e in zip(starts, starts[1:])]
            gather = mailbox.DeviceGather(self.mailboxes, boxes)
            return lambda part: gather(part, xp.empty(int(starts[-1]), part.dtype))
        counts = numpy.diff(starts)
        return lambda part: backend.to_namespace(self.allgatherv(backend.to_host(part), counts), xp)

    def transport_note(self):
        if self.transport == "device":
            return "device to device by CUDA IPC, ordered by counters on the GPU"
        return "through host buffers"

    def check_transport(self):
        """Raise on every rank where a device halo's wait timed out on some rank (collective)."""
        if self.mailboxes is not None and self.allmax(int(not self.mailboxes.check())):
            raise error(f"{self.who}: a ghost exchange waited {mailbox.TIMEOUT_S:.0f} s for a neighbouring rank "
                        "on the GPU and gave up: the ranks are out of step (a rank stopped?); the results are "
                        "wrong. Try -pc_amg_ghost_transport host")

    def free(self):
        if self.mailboxes is not None:
            backend.synchronize(backend.cupy)     # no peer still reads this rank's payloads
            self.barrier()
            self.mailboxes.free()
            self.mailboxes, self._allsum = None, None
        for g in self._neighbourhoods:
            g.Free()
        self._neighbourhoods = []


class _Counted:
    """A halo exchange (_Halo, mailbox.DeviceHalo) that counts its calls and their host wall time
    (Comm.exchanges, exchange_time)."""

    def __init__(self, comm, halo):
        self.comm, self.halo, self.neighbours = comm, halo, halo.neighbours

    def __call__(self, x):
        t = time.perf_counter()
        out = self.halo(x)
        self.comm.exchanges += 1
        self.comm.exchange_time += time.perf_counter() - t
        return out


class _Halo:
    """Values of the global unknowns ``ghosts`` (sorted) from their owners (rank r owns
    [starts[r], starts[r+1])). Set up once: an all-to-all of the requested indices, and a
    neighbourhood (distributed graph) communicator of the ranks this one receives from and sends
    to; then one MPI_Neighbor_alltoallv per call of just those values, so a call costs in the
    number of neighbours, not of ranks. Through the host (our MPICH is not GPU-aware)."""

    def __init__(self, comm, ghosts, starts, xp):
        self.comm, self.xp = comm, xp
        mpi, size = comm.mpi, comm.size
        owner = numpy.searchsorted(starts, ghosts, side="right") - 1
        recv_counts = numpy.bincount(owner, minlength=size).astype(numpy.int64)
        send_counts = numpy.asarray(mpi.alltoall(recv_counts.tolist()), numpy.int64)
        recv_displs = numpy.concatenate([[0], numpy.cumsum(recv_counts)[:-1]])
        send_displs = numpy.concatenate([[0], numpy.cumsum(send_counts)[:-1]])
        wanted = numpy.empty(int(send_counts.sum()), numpy.int64)
        mpi.Alltoallv([numpy.ascontiguousarray(ghosts, numpy.int64), (recv_counts, recv_displs)],
                      [wanted, (send_counts, send_displs)])
        self.send = xp.asarray(wanted - starts[comm.rank])
        self.n = len(ghosts)
        sources, destinations = numpy.nonzero(recv_counts)[0], numpy.nonzero(send_counts)[0]
        self.neighbours = mpi.Create_dist_graph_adjacent(sources.tolist(), destinations.tolist(), reorder=False)
        self.recv = (recv_counts[sources], recv_displs[sources])
        self.sent = (send_counts[destinations], send_displs[destinations])
        self.sources, self.destinations, self.send_displs = sources, destinations, send_displs

    def __call__(self, x):
        out = numpy.empty(self.n, x.dtype)
        self.neighbours.Neighbor_alltoallv([numpy.ascontiguousarray(backend.to_host(x[self.send])), self.sent],
                                      [out, self.recv])
        return backend.to_namespace(out, self.xp)
