"""GMG (and AMG) under MPI beside one rank on the same work: setup + solve on 1 and on P ranks.

    python benchmarks/gmg_mpi.py [-ranks 1,2] [-sizes 127,255] [-weak] [-skip name,...] [-label text]
                                 [-repeats 2] [-out results.json]

The Poisson system of gmg_poisson.py (interior convention: n unknowns per axis), CG to a true
relative residual of 1e-8, each configuration the fastest of -repeats runs after two untimed ones, run
by ``mpiexec -n P`` for every P of -ranks (this script calls itself with -worker). Every rank
count runs on the same devices: on a one-GPU machine all ranks share GPU 0, which measures what the
ranks' communication costs, not a speed-up; on the host the ranks have cores of their own.
pcplugins.AMG and PETSc's GAMG run too (skip them on the GPU at large sizes: GAMG's setup there
takes tens of seconds). PETSc's CG + Jacobi runs beside GMG: its ratio of
P ranks to one is what sharing the GPU costs PETSc itself (PETSc's own kernels and messages).
-label records how the machine was run (for example "MPS": NVIDIA's multi-process service, the
daemon that lets several processes' kernels share the GPU at once instead of by time slices).

Reported per configuration and size: setup, solve, iterations, ghost updates per application and
milliseconds each on rank 0 (host wall time; through host buffers it includes the wait for the
queued device work, through CUDA IPC it does not),
and the ratio of P ranks' setup + solve to one rank's (strong scaling: the speed-up is its inverse).
With -weak each rank count P > 1 also solves a box P times as large, n^3 (or the box of a size
given as x by y by z) per rank: P (n + 1) - 1 unknowns along x, the P - 1 extra ones the planes
between the parts (so that the box coarsens as n^3 does); its weak-scaling efficiency is one
rank's time on n^3 over P ranks' on the box. On a machine with a GPU per rank (PETSc gives rank
r GPU r mod count) these are the scaling figures; on one GPU they are what the ranks' sharing costs.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from gmg_sizes import FAST, parse_sizes, reuse_systems  # noqa: E402

import gmg_poisson  # noqa: E402
from gmg_poisson import GMG, backend, measure_configs, run, write  # noqa: E402

CONFIGS = {
    "pcplugins.GMG (declared laplacian)": dict(GMG, pc_gmg_operator="laplacian"),
    "pcplugins.GMG (declared laplacian, CUDA IPC ordered by MPI messages)":
        dict(GMG, pc_gmg_operator="laplacian", pc_gmg_ghost_transport="ipc"),
    "pcplugins.GMG (declared laplacian, ghost layers through the host)":
        dict(GMG, pc_gmg_operator="laplacian", pc_gmg_ghost_transport="host"),
    "pcplugins.GMG (fast option string)": FAST,
    "pcplugins.GMG (fast option string, whole cycle a CUDA graph)": dict(FAST, pc_gmg_graph=1),
    "pcplugins.GMG (defaults, operator from the matrix)": dict(GMG),
    "CG + Jacobi": {"pc_type": "jacobi"},
    "pcplugins.AMG": {"pc_type": "python", "pc_python_type": "pcplugins.AMG"},
    # the hierarchy a matrix without coordinates gets on the host
    "pcplugins.AMG (smoothed aggregation)": {"pc_type": "python", "pc_python_type": "pcplugins.AMG",
                                             "pc_amg_aggregation": "mis"},
    "pcplugins.AMG (ghost values device to device)": {"pc_type": "python", "pc_python_type": "pcplugins.AMG",
                                                      "pc_amg_ghost_transport": "device"},
    "PETSc GAMG": {"pc_type": "gamg"},
}


def worker(opts):
    """One rank count: every configuration on every size, results to -out (rank 0)."""
    gmg_poisson.CONVENTION = "interior"
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    sizes = parse_sizes(opts.getString("sizes", "127,255"))
    weak = opts.getBool("weak", False)
    skip, out = opts.getString("skip", ""), opts.getString("out")
    opts.hasName("label")                       # the parent's: recorded in the results it writes
    repeats = opts.getInt("repeats", 2)

    def fastest(name, options, n, dim, gpu):
        return min((run(name, options, n, dim, gpu) for _ in range(repeats)), key=lambda r: r["total_s"])
    reuse_systems()
    results = []
    ranks = PETSc.COMM_WORLD.getSize()

    def line(r):
        extra = f"  {r['ghost_transport']}" if r.get("ghost_transport") else ""
        if "ghost_updates_per_application" in r:
            extra = f"  {r['ghost_updates_per_application']:.0f} ghost updates/application" + (
                f", {r['ms_per_ghost_update_rank0']:.3f} ms each" if "ms_per_ghost_update_rank0" in r else "")
        return (f"setup {r['setup_s']*1e3:8.1f} ms  solve {r['solve_s']*1e3:8.1f} ms  its {r['iterations']:4d}  "
                f"res {r['true_rel_residual']:.1e}{extra}")
    runs = [(n, {"n": n}) for n in sizes]
    if weak and ranks > 1:
        runs += [(weak_box(n, ranks), {"n_per_rank": n, "scaling": "weak"}) for n in sizes]
    for grid, tags in runs:
        tags = dict(tags, n=grid)
        name = size_name(grid)
        measure_configs(CONFIGS, skip, fastest, (grid, 3, gpu), gpu, dict(tags, dim=3, ranks=ranks),
                        (f"{ranks} rank(s) {name:>11s}", 50), results, out, line)
    write(out, results, gpu)


def weak_box(n, ranks):
    """The weak-scaling box of ``ranks`` ranks with the grid ``n`` (n^3, or a box x, y, z) each."""
    x, y, z = (n, n, n) if isinstance(n, int) else n
    return ranks * (x + 1) - 1, y, z


def size_name(n):
    """A size as results print it: 255^3, or 511x255x255 for a box (a list once read from JSON)."""
    return "x".join(map(str, n)) if isinstance(n, (tuple, list)) else f"{n}^3"


def scaling(results):
    """Each multi-rank result against one rank's: ``vs_one_rank`` (P ranks' setup + solve over one
    rank's on the same grid; strong scaling) or ``weak_efficiency`` (one rank's on the per-rank grid
    over P ranks' on the P times larger box)."""
    def key(r, n):
        return r["solver"], size_name(n)
    one = {key(r, r["n"]): r["total_s"] for r in results if r.get("ranks") == 1 and "error" not in r}
    for r in results:
        if "error" in r:
            continue
        if r.get("scaling") == "weak":
            if key(r, r["n_per_rank"]) in one:
                r["weak_efficiency"] = one[key(r, r["n_per_rank"])] / r["total_s"]
        elif key(r, r["n"]) in one:
            r["vs_one_rank"] = r["total_s"] / one[key(r, r["n"])]


def main():
    opts = PETSc.Options()
    if opts.getBool("worker", False):
        return worker(opts)
    ranks = [int(p) for p in opts.getString("ranks", "1,2").split(",")]
    out, label = opts.getString("out", ""), opts.getString("label", "")
    for name in ("sizes", "skip", "weak", "repeats", "vec"):     # the workers' options: not left unused here
        opts.hasName(name)
    passed = [a for a in sys.argv[1:] if a not in ("-out", out, "-ranks", opts.getString("ranks", ""))]
    results, meta = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for P in ranks:
            part = os.path.join(tmp, f"ranks{P}.json")
            cmd = ["mpiexec", "-n", str(P), sys.executable, "-u", os.path.abspath(__file__), "-worker",
                   "-out", part, *passed]
            subprocess.run(cmd, check=True)
            with open(part) as fh:
                data = json.load(fh)
            meta = meta or data["meta"]
            results += data["results"]
    scaling(results)
    for r in results:
        if "vs_one_rank" in r and r["ranks"] > 1:
            print(f"{r['ranks']} ranks {size_name(r['n'])} {r['solver']:50s} {r['vs_one_rank']:6.2f}x one rank "
                  f"(speed-up {1 / r['vs_one_rank']:.2f})", flush=True)
        if "weak_efficiency" in r:
            print(f"{r['ranks']} ranks {size_name(r['n'])} {r['solver']:50s} weak-scaling efficiency "
                  f"{100 * r['weak_efficiency']:.0f}%", flush=True)
    if out:
        meta = dict(meta, command=shlex.join(sys.argv), label=label)
        with open(out, "w") as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
