"""FMG against the FFT direct solve, and float32 against float64 cycles (issue 3's benchmark).

    python benchmarks/gmg_fmg_fft.py [-out benchmarks/results/x.json] [-cpu] [-small]

For the constant-coefficient Dirichlet Laplacian (interior convention, 1/h^2) with a smooth
several-mode solution: the FFT solve (fft.LaplacianFFT: DST-I by CuPy's real FFTs) gives u_h
exactly; FMG(mu_f, mu_b) should reach the discretization error |u - u_h| with its algebraic error
|u_FMG - u_h|. Each cycle is captured once as a CUDA graph and timed by CUDA events (median of
20). Also: one V(1,1) application in float64 and float32 at the 3D size.
"""
import json
import platform
import shlex
import sys
import time

import numpy as np

from pcplugins import backend
from pcplugins.core import fft, grid, multigrid, stencil

MODES = [((1, 1, 1), 1.0), ((2, 1, 1), 0.5), ((1, 3, 2), 0.3), ((3, 2, 1), 0.2)]


def problem(n, dim, xp, dtype=np.float64):
    h = 1.0 / (n + 1)
    x = np.arange(1, n + 1) * h
    axes = [x.reshape([-1 if b == a else 1 for b in range(dim)]) for a in range(dim)]
    u = f = 0.0
    for m, c in MODES:
        mode = 1.0
        for a in range(dim):
            mode = mode * np.sin(m[a] * np.pi * axes[a])
        u = u + c * mode
        f = f + c * np.pi ** 2 * sum(k * k for k in m[:dim]) * mode
    op = stencil.laplacian(grid.Box((n,) * dim), [-1.0 / h ** 2] * dim, xp, dtype)
    return op, xp.asarray(np.broadcast_to(f, (n,) * dim), dtype), xp.asarray(np.broadcast_to(u, (n,) * dim))


def timed(fn, xp, reps=20):
    """Median time of ``fn`` (captured as a CUDA graph on the GPU)."""
    if not backend.is_gpu(xp):
        fn()
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts)), "host"
    cp = backend.cupy
    fn()                                                  # compile
    stream = cp.cuda.Stream(non_blocking=True)
    how = "graph"
    try:
        with stream:
            stream.begin_capture()
            fn()
            graph = stream.end_capture()
        run = lambda: graph.launch(stream)  # noqa: E731
    except Exception:
        how, run = "eager", fn
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(stream)
        with stream:
            run()
        b.record(stream)
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) * 1e-3)
    return float(np.median(ts)), how


def rms(e, xp):
    return float(xp.sqrt(xp.mean(e * e)))


def main():
    gpu = "-cpu" not in sys.argv and backend.gpu_available()
    xp = backend.namespace("gpu" if gpu else "cpu")
    small = "-small" in sys.argv
    out = sys.argv[sys.argv.index("-out") + 1] if "-out" in sys.argv else ""
    rows = []
    for n, dim, pairs in (((63, 3, [(2, 2), (3, 3)]), (255, 2, [(1, 2)])) if small else
                          ((255, 3, [(2, 2), (3, 3)]), (4095, 2, [(1, 2), (2, 2)]))):
        op, f, u = problem(n, dim, xp)
        solver = fft.LaplacianFFT(op, [-1.0 * (n + 1) ** 2] * dim)
        uh = grid.interior(solver.cycle(f)).copy()
        t_fft, how = timed(lambda: solver.cycle(f), xp)
        disc = rms(u - uh, xp)
        rows.append({"n": n, "dim": dim, "solver": "FFT (DST-I, CuPy rfft)" if gpu else "FFT (DST-I, NumPy rfft)",
                     "s": t_fft, "timing": how, "discretization_error": disc})
        print(f"{n}^{dim} FFT                 {t_fft * 1e3:8.3f} ms ({how})  discretization error {disc:.2e}",
              flush=True)
        for mf, mb in pairs:
            for smoother, label in (("multicolor", "multicolour GS"), ("redblack", "red-black GS")):
                mg = multigrid.Multigrid(op, multigrid.Options(cycle="fmg", pre=mf, post=mb, smoother=smoother))
                alg = rms(grid.interior(mg.cycle(f)) - uh, xp)
                t, how = timed(lambda: mg.cycle(f), xp)
                rows.append({"n": n, "dim": dim, "solver": f"FMG({mf},{mb}) {label}", "s": t, "timing": how,
                             "algebraic_error": alg, "discretization_error": disc})
                print(f"{n}^{dim} FMG({mf},{mb}) {label:15s} {t * 1e3:8.3f} ms ({how})  algebraic error {alg:.2e}"
                      f" ({alg / disc:.2f} x discretization)", flush=True)
        if dim == 3:
            for dt in (np.float64, np.float32):
                op, f, _ = problem(n, dim, xp, dt)
                mg = multigrid.Multigrid(op, multigrid.Options())
                t, how = timed(lambda: mg.cycle(f), xp)
                rows.append({"n": n, "dim": dim, "solver": f"V(1,1) red-black, {np.dtype(dt).name}", "s": t,
                             "timing": how})
                print(f"{n}^{dim} V(1,1) {np.dtype(dt).name}      {t * 1e3:8.3f} ms ({how})", flush=True)
    if out:
        meta = {"command": shlex.join(sys.argv), "python": platform.python_version()}
        if gpu:
            meta["device"] = backend.cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
            meta["cupy"] = backend.cupy.__version__
        with open(out, "w") as fh:
            json.dump({"meta": meta, "results": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
