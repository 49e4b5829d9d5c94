"""Linear elasticity with pcplugins.AMG: a system of PDEs, the near null space given to PETSc as in
its own elasticity tutorials (ksp ex56): the matrix's block size (MatSetBlockSize, one node's
displacement components) and its rigid body modes (MatNullSpaceCreateRigidBody, MatSetNearNullSpace).

    [mpiexec -n P] python examples/elasticity.py [-dim 2|3] [-ne 32] [-nu 0.3] [-coordinates]
                                                 [PETSc options, e.g. -ksp_view -mat_type aijcusparse]

With -coordinates the nodes' coordinates go to the PC by PCSetCoordinates instead (as GAMG users
and ksp ex55 give them), and the PC builds the rigid body modes from them.

The unit square (cube), clamped at x = 0, under its own weight (a unit body force along -y); Q1
(bilinear, trilinear) elements on an ne^dim grid, Young's modulus 1, Poisson ratio ``nu``.
Defaults (any can be overridden): -ksp_type cg -ksp_rtol 1e-8 -ksp_norm_type unpreconditioned
-pc_type python -pc_python_type pcplugins.AMG. Prints the unknowns, the iterations, the true
relative residual and the setup and solve times.

set_rigid_body_modes(M, xy): the near null space of a PETSc matrix, as ex56 sets it.
q1_elasticity(ne, dim, nu, clamp) -> (A, coords, f): the stiffness matrix (SciPy CSR, unknowns node
by node; the clamped nodes' unknowns eliminated, or with ``clamp`` False none: the floating body,
whose null space is the rigid body modes), the coordinates of its nodes and the load vector.
"""
import itertools
import os
import sys

import numpy
import scipy.sparse


def _element_stiffness(dim, nu):
    """The Q1 element matrix of the unit cell (2^dim Gauss points), for E = 1: K = int B^T D B with
    the strain e(u) in Voigt order and D the isotropic elasticity tensor (Lame's lambda, mu)."""
    lam, mu = nu / ((1 + nu) * (1 - 2 * nu)), 1 / (2 * (1 + nu))
    corners = numpy.array(list(itertools.product((0, 1), repeat=dim)))[:, ::-1]   # x fastest
    g = (1 + numpy.array([-1, 1]) / numpy.sqrt(3)) / 2
    pairs = list(itertools.combinations(range(dim), 2))
    nv = dim + len(pairs)
    D = numpy.zeros((nv, nv))
    D[:dim, :dim] = lam
    D[range(dim), range(dim)] += 2 * mu
    D[range(dim, nv), range(dim, nv)] = mu
    K = numpy.zeros((2 ** dim * dim, 2 ** dim * dim))
    for q in itertools.product(g, repeat=dim):
        q = numpy.array(q)
        # the derivative of corner c's shape function prod_a (c_a q_a + (1 - c_a)(1 - q_a)) along a
        grad = numpy.empty((len(corners), dim))
        for a in range(dim):
            f = numpy.where(corners == 1, q, 1 - q)
            f[:, a] = numpy.where(corners[:, a] == 1, 1.0, -1.0)
            grad[:, a] = f.prod(axis=1)
        Bm = numpy.zeros((nv, len(corners) * dim))
        for c in range(len(corners)):
            for a in range(dim):
                Bm[a, c * dim + a] = grad[c, a]
            for k, (a, b) in enumerate(pairs):
                Bm[dim + k, c * dim + a] = grad[c, b]
                Bm[dim + k, c * dim + b] = grad[c, a]
        K += Bm.T @ D @ Bm / 2 ** dim
    return K, corners


def q1_elasticity(ne, dim=2, nu=0.3, clamp=True):
    h = 1.0 / ne
    Ke, corners = _element_stiffness(dim, nu)
    Ke *= h ** (dim - 2)
    shape = (ne + 1,) * dim
    strides = numpy.array([(ne + 1) ** a for a in range(dim)])          # x fastest
    cells = numpy.array(list(itertools.product(range(ne), repeat=dim)))[:, ::-1]
    nodes = (cells[:, None, :] + corners[None]) @ strides                  # cells x corners
    dofs = (nodes[:, :, None] * dim + numpy.arange(dim)).reshape(len(cells), -1)
    rows = numpy.repeat(dofs, dofs.shape[1], axis=1).ravel()
    cols = numpy.tile(dofs, (1, dofs.shape[1])).ravel()
    n = numpy.prod(shape) * dim
    A = scipy.sparse.coo_matrix((numpy.tile(Ke.ravel(), len(cells)), (rows, cols)), shape=(n, n)).tocsr()
    idx = numpy.indices(shape).reshape(dim, -1)[::-1].T                    # node -> (x, y, z) index
    coords = idx * h
    f = numpy.zeros((len(coords), dim))
    f[:, 1] = -h ** dim                                                    # lumped unit body force along -y
    free = coords[:, 0] > 0 if clamp else coords[:, 0] >= 0                # clamped at x = 0
    keep = numpy.repeat(free, dim)
    return A[keep][:, keep].tocsr(), coords[free], f[free].ravel()


def set_rigid_body_modes(M, xy):
    """Give the PETSc matrix M (block size = dimension) the rigid body modes of its nodes as its
    near null space, as PETSc's ksp ex56 does (MatNullSpaceCreateRigidBody, MatSetNearNullSpace);
    ``xy``: the coordinates of this rank's nodes, one row a node."""
    from petsc4py import PETSc
    lo, hi = M.getOwnershipRange()
    v = PETSc.Vec().createMPI((hi - lo, PETSc.DECIDE), bsize=xy.shape[1], comm=M.getComm())
    v.getArray()[:] = xy.ravel()
    M.setNearNullSpace(PETSc.NullSpace().createRigidBody(v))


def main():
    import petsc4py

    petsc4py.init(sys.argv)
    from petsc4py import PETSc

    sys.path.insert(0, os.path.dirname(__file__))
    import pcplugins  # noqa: F401

    from meshes import petsc_matrix
    from problems import timed_solve

    opts = PETSc.Options()
    for name, value in {"ksp_type": "cg", "ksp_rtol": 1e-8, "ksp_norm_type": "unpreconditioned",
                        "pc_type": "python", "pc_python_type": "pcplugins.AMG"}.items():
        if not opts.hasName(name) and (name != "pc_python_type" or opts.getString("pc_type") == "python"):
            opts[name] = value
    dim, ne, nu = opts.getInt("dim", 2), opts.getInt("ne", 32), opts.getReal("nu", 0.3)
    A, coords, f = q1_elasticity(ne, dim, nu)
    comm = PETSc.COMM_WORLD
    M = petsc_matrix(A, comm=comm, block_size=dim)
    lo, hi = M.getOwnershipRange()
    given = opts.getBool("coordinates", False)
    if not given:
        set_rigid_body_modes(M, coords[lo // dim:hi // dim])
    b, x = M.createVecs()
    b.getArray()[:] = f[lo:hi]
    ksp = PETSc.KSP().create(comm=comm)
    ksp.setOperators(M)
    ksp.setFromOptions()
    if given:               # after the PC has its type, as PCSetCoordinates asks: a row a node
        ksp.getPC().setCoordinates(coords[lo // dim:hi // dim])
    setup, solve, res = timed_solve(ksp, M, b, x)
    PETSc.Sys.Print(f"{dim}D elasticity, {A.shape[0]} unknowns: {ksp.getIterationNumber()} iterations "
                    f"({ksp.getConvergedReason()}), true relative residual {res:.2e}, "
                    f"setup {setup:.3f} s, solve {solve:.3f} s")


if __name__ == "__main__":
    main()
