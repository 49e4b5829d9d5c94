"""Device mailboxes: exchanges between the ranks of one node with no host in the loop.

A mailbox is a few counters and a payload per rank in device memory its peers have mapped through
CUDA IPC (CuPy's IPC handles; the mailboxes of a communicator share one allocation per rank). An
exchange is five steps queued on the current stream: ``ready`` (a one-thread kernel waits until
every peer has read this rank's previous payload), the caller's copies into ``payload``, ``post``
(a one-thread kernel posts the exchange and waits until every peer has posted it), the caller's
copies out of the peers' payloads, ``done`` (tells the peers they are read); ghost layers take the
same five steps in two kernels (``pack``, ``unpack``); ``DeviceGather`` (a replicated level's
parts) and ``DeviceHalo`` (a distributed CSR level's ghost values) take them with copies,
``DeviceAllsum`` (a global sum) in one kernel. The
counters live in device memory and count the exchanges themselves (kernels/mailbox.cu), so the
host never waits, and an exchange captured in a CUDA graph stays right when the graph is
replayed: a whole multigrid cycle with its ghost updates becomes one graph under MPI.

The waits spin on the GPU, so the ranks' kernels must run at the same time: one GPU per rank, or
several ranks on one GPU under NVIDIA's multi-process service (MPS). Ranks time-sliced on one GPU
still finish, a time slice per wait; ``mps_running`` and ``concurrent`` tell which case holds
(``run_together`` decides by them for every rank at once). A wait that times out sets a status word that
``Mailboxes.check`` reads, so a rank that stopped is an error, not a hang.
"""
import math
import os
import time

import numpy

from .. import backend, kernels

# kernels/mailbox.cu's TIMEOUT_NS
TIMEOUT_S = 60.0
# bytes per value a payload is sized for: complex128, so one mailbox serves every value type
WIDEST = 16
# the counters take the first bytes of the allocation; the payload starts aligned after them
_ALIGN = 256


class Mailboxes:
    """The mailboxes of one communicator, carved out of arenas: one device allocation per rank
    that every other rank maps once (an IPC mapping per arena and peer, not per mailbox), and the
    status word the waits share. ``collective``: petsc.mpi.Collective; every ``open`` is
    collective over all ranks, in the same order on each (a rank's mailboxes may differ in size).
    ``free`` gives the arenas to the communicator (``_Arenas``), where the next Mailboxes on it
    finds them mapped already."""

    ARENA = 16 << 20                     # bytes per arena, or one mailbox's if larger

    def __init__(self, collective):
        self.collective = collective
        self.rank, self.size = collective.rank, collective.size
        self.status = backend.cupy.zeros(1, numpy.int32)
        self.boxes, self._arenas = [], []          # (memory, [each rank's base pointer here], serial)
        self._used = 0

    def open(self, nbytes, peers):
        """A mailbox with ``nbytes`` of payload whose exchanges are with ``peers`` (ranks).
        Refused while the stream is being captured, before any message: the capture fails and
        the call runs again eagerly, on every rank alike."""
        if backend.cupy.cuda.get_current_stream().is_capturing():
            raise RuntimeError("a mailbox cannot be opened during a CUDA graph capture")
        head = -(-4 * (1 + self.size) // _ALIGN) * _ALIGN
        need = head + -(-max(nbytes, 1) // _ALIGN) * _ALIGN
        fits = bool(self._arenas) and self._used + need <= self._arenas[-1][0].mem.size
        # one collective: whether every rank's fits, the largest need and every rank's offset
        every = self.collective.allgather((fits, need, self._used))
        if not all(f for f, _, _ in every):
            self._new_arena(max(self.ARENA, max(n for _, n, _ in every)))
            offsets = [0] * self.size
        else:
            offsets = [u for _, _, u in every]
        self._used += need
        memory, bases, _ = self._arenas[-1]
        box = Mailbox(self, memory, [bases[r] + offsets[r] for r in range(self.size)], head, sorted(peers))
        self.boxes.append(box)
        return box

    def _new_arena(self, nbytes):
        """An arena of at least ``nbytes`` for every rank (collective): one the communicator's
        earlier mailboxes left (``_Arenas``: zeroed, every rank's mapped already) where every
        rank has the same one, else a new allocation that every other rank maps."""
        cp = backend.cupy
        pool = _pool(self.collective)
        found = pool.find(nbytes)
        # on every rank, found or not, one collective: the same arena (its serial) on every rank
        every = self.collective.allgather(None if found is None else pool.free[found][2])
        if found is not None and len(set(every)) == 1:
            self._arenas.append(pool.take(found))
            self._used = 0
            return
        memory = cp.cuda.MemoryPointer(cp.cuda.Memory(nbytes), 0)   # its own cudaMalloc: IPC maps whole ones
        memory.memset(0, nbytes)
        backend.synchronize(cp)                    # zeroed before any peer can read it
        handles = self.collective.allgather(cp.cuda.runtime.ipcGetMemHandle(memory.ptr))
        bases = []
        for r, handle in enumerate(handles):
            bases.append(memory.ptr if r == self.rank else cp.cuda.runtime.ipcOpenMemHandle(
                handle, cp.cuda.runtime.cudaIpcMemLazyEnablePeerAccess))
        self._arenas.append((memory, bases, pool.made))
        pool.made += 1                             # in step on every rank: arenas are made together
        self._used = 0

    def check(self):
        """Whether every wait so far has finished (reads the status word: a synchronisation)."""
        return int(self.status.get()[0]) == 0

    def free(self):
        """Give the arenas back to the communicator's pool, zeroed, still mapped by every rank
        (collective, once every rank's device work is done): the next PC on the communicator
        opens its mailboxes there, without mapping new memory (an IPC mapping of a peer GPU's
        memory takes milliseconds)."""
        for box in self.boxes:
            box.free()
        pool = _pool(self.collective)
        for memory, bases, serial in self._arenas:
            memory.memset_async(0, memory.mem.size)
            pool.free.append((memory, bases, serial))
        backend.synchronize(backend.cupy)          # zeroed before any peer can read them again
        self.boxes, self._arenas = [], []


def _pool(collective):
    """The communicator's free arenas on the current GPU."""
    return collective.shared().setdefault(("mailbox arenas", backend.cupy.cuda.Device().id), _Arenas())


class _Arenas:
    """The mailbox arenas of a communicator that no Mailboxes holds now, each (memory, every
    rank's base pointer here, serial: the how-manieth arena made on the communicator), in the
    order they were given back; ``close`` unmaps the peers' (when the communicator is freed)."""

    def __init__(self):
        self.free, self.made = [], 0

    def find(self, nbytes):
        """The index of the first arena of at least ``nbytes``, or None."""
        return next((i for i, (m, _, _) in enumerate(self.free) if m.mem.size >= nbytes), None)

    def take(self, i):
        return self.free.pop(i)

    def close(self):
        cp = backend.cupy
        backend.synchronize(cp)
        for memory, bases, _ in self.free:
            for ptr in bases:
                if ptr != memory.ptr:
                    cp.cuda.runtime.ipcCloseMemHandle(ptr)
        self.free = []


class Mailbox:
    """One mailbox: this rank's counters (``words``) and payload at ``at[rank]`` of its arena
    ``memory``, every rank's at ``at``, exchanges with ``peers``."""

    def __init__(self, owner, memory, at, head, peers):
        cp = backend.cupy
        self.owner, self.memory, self.at, self.head, self.peers = owner, memory, at, head, peers
        mine = cp.cuda.MemoryPointer(memory.mem, at[owner.rank] - memory.ptr)
        self.words = cp.ndarray((1 + owner.size,), numpy.uint32, mine)
        self.seq = cp.zeros(2, numpy.uint32)               # finished exchanges, finished blocks
        device = cp.cuda.Device().id
        # a peer's payload runs at most to the end of its arena (the same size as this one)
        self._payloads = {r: cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(at[r] + head, memory.mem.size, self,
                                                                         device_id=device), 0) for r in peers}
        self._peer_words = cp.asarray(numpy.array([at[r] for r in peers], numpy.uint64))
        self._ranks = cp.asarray(numpy.array(peers, numpy.int32))

    def payload(self, shape, dtype, rank=None):
        """This rank's payload (``rank`` None) or peer ``rank``'s, as an array."""
        ptr = (backend.cupy.cuda.MemoryPointer(self.memory.mem, self.at[self.owner.rank] + self.head - self.memory.ptr)
               if rank is None else self._payloads[rank])
        return backend.cupy.ndarray(shape, dtype, ptr)

    def ready(self):
        _launch("mailbox_ready", self.seq, self._peer_words, numpy.int32(len(self.peers)),
                numpy.int32(self.owner.rank), self.owner.status)

    def post(self):
        _launch("mailbox_post", self.seq, self.words, self._peer_words, numpy.int32(len(self.peers)),
                self.owner.status)

    def done(self):
        _launch("mailbox_done", self.seq, self.words, self._ranks, numpy.int32(len(self.peers)))

    def pack(self, u, layer, lo, hi):
        """``ready``, the layers ``lo`` and ``hi`` of ``u`` (indices along the layer's axis, None:
        no neighbour there) into rows 0 and 1 of the payload, and ``post``: one kernel.
        ``layer``: (axis stride, values per layer, values per row of it, their strides)."""
        sa, L, nc, sb, sc = layer
        _copy("halo_pack", u, L, (u, self.payload((2 * L,), u.dtype), *_longs(L, nc, sa, sb, sc),
                                  *_longs(-1 if lo is None else lo, -1 if hi is None else hi), self.seq, self.words,
                                  self._peer_words, numpy.int32(len(self.peers)), numpy.int32(self.owner.rank),
                                  self.owner.status))

    def unpack(self, u, layer, lo, hi, lo_rank, hi_rank):
        """Row 1 of peer ``lo_rank``'s payload into the layer ``lo`` of ``u``, row 0 of
        ``hi_rank``'s into ``hi`` (None: no neighbour there), and ``done``: one kernel."""
        sa, L, nc, sb, sc = layer
        ptr = [numpy.uint64(0 if r is None else self._payloads[r].ptr) for r in (lo_rank, hi_rank)]
        _copy("halo_unpack", u, L, (u, *ptr, *_longs(L, nc, sa, sb, sc),
                                    *_longs(-1 if lo is None else lo, -1 if hi is None else hi), self.seq, self.words,
                                    self._ranks, numpy.int32(len(self.peers))))

    def free(self):
        self._payloads = {}
        self.memory = self.words = None


def _launch(name, *args):
    kernels.kernel("mailbox", name)((1,), (1,), args)


# the layer kernels copy the values' bits, by their size. halo_pack's blocks wait for the peers: a
# grid of at most MAX_BLOCKS blocks leaves the peers' kernels room on a shared GPU. halo_unpack
# waits for nothing; it reads the peers' payloads across the interconnect, whose latency more
# blocks in flight hide (at most UNPACK_BLOCKS)
WORDS = {4: "unsigned int", 8: "unsigned long long", 16: "ulonglong2"}
MAX_BLOCKS, UNPACK_BLOCKS, THREADS = 64, 256, 256


def _copy(name, u, L, args):
    cap = UNPACK_BLOCKS if name == "halo_unpack" else MAX_BLOCKS
    blocks = max(1, min(cap, -(-L // THREADS)))
    kernels.kernel("mailbox", name, WORD=WORDS[u.dtype.itemsize])((blocks,), (THREADS,), args)


def _longs(*values):
    return [numpy.int64(v) for v in values]


def mps_running():
    """Whether NVIDIA's multi-process service answers this process: its control pipe exists where
    CUDA looks for it (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps)."""
    pipes = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    return os.path.exists(os.path.join(pipes, "control"))


def concurrent(owner, peers, barrier, rounds=10, limit=2e-4):
    """Whether this rank's kernels and its peers' run at the same time: ``rounds`` empty
    exchanges, each within ``limit`` seconds on average (time-sliced ranks take a time slice per
    wait), and the seconds per exchange. Collective (``barrier``: over every rank); the caller
    agrees the answer over every rank."""
    box = owner.open(0, peers)
    for _ in range(2):                      # compiles the kernels; the peers start together
        _round(box)
    backend.synchronize(backend.cupy)
    barrier()
    t = time.perf_counter()
    for _ in range(rounds):
        _round(box)
    backend.synchronize(backend.cupy)
    elapsed = (time.perf_counter() - t) / rounds
    barrier()                               # no peer still reads this rank's counters
    owner.boxes.remove(box)
    box.free()
    return owner.check() and elapsed < limit, elapsed


def run_together(owner, peers, measure=False, gpu=None):
    """Whether every rank's kernels run at the same time as its ``peers``' (the device transport's
    precondition), agreed by every rank, and the seconds of an empty exchange where ``concurrent``
    measured one (else None). Ranks on GPUs of their own run together; ranks that share a GPU do
    only under MPS, which the probe measures, or where ``measure`` asks for the probe anyway.
    Every decision to probe is itself agreed first: the probe is collective, so a rank that probed
    alone (its neighbours on other GPUs, or MPS seen by some ranks only) would wait for ever.
    ``owner``: the Mailboxes the probe opens its mailbox in; ``gpu``: this rank's GPU (its PCI
    id, by default the current device's)."""
    collective = owner.collective
    gpu = backend.cupy.cuda.Device().pci_bus_id if gpu is None else gpu
    gpus = collective.allgather(gpu)
    if collective.allmax(int(any(gpus[p] == gpu for p in peers))) == 0:
        return True, None                   # no rank shares a GPU with a peer
    if collective.allmax(int(measure)) == 0 and collective.allmin(int(mps_running())) == 0:
        return False, None                  # time-sliced ranks: a time slice per wait, not tried
    together, seconds = concurrent(owner, peers, collective.barrier)
    return collective.allmin(int(together)) == 1, seconds


def _round(box):
    box.ready()
    box.post()
    box.done()


class DeviceGather:
    """A replicated level from every rank's part (DMDAComm.gather), through one mailbox shared by
    every rank: each rank copies its part into its payload and every part out of its peers'.
    ``boxes``: every rank's (start, shape) of the level (allgathered, collective)."""

    def __init__(self, owner, boxes):
        self.owner, self.boxes = owner, boxes
        self.box = owner.open(math.prod(boxes[owner.rank][1]) * WIDEST,
                              [r for r in range(owner.size) if r != owner.rank])
        self.where = [tuple(slice(s, s + n) for s, n in zip(start, shape)) for start, shape in boxes]
        self._views = {}

    def _payloads(self, dtype):
        if dtype.str not in self._views:
            me = self.owner.rank
            self._views[dtype.str] = {r: self.box.payload(self.boxes[r][1], dtype, None if r == me else r)
                                      for r in [me] + self.box.peers}
        return self._views[dtype.str]

    def __call__(self, part, out):
        payloads = self._payloads(part.dtype)
        self.box.ready()
        payloads[self.owner.rank][...] = part
        self.box.post()
        for r, where in enumerate(self.where):
            out[where] = part if r == self.owner.rank else payloads[r]
        self.box.done()
        return out


class DeviceHalo:
    """The ghost values of a distributed CSR level (petsc.csrcomm._Halo, whose index lists it takes)
    through one mailbox: each rank copies the values its neighbours want into its payload,
    grouped by neighbour in rank order as the MPI exchange sends them, and its ghosts out of its
    neighbours' payloads. ``offsets[q]``: where in neighbour q's payload this rank's values begin
    (q's displacement for this rank). The peers are the ranks it receives from or sends to, the
    same relation seen from both ends, so every peer posts and reads each exchange."""

    def __init__(self, owner, halo, offsets):
        self.send, self.n, self.neighbours = halo.send, halo.n, halo.neighbours
        sources, destinations = halo.sources, halo.destinations
        peers = sorted(set(sources.tolist()) | set(destinations.tolist()))
        self.box = owner.open(int(self.send.size) * WIDEST, peers)
        # per source: (first ghost, count, where its values for this rank begin in its payload)
        self.reads = [(int(q), int(d), int(c), int(offsets[q])) for q, c, d in zip(sources, *halo.recv)]
        self._views = {}

    def _payloads(self, dtype):
        if dtype.str not in self._views:
            mine = self.box.payload((int(self.send.size),), dtype)
            theirs = {q: self.box.payload((off + c,), dtype, q)[off:] for q, _, c, off in self.reads}
            self._views[dtype.str] = (mine, theirs)
        return self._views[dtype.str]

    def __call__(self, x):
        cp = backend.cupy
        x = cp.asarray(x)                   # setup passes host arrays too
        mine, theirs = self._payloads(x.dtype)
        out = cp.empty(self.n, x.dtype)
        self.box.ready()
        cp.take(x, self.send, out=mine)
        self.box.post()
        for q, d, c, _ in self.reads:
            out[d:d + c] = theirs[q]
        self.box.done()
        return out


class DeviceAllsum:
    """Global sums of small device arrays (at most ``MAX`` values: a few inner products at once)
    through one mailbox shared by every rank, one kernel each (kernels/mailbox.cu's
    ``mailbox_allsum``): every rank adds the ranks' values in rank order, so all get the same bits,
    as an MPI reduction would give them, with no host in the loop (a flexible CG's inner products
    inside a captured cycle)."""
    MAX = 8

    def __init__(self, owner):
        self.owner = owner
        self.box = owner.open(self.MAX * WIDEST, [r for r in range(owner.size) if r != owner.rank])
        self._payloads = backend.cupy.asarray(numpy.array([a + self.box.head for a in self.box.at], numpy.uint64))

    def __call__(self, x):
        cp = backend.cupy
        x = cp.ascontiguousarray(x)
        if x.size > self.MAX:
            raise ValueError(f"DeviceAllsum sums at most {self.MAX} values at once, not {x.size}")
        out = cp.empty(x.shape, x.dtype)
        real = numpy.dtype(numpy.float32 if x.dtype.char in "fF" else numpy.float64)
        n = x.size * (2 if x.dtype.kind == "c" else 1)
        box = self.box
        kernels.kernel("mailbox", "mailbox_allsum", VAL="float" if real.itemsize == 4 else "double")(
            (1,), (1,), (x, out, numpy.int32(n), box.payload((n,), real), self._payloads,
                         numpy.int32(self.owner.size), box.seq, box.words, box._peer_words, box._ranks,
                         numpy.int32(len(box.peers)), numpy.int32(self.owner.rank), self.owner.status))
        return out


def ipc_all(collective):
    """Whether every rank can map every other rank's device memory through CUDA IPC, tried once
    on a small allocation (collective; an allgather of the handles)."""
    cp = backend.cupy
    try:
        probe = cp.cuda.Memory(256)
        handle = cp.cuda.runtime.ipcGetMemHandle(probe.ptr)
    except Exception:                                       # noqa: BLE001 (any failure: no IPC)
        handle = None
    ok = handle is not None
    for r, theirs in enumerate(collective.allgather(handle)):
        if r == collective.rank or not ok:
            continue
        try:
            cp.cuda.runtime.ipcCloseMemHandle(cp.cuda.runtime.ipcOpenMemHandle(
                theirs, cp.cuda.runtime.cudaIpcMemLazyEnablePeerAccess))
        except Exception:                                   # noqa: BLE001
            ok = False
    return collective.allmin(int(ok)) == 1
