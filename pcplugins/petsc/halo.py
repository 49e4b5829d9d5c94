"""Ghost updates of a distributed DMDA level, face by face, on the level's own arrays.

A level's array is this rank's block of the grid with a halo of one point on every side (grid.py).
An update sends the first and last owned layer along each axis to the neighbouring ranks of the
process grid and receives theirs into the halo. The axes go one after the other and each layer
spans the whole padded extent of the other axes, so the edges and corners of the halo (which the
trilinear transfers read) arrive through two or three hops, as in a box-stencil DMDA ghost
update, without the diagonal messages (the standard trick of structured-grid codes).

Transport: with NumPy arrays the layers go through MPI from host buffers. With CuPy arrays the
two layers of an axis are packed into one device buffer, copied to a pinned host buffer, sent,
and the received layers copied back and unpacked, all on the current stream: one wait for the
device per axis (the MPI used here is not GPU-aware; PETSc's DMGlobalToLocal on CUDA Vecs stages
the same bytes through the host, through more copies and a PetscSF set up per level).

Process grid: PETSc numbers a DMDA's ranks with x fastest (rank = i + m j + m n k), so with the
axes in the core's (z, y, x) order the ranks are the C-order ravel of the process coordinates.
"""
import numpy

from .. import backend

# tags of the ghost updates on the PC's communicator (the application's, which PETSc leaves to the
# application): within MPI's guaranteed 32767, and well away from the small tags programs use
TAG = 31000


class FaceExchange:
    """The ghost update of one level: ``shape`` is this rank's block (the array is ``shape + 2``),
    ``neighbours`` one (lower, upper) pair of ranks per axis, None at the grid's boundary."""

    def __init__(self, mpi, shape, neighbours, xp):
        self.mpi, self.xp = mpi, xp
        self.shape = tuple(shape)
        # per axis with a neighbour: the neighbours, and the layers sent (first and last owned)
        # and received (the halo) towards the lower and upper one
        self.axes = [(a, lo, hi, [self._slab(a, i) for i in (1, shape[a], 0, shape[a] + 1)])
                     for a, (lo, hi) in enumerate(neighbours) if lo is not None or hi is not None]
        self._buffers = {}
        self.gpu = backend.is_gpu(xp)

    def _slab(self, a, i):
        return tuple(i if b == a else slice(None) for b in range(len(self.shape)))

    def _buffers_for(self, a, dtype):
        """Send and receive buffers of axis ``a`` (the two layers of the axis side by side); pinned
        host memory with device twins on the GPU."""
        key = (a, dtype.str)
        if key not in self._buffers:
            layer = tuple(n + 2 for b, n in enumerate(self.shape) if b != a)
            count = 2 * int(numpy.prod(layer))
            if self.gpu:
                cp = backend.cupy
                host = [numpy.frombuffer(cp.cuda.alloc_pinned_memory(count * dtype.itemsize), dtype, count)
                        .reshape((2,) + layer) for _ in range(2)]
                dev = [cp.empty((2,) + layer, dtype) for _ in range(2)]
            else:
                host = [numpy.empty((2,) + layer, dtype) for _ in range(2)]
                dev = host
            self._buffers[key] = (host, dev)
        return self._buffers[key]

    def __call__(self, u):
        for a, lo, hi, slabs in self.axes:
            self._axis(u, a, lo, hi, slabs)
        return u

    def _axis(self, u, a, lo, hi, slabs):
        (send_h, recv_h), (send_d, recv_d) = self._buffers_for(a, u.dtype)
        send_lo, send_hi, halo_lo, halo_hi = slabs
        # buffer row 0: the layer for (and from) the lower neighbour, 1: the upper
        if lo is not None:
            send_d[0] = u[send_lo]
        if hi is not None:
            send_d[1] = u[send_hi]
        if self.gpu:
            stream = backend.cupy.cuda.get_current_stream()
            send_d.data.copy_to_host_async(send_h.ctypes.data, send_h.nbytes, stream)
            stream.synchronize()                       # the layers are in host memory
        requests = []
        mpi = self.mpi
        up, down = TAG + 2 * a, TAG + 2 * a + 1         # a message going up the axis, going down
        if lo is not None:
            requests += [mpi.Irecv(recv_h[0], lo, up), mpi.Isend(send_h[0], lo, down)]
        if hi is not None:
            requests += [mpi.Irecv(recv_h[1], hi, down), mpi.Isend(send_h[1], hi, up)]
        _waitall(requests)
        if self.gpu:
            # queued: the next exchange's wait for the device comes after it, so recv_h is free
            # again by then
            recv_d.data.copy_from_host_async(recv_h.ctypes.data, recv_h.nbytes, stream)
        if lo is not None:
            u[halo_lo] = recv_d[0]
        if hi is not None:
            u[halo_hi] = recv_d[1]


def _waitall(requests):
    from mpi4py import MPI
    MPI.Request.Waitall(requests)


def process_grid(counts, own_start, rank, collective):
    """This rank's coordinates in the process grid and its neighbours along each axis.

    ``counts``: per axis (core order), the number of points each process column owns
    (DMDAGetOwnershipRanges); ``own_start``: this rank's first point per axis. Checks on every
    rank that the ranks are numbered as assumed (the module docstring)."""
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
            pair.append(int(numpy.ravel_multi_index(c, dims)) if 0 <= c[a] < dims[a] else None)
        neighbours.append(tuple(pair))
    return coords, dims, neighbours

