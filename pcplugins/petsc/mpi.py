"""Communication for the PCs under MPI: collectives on the PC's communicator (every check that can
fail on some ranks agreed before anyone raises, and what its PCs keep between setups), and the
ghost updates and gathers of distributed DMDA levels. A distributed CSR hierarchy's halo exchange
is csrcomm.py's."""
import math
import time

import numpy

from .. import backend
from ..core.comm import Comm
from . import dmda, halo, mailbox
from .errors import PCPluginError, error

# -pc_gmg_ghost_transport and -pc_sl_ghost_transport
TRANSPORTS = ("auto", "device", "ipc", "host")
TRANSPORT_HELP = ("MPI on the GPU: how ghost layers travel between ranks: device (CUDA IPC, ordered by counters on "
                  "the GPU: no host wait, the cycle captured as a CUDA graph; for ranks whose kernels run at the "
                  "same time: one GPU each, or MPS), ipc (CUDA IPC, ordered by MPI messages), host (pinned host "
                  "buffers and MPI), auto (device where the ranks' kernels run at the same time, else ipc where "
                  "every rank can map its neighbours' memory, else host)")


class Collective:
    """The few collectives the PCs need, on the PC's communicator (mpi4py only in parallel,
    so serial use needs no mpi4py), named as the core's communicator protocol names them
    (comm.Comm): allsum, allmin, allmax, allgather, alltoall, allgatherv."""

    def __init__(self, pc):
        self.size, self.rank = pc.getComm().getSize(), pc.getComm().getRank()
        self.mpi = pc.getComm().tompi4py() if self.size > 1 else None

    def allmin(self, x):
        return self._reduce(x, "MIN")

    def allmax(self, x):
        return self._reduce(x, "MAX")

    def allsum(self, x):
        return x if self.mpi is None else self.mpi.allreduce(x)

    def _reduce(self, x, op):
        if self.mpi is None:
            return x
        from mpi4py import MPI
        return self.mpi.allreduce(x, op=getattr(MPI, op))

    def allgather(self, x):
        return [x] if self.mpi is None else self.mpi.allgather(x)

    def alltoall(self, parts):
        return list(parts) if self.mpi is None else self.mpi.alltoall(parts)

    def allgatherv(self, x, counts=None):
        """Every rank's 1-D host array ``x`` joined in rank order: one MPI_Allgatherv of the
        buffers, which for large arrays is several times faster than the pickled allgather;
        ``counts``: every rank's length, where known (else one more allgather)."""
        if self.mpi is None:
            return x
        x = numpy.ascontiguousarray(x)
        counts = self.mpi.allgather(len(x)) if counts is None else [int(c) for c in counts]
        out = numpy.empty(sum(counts), x.dtype)
        self.mpi.Allgatherv(x, (out, counts))
        return out

    def barrier(self):
        if self.mpi is not None:
            self.mpi.Barrier()

    def shared(self):
        """What this rank keeps for the PCs on this communicator, between their setups: a dict
        held as an attribute of the MPI communicator (PETSc's objects on one communicator share
        it), released with it (``_release``). One rank: this object's own."""
        if self.mpi is None:
            return self.__dict__.setdefault("_shared", {})
        global _KEYVAL
        if _KEYVAL is None:
            from mpi4py import MPI
            _KEYVAL = MPI.Comm.Create_keyval(delete_fn=_release)
        found = self.mpi.Get_attr(_KEYVAL)
        if found is None:
            found = {}
            self.mpi.Set_attr(_KEYVAL, found)
        return found

    def remembered(self, key, compute):
        """``compute()`` (collective), or what it gave when an earlier PC on this communicator
        asked with the same ``key``: for probes of what does not change while the program runs
        (whether CUDA IPC works, whether the ranks' kernels run together). Every rank computes
        unless every rank has the answer (a key may differ between ranks)."""
        shared = self.shared()
        if self.allmin(int(key in shared)) == 0:
            shared[key] = compute()
        return shared[key]

    def check(self, problem):
        """Raise on every rank when any rank found a ``problem`` (its message; None: none), with
        the message of the lowest such rank: a check that fails on some ranks only must stop all
        of them, or the others wait in the next collective for ever."""
        found = [p for p in self.allgather(problem) if p]
        if found:
            raise error(found[0])

    def agreed(self, fn, *args):
        """``fn(*args)``, with its PCPluginError raised on every rank (``check``)."""
        try:
            out, problem = fn(*args), None
        except PCPluginError as e:
            out, problem = None, str(e)
        self.check(problem)
        return out


_KEYVAL = None


def _release(comm, keyval, shared):
    """The communicator is freed: close what its PCs kept (mailbox arenas unmap their peers)."""
    for kept in shared.values():
        try:
            getattr(kept, "close", lambda: None)()
        except Exception:               # noqa: BLE001 (an MPI callback must not raise: at exit CUDA may be gone)
            pass


class DMDAComm(Comm):
    """Ghost updates and gathers for the multigrid levels of a distributed DMDA.

    Levels with at most ``gather_size`` points are gathered onto every rank as well: each
    distributed level costs six ghost updates per V-cycle, mostly latency on small levels, while
    the gather costs one allgather per cycle.

    A distributed level's ownership ranges nest in the finer level's: a rank owning fine points
    [s, e) along an axis owns coarse points [s // 2, e // 2) (grid.py), so every distributed
    level has the user's DMDA's process grid. A level stays distributed while every rank owns
    points of it; below, the levels are replicated (``transfer.Gathered``). ``exchange`` is a
    halo.FaceExchange on the level's arrays; ``transport`` ('auto', 'ipc', 'host') how its
    layers travel on the GPU.
    """

    def __init__(self, pc, dm, layer, xp, gather_size=0, who="pcplugins.GMG", transport="auto"):
        self.gather_size = gather_size            # gather levels with at most this many points
        self.who = who
        self.mpi = Collective(pc)
        self.size = self.mpi.size
        self.xp = xp
        self.dim = dm.getDim()
        counts = [numpy.asarray(c) for c in dm.getOwnershipRanges()[:self.dim]][::-1]
        own_start = [s for s, _ in dm.getRanges()[:self.dim]][::-1]
        self._coords, self._neighbours = halo.process_grid(counts, own_start, self.mpi.rank, self.mpi,
                                                           dmda.periodic_axes(dm))
        self.mailboxes, self.signal_time = None, None
        self.transport, self.ipc_events = self._transport(transport, xp)
        self._gathers, self._parts = {}, {}
        ranges = [[(int(s), int(s + c)) for s, c in zip(numpy.cumsum(cs) - cs, cs)] for cs in counts]
        gshape = tuple(dm.getSizes()[:self.dim][::-1])
        self._ranges = {-1: (gshape, ranges)}
        self._levels = {}
        self._layer = layer
        self.distribute(-1, None)                 # the user's grid, for the boundary elimination
        if layer:
            ranges = [[(max(s, 1) - 1, min(e, m - 1) - 1) for s, e in r] for r, m in zip(ranges, gshape)]
            gshape = tuple(m - 2 for m in gshape)
        self._ranges[0] = (gshape, ranges)
        self.exchanges, self.exchange_time = 0, 0.0

    def distribute(self, level, box):
        if level > 0:
            pshape, pranges = self._ranges[level - 1]
            ranges = [[box.coarse_range(s, e, a, pm) for s, e in r] if m != pm else r
                      for a, (r, m, pm) in enumerate(zip(pranges, box.global_shape, pshape))]
            self._ranges[level] = (box.global_shape, ranges)
        gshape, ranges = self._ranges[level]
        if level > 0 and math.prod(gshape) <= self.gather_size:
            return False              # small coarse levels: one gather beats many tiny exchanges
        if any(e <= s for r in ranges for s, e in r):
            if level <= 0:
                raise error(f"{self.who}: a rank owns no {'interior ' if self._layer else ''}grid points; "
                            "use fewer ranks or a larger grid")
            return False
        own = [r[c] for r, c in zip(ranges, self._coords)]
        if box is not None and own != [(s, s + n) for s, n in zip(box.start, box.shape)]:
            raise error(f"{self.who}: internal error, level {level} ownership {own} does not "
                        f"match the hierarchy's box {box}")
        shape = tuple(e - s for s, e in own)
        self._levels[level] = halo.FaceExchange(self.mpi.mpi, shape, self._neighbours, self.xp,
                                                ipc=self.transport == "ipc", events=self.ipc_events,
                                                mailboxes=self.mailboxes)
        return True

    def _transport(self, requested, xp):
        """How ghost layers travel, and whether CUDA IPC comes with interprocess events: ('ipc',
        events) or ('host', False) on the GPU (halo.py), ('host', False) for NumPy arrays."""
        if not backend.is_gpu(xp) or requested == "host":
            return "host", False
        key = ("ipc to neighbours", tuple(map(tuple, self._neighbours)))
        works, events = self.mpi.remembered(key, lambda: halo.ipc_works(self.mpi.mpi, self._neighbours, self.mpi))
        if requested in ("ipc", "device") and not works:
            raise error(f"{self.who}: ghost transport {requested}: some rank cannot map its neighbours' GPU memory "
                        "through CUDA IPC (ranks on different nodes?); use auto or host")
        if not works:
            return "host", False
        if requested in ("auto", "device"):
            self.mailboxes = mailbox.Mailboxes(self.mpi)
            peers = tuple(sorted({p for pair in self._neighbours for p in pair if p is not None}))
            measure = requested == "device"
            together, self.signal_time = self.mpi.remembered(
                ("together", peers, measure),
                lambda: mailbox.run_together(self.mailboxes, list(peers), measure=measure))
            if requested == "device" or together:
                return "device", False
            self.mailboxes.free()                   # the probe's arena (its device work is done)
            self.mailboxes = None
        return "ipc", events

    @property
    def capturable(self):
        return self.transport == "device"

    def describe(self, applications):
        """-ksp_view's line on the ghost updates, after ``applications`` applications."""
        how = f"face by face, {self.transport_note()}; one per smoothing colour and transfer"
        if self.capturable:          # a replayed graph makes no host call to count or time
            return f"ghost updates: {how}"
        n = self.exchanges
        return (f"ghost updates: {n / max(applications, 1):.0f} per application ({how}), "
                f"{1e3 * self.exchange_time / max(n, 1):.3g} ms each on this rank (host wall time)")

    def transport_note(self):
        probe = ("" if self.signal_time is None
                 else f"; an empty exchange on the GPU took {self.signal_time * 1e6:.0f} us")
        if self.transport == "device":
            return f"device to device by CUDA IPC, ordered by counters on the GPU{probe}"
        if self.transport == "ipc":
            return "device to device by CUDA IPC" + (", ordered by interprocess events" if self.ipc_events
                                                     else ", each rank waiting for its stream") + probe
        return "through pinned host buffers" if backend.is_gpu(self.xp) else "through host buffers"

    def free(self):
        """Unmap the neighbours' IPC buffers once every rank's device work is done (collective)."""
        if self.transport in ("ipc", "device"):
            backend.synchronize(self.xp)
            self.mpi.barrier()
        for ex in self._levels.values():
            ex.free()
        self._levels, self._gathers = {}, {}
        if self.mailboxes is not None:
            self.mailboxes.free()

    def check(self):
        """Raise on every rank where a device transport's wait timed out on some rank (a read of
        the status word and an MPI reduction; the device transport only)."""
        if self.mailboxes is not None and self.mpi.allmax(int(not self.mailboxes.check())):
            raise error(f"{self.who}: a ghost update waited {mailbox.TIMEOUT_S:.0f} s for a neighbouring rank "
                        "on the GPU and gave up: the ranks are out of step (a rank stopped?); the results "
                        "are wrong. Try the ghost transport ipc or host (-pc_gmg_ghost_transport, "
                        "-pc_sl_ghost_transport)")

    def exchange(self, level, u):
        t = time.perf_counter()
        self._levels[level](u)
        self.exchanges += 1
        # host wall time: through host buffers it includes the wait for the queued device work
        self.exchange_time += time.perf_counter() - t
        return u

    def allsum(self, x):
        return self.mpi.allsum(x)

    def allmin(self, x):
        return self.mpi.allmin(x)

    def allmax(self, x):
        return self.mpi.allmax(x)

    def expect_gather(self, level, part_box):
        if self.mailboxes is not None:
            self._parts[level] = part_box

    def prepare(self):
        """Open the device transport's mailboxes of every level and gather now (collective, at
        setup): a cycle captured as a CUDA graph then finds them open."""
        if self.mailboxes is None:
            return
        for ex in self._levels.values():
            ex.open()
        for level, part_box in sorted(self._parts.items()):
            self._open_gather(level, part_box)

    def _open_gather(self, level, part_box):
        if level not in self._gathers:
            boxes = self.mpi.allgather((tuple(part_box.start), tuple(part_box.shape)))
            self._gathers[level] = mailbox.DeviceGather(self.mailboxes, boxes)
        return self._gathers[level]

    def gather(self, level, part, part_box, out):
        if self.mailboxes is not None and backend.is_gpu(backend.array_module(part)):
            return self._open_gather(level, part_box)(part, out)
        full = numpy.zeros(out.shape, dtype=out.dtype)
        for start, shape, a in self.mpi.allgather((part_box.start, part_box.shape, backend.to_host(part))):
            full[tuple(slice(s, s + n) for s, n in zip(start, shape))] = a
        out[...] = backend.to_namespace(full, self.xp)
        return out

