"""Array backend: NumPy on the host, CuPy on the GPU, and CUDA graphs of whole cycles.

The numerical core is written once against an array namespace ``xp`` (``numpy`` or ``cupy``).
This module picks the namespace and moves arrays between host and device; graphs.py replays a
cycle as a CUDA graph, and cublas.py multiplies matrices in a way a graph may capture
(``matmul``). The package depends on nothing else in pcplugins and never touches PETSc (views of
PETSc's Vecs are petsc/vec.py's).
"""
import concurrent.futures
import contextlib
import math
import os
import time

import numpy

try:  # CuPy is optional: CI machines have no GPU.
    import cupy
except Exception:  # pragma: no cover - depends on the machine
    cupy = None


def gpu_available():
    """True when CuPy imports and sees at least one CUDA device."""
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def namespace(device):
    """The array module for ``device`` ('cpu' or 'gpu')."""
    if device == "cpu":
        return numpy
    if device == "gpu":
        if cupy is None:
            raise RuntimeError("GPU requested but CuPy is not installed")
        if not gpu_available():
            raise RuntimeError("GPU requested but CuPy sees no CUDA device")
        return cupy
    raise ValueError(f"unknown device {device!r} (expected 'cpu' or 'gpu')")


def array_module(a):
    """numpy or cupy, whichever owns ``a``."""
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    return numpy


def is_gpu(xp):
    return cupy is not None and xp is cupy


def to_namespace(a, xp):
    """``a`` as an array of ``xp`` (a copy across the host/device boundary, else ``a`` itself)."""
    if is_gpu(xp):
        return a if isinstance(a, cupy.ndarray) else upload(a)
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy.asnumpy(a)
    return numpy.asarray(a)


# Host arrays of at least STAGED_BYTES go up through pinned buffers of STAGE_CHUNK bytes that
# threads fill while the previous buffer's copy runs: a copy straight from pageable memory is
# staged by one driver thread, at a fraction of the link's bandwidth (docs/amg.md has the figures)
STAGED_BYTES = 1 << 24
STAGE_CHUNK = 1 << 25
STAGE_BUFFERS = 3
_stagers = []


def upload(a):
    """The host array ``a`` as a new C-contiguous CuPy array on the current stream's device,
    complete when this returns. Large arrays (STAGED_BYTES) go through pinned buffers from CuPy's
    pinned pool, each filled by up to 16 threads (as many as this process may run on), then copied
    asynchronously while the next buffer fills."""
    a = numpy.ascontiguousarray(a)
    if a.nbytes < STAGED_BYTES:
        return cupy.asarray(a)
    if not _stagers:
        threads = min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        _stagers.append((concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="pcplugins-upload"),
                         threads))
    pool, threads = _stagers[0]
    out = cupy.empty(a.shape, a.dtype)
    src = a.reshape(-1).view(numpy.uint8)
    stream = cupy.cuda.get_current_stream()
    bufs = [cupy.cuda.alloc_pinned_memory(STAGE_CHUNK) for _ in range(STAGE_BUFFERS)]
    done = [None] * STAGE_BUFFERS         # the event of each buffer's last copy
    for i, start in enumerate(range(0, src.size, STAGE_CHUNK)):
        k, m = i % STAGE_BUFFERS, min(STAGE_CHUNK, src.size - start)
        if done[k] is not None:
            done[k].synchronize()
        buf, step = numpy.frombuffer(bufs[k], numpy.uint8, m), -(-m // threads)
        # numpy's copies release the GIL: the threads copy in parallel
        list(pool.map(lambda j: numpy.copyto(buf[j:j + step], src[start + j:start + j + step]), range(0, m, step)))
        (out.data + start).copy_from_host_async(bufs[k].ptr, m, stream)
        done[k] = stream.record()
    stream.synchronize()                  # the buffers go back to the pool only once read
    return out


def to_host(a):
    return to_namespace(a, numpy)


def device_id(xp):
    """The current CUDA device's number for CuPy, None on the host."""
    return cupy.cuda.Device().id if is_gpu(xp) else None


def resident_blocks(kernel, threads):
    """Blocks of ``threads`` threads of a compiled CuPy kernel that the current device's SMs hold at
    once (its registers and static shared memory decide)."""
    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, 0)
    return per_sm * cupy.cuda.Device().attributes["MultiProcessorCount"]


def synchronize(xp):
    """Wait for queued device work (a no-op on the host)."""
    if is_gpu(xp):
        cupy.cuda.get_current_stream().synchronize()


_SIDE_STREAMS = {}


def fork(xp):
    """A second stream for device work that may run while the host goes on queueing work on the
    current one: it starts after what the current stream has queued so far. Returns
    (stream, join): ``with stream:`` queues work there; join() makes the current stream's later
    work wait for it. Non-blocking (CUDA's legacy default stream, CuPy's and PETSc's, would otherwise
    wait for it at once), one per device, kept: CuPy's pool reuses a stream's freed memory on that
    stream only. On the host (stream, join) do nothing."""
    if not is_gpu(xp):
        return contextlib.nullcontext(), lambda: None
    device = cupy.cuda.Device().id
    side = _SIDE_STREAMS.get(device)
    if side is None:
        side = _SIDE_STREAMS[device] = cupy.cuda.Stream(non_blocking=True)
    main = cupy.cuda.get_current_stream()
    side.wait_event(main.record())
    return side, lambda: main.wait_event(side.record())


class Clock:
    """Seconds since the previous call (device work finished)."""

    def __init__(self, xp):
        self.xp, self.t = xp, time.perf_counter()

    def __call__(self):
        synchronize(self.xp)
        t, self.t = self.t, time.perf_counter()
        return self.t - t


def zeros_carved(xp, dtype, shapes, align=64):
    """Zeroed C-contiguous arrays of the given shapes, views of one allocation (one cudaMalloc,
    not one per array: allocations are much of a GPU setup's host time), each starting a multiple
    of ``align`` entries in."""
    sizes = [-(-math.prod(s) // align) * align for s in shapes]
    buf = xp.zeros(sum(sizes), dtype)
    out, start = [], 0
    for s, n in zip(shapes, sizes):
        out.append(buf[start:start + math.prod(s)].reshape(s))
        start += n
    return out


def any_true(mask):
    """bool(mask.any()) for a boolean array (see any_flag)."""
    return mask.size > 0 and bool(any_flag(mask))


def any_flag(mask):
    """1 if any entry of a non-empty boolean array is true, else 0, as a 0-d array on its device
    (no host transfer): the maximum of its bytes. CuPy's any() is a CUB block reduction compiled
    (with CUB's headers) anew for each input-size class, seconds each time a new AMG level size
    appears; a maximum goes to the device-wide CUB routines CuPy ships compiled."""
    return mask.view(numpy.int8).max()


def all_true(mask):
    """bool(mask.all()), as any_true does it (a minimum of the bytes)."""
    return mask.size == 0 or bool(mask.view(numpy.int8).min())


def column_reduce(a, name):
    """``a.<name>(axis=0)`` (min, max, mean, sum) of an n x d array with small d, one column at
    a time: CuPy reduces along the leading axis of a tall array with one thread block per output,
    which is slow for millions of rows, and a contiguous column with the device-wide CUB routine."""
    xp = array_module(a)
    if xp is numpy:
        return getattr(a, name)(axis=0)
    return xp.stack([getattr(xp.ascontiguousarray(a[:, k]), name)() for k in range(a.shape[1])])


# the package's other modules use the names above
from .cublas import matmul  # noqa: E402, F401
from .graphs import CycleGraphs, Subgraphs, graph_pool  # noqa: E402, F401
