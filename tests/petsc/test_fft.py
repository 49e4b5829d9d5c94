"""pcplugins.FFTPoisson and the DST-I solve (fft.py) against direct solves."""
import numpy as np
import pytest
import scipy.sparse.linalg
from petsc4py import PETSc

from pcplugins.core import fft, grid, stencil

from conftest import petsc_solve, real_scalars, true_relative_residual
from problems import poisson_system


# odd, even, prime and box sizes: the sine transforms are exact on every one
@pytest.mark.parametrize("shape,w", [((13, 21), [-1.0, -3.0]), ((16, 16), [-1.0, -1.0]), ((31, 17), [-1.0, -1.0]),
                                     ((2, 97), [-1.0, -2.0]), ((7, 9, 11), [-2.0, -1.0, -0.5]),
                                     ((8, 6, 10), [-1.0, -1.0, -1.0]), ((5, 13, 4), [-1.0, -3.0, -1.0])])
def test_dirichlet_fft_is_the_exact_inverse(shape, w):
    box = grid.Box(shape)
    op = stencil.laplacian(box, w, np)
    f = np.random.default_rng(0).standard_normal(shape)
    u = grid.interior(fft.DirichletFFT(op, w).cycle(f))
    ref = scipy.sparse.linalg.spsolve(op.to_scipy().tocsc(), f.ravel()).reshape(shape)
    assert np.linalg.norm(u - ref) <= 1e-12 * np.linalg.norm(ref)


def fft_solve(da, A, b, options, ksp_type="preonly"):
    ksp, x = petsc_solve(da, A, b, options, ksp_type, pc="pcplugins.FFTPoisson", rtol=1e-12)
    return ksp, true_relative_residual(A, b, x)


@pytest.mark.parametrize("dim,n,convention", [(2, 33, "petsc"), (2, 30, "interior"), (3, 17, "petsc"),
                                              (3, 12, "interior")])
@pytest.mark.parametrize("declared", [False, True])
@real_scalars
def test_preonly_fft_solves_both_conventions(dim, n, convention, declared):
    da, A, b = poisson_system(n, dim, convention)
    ksp, rel = fft_solve(da, A, b, {"pc_fft_operator": "laplacian"} if declared else {})
    assert rel < 1e-11
    assert "fast Poisson solver" in ksp.getPC().getPythonContext().describe()[0]


@real_scalars
def test_cg_with_fft_converges_in_one_iteration():
    da, A, b = poisson_system(33, 3, "petsc")
    ksp, rel = fft_solve(da, A, b, {}, ksp_type="cg")
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 1


def test_variable_coefficients_are_refused_by_name():
    da, A, b = poisson_system(17, 2, "petsc", jump=2.0)
    with pytest.raises(PETSc.Error):
        fft_solve(da, A, b, {})
