"""CUDA graphs: whole cycles replayed as one launch (CycleGraphs), and the coarse visits that a
cycle repeats captured once and inserted wherever they recur (Subgraphs)."""
import collections
import contextlib
import ctypes

from . import cupy

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


def graph_pool():
    """A memory pool for a graph's temporaries (CycleGraphs' ``pool``): private, as a captured
    graph keeps the addresses it got, but with its chunks taken from CuPy's default pool, to which
    ``free_all_blocks`` gives them back. So the capture of a new preconditioner reuses the memory
    an earlier one gave back, where a pool of its own would pay a cudaMalloc for each temporary
    (a KSP created for each solve, a SNES step's new PC)."""
    return cupy.cuda.MemoryPool(cupy.get_default_memory_pool().malloc)


class CycleGraphs:
    """Replays ``run(x, out)`` as a CUDA graph, one per (input, output) pair of device buffers.

    A multigrid cycle is hundreds of small kernel launches (the coarse levels are launch-bound);
    captured once and replayed it is one launch. KSPs pass the same few work Vecs every iteration,
    so the graphs read and write PETSc's own memory with no extra copies. The first call per
    buffer pair captures, in relaxed mode so that kernels may compile and ``pool`` may grow while
    capturing (an eager first run would add a whole cycle's Python time to every setup). A call
    whose capture fails runs eagerly and the next one captures again; a second failure turns the
    graphs off. ``run`` must not synchronise with the host. Its temporaries come from ``pool`` (a
    private CuPy memory pool such as graph_pool(), or None for the default one): the captured graph
    keeps using the addresses it got during capture, so nothing else may allocate from that pool. With
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

    @classmethod
    def on_buffers(cls, run, n, dtype):
        """The graphs of a preconditioner's cycle ``run``: one graph on two buffers of ``n`` values
        of its own, whatever Vecs the KSP passes, its temporaries from a graph_pool()."""
        return cls(run, graph_pool(), buffers=(cupy.zeros(n, dtype), cupy.zeros(n, dtype)))

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


class Subgraphs:
    """The visits a cycle repeats, each captured once. During a capture ``__call__(key, run, f)``
    captures run(f) the first time as a graph of its own and inserts it as a child graph node,
    and inserts that graph again at every later call with the same key: a W- or K-cycle visits
    level k 2^(k-1) times with the same kernels on the same arrays, so the capture's Python runs
    once a level instead of once a visit (the graph replayed is the same). Outside a capture
    (eager, or where the driver has no child graph nodes) it is run(f).

    A visit's graph reads its input from a buffer of its own, ``input(key)``, where the caller may
    write it (else f is copied there), and writes its result where its first run did: every
    allocation of its capture is held until ``free`` (from CuPy's default pool, to which they go
    back then), so no later allocation reuses that memory. So the result is the same array at
    every visit of a key, valid until the next one, and ``run`` must neither keep its input nor
    return it."""

    def __init__(self):
        self.entries = {}                      # key: (graph, input buffer, result, the capture's allocations)
        self._depth = 0

    def input(self, key):
        """The buffer the visit ``key`` reads during a capture, None before its first capture or
        outside one."""
        entry = self.entries.get(key)
        return entry[1] if entry is not None and cupy.cuda.get_current_stream().is_capturing() else None

    def __call__(self, key, run, f):
        stream = cupy.cuda.get_current_stream()
        if not stream.is_capturing() or _driver() is None or _DRIVER.get("off"):
            return run(f)
        entry = self.entries.get(key)
        if entry is None:
            with cupy.cuda.using_allocator(cupy.get_default_memory_pool().malloc):
                buf = cupy.empty_like(f)
            buf[...] = f
            entry = self.entries[key] = self._capture(run, buf)
        elif f.data.ptr != entry[1].data.ptr:
            entry[1][...] = f
        _insert(stream.ptr, entry[0])
        return entry[2]

    def _capture(self, run, buf):
        """(graph, buf, run(buf), allocations held): run captured on a stream of this nesting depth."""
        key = (cupy.cuda.Device().id, self._depth)
        stream = _NESTED.get(key) or _NESTED.setdefault(key, cupy.cuda.Stream(non_blocking=True))
        held, graph, runtime, pool = [], None, cupy.cuda.runtime, cupy.get_default_memory_pool()

        def malloc(nbytes):
            held.append(pool.malloc(nbytes))
            return held[-1]
        self._depth += 1
        try:
            with stream, cupy.cuda.using_allocator(malloc):
                runtime.streamBeginCapture(stream.ptr, runtime.streamCaptureModeRelaxed)
                try:
                    out = run(buf)
                finally:
                    graph = runtime.streamEndCapture(stream.ptr)
        except BaseException:
            if graph:
                _driver().destroy(graph)
            raise
        finally:
            self._depth -= 1
        return graph, buf, out, held

    def free(self):
        """Destroy the captured visits and give their memory back (a graph that inserted them
        holds copies of the graphs, not of the memory: free it first). Also when this object goes."""
        for graph, *_ in self.entries.values():
            _driver().destroy(graph)
        self.entries = {}

    def __del__(self):
        if self.entries and _DRIVER.get("lib"):
            self.free()


_NESTED = {}      # (device, depth): the stream Subgraphs captures a visit on at that nesting depth
_DRIVER = {}


def _driver():
    """libcuda's entry points for adding nodes to a capture by hand (CuPy has no child graph
    nodes): cuStreamGetCaptureInfo and cuStreamUpdateCaptureDependencies in their CUDA 12.3+
    forms, cuGraphAddChildGraphNode, cuGraphDestroy; None where the driver lacks them."""
    if "lib" not in _DRIVER:
        try:
            lib, vp, p = ctypes.CDLL("libcuda.so.1"), ctypes.c_void_p, ctypes.POINTER
            fns = (lib.cuStreamGetCaptureInfo_v3, lib.cuGraphAddChildGraphNode,
                   lib.cuStreamUpdateCaptureDependencies_v2, lib.cuGraphDestroy)
        except (OSError, AttributeError):
            _DRIVER["lib"] = None
            return None
        fns[0].argtypes = [vp, p(ctypes.c_int), p(ctypes.c_ulonglong), p(vp), p(vp), p(vp), p(ctypes.c_size_t)]
        fns[1].argtypes = [p(vp), vp, vp, ctypes.c_size_t, vp]
        fns[2].argtypes = [vp, p(vp), vp, ctypes.c_size_t, ctypes.c_uint]
        fns[3].argtypes = [vp]
        _DRIVER["lib"] = _Driver(*fns)
    return _DRIVER["lib"]


_Driver = collections.namedtuple("_Driver", "capture_info add_child update_dependencies destroy")


def _insert(stream, graph):
    """Append ``graph`` to the capture under way on ``stream``: one child graph node after the
    stream's current dependencies, which it then replaces (CUDA's way of adding nodes to a
    capture: get the capture's graph and dependencies, add the node, set the dependencies). A
    failure turns child nodes off for this process, so that the next capture goes without them."""
    lib = _driver()
    vp, ref = ctypes.c_void_p, ctypes.byref
    status, ident, parent, deps, edges, n, node = (ctypes.c_int(), ctypes.c_ulonglong(), vp(), vp(), vp(),
                                                   ctypes.c_size_t(), vp())
    _check(lib.capture_info(stream, ref(status), ref(ident), ref(parent), ref(deps), ref(edges), ref(n)),
           "cuStreamGetCaptureInfo")
    _check(lib.add_child(ref(node), parent, deps, n, graph), "cuGraphAddChildGraphNode")
    _check(lib.update_dependencies(stream, ref(node), None, 1, 1), "cuStreamUpdateCaptureDependencies")  # 1: set


def _check(code, what):
    if code != 0:
        _DRIVER["off"] = True
        raise RuntimeError(f"{what} failed: CUresult {code}")
