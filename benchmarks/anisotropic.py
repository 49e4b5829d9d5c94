"""Anisotropic benchmark (Goddeke and Strzodka's meshes): Q1 finite elements for -Laplace u on the
unit square, on uniform meshes of cell aspect ratio 1, 4, 16 (U1-U3) and on meshes refined
anisotropically towards two edges (A1-A5, examples/meshes.py graded_axis), solved through PETSc
with pcplugins.GMG and its ADI smoother, to a true relative residual of 1e-8, every variant in the
same run.

    python benchmarks/anisotropic.py [-levels 9,10] [-meshes U1,U2,U3,A1,A2,A3,A4,A5] [-vec gpu|cpu]
                                     [-skip name,...] [-out benchmarks/results/x.json]

The matrix is the interior 9-point Q1 stencil on a DMDA of (2^L - 1)^2 points (the PC reads the
stencil from the AIJ matrix and builds Galerkin coarse levels). The right-hand side is A u0 for
u0 = x(1 - x) y(1 - y) at the nodes, so the algebraic error |x - u0| / |u0| is reported beside the
residual. The paper's counting: ADI(2,2), one ADI application counting as two sweeps. Variants:
double multigrid as the solver (Richardson), the float32 cycle inside the double Richardson
iteration, and the mixed-precision defect correction inside the PC (preonly, 8 digits from float32
inner cycles). Each runs twice on fresh KSPs, the second reported. Also: CG + PETSc GAMG.
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

from pcplugins import backend  # noqa: E402
from pcplugins.core import grid, stencil  # noqa: E402

import meshes  # noqa: E402
from gmg_poisson import measure_configs, options_in_database, timed_solve, write  # noqa: E402

GRADED = {"A1": 0.75, "A2": 0.5, "A3": 0.25, "A4": 0.0625, "A5": 0.03125}
ASPECT = {"U1": 1, "U2": 4, "U3": 16}
ADI = {"pc_type": "python", "pc_python_type": "pcplugins.GMG", "pc_gmg_smoother": "adi",
       "pc_gmg_pre": 2, "pc_gmg_post": 2}
CONFIGS = {
    "GMG ADI(2,2), double (Richardson)": dict(ADI, ksp_type="richardson"),
    "GMG ADI(2,2), float32 cycle in double Richardson": dict(ADI, ksp_type="richardson", pc_gmg_precision="single"),
    "GMG ADI(2,2), mixed defect correction in the PC (preonly)": dict(ADI, ksp_type="preonly",
                                                                      pc_gmg_mixed_inner_digits=8),
    "CG + PETSc GAMG": {"ksp_type": "cg", "pc_type": "gamg"},
}


def mesh_nodes(name, level):
    if name in ASPECT:
        xs = numpy.linspace(0.0, 1.0, 2 ** level + 1)
        return xs, xs / ASPECT[name]
    x = meshes.graded_axis(level, GRADED[name])
    return x, x


def system(name, level):
    xs, ys = mesh_nodes(name, level)
    offs, coefs = meshes.q1_stencil(xs, ys)
    m = len(xs) - 2
    A = stencil.compress(grid.Box((m, m)), offs, coefs, numpy, numpy.float64).to_scipy().tocsr()
    X, Y = numpy.meshgrid(xs[1:-1] / xs[-1], ys[1:-1] / ys[-1])
    u0 = (X * (1 - X) * Y * (1 - Y)).ravel()
    return m, A, u0, float(numpy.diff(xs).min() / numpy.diff(xs).max())


def run(name, options, m, A, u0, gpu):
    with options_in_database(options):
        return _run(name, options, m, A, u0, gpu)


def _run(name, options, m, A, u0, gpu):
    M = meshes.petsc_matrix(A, "aijcusparse" if gpu else "aij")
    da = PETSc.DMDA().create([m, m], dof=1, stencil_width=1, stencil_type=PETSc.DMDA.StencilType.BOX,
                             comm=PETSc.COMM_SELF)
    da.setUp()
    if gpu:
        da.setVecType("cuda")
    b, x = M.createVecs()
    b.setArray(A @ u0)
    M.mult(b, x)          # the matrix is resident where it is used (PETSc uploads it on first use)
    x.set(0.0)
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(M)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-8, max_it=200)
    ksp.setFromOptions()
    res = dict({"solver": name, "options": options}, **timed_solve(ksp, M, b, x, gpu))
    res["algebraic_error"] = float(numpy.linalg.norm(x.getArray() - u0) / numpy.linalg.norm(u0))
    if options.get("pc_python_type"):
        res["view"] = ksp.getPC().getPythonContext().describe()
    for o in (ksp, M, da, b, x):
        o.destroy()
    return res


def main():
    opts = PETSc.Options()
    levels = [int(s) for s in opts.getString("levels", "9,10").split(",")]
    names = opts.getString("meshes", "U1,U2,U3,A1,A2,A3,A4,A5").split(",")
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    skip = opts.getString("skip", "")
    out = opts.getString("out", "")
    results = []
    for level in levels:
        for mesh in names:
            m, A, u0, ratio = system(mesh, level)
            tags = dict(mesh=mesh, level=level, unknowns=m * m, smallest_over_largest_cell=ratio)
            measure_configs(CONFIGS, skip, run, (m, A, u0, gpu), gpu, tags, (f"{mesh} L{level}", 58), results, out,
                            lambda r: f"setup {r['setup_s'] * 1e3:8.1f} ms  solve {r['solve_s'] * 1e3:8.1f} ms  "
                                      f"its {r['iterations']:4d} (reason {r['reason']})  "
                                      f"res {r['true_rel_residual']:.1e}  err {r['algebraic_error']:.1e}")
    write(out, results, gpu)


if __name__ == "__main__":
    main()
