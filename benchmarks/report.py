"""Write benchmarks/README.md and docs/performance.md from the JSON results in benchmarks/results/.

    python benchmarks/report.py            # rewrites both files

Each section names its result files and the command that made them (from the files' meta); every
figure is the files' own, nothing is typed in by hand, and every ratio compares solvers of one run.
``tests/petsc/test_docs.py`` checks that both files are current. The figures of docs/ come from
``benchmarks/plot.py`` (matplotlib).
"""
import ast
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# benchmark script -> its current result files (one per device and configuration)
BENCHMARKS = {
    "gmg_poisson.py": ["gmg_poisson_h200.json", "gmg_poisson_h100.json", "gmg_poisson_2d_h200.json",
                       "gmg_poisson_2d_h100.json", "gmg_poisson_cpu_local.json", "hybrid_sweep_3d_h100.json",
                       "hybrid_sweep_2d_h100.json", "gmg_jumps_257_h200.json", "gmg_jumps_129_h100.json",
                       "gmg_jumps_257_h100.json",
                       "gmg_jumps_97_cpu_local.json"],
    "gmg_sizes.py": ["gmg_sizes_3d_h200.json", "gmg_sizes_3d_h100.json", "gmg_sizes_2d_h200.json",
                     "gmg_sizes_2d_h100.json",
                     "gmg_sizes_read_h100.json",
                     "gmg_sizes_read_petsc_h100.json"],
    "gmg_mpi.py": ["gmg_mpi_2gpu_h200.json", "gmg_mpi_2gpu_h100.json", "gmg_mpi_2gpu_declared_h100.json",
                   "gmg_mpi_1gpu_h100.json", "gmg_mpi_1gpu_mps_h100.json",
                   "gmg_mpi_1gpu_mps_transports_h100.json",
                   "gmg_mpi_1gpu_jacobi_h100.json",
                   "gmg_mpi_1gpu_jacobi_mps_h100.json", "gmg_mpi_cpu2_local.json", "amg_mpi_1gpu_mps_h100.json",
                   "amg_mpi_cpu2_local.json", "amg_mpi_2gpu_h200.json", "amg_mpi_2gpu_h100.json",
                   "gmg_mpi_1gpu_mps_255_h100.json", "amg_mpi_1gpu_mps_255_h200.json",
                   "amg_mpi_1gpu_mps_255_h100.json"],
    "gmg_fmg_fft.py": ["gmg_fmg_fft_h100.json"],
    "gmg_kernels.py": ["gmg_kernels_h200.json", "gmg_kernels_float32_h200.json", "gmg_kernels_h100.json",
                       "gmg_kernels_float32_h100.json"],
    "anisotropic.py": ["anisotropic_l10_h200.json", "anisotropic_l9_h200.json", "anisotropic_mixed_l10_h200.json"],
    "tridiag.py": ["tridiag_h200.json", "tridiag_h100.json"],
    "fft_dst.py": ["fft_dst_h200.json"],
    "amg_poisson.py": ["amg_poisson_2d_h200.json", "amg_wcycle_2d_h200.json", "amg_boundary_2d_h200.json",
                       "amg_poisson_3d_h200.json",
                       "amg_poisson_2d_h100.json",
                       "amg_poisson_3d_mesh_h100.json", "amg_poisson_cpu_local.json",
                       "amg_elasticity_cpu_local.json"],
    "amg_convection.py": ["amg_convection_cpu.json", "amg_convection_transpose_cpu.json",
                          "amg_convection_gpu_h200.json", "amg_convection_transpose_gpu_h200.json"],
    "amg_ranks.py": ["amg_ranks_cpu2_local.json"],
    "shifted_laplace.py": ["shifted_laplace_dezeeuw_complex_h200.json", "shifted_laplace_dezeeuw_complex_h100.json",
                           "shifted_laplace_dezeeuw_real_h100.json", "shifted_laplace_3d_complex_h100.json",
                           "shifted_laplace_even_cpu_local.json"],
}

# docs/performance.md's headline: (title, result file, problem, our solver, the baselines)
HEADLINES = [
    ("GMG, 3D Poisson on a 257^3 DMDA (255^3 unknowns), the fast option string", "gmg_poisson_h200.json", "257^3",
     "pcplugins.GMG (declared, float32, 5 V(2,2) cycles, no graph)",
     ["PETSc PCMG (DMDA, Galerkin)", "PETSc GAMG", "CG + Jacobi"]),
    ("AMG, 2D 5-point 2048^2, auxiliary grid, the default (over-corrected) W-cycle under cg",
     "amg_poisson_2d_h200.json", "2D 5-point 2048^2", "pcplugins.AMG (auxgrid, W-cycle, cg)", ["PETSc GAMG"]),
    ("ShiftedLaplace, MP1 N=1024 (k = 640), Bi-CGSTAB", "shifted_laplace_dezeeuw_complex_h200.json",
     "MP1 N=1024 k=640", "bcgs + pcplugins.ShiftedLaplace", []),
]
FIGURES = [("hybrid_sweep.png", "Hybrid CPU-GPU cycle (Feng et al., Figures 5 and 6): setup + solve against "
            "the number of levels on the GPU, the rest on the CPU"),
           ("headline.png", "Setup + solve of the headline problems beside PETSc's own preconditioners, "
            "same run, log scale")]


def load(name):
    with open(os.path.join(RESULTS, name)) as fh:
        return json.load(fh)


def label(n, dim):
    return "x".join(map(str, n)) if isinstance(n, list) else f"{n}^{dim}"


def problem(r):
    """The problem a result row solves, as its benchmark names it."""
    if "case" in r:
        return r["case"]
    if "mesh" in r:
        return f"{r['mesh']} level {r['level']}"
    if "peclet" in r:
        return f"{label(r['n'], r['dim'])}, Peclet {r['peclet']:g}" + (", A^T x = b (KSPSolveTranspose)"
                                                                     if r.get("transpose") else "")
    if "n" in r:
        return label(r["n"], r.get("dim", 3)) + (f", kappa jumps 1e{r['jump']:g}" if r.get("jump") else "")
    return str(r.get("N", ""))


def is_baseline(solver):
    return solver.startswith(("PETSc", "CG + ", "pyamg", "cuFFT")) or "PETSc GAMG" in solver


def head(name):
    meta = load(name)["meta"]
    how = f", {meta['label']}" if meta.get("label") else ""
    versions = ", ".join(f"{k} {meta[k]}" for k in ("petsc", "cupy") if meta.get(k))
    return [f"### {meta['device']}{how}: results/{name}", "", f"`{meta['command']}`" + (f" ({versions})" if versions
                                                                                       else ""), ""]


def ms(s):
    return f"{s * 1e3:.1f}"


def solve_section(name):
    """Setup + solve per problem and solver, and each total over the fastest baseline of that problem
    in the same run (PETSc's PCMG/GAMG, CG + Jacobi, pyamg)."""
    rows = [r for r in load(name)["results"] if "setup_s" in r or "error" in r]
    out = head(name) + ["| problem | solver | setup + solve (ms) | iterations | vs fastest baseline |",
                        "|---|---|---|---|---|"]
    for r in rows:
        base = [b["total_s"] for b in rows if problem(b) == problem(r) and "total_s" in b and is_baseline(b["solver"])
                and b.get("reason", 1) > 0]
        if "error" in r:
            out.append(f"| {problem(r)} | {r['solver']} | failed: {r['error'].splitlines()[-1][:80]} | | |")
            continue
        its = f"{r['iterations']}" + ("" if r.get("reason", 1) > 0 else " (not converged)")
        ratio = f"{r['total_s'] / min(base):.3g}x" if base and not is_baseline(r["solver"]) else ""
        out.append(f"| {problem(r)} | {r['solver']} | {ms(r['setup_s'])} + {ms(r['solve_s'])} | {its} | {ratio} |")
    return out


def sizes_section(name):
    """A size sweep (gmg_sizes.py): time per unknown beside the first size's, per solver."""
    rows = [r for r in load(name)["results"] if "error" not in r]
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    repeat = rows[0].get("repeat") if rows else None
    how = (f"the run of median total of {repeat} after one untimed run" if repeat else
           "best of two runs after two untimed ones")
    out = head(name) + ["setup + solve in ms (CG iterations), and time per unknown relative to the first size's "
                        f"for the same solver ({how}):", ""]
    sizes = list(dict.fromkeys(json.dumps(r["n"]) for r in rows))
    out.append("| solver | " + " | ".join(label(json.loads(s), rows[0]["dim"]) for s in sizes) + " |")
    out.append("|---" * (len(sizes) + 1) + "|")
    for solver in solvers:
        cells = []
        for s in sizes:
            r = next((r for r in rows if r["solver"] == solver and json.dumps(r["n"]) == s), None)
            cells.append("" if r is None else f"{ms(r['setup_s'])} + {ms(r['solve_s'])} ({r['iterations']}), "
                                              f"{r['vs_reference']:.2f}x")
        out.append(f"| {solver} | " + " | ".join(cells) + " |")
    return out


def mpi_section(name):
    """Ranks beside one rank on the same device (gmg_mpi.py)."""
    rows = [r for r in load(name)["results"] if "error" not in r]
    out = head(name) + ["setup + solve in ms (CG iterations); for more than one rank the ghost updates per "
                        "application and milliseconds each (rank 0, each level's updates timed alone and launched "
                        "from the host, so their sum against an application's time, which can exceed 100% where a "
                        "CUDA graph replays the cycle, bounds their share from above), and setup + solve over "
                        "one rank's on the same "
                        "grid (strong scaling), or for a grid of n^3 per rank (-weak) the weak-scaling efficiency: "
                        "one rank's time on n^3 over the ranks' time:", "",
                        "| solver | size | ranks | setup + solve (its) | ghost updates | vs one rank |",
                        "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["solver"], str(r["n"]), r["ranks"])):
        ghost = f"{r.get('ghost_updates_per_application', 0):.0f}" if "ghost_updates_per_application" in r else ""
        if "ms_per_ghost_update_rank0" in r:
            ghost += f" x {r['ms_per_ghost_update_rank0']:.3f} ms"
        if "ghost_share" in r:
            ghost += f" = {r['ghost_ms_per_application']:.2f} ms, {100 * r['ghost_share']:.0f}% of an application"
        if r.get("ghost_transport"):
            ghost = r["ghost_transport"] + (f": {ghost}" if ghost else ", cycle a CUDA graph")
        out.append(f"| {r['solver']} | {label(r['n'], r['dim'])} | {r['ranks']} | {ms(r['setup_s'])} + "
                   f"{ms(r['solve_s'])} ({r['iterations']}) | {ghost} | {versus(r)} |")
    return out


def versus(r):
    """A gmg_mpi.py row against one rank: the weak-scaling efficiency, or the time ratio."""
    if "weak_efficiency" in r:
        return f"weak-scaling efficiency {100 * r['weak_efficiency']:.0f}%"
    return "" if r.get("scaling") == "weak" else f"{r.get('vs_one_rank', 1.0):.2f}x"


def kernels_section(name):
    data = load(name)
    grid = "x".join(map(str, data["meta"].get("grid", [])))
    out = head(name) + [f"One level of {grid} points, {data['meta'].get('dtype', '')}: device time per kernel "
                        "(median of 20) and the bandwidth its least traffic implies. relax_pair, the sweep of "
                        "2 sweeps, is compiled to leave registers for the blocks an SM in the fourth column "
                        "(1: the compiler's own choice; blank where the file does not record it).", "",
                        "| kernel | fused | rows a thread | relax_pair blocks an SM | ms | GB/s |",
                        "|---|---|---|---|---|---|"]
    for r in data["results"]:
        bw = f"{r['GB/s']:.0f}" if "GB/s" in r else ""
        out.append(f"| {r['kernel']} | {'yes' if r['fused'] else 'no'} | {r.get('rows_per_thread') or ''} | "
                   f"{r.get('pair_minb') or ''} | {r['ms']:.3f} | {bw} |")
    return out


def tridiag_section(name):
    out = head(name) + ["| dtype | systems x unknowns | solver | us | read GB/s | of a copy's bandwidth |",
                        "|---|---|---|---|---|---|"]
    for r in load(name)["results"]:
        out.append(f"| {r['dtype']} | {r['batch']} x {r['n']} | {r['solver']} | {r['seconds'] * 1e6:.1f} | "
                   f"{r['read_GBps']:.0f} | {r['fraction_of_copy']:.2f} |")
    return out


def dst_section(name):
    """FFTPoisson's solve with cuFFT or cuBLAS sine transforms, by grid and precision (fft_dst.py)."""
    rows = load(name)["results"]
    out = head(name) + ["One exact solve (device time, replayed CUDA graph) with the sine transforms as FFTs "
                        "(cuFFT) or as matrix products (cuBLAS); fft.DENSE_DST chooses by axis length:", "",
                        "| grid | dtype | cuFFT ms | cuBLAS ms | cuBLAS flop floor ms | error cuFFT / cuBLAS |",
                        "|---|---|---|---|---|---|"]
    for a, b in zip(rows[::2], rows[1::2]):
        out.append(f"| {'x'.join(map(str, a['shape']))} | {a['dtype']} | {a['seconds'] * 1e3:.3f} | "
                   f"{b['seconds'] * 1e3:.3f} | {b['floor_flops_s'] * 1e3:.3f} | "
                   f"{a['rel_error_to_double_fft']:.0e} / {b['rel_error_to_double_fft']:.0e} |")
    return out


def fmg_section(name):
    out = head(name) + ["| problem | solver | ms | algebraic error | discretization error |", "|---|---|---|---|---|"]
    for r in load(name)["results"]:
        alg = f"{r['algebraic_error']:.2e}" if "algebraic_error" in r else ""
        disc = f"{r['discretization_error']:.2e}" if "discretization_error" in r else ""
        out.append(f"| {label(r['n'], r['dim'])} | {r['solver']} | {r['s'] * 1e3:.3f} | {alg} | {disc} |")
    return out


SECTIONS = {"gmg_sizes.py": sizes_section, "gmg_mpi.py": mpi_section, "amg_ranks.py": mpi_section,
            "gmg_kernels.py": kernels_section,
            "tridiag.py": tridiag_section, "fft_dst.py": dst_section, "gmg_fmg_fft.py": fmg_section}


def how_to_run(script):
    """The script's docstring: its first paragraph and its command line."""
    with open(os.path.join(HERE, script)) as fh:
        doc = ast.get_docstring(ast.parse(fh.read())) or ""
    parts = doc.split("\n\n")
    usage = next((p for p in parts[1:] if p.startswith("    ")), "")
    return [" ".join(parts[0].split()), ""] + (["```", "\n".join(line[4:] for line in usage.splitlines()), "```", ""]
                                               if usage else [])


def benchmarks_readme():
    """benchmarks/README.md's text."""
    lines = ["# Benchmarks", "",
             "Generated by `python benchmarks/report.py` from `benchmarks/results/`; do not edit by hand. Each "
             "benchmark runs every solver of a problem in one run (ours and PETSc's), so every ratio is measured "
             "side by side; each result file records the device, the versions and the command. "
             "`results/` holds the current result per benchmark, device and configuration. "
             "The headline figures and plots: ../docs/performance.md.", ""]
    for script, names in BENCHMARKS.items():
        lines += [f"## {script}", ""] + how_to_run(script)
        for name in names:
            lines += SECTIONS.get(script, solve_section)(name) + [""]
    return "\n".join(lines)


def find(name, prob, solver):
    return next(r for r in load(name)["results"] if problem(r) == prob and r.get("solver") == solver and "setup_s" in r)


def headline_rows():
    """(title, file, device, our row, [(baseline, row)]) for docs/performance.md and plot.py."""
    out = []
    for title, name, prob, ours, baselines in HEADLINES:
        out.append((title, name, load(name)["meta"]["device"], find(name, prob, ours),
                    [(b, find(name, prob, b)) for b in baselines]))
    return out


def performance_page():
    """docs/performance.md's text."""
    lines = ["# Performance", "",
             "Generated by `python benchmarks/report.py` from `benchmarks/results/`; do not edit by hand. Every "
             "benchmark runs the solvers of a problem side by side in one run, on CUDA vectors (PETSc's "
             "aijcusparse and VECCUDA) unless it says cpu, to a true relative residual, on fresh KSPs, "
             "reporting the second of two runs or the best of several; the figures below are from the named "
             "result files, whose meta records device, versions and command. All tables, how to run each "
             "benchmark and what it measures: [benchmarks/README.md](../benchmarks/README.md).", "",
             "## Headline", "",
             "| problem | device | pcplugins: setup + solve (ms), iterations "
             "| baselines, same run: setup + solve (ms), iterations | result |", "|---|---|---|---|---|"]
    for title, name, device, r, base in headline_rows():
        ours = f"{ms(r['setup_s'])} + {ms(r['solve_s'])}, {r['iterations']}"
        theirs = "; ".join(f"{b}: {ms(x['setup_s'])} + {ms(x['solve_s'])}, {x['iterations']} "
                           f"({x['total_s'] / r['total_s']:.0f}x ours)" for b, x in base)
        lines.append(f"| {title} | {device} | {ours} | {theirs or '-'} | results/{name} |")
    lines += ["", "## Figures", ""]
    for png, caption in FIGURES:
        lines += [f"![{caption}](figures/{png})", "", f"*{caption}* (`python benchmarks/plot.py`).", ""]
    return "\n".join(lines)


def main():
    with open(os.path.join(HERE, "README.md"), "w") as fh:
        fh.write(benchmarks_readme())
    with open(os.path.join(HERE, "..", "docs", "performance.md"), "w") as fh:
        fh.write(performance_page())


if __name__ == "__main__":
    main()
