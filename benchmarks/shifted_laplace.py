"""Shifted-Laplace benchmark: Knibbe, Oosterlee and Vuik's model problems MP1 (constant k, k h =
0.625, point source in the centre) and MP2 (the three-layer wedge, f = 30 Hz), first-order absorbing
boundary, Krylov preconditioned on the right and stopped at a true relative residual of 1e-3 (the
paper's setting), every solver in the same run.

    python benchmarks/shifted_laplace.py [-cases mp1:512,mp1:1024,mp2:1024,mp1_3d:128] [-vec gpu|cpu]
                                         [-skip name,...] [-max_it 2000] [-out benchmarks/results/x.json]

Solvers: Bi-CGSTAB, GMRES(100) and PETSc's IDR(4) (beta2 0.65) with pcplugins.ShiftedLaplace (one
F-cycle), Bi-CGSTAB with the cycle in single precision; beside them PETSc's own alternatives on the
same problem: PCMG on the DMDA with Galerkin coarse operators of the same shifted matrix M (two
levels, Jacobi-Richardson or SOR smoothing, PETSc's default LU on the coarse grid) and ILU(0) of A.
Each configuration runs twice on fresh KSPs and the second run is reported (the first compiles kernels). With a real
PETSc the system is in the real-equivalent form (dof 2); with complex scalars it is complex.
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

import pcplugins  # noqa: E402
from pcplugins import backend  # noqa: E402

from gmg_poisson import apply_ms, measure_configs, options_in_database, timed_solve, write  # noqa: E402
from problems import helmholtz_system, wedge_wavenumber  # noqa: E402

SL = {"pc_type": "python", "pc_python_type": "pcplugins.ShiftedLaplace"}
# PETSc's PCMG diverged with a coarsest grid at k h = 2.5 (ours: 0.625 -> 1.25 -> 2.5) with either
# smoother, at N = 64 and 128; it converges with two levels, the coarsest grid (k h = 1.25, N/2 + 1
# points per axis) by PETSc's LU
PCMG = {"ksp_type": "bcgs", "pc_type": "mg", "pc_mg_galerkin": "both", "pc_mg_type": "full", "pc_mg_levels": 2,
        "mg_levels_ksp_type": "richardson"}
CONFIGS = {
    "bcgs + pcplugins.ShiftedLaplace": dict(SL, ksp_type="bcgs"),
    "bcgs + pcplugins.ShiftedLaplace (complex64 cycle)": dict(SL, ksp_type="bcgs", pc_sl_precision="single"),
    "gmres(100) + pcplugins.ShiftedLaplace": dict(SL, ksp_type="gmres", ksp_gmres_restart=100),
    "idr(4) + pcplugins.ShiftedLaplace (beta2 0.65)": dict(SL, ksp_type="idr", ksp_idr_s=4, pc_sl_beta2=0.65),
    "bcgs + PETSc PCMG (Galerkin on M, Jacobi-Richardson)": dict(PCMG, mg_levels_pc_type="jacobi",
                                                                  mg_levels_ksp_richardson_scale=0.8,
                                                                  mg_levels_ksp_max_it=2),
    "bcgs + PETSc PCMG (Galerkin on M, SOR omega 0.9)": dict(PCMG, mg_levels_pc_type="sor",
                                                              mg_levels_pc_sor_omega=0.9, mg_levels_ksp_max_it=1),
    "bcgs + PETSc ILU(0) of A": {"ksp_type": "bcgs", "pc_type": "ilu"},
}


def problem(case):
    """(label, N, k, dim) of a case: mp1:N, mp2:N, or mp1_3d:N (MP1 on the unit cube, our extension)."""
    kind, N = case.split(":")
    N = int(N)
    if kind == "mp2":
        return f"MP2 wedge N={N}", N, wedge_wavenumber(N + 1), 2
    k = 0.625 * N
    if kind == "mp1_3d":
        return f"MP1 3D N={N} k={k:g}", N, k, 3
    return f"MP1 N={N} k={k:g}", N, k, 2


def run(name, options, N, k, dim, gpu, max_it):
    if gpu:
        options = dict(options, mat_type="aijcusparse", vec_type="cuda")
    if options.get("pc_python_type") and numpy.ndim(k) == 0:
        options = dict(options, pc_sl_k=k)
    with options_in_database(options):
        return _run(name, options, N, k, dim, gpu, max_it)


def _run(name, options, N, k, dim, gpu, max_it):
    source = "edge" if numpy.ndim(k) else "centre"
    da, A, b = helmholtz_system(N, k, source=source, dim=dim)   # -mat_type: aijcusparse, CUDA Vecs on the GPU
    Mda, M, _ = helmholtz_system(N, k, source=source, shift=(1.0, 0.6), dim=dim)
    x = b.duplicate()
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    if options.get("pc_type") == "mg":
        ksp.setOperators(A, M)
    else:
        ksp.setOperators(A)
    ksp.setPCSide(PETSc.PC.Side.RIGHT)
    ksp.setTolerances(rtol=1e-3, max_it=max_it)
    ksp.setFromOptions()
    if options.get("pc_python_type") and numpy.ndim(k):
        pcplugins.set_wavenumber(ksp.getPC(), numpy.ravel(k))
    A.mult(b, x)          # the matrix is resident where it is used (PETSc uploads it on first use)
    x.set(0.0)
    res = dict({"solver": name, "N": N, "kmax": float(numpy.max(k)), "kh": float(numpy.max(k)) / N, "options": options},
               **timed_solve(ksp, A, b, x, gpu))
    if options.get("pc_python_type"):
        pc = ksp.getPC()
        res["apply_ms"] = apply_ms(pc, b, gpu)
        res["view"] = pc.getPythonContext().describe()
    ksp.destroy()
    for o in (A, M, Mda, da):
        o.destroy()
    return res


def main():
    opts = PETSc.Options()
    cases = opts.getString("cases", "mp1:512,mp1:1024,mp2:1024").split(",")
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    skip = opts.getString("skip", "")
    max_it = opts.getInt("max_it", 2000)
    out = opts.getString("out", "")
    results = []
    for case in cases:
        label, N, k, dim = problem(case)
        measure_configs(CONFIGS, skip, run, (N, k, dim, gpu, max_it), gpu, {"case": label}, (label, 52), results,
                        out, lambda r: f"setup {r['setup_s']*1e3:8.1f} ms  solve {r['solve_s']*1e3:9.1f} ms"
                                       f"  its {r['iterations']:5d} (reason {r['reason']})  true rel res "
                                       f"{r['true_rel_residual']:.2e}"
                                       + (f"  PCApply {r['apply_ms']:.2f} ms" if "apply_ms" in r else ""))
    write(out, results, gpu)


if __name__ == "__main__":
    main()
