"""GMG on every grid size: time per unknown off the 2^k - 1 grids, beside the 2^k - 1 grid's.

    python benchmarks/gmg_sizes.py [-dim 3] [-sizes 255,200,256,257,300,320,512x256x128]
                                   [-baseline_sizes 255,256] [-convention interior|petsc]
                                   [-skip name,...] [-repeat N] [-out results.json]

The 7-point (5-point in 2D) Poisson system of gmg_poisson.py, CG to a true relative residual of
1e-8, on each size; the first size is the reference, and every line reports the time per unknown
relative to that size's for the same solver. Solvers: pcplugins.GMG with the fast option string
(declared Laplacian, float32 cycles, 5 V(2,2) cycles an application, no whole-cycle graph), the
same with the operator read from the matrix, and with its defaults, pcplugins.FFTPoisson, PETSc
PCMG on the DMDA (Galerkin) and GAMG. With the interior convention ``n`` counts unknowns per
axis (no boundary rows), with petsc the DMDA's points, boundary included. PCMG and GAMG run on
the sizes of -baseline_sizes only (all by default): on the GPU they take seconds a size. Each
figure is the faster of two timed runs after two untimed ones (setups of a few milliseconds vary
by as much); with -repeat N the run of median total of N after one untimed run, every run's setup
and solve times in the JSON.
"""
import os
import sys

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import gmg_poisson  # noqa: E402
from gmg_poisson import GMG, backend, measure_configs, pcmg_levels, run, write  # noqa: E402

FAST = dict(GMG, pc_gmg_operator="laplacian", pc_gmg_precision="single", pc_gmg_pre=2, pc_gmg_post=2,
            pc_gmg_multiplicative_cycles=5, pc_gmg_graph=0)
CONFIGS = {
    "pcplugins.GMG (fast option string)": FAST,
    "pcplugins.GMG (fast option string, operator read)": {k: v for k, v in FAST.items() if k != "pc_gmg_operator"},
    "pcplugins.GMG (defaults, operator from the matrix)": dict(GMG),
    "pcplugins.FFTPoisson (declared)": {"pc_type": "python", "pc_python_type": "pcplugins.FFTPoisson",
                                        "pc_fft_operator": "laplacian"},
    "PETSc PCMG (DMDA, Galerkin)": {"pc_type": "mg", "pc_mg_galerkin": "both"},
    "PETSc GAMG": {"pc_type": "gamg"},
}
DEFAULT_SIZES = {3: "255,200,256,257,300,320,512x256x128", 2: "2047,2048,3000,1000x37"}
BASELINES = ("PETSc PCMG (DMDA, Galerkin)", "PETSc GAMG")


def best_of_two(name, options, n, dim, gpu):
    """The faster (setup + solve) of two runs on fresh objects."""
    return min((run(name, options, n, dim, gpu) for _ in range(2)), key=lambda r: r["total_s"])


def reuse_systems():
    """Every run of a size gets a copy of one assembled system: assembling 16M rows in Python
    takes seconds, copying the matrix milliseconds (gmg_poisson's runs destroy theirs)."""
    assemble, saved = gmg_poisson.poisson_system, {}

    def system(*args, **kwargs):
        key = (repr(args), repr(sorted(kwargs.items())))
        if key not in saved:
            for da, A, b in saved.values():
                A.destroy()
                b.destroy()
            saved.clear()
            saved[key] = assemble(*args, **kwargs)
        da, A, b = saved[key]
        return da, A.duplicate(copy=True), b.copy()
    gmg_poisson.poisson_system = system


def parse_sizes(text):
    return [int(s) if s.isdigit() else tuple(map(int, s.split("x"))) for s in text.split(",") if s]


def main():
    opts = PETSc.Options()
    dim = opts.getInt("dim", 3)
    sizes = parse_sizes(opts.getString("sizes", DEFAULT_SIZES[dim]))
    baseline_sizes = parse_sizes(opts.getString("baseline_sizes", ",".join(
        "x".join(map(str, n)) if isinstance(n, tuple) else str(n) for n in sizes)))
    gmg_poisson.CONVENTION = opts.getString("convention", "interior")
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    skip, out = opts.getString("skip", ""), opts.getString("out", "")
    repeat = opts.getInt("repeat", 0)
    results, reference = [], {}
    reuse_systems()

    def line(r):
        per = r["total_s"] / r["unknowns"]
        ref = reference.setdefault(r["solver"], per)
        r["ns_per_unknown"], r["vs_reference"] = per * 1e9, per / ref
        return (f"setup {r['setup_s']*1e3:8.1f} ms  solve {r['solve_s']*1e3:8.1f} ms  its {r['iterations']:4d}  "
                f"{per*1e9:7.2f} ns/unknown  {per/ref:5.2f}x  res {r['true_rel_residual']:.1e}")
    for n in sizes:
        label = f"{n}^{dim}" if isinstance(n, int) else "x".join(map(str, n))
        configs = {k: v for k, v in CONFIGS.items() if n in baseline_sizes or k not in BASELINES}
        if pcmg_levels(n, dim) < 3:     # PCMG's DMDA coarsening halves (points - 1): not here
            configs.pop("PETSc PCMG (DMDA, Galerkin)", None)
        measure_configs(configs, skip, run if repeat else best_of_two, (n, dim, gpu), gpu,
                        {"n": n, "dim": dim, "convention": gmg_poisson.CONVENTION}, (f"{label:>12s}", 50),
                        results, out, line, repeat=max(repeat, 1))
    write(out, results, gpu)


if __name__ == "__main__":
    main()
