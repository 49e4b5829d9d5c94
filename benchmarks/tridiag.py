"""Batched tridiagonal solve throughput on the GPU: pcplugins' cyclic-reduction kernel
(tridiag.cyclic_reduction) against cuSPARSE's gtsv2StridedBatch, the Thomas algorithm vectorised
over the systems in CuPy (tridiag.thomas), and a bandwidth floor: a device-to-device copy of the
same bytes.

    python benchmarks/tridiag.py [-batches 1025,8192] [-n 1025] [-out benchmarks/results/x.json]

Bytes counted per solve: the four arrays read (lower, diagonal, upper, right-hand side), as the
issue states the target; the solution written is reported beside. Times are device times: each
solver (and the copy) is captured ten times over in one CUDA graph, and the median of 15 replays,
divided by ten, is one call's time. Events around a single call would also count the host's
Python overhead whenever the GPU waits for the launch (tens of microseconds: as much as the
kernel itself at 1025 systems). The CuPy Thomas solve, thousands of kernels, is captured once
and replayed 3 times. cuSPARSE cannot be called during a capture in CuPy: its ten calls are
enqueued back to back between the events instead (a call's host time is shorter than its device
time, so the GPU does not wait); its time includes copying the right-hand side, which gtsv
overwrites.
"""
import json
import platform
import shlex
import sys

import cupy as cp
import numpy

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from pcplugins.core import tridiag  # noqa: E402


def device_time(f, calls=10, reps=15, graph=True):
    """One call's device time: f captured ``calls`` times in a CUDA graph, median of the replays
    (graph=False: ``calls`` calls enqueued back to back, for what CuPy cannot capture)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        f()
        if graph:
            stream.begin_capture()
            for _ in range(calls):
                f()
            g = stream.end_capture()
            g.launch(stream)
        times = []
        for _ in range(reps):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            if graph:
                g.launch(stream)
            else:
                for _ in range(calls):
                    f()
            end.record(stream)
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3 / calls)
    return float(numpy.median(times))


def write(path, results):
    """The results as JSON with the command, the device and the versions (the device benchmarks
    without PETSc: tridiag.py, fft_dst.py)."""
    meta = {"command": shlex.join(sys.argv), "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
            "cupy": cp.__version__, "python": platform.python_version()}
    with open(path, "w") as fh:
        json.dump({"meta": meta, "results": results}, fh, indent=1)


def systems(batch, n, dtype, seed=0):
    rng = cp.random.default_rng(seed)
    lo = -rng.random((batch, n), dtype=numpy.float64)
    up = -rng.random((batch, n), dtype=numpy.float64)
    dg = 2.2 + rng.random((batch, n), dtype=numpy.float64)
    rhs = rng.standard_normal((batch, n), dtype=numpy.float64)
    return [a.astype(dtype) for a in (lo, dg, up, rhs)]


def cusparse_gtsv(lo, dg, up, rhs):
    """A solver calling cuSPARSE gtsv2StridedBatch (None where CuPy does not expose it)."""
    try:
        from cupy.cuda import device
        from cupy_backends.cuda.libs import cusparse
    except ImportError:
        return None
    prefix = {numpy.dtype(numpy.float64): "d", numpy.dtype(numpy.float32): "s"}[numpy.dtype(dg.dtype)]
    size_f = getattr(cusparse, prefix + "gtsv2StridedBatch_bufferSizeExt", None)
    solve_f = getattr(cusparse, prefix + "gtsv2StridedBatch", None)
    if size_f is None or solve_f is None:
        return None
    batch, n = dg.shape
    dl, du = lo.copy(), up.copy()
    dl[:, 0] = 0
    du[:, -1] = 0
    x = rhs.copy()
    h = device.get_cusparse_handle()
    buf = cp.empty(size_f(h, n, dl.data.ptr, dg.data.ptr, du.data.ptr, x.data.ptr, batch, n), numpy.uint8)

    def run():
        x[...] = rhs                          # gtsv overwrites the right-hand side
        cusparse.setStream(h, cp.cuda.get_current_stream().ptr)
        solve_f(h, n, dl.data.ptr, dg.data.ptr, du.data.ptr, x.data.ptr, batch, n, buf.data.ptr)
        return x
    return run


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    batches = [int(b) for b in args.get("-batches", "1025,8192").split(",")]
    n = int(args.get("-n", 1025))
    results = []
    for dtype in (numpy.float64, numpy.float32):
        for batch in batches:
            lo, dg, up, rhs = systems(batch, n, dtype)
            read = 4 * batch * n * numpy.dtype(dtype).itemsize
            ref = tridiag.thomas(lo, dg, up, rhs, cp)
            src = cp.empty(read // numpy.dtype(dtype).itemsize, dtype)
            dst = cp.empty_like(src)
            t_copy = device_time(lambda: cp.copyto(dst, src))
            row = {"dtype": numpy.dtype(dtype).name, "batch": batch, "n": n, "bytes_read": read,
                   "copy_s": t_copy, "copy_GBps": 2 * read / t_copy / 1e9}
            x = cp.empty_like(rhs)
            solvers = {"pcplugins cyclic reduction": lambda: tridiag.cyclic_reduction(lo, dg, up, rhs, out=x),
                       **{f"pcplugins cyclic reduction, {t} threads per system":
                          (lambda t=t: tridiag.cyclic_reduction(lo, dg, up, rhs, out=x, threads=t))
                          for t in (64, 128, 256)},
                       "CuPy Thomas (vectorised over systems)": lambda: tridiag.thomas(lo, dg, up, rhs, cp)}
            gtsv = cusparse_gtsv(lo, dg, up, rhs)
            if gtsv is not None:
                solvers["cuSPARSE gtsv2StridedBatch"] = gtsv
            for name, f in solvers.items():
                x[...] = cp.nan
                err = float(cp.abs(f() - ref).max() / cp.abs(ref).max())
                t = (device_time(f, 1, 3) if "Thomas" in name else
                     device_time(f, graph=False) if "cuSPARSE" in name else device_time(f))
                r = dict(row, solver=name, seconds=t, systems_per_s=batch / t, read_GBps=read / t / 1e9,
                         fraction_of_copy=(read / t) / (2 * read / t_copy), max_rel_diff_to_thomas=err)
                results.append(r)
                print(f"{r['dtype']:8s} {batch:6d} x {n}: {name:40s} {t * 1e3:8.3f} ms  {r['read_GBps']:7.0f} GB/s read"
                      f"  ({100 * r['fraction_of_copy']:.0f}% of copy {r['copy_GBps']:.0f} GB/s)  diff {err:.1e}",
                      flush=True)
            if gtsv is None:
                print("cuSPARSE gtsv2StridedBatch: not exposed by this CuPy", flush=True)
    if "-out" in args:
        write(args["-out"], results)


if __name__ == "__main__":
    main()
