"""GMG benchmark: 3D Poisson (7-point, PETSc DMDA convention), random right-hand side, CG to a true
relative residual of 1e-8, every solver in the same run so every figure is a ratio side by side.

    python benchmarks/gmg_poisson.py [-sizes 129,257,513x257x257] [-vec gpu|cpu] [-out benchmarks/results/x.json]
                                     [-skip name,...] [-dim 2|3] [-hybrid_sweep] [-jumps]
                                     [-repeat N]

A size NxMxK is a box grid (DMDA x, y, z order) of square cells, for weak scaling: two ranks split
513x257x257 into two 257^3 halves. Solvers: pcplugins.GMG (declared Laplacian: fused kernels,
float32 cycle, hybrid CPU-GPU cycles, generic kernels; detected from the matrix),
pcplugins.FFTPoisson, PETSc PCMG on the DMDA (Galerkin), PETSc GAMG, CG + Jacobi, and (GPU) a
cuFFT sine-transform direct solve of the same interior system. Each configuration runs twice on
fresh KSPs; the second run is reported (the first compiles kernels; -repeat N: of N runs after the
first, the one of median total time). Results: JSON with device, versions and command.
-jumps: -div(kappa grad u) = f with kappa = 10^4 on the black cells of a 3^d checkerboard (faces on
no coarse grid line), GMG's defaults (operator-dependent transfers) and linear transfers beside the
constant-coefficient problem and PETSc's preconditioners on the same matrix.
"""
import contextlib
import json
import os
import platform
import shlex
import sys
import time
import traceback

import numpy
import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from pcplugins import backend  # noqa: E402

from problems import grid_sizes, poisson_system  # noqa: E402

GMG = {"pc_type": "python", "pc_python_type": "pcplugins.GMG"}
# fewer CG iterations for more cycles: PETSc's side of a CG iteration costs about as much as a cycle
TWO_CYCLES = dict(GMG, pc_gmg_operator="laplacian", pc_gmg_precision="single", pc_gmg_pre=2, pc_gmg_post=2,
                  pc_gmg_multiplicative_cycles=2)
CONFIGS = {
    "pcplugins.GMG (declared laplacian)": dict(GMG, pc_gmg_operator="laplacian"),
    "pcplugins.GMG (declared, float32 cycle)": dict(GMG, pc_gmg_operator="laplacian", pc_gmg_precision="single"),
    "pcplugins.GMG (declared, float32, 2 V(2,2) cycles)": TWO_CYCLES,
    "pcplugins.GMG (declared, double, 2 V(2,2) cycles)": dict(TWO_CYCLES, pc_gmg_precision="double"),
    # without the whole-cycle CUDA graph (its capture costs about what it saves over 4
    # applications), the coarse levels still replayed as one graph; and with no graph at all
    "pcplugins.GMG (declared, float32, 2 V(2,2) cycles, no graph)": dict(TWO_CYCLES, pc_gmg_graph=0),
    "pcplugins.GMG (declared, float32, 2 V(2,2) cycles, no graph, no coarse graph)":
        dict(TWO_CYCLES, pc_gmg_graph=0, pc_gmg_graph_coarse=0),
    # 5 cycles: 2 CG iterations; with the coarse levels' graph and with no graph at all
    "pcplugins.GMG (declared, float32, 5 V(2,2) cycles, no graph)": dict(TWO_CYCLES, pc_gmg_multiplicative_cycles=5,
                                                                        pc_gmg_graph=0),
    "pcplugins.GMG (declared, float32, 5 V(2,2) cycles, no graph, no coarse graph)":
        dict(TWO_CYCLES, pc_gmg_multiplicative_cycles=5, pc_gmg_graph=0, pc_gmg_graph_coarse=0),
    "pcplugins.GMG (declared, double cycles, Richardson)": dict(GMG, pc_gmg_operator="laplacian",
                                                                ksp_type="richardson"),
    "pcplugins.GMG (declared, mixed defect correction, preonly)": dict(GMG, pc_gmg_operator="laplacian",
                                                                       pc_gmg_mixed_inner_digits=8,
                                                                       ksp_type="preonly"),
    "pcplugins.GMG (declared, hybrid: 2 GPU levels)": dict(GMG, pc_gmg_operator="laplacian", pc_gmg_gpu_levels=2),
    "pcplugins.GMG (declared, hybrid: 4 GPU levels)": dict(GMG, pc_gmg_operator="laplacian", pc_gmg_gpu_levels=4),
    "pcplugins.GMG (declared, generic kernels)": dict(GMG, pc_gmg_operator="laplacian", pc_gmg_fused=0),
    "pcplugins.GMG (detected from matrix)": dict(GMG),
    "pcplugins.GMG (HOMG MFMG, Richardson)": dict(GMG, pc_gmg_operator="laplacian", pc_gmg_cycle="homg",
                                                  ksp_type="richardson"),
    "pcplugins.FFTPoisson (declared)": {"pc_type": "python", "pc_python_type": "pcplugins.FFTPoisson",
                                        "pc_fft_operator": "laplacian"},
    "PETSc PCMG (DMDA, Galerkin)": {"pc_type": "mg", "pc_mg_galerkin": "both"},
    "CG + Jacobi": {"pc_type": "jacobi"},
    "PETSc GAMG": {"pc_type": "gamg"},
}
# -jumps: the key "jump" is the problem's (kappa = 10^jump), not an option
JUMP = 4.0
JUMPS = {
    "pcplugins.GMG (kappa 1, defaults)": dict(GMG, jump=0.0),
    "pcplugins.GMG (jumps, defaults: operator-dependent transfers)": dict(GMG, jump=JUMP),
    "pcplugins.GMG (jumps, float64 coefficients)": dict(GMG, jump=JUMP, pc_gmg_coefficient_precision="cycle"),
    "pcplugins.GMG (jumps, float32 cycle)": dict(GMG, jump=JUMP, pc_gmg_precision="single"),
    "pcplugins.GMG (jumps, linear transfers)": dict(GMG, jump=JUMP, pc_gmg_transfer="linear"),
    "PETSc PCMG (DMDA, Galerkin), jumps": {"pc_type": "mg", "pc_mg_galerkin": "both", "jump": JUMP},
    "PETSc GAMG, jumps": {"pc_type": "gamg", "jump": JUMP},
    "CG + Jacobi, jumps": {"pc_type": "jacobi", "jump": JUMP},
}


def run(name, options, n, dim, gpu):
    if gpu:
        options = dict(options, mat_type="aijcusparse", dm_mat_type="aijcusparse", dm_vec_type="cuda")
        if options.get("pc_type") == "mg":   # PETSc's default SOR smoother runs on the host
            options = dict(options, mg_levels_pc_type="jacobi")
    if options.get("pc_type") == "mg":
        options = dict(options, pc_mg_levels=pcmg_levels(n, dim))
    options = dict(options)
    jump = options.pop("jump", 0.0)
    with options_in_database(options):
        return dict(_run(name, options, n, dim, gpu, jump), jump=jump)


def pcmg_levels(n, dim):
    """PCMG's levels on this DMDA: its coarsening halves (points - 1) while that is even."""
    m, levels = min(grid_sizes(n, dim)) - 1, 1
    while m % 2 == 0 and m > 4:
        m, levels = m // 2, levels + 1
    return levels


CONVENTION = "petsc"     # the matrix convention of the systems (problems.poisson_csr)


def _run(name, options, n, dim, gpu, jump=0.0):
    da, A, b = poisson_system(n, dim, CONVENTION, jump=jump, rhs="random", seed=1, pattern="checkerboard")
    da.setInterpolationType(PETSc.DMDA.InterpolationType.Q1)
    x = b.duplicate()
    ksp = PETSc.KSP().create()
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-8, max_it=5000)
    ksp.setFromOptions()
    A.mult(b, x)          # the matrix is resident where it is used (PETSc uploads it on first use)
    x.set(0.0)
    sizes = grid_sizes(n, dim)
    res = dict({"solver": name, "n": n, "dim": dim, "unknowns": int(numpy.prod(sizes)), "options": options},
               **timed_solve(ksp, A, b, x, gpu))
    if options.get("pc_type") == "python":
        res["apply_ms"] = apply_ms(ksp.getPC(), b, gpu)
        ctx = ksp.getPC().getPythonContext()
        res["view"] = ctx.describe()
        if hasattr(ctx.mg, "memory_values"):        # the DMDA PCs (pcplugins.AMG reports its complexities)
            res["extra_values_per_unknown"] = ctx.mg.memory_values() / numpy.prod([m - 2 for m in sizes])
            res["graph"] = ctx.graph_note
        res["ranks"] = PETSc.COMM_WORLD.getSize()
        if res["ranks"] > 1 and hasattr(ctx, "applications"):
            res.update(ghost_updates(ctx, gpu), ghost_transport=ctx.comm.transport)
            res["ghost_share"] = res["ghost_ms_per_application"] / res["apply_ms"]
        elif res["ranks"] > 1 and hasattr(getattr(ctx, "comm", None), "exchanges"):     # pcplugins.AMG
            res.update(csr_exchanges(ctx, ksp.getPC(), b, gpu))
            if "ghost_ms_per_application" in res:
                res["ghost_share"] = res["ghost_ms_per_application"] / res["apply_ms"]
    ksp.destroy()
    A.destroy()
    return res


@contextlib.contextmanager
def options_in_database(options):
    """``options`` in PETSc's options database for the block, removed afterwards even when it
    raises: a failed configuration must not leave its options to the next one."""
    opts = PETSc.Options()
    for k, v in options.items():
        opts[k] = v
    try:
        yield
    finally:
        for k in options:
            opts.delValue(k)


def synchronizer(gpu):
    """A function that waits for the GPU's work (nothing on the CPU)."""
    return (lambda: backend.cupy.cuda.runtime.deviceSynchronize()) if gpu else (lambda: None)


def timed_solve(ksp, A, b, x, gpu, transpose=False):
    """KSPSetUp and KSPSolve timed apart (the GPU synchronised around each), with the result;
    ``transpose``: KSPSolveTranspose, A^T x = b (an adjoint solve)."""
    sync = synchronizer(gpu)
    sync()
    t0 = time.perf_counter()
    ksp.setUp()
    sync()
    t1 = time.perf_counter()
    (ksp.solveTranspose if transpose else ksp.solve)(b, x)
    sync()
    t2 = time.perf_counter()
    r = b.duplicate()
    (A.multTranspose if transpose else A.mult)(x, r)
    r.aypx(-1.0, b)
    return {"setup_s": t1 - t0, "solve_s": t2 - t1, "total_s": t2 - t0, "iterations": ksp.getIterationNumber(),
            "reason": int(ksp.getConvergedReason()), "true_rel_residual": r.norm() / b.norm()}


def fft_solve(n, dim):
    """cuFFT direct solve of the interior 7-point system (unit stencil) by DST-I via real FFTs of
    the odd extension; returns the time of one solve (transforms and scaling only)."""
    cp = backend.cupy
    m = n - 2
    k = cp.arange(1, m + 1)
    lam1 = 2.0 - 2.0 * cp.cos(cp.pi * k / (m + 1))
    lam = sum(lam1.reshape([-1 if a == b else 1 for b in range(dim)]) for a in range(dim))
    f = cp.random.default_rng(1).standard_normal((m,) * dim)

    def dst1(x, axis):
        x = cp.moveaxis(x, axis, -1)
        z = cp.zeros(x.shape[:-1] + (1,), x.dtype)
        y = cp.concatenate([z, x, z, -x[..., ::-1]], axis=-1)
        return cp.moveaxis(-cp.fft.rfft(y, axis=-1)[..., 1:m + 1].imag / 2, -1, axis)

    def solve(f):
        u = f
        for a in range(dim):
            u = dst1(u, a)
        u = u / lam
        for a in range(dim):
            u = dst1(u, a) * (2.0 / (m + 1))
        return u
    u = solve(f)
    # check: apply the 7-point operator
    up = cp.pad(u, 1)
    Au = 2 * dim * u
    for a in range(dim):
        for s in (-1, 1):
            Au -= cp.roll(up, s, axis=a)[tuple(slice(1, -1) for _ in range(dim))]
    err = float(cp.linalg.norm(Au - f) / cp.linalg.norm(f))
    times = []
    for _ in range(10):
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        solve(f)
        cp.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t)
    times.sort()
    return {"solver": "cuFFT DST-I direct solve", "n": n, "dim": dim, "unknowns": m ** dim,
            "total_s": times[len(times) // 2], "rel_residual": err}


def apply_ms(pc, x, gpu, reps=10):
    """Milliseconds per application of ``pc`` to ``x``: the mean of ``reps`` after a warm one."""
    sync = synchronizer(gpu)
    y = x.duplicate()
    pc.apply(x, y)
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        pc.apply(x, y)
    sync()
    y.destroy()
    return (time.perf_counter() - t) * 1e3 / reps


def csr_exchanges(ctx, pc, x, gpu, reps=10):
    """pcplugins.AMG's ghost exchanges (its CSRComm ``ctx.comm``) per application, counted in one
    cycle run eagerly (a replayed graph makes no host call to count), and through host buffers
    their host wall time each over ``reps`` applications on rank 0 (the wait for the neighbours
    included). The device transport's exchanges are queued, not waited for, on the host: counted
    only."""
    comm = ctx.comm
    n0 = comm.exchanges
    ctx.mg.cycle(backend.to_namespace(x.getArray(readonly=True), ctx.xp))
    res = {"ghost_updates_per_application": comm.exchanges - n0, "ghost_transport": comm.transport or "host"}
    if res["ghost_transport"] == "host":
        n0, t0 = comm.exchanges, comm.exchange_time
        apply_ms(pc, x, gpu, reps)                   # reps applications and a warm one
        res["ms_per_ghost_update_rank0"] = (comm.exchange_time - t0) * 1e3 / max(comm.exchanges - n0, 1)
        res["ghost_ms_per_application"] = res["ms_per_ghost_update_rank0"] * res["ghost_updates_per_application"]
    return res


def ghost_updates(ctx, gpu, reps=20):
    """The ghost updates of one application of a DMDA PC under MPI (collective): how many per
    level (counted in one eager application, so a replayed graph's count too) and each level's
    milliseconds per update on rank 0, timed alone: ``reps`` in a row, launched from the host (no
    graph), the ranks started together, the device synchronised before the clock is read. Their
    sum over an application estimates the updates' share of it: alone they overlap nothing, and
    a captured cycle launches them faster than the host does."""
    comm, counts = ctx.comm, {}
    exchange = comm.exchange

    def counting(level, u):
        counts[level] = counts.get(level, 0) + 1
        return exchange(level, u)
    comm.exchange = counting
    x = ctx.xp.ones(ctx.box.shape)           # the values do not matter here
    try:
        ctx._cycle(x, ctx.xp.empty_like(x))
    finally:
        del comm.exchange
    sync = synchronizer(gpu)
    arrays = {lev.index: lev.u for lev in ctx.mg.levels}
    arrays[-1] = getattr(ctx, "_ypad", None)
    per_update = {}
    for level in sorted(counts):
        u = arrays[level]
        sync()
        comm.mpi.mpi.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            comm.exchange(level, u)
        sync()
        per_update[level] = (time.perf_counter() - t) * 1e3 / reps
    return {"ghost_updates_per_application": sum(counts.values()),
            "ghost_updates_per_level": {str(k): v for k, v in sorted(counts.items())},
            "ms_per_ghost_update_per_level": {str(k): v for k, v in per_update.items()},
            "ghost_ms_per_application": sum(counts[k] * per_update[k] for k in counts),
            "ms_per_ghost_update_rank0": sum(counts[k] * per_update[k] for k in counts) / max(sum(counts.values()), 1)}


def skipped(name, skip):
    """True when ``name`` contains one of the comma-separated words of -skip (separated by ';'
    where -skip holds one, so that a word may hold a comma: -skip 'W-cycle, cg);pyamg')."""
    return any(s and s in name for s in skip.split(";" if ";" in skip else ","))


def measure(run, gpu, *args, repeat=1):
    """run(*args) on fresh objects 1 + ``repeat`` times and, of the runs after the first (which
    compiles kernels and fills caches), the one of median total time, with every run's setup and
    solve times; GPU memory released around each. A failure comes back as {"error": ...} naming
    its cause (a PETSc error wraps the Python one), its traceback on stderr, so that the other
    configurations go on."""
    try:
        run(*args)
        release(gpu)
        runs = []
        for _ in range(repeat):
            runs.append(run(*args))
            release(gpu)
        if repeat == 1:
            return runs[0]
        runs.sort(key=lambda r: r["total_s"])
        return dict(runs[len(runs) // 2], repeat=repeat, runs_setup_s=[r["setup_s"] for r in runs],
                    runs_solve_s=[r["solve_s"] for r in runs])
    except Exception as e:
        cause = e.__cause__ or e.__context__ or e
        traceback.print_exception(cause, file=sys.stderr)
        return {"error": f"{type(cause).__name__}: {cause}"[:300]}
    finally:
        release(gpu)


def measure_configs(configs, skip, run, args, gpu, tags, label, results, out, line, repeat=1):
    """Every configuration of ``configs`` (name: options) not named in ``skip``:
    measure(run, gpu, name, options, *args), tagged with ``tags``, appended to ``results`` (a
    failure with its solver's name) and written to ``out``; one printed line each, ``label``, the
    name padded to ``label``'s width and line(result) (or the failure); ``repeat``: measure's."""
    prefix, width = label
    for name, conf in configs.items():
        if skipped(name, skip):
            continue
        r = dict(measure(run, gpu, name, conf, *args, repeat=repeat), **tags)
        if "error" in r:                              # record it, go on with the others
            results.append(dict(r, solver=name))
            PETSc.Sys.Print(f"{prefix} {name:{width}s} FAILED: {r['error']}", flush=True)
            continue
        results.append(r)
        write(out, results, gpu)
        PETSc.Sys.Print(f"{prefix} {name:{width}s} {line(r)}", flush=True)


def release(gpu):
    """Give CuPy's cached blocks back, so PETSc's own cudaMalloc calls find the memory."""
    import gc
    gc.collect()
    if gpu:
        backend.cupy.get_default_memory_pool().free_all_blocks()


def main():
    opts = PETSc.Options()
    sizes = [int(s) if s.isdigit() else tuple(map(int, s.split("x")))
             for s in opts.getString("sizes", "129,257").split(",")]
    dim = opts.getInt("dim", 3)
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    skip = opts.getString("skip", "")
    out = opts.getString("out", "")
    jumps = opts.getBool("jumps", False)
    configs = dict(JUMPS if jumps else CONFIGS)
    if opts.getBool("hybrid_sweep", False):      # the paper's Figures 5-6: every split L_theta
        configs = {f"pcplugins.GMG (declared, hybrid: {L} GPU levels)":
                   dict(GMG, pc_gmg_operator="laplacian", pc_gmg_gpu_levels=L) for L in range(0, 13)}
    results = []
    for n in sizes:
        label = f"{n}^{dim}" if isinstance(n, int) else "x".join(map(str, n))
        measure_configs(configs, skip, run, (n, dim, gpu), gpu, {"n": n, "dim": dim}, (label, 58), results,
                        out, lambda r: f"setup {r['setup_s']*1e3:9.1f} ms  solve {r['solve_s']*1e3:9.1f} ms"
                                       f"  its {r['iterations']:4d}  true rel res {r['true_rel_residual']:.2e}"
                                       + (f"  PCApply {r['apply_ms']:.3f} ms" if "apply_ms" in r else ""),
                        repeat=opts.getInt("repeat", 1))
        if gpu and isinstance(n, int) and not jumps and not skipped("cuFFT DST-I direct solve", skip):
            r = fft_solve(n, dim)
            results.append(r)
            PETSc.Sys.Print(f"{n}^{dim} {r['solver']:58s} total {r['total_s']*1e3:9.2f} ms  "
                            f"rel res {r['rel_residual']:.1e}")
    write(out, results, gpu)


def write(out, results, gpu):
    if not out or PETSc.COMM_WORLD.getRank() != 0:
        return
    meta = {"command": shlex.join(sys.argv), "petsc": ".".join(map(str, PETSc.Sys.getVersion())),
            "python": platform.python_version(), "host": platform.node()}
    if gpu:
        cp = backend.cupy
        meta["device"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        meta["cupy"] = cp.__version__
    else:
        meta["device"] = platform.processor() or "cpu"
    with open(out, "w") as fh:
        json.dump({"meta": meta, "results": results}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
