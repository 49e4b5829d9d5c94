"""AMG on nonsymmetric matrices: first-order upwind convection-diffusion, -Laplace u + b . grad u,
on the unit square (n^2 interior points) and cube (n^3), the wind b = (1, 1/2, 0) scaled to cell
Peclet numbers |b_x| h / 2 from 0.1 to 100. pcplugins.AMG, W-cycle: unsmoothed (pairwise aggregation
on the symmetrized strength, -pc_amg_agg_nsmooths 0), smoothed (1) and the default (smoothed where
the matrix is nearly symmetric), against PETSc GAMG, all under FGMRES to a true relative residual
of 1e-8 (FGMRES's own norm is the true one), random right-hand side, side by side in one run.

    python benchmarks/amg_convection.py [-n2 511] [-n3 63] [-peclet 0.1,1,10,100] [-vec cpu|gpu]
                                        [-transpose] [-out benchmarks/results/amg_convection_cpu.json]

With -transpose every solver solves A^T x = b by KSPSolveTranspose (an adjoint solve: PCApplyTranspose,
the transposed cycle for pcplugins.AMG), the residual that of A^T. Each solver runs twice on fresh
KSPs; the second run is reported.
"""
import os
import sys

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
import numpy  # noqa: E402

import meshes  # noqa: E402
from gmg_poisson import options_in_database, timed_solve, write  # noqa: E402
from problems import convection_diffusion  # noqa: E402

CONFIGS = {
    "pcplugins.AMG (default, W-cycle)": {"pc_type": "python", "pc_python_type": "pcplugins.AMG"},
    "pcplugins.AMG (unsmoothed, W-cycle)": {"pc_type": "python", "pc_python_type": "pcplugins.AMG",
                                            "pc_amg_agg_nsmooths": 0},
    "pcplugins.AMG (smoothed, W-cycle)": {"pc_type": "python", "pc_python_type": "pcplugins.AMG",
                                          "pc_amg_agg_nsmooths": 1},
    "PETSc GAMG": {"pc_type": "gamg"},
}


def run(A, options, gpu, transpose=False):
    M = meshes.petsc_matrix(A, "aijcusparse" if gpu else None)
    b, x = M.createVecs()
    b.setArray(numpy.random.default_rng(0).standard_normal(A.shape[0]))
    out = None
    for _ in range(2):
        with options_in_database(dict(options, ksp_type="fgmres", ksp_rtol=1e-8, ksp_max_it=300,
                                      ksp_gmres_restart=100)):
            ksp = PETSc.KSP().create()
            ksp.setOperators(M)
            ksp.setFromOptions()
            x.set(0.0)
            out = timed_solve(ksp, M, b, x, gpu, transpose)
            if options.get("pc_python_type"):
                mg = ksp.getPC().getPythonContext().mg
                out["levels"] = len(mg.counts())
            ksp.destroy()
    return out


def main():
    opts = PETSc.Options()
    n2, n3 = opts.getInt("n2", 511), opts.getInt("n3", 63)
    pecs = [float(p) for p in opts.getString("peclet", "0.1,1,10,100").split(",")]
    gpu = opts.getString("vec", "cpu") == "gpu"
    out = opts.getString("out", "")
    transpose = opts.getBool("transpose", False)
    results = []
    for dim, n in ((2, n2), (3, n3)):
        for pe in pecs:
            A = convection_diffusion(n, pe, dim)
            for name, conf in CONFIGS.items():
                r = dict(run(A, conf, gpu, transpose), solver=name, dim=dim, n=n, peclet=pe, transpose=transpose)
                results.append(r)
                write(out, results, gpu)
                PETSc.Sys.Print(f"{dim}D n={n} Pe={pe:g} {name:26s} its {r['iterations']:3d} "
                                f"rel {r['true_rel_residual']:.1e} setup {r['setup_s']:.3f} s solve "
                                f"{r['solve_s']:.3f} s levels {r.get('levels', '-')}", flush=True)


if __name__ == "__main__":
    main()
