"""pcplugins.FFTPoisson and the DST-I solve (fft.py) against direct solves."""
import numpy as np
import pytest
import scipy.sparse.linalg
from petsc4py import PETSc

from pcplugins.core import fft, grid, stencil

from conftest import petsc_solve, real_scalars, true_relative_residual
from problems import poisson_system, row_coefficient_system


# odd, even, prime and box sizes: the sine transforms are exact on every one
@pytest.mark.parametrize("shape,w", [((13, 21), [-1.0, -3.0]), ((16, 16), [-1.0, -1.0]), ((31, 17), [-1.0, -1.0]),
                                     ((2, 97), [-1.0, -2.0]), ((7, 9, 11), [-2.0, -1.0, -0.5]),
                                     ((8, 6, 10), [-1.0, -1.0, -1.0]), ((5, 13, 4), [-1.0, -3.0, -1.0])])
@pytest.mark.parametrize("periodic", ["none", "first", "all"])
@pytest.mark.parametrize("dense", [0, 12, None])
def test_laplacian_fft_is_the_exact_inverse(shape, w, periodic, dense):
    """Dirichlet axes, the first axis periodic, or every axis (singular: the pseudo-inverse's
    mean-free answer, from the system bordered by the constants); the sine transforms by FFTs,
    as matrix products, or some axes each way (dense=12)."""
    per = [periodic == "all" or (periodic == "first" and a == 0) for a in range(len(shape))]
    if any(p and m < 3 for p, m in zip(per, shape)):
        pytest.skip("a periodic axis needs 3 points")
    box = grid.Box(shape, periodic=per)
    op = stencil.laplacian(box, w, np)
    f = np.random.default_rng(0).standard_normal(shape)
    A = op.to_scipy()
    if all(per):
        f -= f.mean()
        e = scipy.sparse.csr_matrix(np.ones((A.shape[0], 1)))
        A = scipy.sparse.bmat([[A, e], [e.T, None]])
    solver = fft.LaplacianFFT(op, w, dense=dense)
    limit = fft.DENSE_DST if dense is None else dense
    assert sorted(solver.dense) == [a for a in range(len(shape)) if not per[a] and shape[a] <= limit]
    u = grid.interior(solver.cycle(f))
    ref = scipy.sparse.linalg.spsolve(A.tocsc(), np.append(f.ravel(), [0.0] * (A.shape[0] - f.size)))
    assert np.linalg.norm(u.ravel() - ref[:f.size]) <= 1e-12 * np.linalg.norm(ref)


@pytest.mark.parametrize("shape", [(20, 33), (9, 16, 11)])
@pytest.mark.parametrize("dense", [0, None])
def test_single_precision_sine_transforms(shape, dense):
    """-pc_fft_precision single: both ways of the sine transforms in float32, to float32's accuracy
    of the double solve."""
    box = grid.Box(shape)
    w = [-1.0] * len(shape)
    f = np.random.default_rng(3).standard_normal(shape)
    ref = grid.interior(fft.LaplacianFFT(stencil.laplacian(box, w, np), w).cycle(f))
    u = grid.interior(fft.LaplacianFFT(stencil.laplacian(box, w, np, np.float32), w, dense=dense).cycle(f))
    assert u.dtype == np.float32
    assert np.linalg.norm(u - ref) <= 1e-6 * np.linalg.norm(ref)


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


@real_scalars
@pytest.mark.parametrize("n,dim", [(33, 2), ((20, 13), 2), ((9, 12, 7), 3)])
def test_rows_that_are_multiples_of_the_laplacian_are_solved(n, dim):
    """ksp ex29's rows (rho_i times the Laplacian's, rho 1e5 in the middle third): read as D^-1 A,
    the constant Laplacian, and applied to D^-1 x (detect.row_scaled), a direct solve under preonly
    (true residual at rounding); before, refused as a variable-coefficient operator."""
    da, A, b = row_coefficient_system(n, dim, 1e5)
    ksp, rel = fft_solve(da, A, b, {})
    assert rel < 1e-10, rel
    assert "rows scaled" in "\n".join(ksp.getPC().getPythonContext().describe())


def test_variable_coefficients_are_refused_by_name():
    da, A, b = poisson_system(17, 2, "petsc", jump=2.0)
    with pytest.raises(PETSc.Error):
        fft_solve(da, A, b, {})
