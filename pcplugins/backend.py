"""Array backend: NumPy on the host, CuPy on the GPU, and CUDA graphs of whole cycles.

The numerical core is written once against an array namespace ``xp`` (``numpy`` or ``cupy``).
This module picks the namespace, moves arrays between host and device, replays a cycle as a CUDA
graph, and multiplies matrices in a way a graph may capture (``matmul``). It depends on nothing
else in pcplugins and never touches PETSc (views of PETSc's Vecs are petsc/vec.py's).
"""
import concurrent.futures
import contextlib
import ctypes
import ctypes.util
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


def matmul(a, b, out):
    """out = a @ b for C-contiguous real arrays: (M, K) or a batch (n, M, K) times (K, N) or a
    batch (n, K, N), one operand possibly unbatched (used for every matrix of the other). On the
    GPU one cuBLAS strided batched GEMM (see _Cublas), which a CUDA graph capture may record."""
    if array_module(out) is numpy:
        return numpy.matmul(a, b, out=out)
    return _cublas().gemm(a, b, out)


class _Cublas:
    """cuBLAS's ?gemmStridedBatched on a handle of our own, called through ctypes. CuPy refuses
    every cuBLAS call while a stream captures (cuBLAS supports capture: its CUDA Graphs section
    asks for a workspace set by the caller, so that no allocation happens in a capture), so the
    products that a captured cycle makes come here. Row-major C = A B is column-major
    C^T = B^T A^T: cuBLAS gets B as its first operand."""
    WORKSPACE = 32 << 20                    # cuBLAS's recommendation for Hopper

    def __init__(self):
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (CuPy's own load of libcublas)
        path = next((line.split()[-1] for line in open("/proc/self/maps")
                     if "/libcublas.so" in line), None) or ctypes.util.find_library("cublas")
        self.lib = ctypes.CDLL(path)
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        self.workspace = cupy.empty(self.WORKSPACE, numpy.uint8)
        self.stream = None
        self.funcs = {numpy.dtype(numpy.float64): (self.lib.cublasDgemmStridedBatched, ctypes.c_double),
                      numpy.dtype(numpy.float32): (self.lib.cublasSgemmStridedBatched, ctypes.c_float)}

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed: cuBLAS status {status}")

    def _use_stream(self):
        stream = cupy.cuda.get_current_stream().ptr
        if stream != self.stream:           # setting the stream resets the workspace
            self._check(self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream)), "cublasSetStream")
            self._check(self.lib.cublasSetWorkspace_v2(self.handle, ctypes.c_void_p(self.workspace.data.ptr),
                                                       ctypes.c_size_t(self.WORKSPACE)), "cublasSetWorkspace")
            self.stream = stream

    def gemm(self, a, b, out):
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            raise ValueError("matmul needs C-contiguous arrays")
        if a.dtype != b.dtype or a.dtype != out.dtype or a.dtype not in self.funcs:
            raise ValueError(f"matmul needs one real dtype, got {a.dtype}, {b.dtype}, {out.dtype}")
        M, K = a.shape[-2:]
        N = b.shape[-1]
        if out.size == 0:
            return out
        batch = out.size // (M * N)
        if b.shape[-2] != K or out.shape[-2:] != (M, N) or any(x.ndim == 3 and x.shape[0] != batch for x in (a, b)):
            raise ValueError(f"matmul shapes {a.shape} @ {b.shape} -> {out.shape}")
        func, scalar = self.funcs[a.dtype]
        one, zero = scalar(1.0), scalar(0.0)
        self._use_stream()
        status = func(self.handle, 0, 0, N, M, K, ctypes.byref(one),
                      ctypes.c_void_p(b.data.ptr), N, ctypes.c_longlong(K * N if b.ndim == 3 else 0),
                      ctypes.c_void_p(a.data.ptr), K, ctypes.c_longlong(M * K if a.ndim == 3 else 0),
                      ctypes.byref(zero), ctypes.c_void_p(out.data.ptr), N, ctypes.c_longlong(M * N), batch)
        self._check(status, "cublas?gemmStridedBatched")
        return out


_CUBLAS = {}


def _cublas():
    dev = device_id(cupy)
    if dev not in _CUBLAS:
        _CUBLAS[dev] = _Cublas()
    return _CUBLAS[dev]


_CAPTURE_STREAMS = {}


def _capture_stream():
    """One capture stream per device, kept: CuPy's pool reuses a freed block only on the stream it
    was freed on, so the temporaries of a capture on a new stream each time (an FFT's, say) would
    pile up in the default pool with every new preconditioner."""
    dev = cupy.cuda.Device().id
    stream = _CAPTURE_STREAMS.get(dev)
    if stream is None:
        stream = _CAPTURE_STREAMS[dev] = cupy.cuda.Stream(non_blocking=True)
    return stream


class CycleGraphs:
    """Replays ``run(x, out)`` as a CUDA graph, one per (input, output) pair of device buffers.

    A multigrid cycle is hundreds of small kernel launches (the coarse levels are launch-bound);
    captured once and replayed it is one launch. KSPs pass the same few work Vecs every iteration,
    so the graphs read and write PETSc's own memory with no extra copies. The first call per
    buffer pair captures, in relaxed mode so that kernels may compile and ``pool`` may grow while
    capturing (an eager first run would add a whole cycle's Python time to every setup). A call
    whose capture fails runs eagerly and the next one captures again; a second failure turns the
    graphs off. ``run`` must not synchronise with the host. Its temporaries come from ``pool`` (a
    private CuPy memory pool, or None for the default one): the captured graph keeps using the
    addresses it got during capture, so nothing else may allocate from that pool. With
    ``buffers`` (an input and an output array of our own) there is one graph on them, whatever
    Vecs the KSP passes.
    """
    MAX = 8

    def __init__(self, run, pool=None, buffers=None):
        self.run, self.pool = run, pool
        self.graphs = {}
        self.failed = False
        self.on = True
        self.note = "on (whole cycle captured)"
        self.buffers = buffers

    def __call__(self, x, out):
        if not self.on:
            return self._eager(x, out)
        if self.buffers is not None:
            # Krylov methods that keep many directions (fcg, fgmres) pass a new output Vec nearly
            # every iteration: one graph on buffers of our own, two copies per application
            bx, bout = self.buffers
            bx[...] = x
            self._keyed(bx, bout)
            out[...] = bout
            return
        self._keyed(x, out)

    def _keyed(self, x, out):
        key = (x.data.ptr, out.data.ptr)
        graph = self.graphs.get(key)
        if graph is None:
            graph = self._capture(x, out)
            if graph is None:
                return self._eager(x, out)
            if len(self.graphs) >= self.MAX:
                self.graphs.pop(next(iter(self.graphs)))
            self.graphs[key] = graph
        graph.launch(cupy.cuda.get_current_stream())

    def free(self):
        """Drop the graphs, the callback and the pool now (the callback usually refers back to
        the object that holds these graphs: a reference cycle that would keep the GPU memory
        until Python's cyclic garbage collector runs)."""
        self.graphs = {}
        self.run = self.buffers = None
        if self.pool is not None:
            self.pool.free_all_blocks()
        self.pool = None
        self.on = False

    def _allocator(self):
        if self.pool is None:
            return contextlib.nullcontext()
        return cupy.cuda.using_allocator(self.pool.malloc)

    def _eager(self, x, out):
        with self._allocator():
            return self.run(x, out)

    def _capture(self, x, out):
        # no synchronisation first: capturing executes nothing, and the graph is launched on the
        # current stream after the work queued there, so the GPU goes on with that work while
        # the host captures
        stream = _capture_stream()
        try:
            with stream, self._allocator():
                stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
                try:
                    self.run(x, out)
                finally:
                    graph = stream.end_capture()
            stream.synchronize()
            return graph
        except Exception as e:                  # stay correct: this call runs eagerly
            if self.failed:                     # and so do all later ones
                self.on = False
                self.note = f"off (capture failed: {str(e).splitlines()[0][:80]})"
            self.failed = True
            return None
