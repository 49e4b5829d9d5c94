"""Poisson's equation -div(kappa grad u) = f on the unit square/cube, on a DMDA, solved by a PETSc
KSP whose preconditioner comes from the command line (pcplugins.GMG by default).

    python examples/poisson.py -n 129 -dim 3 -ksp_type cg -pc_type python \
        -pc_python_type pcplugins.GMG -ksp_rtol 1e-8

Options of this example:
  -n <65>            grid points per direction
  -dim <3>           2 or 3
  -convention <interior>  interior: all grid points are unknowns, Dirichlet values eliminated,
                     1/h^2 scaling (Feng et al.); petsc: boundary points kept as scaled identity
                     rows, h-scaled stencil (PETSc's KSP tutorial ex45)
  -jump <0>          if > 0, kappa = 10^jump in a few off-grid-aligned boxes, else 1
  -pattern <boxes>   where kappa jumps: boxes | checkerboard (3^dim cells, faces at 1/3, 2/3)
  -rhs <random>      random | ones | sine
  -seed <0>
  -periodic <>       axes along which the domain is periodic, e.g. x,y (a periodic DMDA; along
                     every axis the constant null space is attached and removed from the rhs)
With -vec_type cuda -mat_type aijcusparse PETSc's vectors and matrix live on the GPU.
"""
import sys

import petsc4py

petsc4py.init(sys.argv)
from petsc4py import PETSc  # noqa: E402

from problems import poisson_system, timed_solve  # noqa: E402  (examples/problems.py, beside this file)


def main():
    opts = PETSc.Options()
    if not opts.hasName("pc_type"):
        opts["pc_type"] = "python"
        if not opts.hasName("pc_python_type"):     # a user's -pc_python_type stays
            opts["pc_python_type"] = "pcplugins.GMG"
    if not opts.hasName("ksp_type"):
        opts["ksp_type"] = "cg"
    n = opts.getInt("n", 65)
    dim = opts.getInt("dim", 3)
    conv = opts.getString("convention", "interior")
    jump = opts.getReal("jump", 0.0)
    rhs = opts.getString("rhs", "random")
    periodic = [name in opts.getString("periodic", "").split(",") for name in "xyz"[:dim]]
    da, A, b = poisson_system(n, dim, conv, jump, rhs, opts.getInt("seed", 0),
                              pattern=opts.getString("pattern", "boxes"), periodic=periodic)
    x = b.duplicate()
    ksp = PETSc.KSP().create()
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    ksp.setFromOptions()
    setup, solve, residual = timed_solve(ksp, A, b, x)
    pc = ksp.getPC()
    pcname = pc.getPythonContext().__class__.__name__ if pc.getType() == "python" else pc.getType()
    PETSc.Sys.Print(f"grid {n}^{dim} ({A.getSize()[0]} unknowns), {ksp.getType()} + {pcname}: "
                    f"{ksp.getIterationNumber()} iterations, reason {ksp.getConvergedReason()}, "
                    f"true relative residual {residual:.3e}, setup {setup:.3f} s, solve {solve:.3f} s")


if __name__ == "__main__":
    main()
