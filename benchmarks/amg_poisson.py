"""AMG benchmark: pcplugins.AMG (auxiliary grid and pairwise aggregation, K-cycle, outer fcg) against
PETSc GAMG (cg) and CG + Jacobi, side by side in one run, to a true relative residual of 1e-6
(unpreconditioned norm for every solver), random right-hand side.

    [mpiexec -n P] python benchmarks/amg_poisson.py [-cases 2d,2dbc,3d,mesh,elasticity2d,elasticity3d]
                         [-n2 2048] [-n3 129] [-mesh_n 1000] [-ne2 256] [-ne3 32]
                         [-vec gpu|cpu] [-skip name,...] [-repeat 1] [-out benchmarks/results/x.json]

pyamg (smoothed aggregation on the host, its CG) runs beside them where it is installed (one rank).
The K-cycle is nonlinear, so fcg is its outer method; cg and fgmres run beside it because PETSc
3.26's fcg computes its VecMTDot on the host for CUDA vectors (two vectors copied down per
iteration, seen with -log_view).
Cases: 2D 5-point Laplacian on an n2 x n2 grid (2dbc: its boundary points' rows identity rows, the
interior rows still coupled to them, as PETSc's DMDA tutorials assemble it), 3D 7-point on n3^3, P1 finite elements on a
quasi-uniform Delaunay mesh of (mesh_n + 1)^2 points (examples/meshes.py), and (not by default)
Q1 linear elasticity on ne2^2 / ne3^3 elements (examples/elasticity.py: block size = dimension,
the rigid body modes set as the near null space, as PETSc's ksp ex56 does; pyamg gets them as B).
The matrix is given
without a DM, already on the device for the GPU runs; pcplugins.AMG gets the vertex coordinates
through pcplugins.set_coordinates (for the GPU runs a CuPy array, on the device too). Under
mpiexec each rank holds a block of consecutive rows (and their coordinates), one GPU per rank.
Each solver runs 1 + repeat times on fresh KSPs; of the runs after the first (which compiles
kernels) the one of median total time is reported.
After the solve, one preconditioner application is timed (the mean of 10; for pcplugins.AMG on
the GPU a CUDA graph replay).
Also measured: reading the aijcusparse matrix as CSR through petsc4py's getValuesCSR (host) and
through MatSeqAIJGetCSRAndMemType (device).
"""
import os
import sys
import time

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
import elasticity  # noqa: E402
import numpy  # noqa: E402
import scipy.sparse  # noqa: E402

import pcplugins  # noqa: E402
from pcplugins import backend  # noqa: E402
from pcplugins.core import nullspace  # noqa: E402
from pcplugins.petsc import mat  # noqa: E402

import meshes  # noqa: E402
from gmg_poisson import apply_ms, measure_configs, options_in_database, timed_solve, write  # noqa: E402

AMG = {"ksp_type": "fcg", "pc_type": "python", "pc_python_type": "pcplugins.AMG", "pc_amg_cycle": "k"}
CONFIGS = {
    "pcplugins.AMG (auxgrid, K-cycle)": dict(AMG, pc_amg_aggregation="auxgrid"),
    "pcplugins.AMG (auxgrid, K-cycle, fcg mmax 1)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_fcg_mmax=1),
    "pcplugins.AMG (auxgrid, K-cycle, fcg mmax 1, CSR levels)": dict(AMG, pc_amg_aggregation="auxgrid",
                                                                     ksp_fcg_mmax=1, pc_amg_storage="csr"),
    "pcplugins.AMG (auxgrid, K-cycle, cg)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="cg"),
    "pcplugins.AMG (auxgrid, K-cycle, fgmres)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="fgmres"),
    "pcplugins.AMG (auxgrid, K-cycle, fgmres, single)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="fgmres",
                                                             pc_amg_precision="single"),
    "pcplugins.AMG (auxgrid, W-cycle, cg)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="cg", pc_amg_cycle="w"),
    "pcplugins.AMG (auxgrid, W-cycle, cg, single)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="cg",
                                                         pc_amg_cycle="w", pc_amg_precision="single"),
    "pcplugins.AMG (auxgrid, W-cycle untruncated, cg)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="cg",
                                                             pc_amg_cycle="w", pc_amg_kcycle_size=0),
    "pcplugins.AMG (pairwise, K-cycle)": dict(AMG, pc_amg_aggregation="pairwise"),
    "pcplugins.AMG (pairwise, K-cycle, fcg mmax 1)": dict(AMG, pc_amg_aggregation="pairwise", ksp_fcg_mmax=1),
    "pcplugins.AMG (pairwise, K-cycle, cg)": dict(AMG, pc_amg_aggregation="pairwise", ksp_type="cg"),
    "pcplugins.AMG (pairwise, K-cycle, fgmres)": dict(AMG, pc_amg_aggregation="pairwise", ksp_type="fgmres"),
    "pcplugins.AMG (pairwise, W-cycle, cg)": dict(AMG, pc_amg_aggregation="pairwise", ksp_type="cg",
                                                  pc_amg_cycle="w"),
    "pcplugins.AMG (smoothed, W-cycle, cg)": dict(AMG, pc_amg_agg_nsmooths=1, ksp_type="cg", pc_amg_cycle="w"),
    # the boundary case's identity rows left in the hierarchy (core/rows.py)
    "pcplugins.AMG (auxgrid, W-cycle, cg, lone rows kept)": dict(AMG, pc_amg_aggregation="auxgrid", ksp_type="cg",
                                                                 pc_amg_cycle="w", pc_amg_eliminate_lone_rows=0),
    "pcplugins.AMG (pairwise, W-cycle, cg, lone rows kept)": dict(AMG, pc_amg_aggregation="pairwise", ksp_type="cg",
                                                                  pc_amg_cycle="w", pc_amg_eliminate_lone_rows=0),
    "PETSc GAMG": {"ksp_type": "cg", "pc_type": "gamg"},
    "CG + Jacobi": {"ksp_type": "cg", "pc_type": "jacobi"},
    "pyamg smoothed aggregation (CPU, its CG)": {"pyamg": True},
}


def laplacian(n, dim):
    T = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (n, n), format="csr")
    I = scipy.sparse.identity(n, format="csr")
    if dim == 2:
        A = scipy.sparse.kron(I, T) + scipy.sparse.kron(T, I)
    else:
        A = (scipy.sparse.kron(scipy.sparse.kron(I, I), T) + scipy.sparse.kron(scipy.sparse.kron(I, T), I)
             + scipy.sparse.kron(scipy.sparse.kron(T, I), I))
    g = numpy.indices((n,) * dim).reshape(dim, -1)[::-1].T.astype(float)
    return A.tocsr(), g


def problem(case, opts):
    """(label, A, coordinates, block size): one coordinate row a node."""
    if case == "2d":
        n = opts.getInt("n2", 2048)
        return f"2D 5-point {n}^2", *laplacian(n, 2), 1
    if case == "2dbc":          # PETSc's way: the boundary points' rows identity, the interior coupled to them
        n = opts.getInt("n2", 2048)
        A, g = laplacian(n, 2)
        wall = ((g == 0) | (g == n - 1)).any(axis=1)
        A = (scipy.sparse.diags(wall.astype(float)) + scipy.sparse.diags((~wall).astype(float)) @ A).tocsr()
        return f"2D 5-point {n}^2, identity rows on the boundary", A, g, 1
    if case == "3d":
        n = opts.getInt("n3", 129)
        return f"3D 7-point {n}^3", *laplacian(n, 3), 1
    if case.startswith("elasticity"):
        dim = int(case[-2])
        ne = opts.getInt(f"ne{dim}", 256 if dim == 2 else 32)
        A, xy, _ = elasticity.q1_elasticity(ne, dim)
        return (f"{dim}D Q1 elasticity, {ne}^{dim} elements, {A.shape[0]} unknowns (block size {dim}, rigid body "
                "modes as the near null space)", A, xy, dim)
    n = opts.getInt("mesh_n", 1000)
    A, xy = meshes.p1_poisson(*meshes.mesh("quasi", n))
    return f"2D P1 quasi-uniform Delaunay mesh, {A.shape[0]} unknowns", A, xy, 1


def run(name, options, A, xy, gpu, bs=1):
    if options.get("pyamg"):
        return run_pyamg(name, A, xy if bs > 1 else None)
    with options_in_database(options):
        return _run(name, options, A, xy, gpu, bs)


_PYAMG = {}


def run_pyamg(name, A, xy=None):
    """pyamg's smoothed aggregation (its defaults: V-cycle, symmetric Gauss-Seidel) inside its own
    CG on the host, the same right-hand side and tolerance; one rank only. It runs once per matrix:
    it compiles nothing, so the benchmark's second run gets the first one's result."""
    import pyamg  # optional: the configuration fails (recorded, the others go on) without it
    if PETSc.COMM_WORLD.getSize() > 1:
        raise RuntimeError("pyamg runs on one rank")
    key = (name, A.shape, A.nnz)
    if key not in _PYAMG:
        _PYAMG[key] = _run_pyamg(name, A, pyamg, xy)
    return _PYAMG[key]


def _run_pyamg(name, A, pyamg, xy=None):
    b = numpy.random.default_rng(1).random(A.shape[0])
    t0 = time.perf_counter()
    if xy is None:
        ml = pyamg.smoothed_aggregation_solver(A)
    else:                                       # a system: its block size and rigid body modes
        B = nullspace.rigid_body_modes(xy, numpy)
        ml = pyamg.smoothed_aggregation_solver(scipy.sparse.bsr_matrix(A, blocksize=(xy.shape[1],) * 2), B=B)
    t1 = time.perf_counter()
    res = []
    x = ml.solve(b, tol=1e-6, accel="cg", residuals=res, maxiter=500)
    t2 = time.perf_counter()
    M = ml.aspreconditioner()
    M @ b
    t3 = time.perf_counter()
    for _ in range(3):
        M @ b
    apply_s = (time.perf_counter() - t3) / 3
    return {"solver": name, "unknowns": A.shape[0], "ranks": 1, "options": {"pyamg": pyamg.__version__},
            "setup_s": t1 - t0, "solve_s": t2 - t1, "total_s": t2 - t0, "iterations": len(res) - 1,
            "true_rel_residual": float(numpy.linalg.norm(b - A @ x) / numpy.linalg.norm(b)),
            "apply_ms": 1e3 * apply_s, "operator_complexity": ml.operator_complexity()}


def _run(name, options, A, xy, gpu, bs=1):
    comm = PETSc.COMM_WORLD
    M = meshes.petsc_matrix(A, "aijcusparse" if gpu else "aij", comm, block_size=bs)
    lo, hi = M.getOwnershipRange()
    xy = xy[lo // bs:hi // bs]                  # this rank's nodes
    if bs > 1:                                  # as PETSc's ksp ex56: the rigid body modes
        elasticity.set_rigid_body_modes(M, xy)
    b, x = M.createVecs()
    b.setArray(numpy.random.default_rng(1).random(A.shape[0])[lo:hi])
    M.mult(b, x)          # the matrix is resident where it is used (PETSc uploads it on first use)
    x.set(0.0)
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(M)
    if options.get("pc_python_type") == "pcplugins.AMG":
        ksp.getPC().setType("python")
        ksp.getPC().setPythonType("pcplugins.AMG")
        # on the GPU the coordinates are where the matrix is (a CuPy array: a CUDA Vec on the PC)
        pcplugins.set_coordinates(ksp.getPC(), backend.cupy.asarray(xy) if gpu else xy)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-6, max_it=20000)
    ksp.setFromOptions()
    res = dict({"solver": name, "unknowns": A.shape[0], "ranks": comm.getSize(), "options": options},
               **timed_solve(ksp, M, b, x, gpu))
    pc = ksp.getPC()
    res["apply_ms"] = apply_ms(pc, b, gpu)
    if options.get("pc_python_type"):
        ctx = pc.getPythonContext()
        res["view"] = ctx.describe()
        res["setup_phases_s"] = ctx.timings
    ksp.destroy()
    M.destroy()
    return res


def csr_read_times(A):
    """Seconds to read an aijcusparse matrix as CSR: petsc4py getValuesCSR vs the device CSR."""
    M = meshes.petsc_matrix(A, "aijcusparse")
    b, x = M.createVecs()
    M.mult(b, x)
    out = {}
    for label, f in (("getValuesCSR (host)", M.getValuesCSR),
                     ("MatSeqAIJGetCSRAndMemType (device, copied)",
                      lambda: mat._device_csr(M.handle, M.getSize()[0], M))):
        f()
        backend.cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        f()
        backend.cupy.cuda.runtime.deviceSynchronize()
        out[label] = time.perf_counter() - t
    M.destroy()
    return out


def main():
    opts = PETSc.Options()
    cases = opts.getString("cases", "2d,3d,mesh").split(",")
    gpu = opts.getString("vec", "gpu" if backend.gpu_available() else "cpu") == "gpu"
    skip = opts.getString("skip", "")
    out = opts.getString("out", "")
    repeat = opts.getInt("repeat", 1)
    results = []
    for case in cases:
        t = time.perf_counter()
        label, A, xy, bs = problem(case, opts)
        PETSc.Sys.Print(f"{label}: built in {time.perf_counter() - t:.1f} s", flush=True)
        if gpu and case == "2d" and PETSc.COMM_WORLD.getSize() == 1:
            r = {"case": label, "solver": "CSR read", "seconds": csr_read_times(A)}
            results.append(r)
            PETSc.Sys.Print(f"  CSR read: {r['seconds']}", flush=True)
        measure_configs(CONFIGS, skip, run, (A, xy, gpu, bs), gpu, {"case": label}, (" ", 36), results, out,
                        lambda r: f"setup {r['setup_s']*1e3:9.1f} ms  solve {r['solve_s']*1e3:9.1f} ms"
                                  f"  its {r['iterations']:5d}  true rel res {r['true_rel_residual']:.2e}"
                                  f"  PCApply {r['apply_ms']:.2f} ms", repeat=repeat)
    write(out, results, gpu)


if __name__ == "__main__":
    main()
