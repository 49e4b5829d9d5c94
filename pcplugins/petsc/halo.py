"""Ghost updates of a distributed DMDA level, face by face, on the level's own arrays.

A level's array is this rank's block of the grid with a halo of one point on every side (grid.py).
An update sends the first and last owned layer along each axis to the neighbouring ranks of the
process grid and receives theirs into the halo. The axes go one after the other and each layer
spans the whole padded extent of the other axes, so the edges and corners of the halo (which the
trilinear transfers read) arrive through two or three hops, as in a box-stencil DMDA ghost
update, without the diagonal messages (the standard trick of structured-grid codes).

Transport: with NumPy arrays the layers go through MPI from host buffers. With the device
transport (``mailboxes``: ranks whose kernels run at the same time) each rank packs its layers into
a device mailbox its neighbours have mapped and the mailbox's counters order the updates on the GPU
(mailbox.py): nothing waits for the host. Otherwise, with CuPy arrays, where
every rank's neighbours run on the same node and CUDA IPC works between them (``ipc_works``, tried
once for the whole communicator), each rank packs its layers into a device buffer its neighbours
have mapped (cudaIpcOpenMemHandle, through CuPy), signals them by a one-byte MPI message and copies
their layers straight into its halo: no host copies, and MPI carries only the signal. The device
work is ordered by interprocess events: a rank records ``packed`` after its pack and ``read``
after its copies, and its neighbours' streams wait for them (cudaStreamWaitEvent), so the host
never waits for the device; where the events cannot be shared, each rank waits for its stream
before signalling instead. Two buffers alternate, so a rank packs update k + 2 over the layers of
update k only after its neighbours have read them: their ``read`` event of update k was recorded
before their signal of update k + 1, which this rank has received. Elsewhere the two layers of an
axis are packed into one device buffer, copied to a pinned host buffer, sent, and copied back and
unpacked, all on the current stream: one wait for the device per axis (the MPI used here is not
GPU-aware).

Process grid: PETSc numbers a DMDA's ranks with x fastest (rank = i + m j + m n k), so with the
axes in the core's (z, y, x) order the ranks are the C-order ravel of the process coordinates.
"""
import numpy

from .. import backend
from . import mailbox

# tags of the ghost updates on the PC's communicator (the application's, which PETSc leaves to the
# application): within MPI's guaranteed 32767, and well away from the small tags programs use
TAG = 31000


class FaceExchange:
    """The ghost update of one level: ``shape`` is this rank's block (the array is ``shape + 2``),
    ``neighbours`` one (lower, upper) pair of ranks per axis, None at the grid's boundary;
    ``ipc``: CuPy arrays travel through CUDA IPC, ``events``: with interprocess events instead of
    waits for the stream (``ipc_works`` said yes on every rank)."""

    def __init__(self, mpi, shape, neighbours, xp, ipc=False, events=False, mailboxes=None):
        self.mpi, self.xp, self.mailboxes = mpi, xp, mailboxes
        self.shape = tuple(shape)
        # per axis with a neighbour: the neighbours, and the layers sent (first and last owned)
        # and received (the halo) towards the lower and upper one
        self.axes = [(a, lo, hi, [self._slab(a, i) for i in (1, shape[a], 0, shape[a] + 1)])
                     for a, (lo, hi) in enumerate(neighbours) if lo is not None or hi is not None]
        self._layers = {}
        self.gpu = backend.is_gpu(xp)
        self.ipc = ipc and self.gpu
        self.events = events and self.ipc

    def _slab(self, a, i):
        return tuple(i if b == a else slice(None) for b in range(len(self.shape)))

    def open(self):
        """Open the device mailboxes of every axis now (collective; the device transport's layers
        serve every value type, so a captured cycle finds them open)."""
        for a, lo, hi, _ in self.axes:
            self._open(a, lo, hi, None)

    def _open(self, a, lo, hi, dtype):
        key = a if self.mailboxes is not None else (a, dtype.str)
        if key not in self._layers:       # made at the first update, when the neighbours make theirs
            layer = tuple(n + 2 for b, n in enumerate(self.shape) if b != a)
            if self.mailboxes is not None:
                self._layers[key] = _DeviceLayers(a, lo, hi, layer, self.mailboxes)
            elif self.ipc:
                self._layers[key] = _IpcLayers(self.mpi, a, lo, hi, layer, dtype, self.xp, self.events)
            else:
                self._layers[key] = _HostLayers(self.mpi, a, lo, hi, layer, dtype, self.xp)
        return self._layers[key]

    def __call__(self, u):
        for a, lo, hi, slabs in self.axes:
            self._open(a, lo, hi, u.dtype).update(u, slabs)
        return u

    def free(self):
        """Unmap the neighbours' buffers (after every rank's device work: petsc.mpi.DMDAComm.free)."""
        for layers in self._layers.values():
            layers.free()
        self._layers = {}


class _HostLayers:
    """The two layers of one axis through host memory: pinned buffers with device twins on the
    GPU, row 0 for (and from) the lower neighbour, row 1 the upper."""

    def __init__(self, mpi, a, lo, hi, layer, dtype, xp):
        self.mpi, self.lo, self.hi = mpi, lo, hi
        self.up, self.down = TAG + 2 * a, TAG + 2 * a + 1      # a message going up the axis, going down
        self.gpu = backend.is_gpu(xp)
        count = 2 * int(numpy.prod(layer))
        if self.gpu:
            cp = backend.cupy
            self.send_h, self.recv_h = [numpy.frombuffer(cp.cuda.alloc_pinned_memory(count * dtype.itemsize), dtype,
                                                         count).reshape((2,) + layer) for _ in range(2)]
            self.send_d, self.recv_d = cp.empty((2,) + layer, dtype), cp.empty((2,) + layer, dtype)
        else:
            self.send_h, self.recv_h = numpy.empty((2,) + layer, dtype), numpy.empty((2,) + layer, dtype)
            self.send_d, self.recv_d = self.send_h, self.recv_h

    def update(self, u, slabs):
        _pack(self.send_d, u, slabs, self.lo, self.hi)
        if self.gpu:
            stream = backend.cupy.cuda.get_current_stream()
            self.send_d.data.copy_to_host_async(self.send_h.ctypes.data, self.send_h.nbytes, stream)
            stream.synchronize()                       # the layers are in host memory
        _swap(self.mpi, self.lo, self.hi, self.up, self.down, self.send_h, self.recv_h)
        if self.gpu:
            # queued: the next update's wait for the device comes after it, so recv_h is free by then
            self.recv_d.data.copy_from_host_async(self.recv_h.ctypes.data, self.recv_h.nbytes, stream)
        _unpack(u, self.recv_d[0], self.recv_d[1], slabs, self.lo, self.hi)

    def free(self):
        pass


class _IpcLayers:
    """The two layers of one axis through CUDA IPC: this rank's buffer ``mine`` [parity][side]
    [layer], mapped by its neighbours, and theirs mapped here (the module docstring)."""

    def __init__(self, mpi, a, lo, hi, layer, dtype, xp, events=False):
        cp = backend.cupy
        self.mpi, self.lo, self.hi = mpi, lo, hi
        # with IPC events: ``packed`` recorded after this rank's pack, ``read`` after its copies of
        # the neighbours' layers; the neighbours' streams wait for them, the host never does
        self.events = events
        self.peer_events = [None, None]
        mine_events = []
        if events:
            self.packed, self.read = (cp.cuda.Event(block=False, disable_timing=True, interprocess=True)
                                      for _ in range(2))
            mine_events = [cp.cuda.runtime.ipcGetEventHandle(e.ptr) for e in (self.packed, self.read)]
        self.up, self.down = TAG + 2 * a, TAG + 2 * a + 1
        shape = (2, 2) + layer
        nbytes = int(numpy.prod(shape)) * dtype.itemsize
        self.mem = cp.cuda.Memory(nbytes)           # its own cudaMalloc: an IPC handle maps a whole allocation
        self.mine = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(self.mem, 0))
        handle = cp.cuda.runtime.ipcGetMemHandle(self.mem.ptr)
        self.peers, self._opened = [None, None], []
        device = cp.cuda.Device().id
        for side, peer in ((0, lo), (1, hi)):
            if peer is None:
                continue
            theirs, theirs_events = mpi.sendrecv((handle, mine_events), dest=peer, sendtag=TAG + 100 + a,
                                                 source=peer, recvtag=TAG + 100 + a)
            ptr = cp.cuda.runtime.ipcOpenMemHandle(theirs, cp.cuda.runtime.cudaIpcMemLazyEnablePeerAccess)
            self._opened.append(ptr)
            mem = cp.cuda.UnownedMemory(ptr, nbytes, self, device_id=device)
            self.peers[side] = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0))
            if events:
                self.peer_events[side] = [cp.cuda.runtime.ipcOpenEventHandle(h) for h in theirs_events]
        self.k = 0
        self.signal_out, self.signal_in = numpy.zeros((2, 1), numpy.int8), numpy.zeros((2, 1), numpy.int8)

    def update(self, u, slabs):
        cp = backend.cupy
        stream = cp.cuda.get_current_stream()
        par = self.k % 2
        self.k += 1
        if self.events and self.k > 2:
            # the neighbours have read this parity's layers (two updates ago): their ``read``
            # event, recorded before their signal of the last update arrived here
            for ev in self.peer_events:
                if ev is not None:
                    cp.cuda.runtime.streamWaitEvent(stream.ptr, ev[1], 0)
        _pack(self.mine[par], u, slabs, self.lo, self.hi)
        if self.events:
            self.packed.record(stream)
        else:
            stream.synchronize()              # packed, and this rank's last reads of theirs done
        _swap(self.mpi, self.lo, self.hi, self.up, self.down, self.signal_out, self.signal_in)
        if self.events:                       # their pack of this update (or a later one) is done
            for ev in self.peer_events:
                if ev is not None:
                    cp.cuda.runtime.streamWaitEvent(stream.ptr, ev[0], 0)
        # from each neighbour the layer it packed for this rank: the lower one's upper layer, the
        # upper one's lower layer
        theirs = [p[par, 1 - side] if p is not None else None for side, p in enumerate(self.peers)]
        _unpack(u, *theirs, slabs, self.lo, self.hi)
        if self.events:
            self.read.record(stream)

    def free(self):
        cp = backend.cupy
        self.peers = [None, None]
        for ptr in self._opened:
            cp.cuda.runtime.ipcCloseMemHandle(ptr)
        for evs in self.peer_events:
            for ev in evs or ():
                cp.cuda.runtime.eventDestroy(ev)
        self._opened, self.peer_events = [], [None, None]
        self.mine = self.mem = None


class _DeviceLayers:
    """The two layers of one axis through a device mailbox (mailbox.py): packed into this rank's
    payload, read by the neighbours from theirs, every wait on the GPU. The payload holds the
    widest value type (mailbox.WIDEST), so one mailbox serves the setup's and the cycle's."""

    def __init__(self, a, lo, hi, layer, mailboxes):
        self.a, self.lo, self.hi = a, lo, hi
        self.shape = (2,) + layer
        self.box = mailboxes.open(int(numpy.prod(self.shape)) * mailbox.WIDEST, [p for p in (lo, hi) if p is not None])
        self._views = {}

    def update(self, u, slabs):
        """Two kernels (mailbox.Mailbox.pack, unpack): the copies of halo.py's ``_pack`` and
        ``_unpack`` with the mailbox's waits folded in."""
        key = (u.dtype.str, u.strides)
        if key not in self._views:
            # the layer across axis a: its stride, and the other axes' extents and strides as a
            # (rows, row) block (one row of one block in 2D)
            st = [s // u.itemsize for s in u.strides]
            rest = [b for b in range(u.ndim) if b != self.a]
            nb, sb = (u.shape[rest[0]], st[rest[0]]) if len(rest) == 2 else (1, 0)
            self._views[key] = (st[self.a], nb * u.shape[rest[-1]], u.shape[rest[-1]], sb, st[rest[-1]])
        layer, n = self._views[key], u.shape[self.a] - 2
        lo, hi = (1 if self.lo is not None else None), (n if self.hi is not None else None)
        self.box.pack(u, layer, lo, hi)
        self.box.unpack(u, layer, 0 if lo is not None else None, n + 1 if hi is not None else None, self.lo, self.hi)

    def free(self):
        self._views = {}                          # the mailboxes themselves: Mailboxes.free


def ipc_works(mpi, neighbours, collective):
    """What CUDA IPC every rank can do with its neighbours, tried once on small objects
    (collective): (memory, events): each True on every rank when every rank can map its
    neighbours' device memory, and open their interprocess events."""
    cp = backend.cupy
    mem_ok = ev_ok = True
    handles = None
    try:
        probe = cp.cuda.Memory(256)
        event = cp.cuda.Event(block=False, disable_timing=True, interprocess=True)
        handles = (cp.cuda.runtime.ipcGetMemHandle(probe.ptr), cp.cuda.runtime.ipcGetEventHandle(event.ptr))
    except Exception:                                       # noqa: BLE001 (any failure: no IPC)
        mem_ok = ev_ok = False
    for a, pair in enumerate(neighbours):
        for peer in pair:
            if peer is None:
                continue
            theirs = mpi.sendrecv(handles, dest=peer, sendtag=TAG + 200 + a, source=peer, recvtag=TAG + 200 + a)
            if theirs is None or handles is None:
                mem_ok = ev_ok = False
                continue
            try:
                ptr = cp.cuda.runtime.ipcOpenMemHandle(theirs[0], cp.cuda.runtime.cudaIpcMemLazyEnablePeerAccess)
                cp.cuda.runtime.ipcCloseMemHandle(ptr)
            except Exception:                               # noqa: BLE001
                mem_ok = False
            try:
                cp.cuda.runtime.eventDestroy(cp.cuda.runtime.ipcOpenEventHandle(theirs[1]))
            except Exception:                               # noqa: BLE001
                ev_ok = False
    mem_ok = collective.allmin(int(mem_ok)) == 1
    return mem_ok, mem_ok and collective.allmin(int(ev_ok)) == 1


def _pack(buf, u, slabs, lo, hi):
    """The first and last owned layers of ``u`` into rows 0 and 1 of ``buf``, where there is a
    lower and an upper neighbour."""
    if lo is not None:
        buf[0] = u[slabs[0]]
    if hi is not None:
        buf[1] = u[slabs[1]]


def _unpack(u, from_lo, from_hi, slabs, lo, hi):
    """The layers received from the lower and upper neighbour into ``u``'s halo."""
    if lo is not None:
        u[slabs[2]] = from_lo
    if hi is not None:
        u[slabs[3]] = from_hi


def _swap(mpi, lo, hi, up, down, send, recv):
    """Row 0 of ``send`` to the lower neighbour and row 1 to the upper, their rows into ``recv``
    (tag ``up`` for a message going up the axis, ``down`` going down), waiting for all four."""
    from mpi4py import MPI
    requests = []
    if lo is not None:
        requests += [mpi.Irecv(recv[0], lo, up), mpi.Isend(send[0], lo, down)]
    if hi is not None:
        requests += [mpi.Irecv(recv[1], hi, down), mpi.Isend(send[1], hi, up)]
    MPI.Request.Waitall(requests)


def process_grid(counts, own_start, rank, collective, periodic=()):
    """This rank's coordinates in the process grid and its neighbours along each axis.

    ``counts``: per axis (core order), the number of points each process column owns
    (DMDAGetOwnershipRanges); ``own_start``: this rank's first point per axis; ``periodic``: per
    axis whether the grid wraps, so the first and last process columns are neighbours (a rank
    alone along such an axis is its own neighbour on both sides: its messages to itself wrap its
    halo). Checks on every rank that the ranks are numbered as assumed (the module docstring)."""
    dims = tuple(len(c) for c in counts)
    coords = tuple(int(numpy.searchsorted(numpy.cumsum(c) - c, s)) for c, s in zip(counts, own_start))
    if int(numpy.ravel_multi_index(coords, dims)) != rank:
        problem = f"rank {rank} at process coordinates {coords} of {dims}"
    else:
        problem = None
    collective.check(problem and f"internal error: DMDA ranks not numbered x fastest ({problem})")
    neighbours = []
    for a in range(len(dims)):
        pair = []
        for step in (-1, 1):
            c = list(coords)
            c[a] += step
            if a < len(periodic) and periodic[a]:
                c[a] %= dims[a]
            pair.append(int(numpy.ravel_multi_index(c, dims)) if 0 <= c[a] < dims[a] else None)
        neighbours.append(tuple(pair))
    return coords, neighbours

