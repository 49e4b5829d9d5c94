"""Per-kernel GPU times of one GMG level (CuPy events, median of 20), fused against generic.

    python benchmarks/gmg_kernels.py [-n 255] [-dim 3] [-dtype float64|float32] [-rows 1,2,4]
                                     [-pair_minb 1,4,6] [-generic 0] [-out benchmarks/results/x.json]

Each figure comes with the bytes the kernel must move at least (each value read or written once,
at the -dtype's size) and the bandwidth that implies, so the gap to the memory-bandwidth floor is
visible. -rows lists the rows per thread to try in the fused colour sweep and residual
(fused.ROWS; default: the current choice for -dtype); -pair_minb the blocks an SM relax_pair is
compiled to leave registers for (fused.PAIR_MINB; each row gives the registers it took, whether it
spilled, and the blocks the SMs hold); -generic 0 leaves out the generic kernels.
"""
import json
import platform
import shlex
import sys

import cupy as cp
import numpy as np
from cupyx.profiler import benchmark

from pcplugins.core import fused, grid, multigrid, stencil


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index("-" + name) + 1]) if "-" + name in sys.argv else default


def main():
    n, dim, out = arg("n", 255), arg("dim", 3), arg("out", "")
    dtype = np.dtype(arg("dtype", "float64"))
    per_thread = [int(r) for r in arg("rows", str(fused.ROWS[dtype.name])).split(",")]
    minbs = [int(m) for m in arg("pair_minb", str(fused.PAIR_MINB[dtype.name])).split(",")]
    box = grid.Box((n,) * dim)
    N = box.size
    rows = []
    runs = [(True, r, m) for r in per_thread for m in minbs] + ([(False, None, None)] if arg("generic", 1) else [])
    for fast, per, minb in runs:
        pair = {}
        if fast:
            fused.set_rows(dtype, per, pair_minb=minb)
            k = fused._kernel(dim, dtype.name, "relax_pair") if dim == 3 else None
            pair = {"pair_minb": minb, "relax_pair_registers": k.num_regs, "relax_pair_local_bytes": k.local_size_bytes,
                    "relax_pair_wave": fused.pair_wave(dtype)} if k else {}
        op = stencil.laplacian(box, [-1.0] * dim, cp, dtype)
        mg = multigrid.Multigrid(op, multigrid.Options(fused=fast))
        L0, L1 = mg.levels[0], mg.levels[1]
        L0.f = cp.random.default_rng(0).standard_normal(box.shape, dtype)
        # (name, call, sweeps a call makes, values moved at least per fine point and sweep). A
        # single sweep runs a kernel per colour in place; two run fused.relax_pair u -> r -> u
        # (3D, fused), both colours a pass.
        cases = [("red-black sweep (a kernel per colour)", lambda: L0.smoother.smooth(L0.u, L0.f, 1), 1, 6),
                 ("red-black sweep (of 2 sweeps)", lambda: L0.smoother.smooth(L0.u, L0.f, 2), 2, 3),
                 ("residual", L0.residual, 1, 3),
                 ("restriction", lambda: L0.transfer.restrict(L1.f, L0.r), 1, 1 + 1 / 2 ** dim),
                 ("prolongation", lambda: L0.transfer.prolong_add(L0.u, L1.u), 1, 2 + 1 / 2 ** dim),
                 ("V(1,1) cycle, all levels", lambda: mg.cycle(L0.f), 1, None)]
        for name, fn, calls, values in cases:
            t = float(np.median(benchmark(fn, n_repeat=20, n_warmup=3).gpu_times)) / calls
            row = {"kernel": name, "fused": fast, "rows_per_thread": per, **pair, "ms": t * 1e3}
            if values:
                row["GB/s"] = values * N * dtype.itemsize / t / 1e9
            rows.append(row)
            print(f"{'fused %d/%d' % (per, minb) if fast else 'generic':10s} {name:30s} {t * 1e3:8.3f} ms"
                  + (f"  {row['GB/s']:7.0f} GB/s" if values else ""), flush=True)
    if out:
        meta = {"command": shlex.join(sys.argv), "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                "cupy": cp.__version__, "python": platform.python_version(), "grid": [n] * dim, "dtype": dtype.name}
        with open(out, "w") as fh:
            json.dump({"meta": meta, "results": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
