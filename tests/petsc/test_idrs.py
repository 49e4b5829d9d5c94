"""pcplugins.IDRS, IDR(s) with biorthogonalisation as a Python KSP: against a direct solve, its
counting, its options and PETSc's monitors (the Helmholtz counts are in test_shifted_laplace.py)."""
import numpy
import pytest
import scipy.sparse
import scipy.sparse.linalg

from conftest import petsc_options


def convection_diffusion(n=20, wind=30.0):
    """A non-symmetric 2D upwind convection-diffusion matrix (n^2 unknowns)."""
    h = 1.0 / (n + 1)
    T = scipy.sparse.diags([-1 - wind * h, 2 + wind * h, -1.0], [-1, 0, 1], (n, n))
    I = scipy.sparse.identity(n)
    return (scipy.sparse.kron(I, T) + scipy.sparse.kron(T, I)).tocsr()


def idrs_solve(A, b, options, pc="none", monitor=None):
    from petsc4py import PETSc

    import meshes
    M = meshes.petsc_matrix(A, "aij")
    with petsc_options(dict({"ksp_type": "python", "ksp_python_type": "pcplugins.IDRS"}, **options)):
        ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
        ksp.setOperators(M)
        ksp.getPC().setType(pc)
        ksp.setTolerances(rtol=1e-10, max_it=500)
        ksp.setFromOptions()
        if monitor is not None:
            ksp.setMonitor(monitor)
        bv, x = M.createVecs()
        bv.setArray(b)
        ksp.solve(bv, x)
    return ksp, x.getArray().copy()


@pytest.mark.parametrize("s", [1, 2, 4, 8])
def test_idrs_matches_a_direct_solve(s):
    """Non-symmetric system, no preconditioner (and Jacobi): the solution of a direct solve to the
    tolerance, in at most as many products as unknowns; an iteration is s + 1 products."""
    A = convection_diffusion()
    b = numpy.random.default_rng(0).standard_normal(A.shape[0])
    ref = scipy.sparse.linalg.spsolve(A.tocsc(), b)
    for pc in ("none", "jacobi"):
        ksp, x = idrs_solve(A, b, {"ksp_idrs_s": s}, pc)
        assert ksp.getConvergedReason() > 0, (s, pc, ksp.getConvergedReason())
        assert numpy.linalg.norm(x - ref) <= 1e-8 * numpy.linalg.norm(ref)
        ctx = ksp.getPythonContext()
        assert ctx.products == (s + 1) * ksp.getIterationNumber() <= A.shape[0]


def test_larger_shadow_space_needs_fewer_products():
    """IDR(s) needs fewer matrix-vector products as s grows (measured 118, 110, 99 for s = 1, 4, 8
    without preconditioning; on 24^2 a lucky shadow vector once gave s = 1 only 50, so the
    larger grid)."""
    A = convection_diffusion(32)
    b = numpy.ones(A.shape[0])
    products = [idrs_solve(A, b, {"ksp_idrs_s": s})[0].getPythonContext().products for s in (1, 4, 8)]
    assert products[0] > products[1] >= products[2], products


def test_monitor_tolerances_and_reasons():
    """PETSc's monitor sees every iteration with the true residual norm, -ksp_max_it stops it with
    DIVERGED_MAX_IT, and a non-positive -ksp_idrs_s is refused naming the option."""
    from petsc4py import PETSc
    A = convection_diffusion()
    b = numpy.ones(A.shape[0])
    seen = []
    ksp, x = idrs_solve(A, b, {}, monitor=lambda k, its, rnorm: seen.append((its, rnorm)))
    assert [its for its, _ in seen] == list(range(ksp.getIterationNumber() + 1))
    # the recursively updated residual the monitor sees is the true one, up to rounding drift
    assert abs(seen[-1][1] - numpy.linalg.norm(b - A @ x)) <= 1e-10 * numpy.linalg.norm(b)
    assert seen[-1][1] <= 1e-10 * seen[0][1]
    ksp, _ = idrs_solve(A, b, {"ksp_max_it": 2})
    assert ksp.getConvergedReason() == PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT
    with pytest.raises(PETSc.Error) as e:
        idrs_solve(A, b, {"ksp_idrs_s": 0})
    assert "-ksp_idrs_s" in str(e.value.__cause__ or e.value.__context__)
