"""PCApplyTranspose of pcplugins.AMG on a matrix that is not symmetric (cycle.Cycle.transposed):
the V- and W-cycles applied to A^T with the transfers swapped and the smoothers transposed, so
that KSPSolveTranspose (ksp ex53, adjoint solves) and bicg (which applies both) work. The
reference is the cycle's own matrix: the transposed application is B^T to rounding, B built
column by column from PCApply."""
import numpy
import pytest
from petsc4py import PETSc

import meshes
from conftest import complex_scalars, grid_amg_ksp, pc_matrices, petsc_options, python_pc_ksp
from problems import convection_box

AMG = "pcplugins.AMG"


CASES = [
    ({"pc_amg_cycle": "w"}, (15, 15)),
    ({"pc_amg_cycle": "v"}, (16, 16)),
    ({"pc_amg_cycle": "w", "pc_amg_pre": "1", "pc_amg_post": "2"}, (14, 11)),
    ({"pc_amg_cycle": "v", "pc_amg_smoother": "l1jacobi", "pc_amg_pre": "2", "pc_amg_post": "1"}, (16, 13)),
    ({"pc_amg_cycle": "w", "pc_amg_smoother": "chebyshev"}, (15, 16)),
    ({"pc_amg_agg_nsmooths": "1"}, (17, 16)),
    ({"pc_amg_agg_nsmooths": "1", "pc_amg_smoother": "gs", "pc_amg_pre": "2", "pc_amg_post": "1"}, (6, 7, 5)),
    ({"pc_amg_diagonal_scaling": "rows", "pc_amg_pre": "1", "pc_amg_post": "2"}, (13, 16)),
    ({"pc_amg_cycle": "w"}, (7, 6, 6)),
]


@pytest.mark.parametrize("options,shape", CASES)
@pytest.mark.parametrize("coords", [False, True])
def test_transposed_application_is_the_transpose(options, shape, coords):
    """PCApplyTranspose = B^T to rounding for V and W cycles, Gauss-Seidel, l1-Jacobi and
    Chebyshev, as many or fewer post- than pre-sweeps, smoothed and unsmoothed aggregation
    (pairwise, or the aux grid with coordinates), the rows scaled, 2D and 3D; and B^T is far from B
    (the test would fail on the cycle itself), the coarsest level well below the finest."""
    A = convection_box(shape, 3.0, complex_part=complex_scalars())
    M = meshes.petsc_matrix(A, "aij")
    ksp = grid_amg_ksp(M, options, shape, coords, "gmres")
    mg = ksp.getPC().getPythonContext().mg
    assert len(mg.levels) >= 3
    B, T = pc_matrices(ksp.getPC())
    scale = abs(B).max()
    assert abs(T - B.T).max() <= 1e-10 * scale, abs(T - B.T).max() / scale
    assert abs(B - B.T).max() >= 1e-3 * scale


def test_symmetric_matrix_with_unequal_sweeps_takes_the_transposed_cycle():
    """A symmetric matrix, pre 1 and post 2: not a symmetric preconditioner, and its transpose is
    the transposed cycle (before, PCApplyTranspose refused it)."""
    A = convection_box((15, 14), peclet=0.0)
    M = meshes.petsc_matrix(A, "aij")
    with petsc_options({"pc_amg_pre": "1", "pc_amg_post": "2", "pc_amg_coarse_size": "12"}):
        ksp = python_pc_ksp(M, AMG)
        ksp.setFromOptions()
        ksp.setUp()
    B, T = pc_matrices(ksp.getPC())
    assert abs(T - B.T).max() <= 1e-10 * abs(B).max() and abs(T - B).max() >= 1e-3 * abs(B).max()
    assert any("PCApplyTranspose: the transposed cycle" in ln and "2 pre- and 1 post-sweeps" in ln
               for ln in ksp.getPC().getPythonContext().describe())


@pytest.mark.parametrize("ksp_type", ["gmres", "bcgs", "fgmres", "bicg"])
@pytest.mark.parametrize("shape,peclet", [((63, 63), 1.0), ((64, 64), 10.0), ((40, 33), 100.0), ((12, 10, 9), 3.0)])
def test_transpose_solve_of_a_nonsymmetric_matrix(ksp_type, shape, peclet):
    """KSPSolveTranspose (ksp ex53) solves A^T x = b, judged by the true residual of A^T x - b,
    in as many iterations as the same KSP's solve of A x = b (within one); bicg, which applies
    both the cycle and its transpose, solves A x = b. Measured: 6-21 iterations, bicg 14-26,
    real and complex."""
    A = convection_box(shape, peclet, complex_part=complex_scalars())
    M = meshes.petsc_matrix(A, "aij")
    b, x = M.createVecs()
    rhs = numpy.random.default_rng(4).random(A.shape[0])
    b.setArray(rhs)
    ksp = python_pc_ksp(M, AMG, ksp_type=ksp_type)
    if ksp_type != "bicg":                     # bicg has the preconditioned norm only
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-10 if ksp_type == "bicg" else 1e-8, max_it=100)
    ksp.setFromOptions()
    its = []
    for transpose in ([False] if ksp_type == "bicg" else [True, False]):
        x.set(0.0)
        (ksp.solveTranspose if transpose else ksp.solve)(b, x)
        op = A.T if transpose else A
        res = numpy.linalg.norm(rhs - op @ x.getArray()) / numpy.linalg.norm(rhs)
        assert ksp.getConvergedReason() > 0 and res <= 1e-7, (transpose, ksp.getConvergedReason(), res)
        its.append(ksp.getIterationNumber())
    assert its[0] <= 30 and its[0] <= its[-1] + 1, its
