"""pcplugins.AMG on an unstructured mesh: P1 finite elements for -div(kappa grad u) = 1 with
homogeneous Dirichlet conditions on a Delaunay mesh of the unit square (or the unit disk), a
flexible CG and pcplugins.AMG chosen from the options database, on one rank or under mpiexec (each
rank assembles a block of consecutive rows and gives the PC the coordinates of its vertices, for
the auxiliary-grid aggregation).

    [mpiexec -n P] python examples/amg_solve.py [-mesh quasi|uniform|disk] [-n 200] [-jump 0]
                                                [PETSc options, e.g. -mat_type aijcusparse -ksp_view]

Defaults (any of them can be overridden): -ksp_type fcg -ksp_fcg_mmax 1 -ksp_norm_type
unpreconditioned -pc_type python -pc_python_type pcplugins.AMG -ksp_rtol 1e-8, and the paper's
K-cycle (-pc_amg_cycle k) where the KSP is flexible (fcg, fgmres, gcr); with -mat_type
aijcusparse the default is -ksp_type fgmres (PETSc 3.26's fcg does its VecMTDot on the host for
CUDA vectors).
``-jump J``: kappa = 10^J on two rectangles.
Prints the unknowns, the iterations, the true relative residual and the setup and solve times.
"""
import os
import sys

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import pcplugins  # noqa: E402

import meshes  # noqa: E402
from problems import timed_solve  # noqa: E402

DEFAULTS = {"ksp_type": "fcg", "ksp_fcg_mmax": 1, "ksp_norm_type": "unpreconditioned", "pc_type": "python",
            "pc_python_type": "pcplugins.AMG", "ksp_rtol": 1e-8, "pc_amg_cycle": "k"}
FLEXIBLE = ("fcg", "fgmres", "gcr")


def main():
    opts = PETSc.Options()
    defaults = dict(DEFAULTS)
    if "cusparse" in opts.getString("mat_type", ""):
        defaults.pop("ksp_fcg_mmax")
        defaults["ksp_type"] = "fgmres"
    ksp_type = opts.getString("ksp_type", defaults["ksp_type"])
    if ksp_type != "fcg":
        defaults.pop("ksp_fcg_mmax", None)    # read by fcg alone: PETSc would call it unused
    if ksp_type not in FLEXIBLE:
        defaults.pop("pc_amg_cycle")          # the K-cycle is nonlinear: the PC's own linear default
    for name, value in defaults.items():
        if not opts.hasName(name):
            opts[name] = value
    kind, n, jump = opts.getString("mesh", "quasi"), opts.getInt("n", 200), opts.getReal("jump", 0.0)
    points, triangles = meshes.mesh(kind, n)
    kappa = meshes.centroid_kappa(points, triangles, jump) if jump else None
    A, xy = meshes.p1_poisson(points, triangles, kappa)
    comm = PETSc.COMM_WORLD
    M = meshes.petsc_matrix(A, comm=comm)              # -mat_type from the options
    lo, hi = M.getOwnershipRange()
    b, x = M.createVecs()
    b.set(1.0)
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(M)
    ksp.setFromOptions()
    pc = ksp.getPC()
    if pc.getType() == "python":
        pcplugins.set_coordinates(pc, xy[lo:hi])       # this rank's vertices
    setup, solve, residual = timed_solve(ksp, M, b, x)
    PETSc.Sys.Print(f"{kind} mesh, {A.shape[0]} unknowns, {comm.getSize()} rank(s): {ksp.getIterationNumber()} "
                    f"iterations, reason {int(ksp.getConvergedReason())}, true relative residual "
                    f"{residual:.2e}, setup {setup:.3f} s, solve {solve:.3f} s")


if __name__ == "__main__":
    main()
