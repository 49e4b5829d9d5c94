"""-pc_amg_precision single: the hierarchy set up in double, the cycle run in float32 (complex64
for complex scalars). The reference is the double cycle on the same matrix: the single cycle is
that operator rounded (relative difference near float32's epsilon, far from double's), and a
KSP in double around it reaches the same true residual in as many iterations, within one."""
import numpy
import pytest
from petsc4py import PETSc

import meshes
from conftest import amg_solve, complex_scalars, grid_amg_ksp, laplacian, petsc_options, python_pc_ksp
from problems import convection_box

AMG = "pcplugins.AMG"
SINGLE = numpy.complex64 if complex_scalars() else numpy.float32


def applied(M, options, shape, coords):
    """PCApply of a random vector with ``options``, and the KSP (its PC's context lives with it)."""
    ksp = grid_amg_ksp(M, options, shape, coords, "fgmres")
    x, y = M.createVecs()
    x.setArray(numpy.random.default_rng(5).random(x.getSize()))
    ksp.getPC().apply(x, y)
    return y.getArray().copy(), ksp


@pytest.mark.parametrize("options", [
    {"pc_amg_cycle": "k"},
    {"pc_amg_cycle": "w"},
    {"pc_amg_cycle": "v", "pc_amg_smoother": "l1jacobi", "pc_amg_pre": "2"},
    {"pc_amg_cycle": "w", "pc_amg_smoother": "chebyshev"},
    {"pc_amg_agg_nsmooths": "1"},
    {"pc_amg_diagonal_scaling": "rows", "pc_amg_cycle": "k"},
])
@pytest.mark.parametrize("shape", [(15, 15), (16, 13), (7, 6, 6)])
@pytest.mark.parametrize("coords", [False, True])
def test_single_cycle_is_the_double_cycle_rounded(options, shape, coords):
    """The single cycle differs from the double one by float32 rounding: below 1e-4 relative, and
    above 1e-9 (a cycle left in double would agree to 1e-14); its levels, transfers, smoothers
    and coarse inverse hold float32 (complex64) values, and -ksp_view says so. V, W and K cycles,
    Gauss-Seidel, l1-Jacobi and Chebyshev, smoothed aggregation, scaled rows, odd and even boxes."""
    A = convection_box(shape, 2.0, complex_part=complex_scalars())
    M = meshes.petsc_matrix(A, "aij")
    double, _ = applied(M, options, shape, coords)
    single, ksp = applied(M, dict(options, pc_amg_precision="single"), shape, coords)
    ctx = ksp.getPC().getPythonContext()
    diff = numpy.linalg.norm(single - double) / numpy.linalg.norm(double)
    assert 1e-9 < diff < 1e-4, diff
    mg = ctx.mg
    assert len(mg.levels) >= 2 and mg.dtype == SINGLE
    for lev in mg.levels[:-1]:      # the aggregates' restriction holds ones: real
        assert lev.M.dtype == SINGLE and lev.R.dtype in (SINGLE, numpy.float32)
    assert mg.coarse.inv.dtype == SINGLE
    assert any(f"the cycle in {numpy.dtype(SINGLE)}" in line for line in ctx.describe())


@pytest.mark.parametrize("ksp_type,cycle", [("cg", "w"), ("fgmres", "k"), ("fcg", "k"), ("fgmres", "w")])
@pytest.mark.parametrize("shape", [(33, 33), (48, 40), (9, 10, 8)])
def test_single_cycle_solves_as_the_double_one(ksp_type, cycle, shape):
    """The KSPs that keep the preconditioned vectors in double reach rtol 1e-8 on the true
    residual around the single cycle in the double cycle's iterations, within one."""
    A = laplacian(shape)
    counts = []
    for precision in ("double", "single"):
        its, res, _ = amg_solve(A, options={"pc_amg_precision": precision, "pc_amg_coarse_size": "20"},
                                ksp_type=ksp_type, rtol=1e-8, cycle=cycle)
        assert res <= 1.01e-8, (precision, res)
        counts.append(its)
    assert abs(counts[1] - counts[0]) <= 1, counts


@pytest.mark.parametrize("ksp_type,side", [("gmres", "right"), ("gmres", "left"), ("bcgs", "right")])
def test_single_cycle_under_gmres_is_checked(ksp_type, side):
    """gmres and bcgs build their answer through the preconditioner (right), or judge the residual
    through it (left, its preconditioned norm): around the single cycle they stop at its rounding
    times the condition number (measured 1e-5 on 33^2 where they claim 1e-10). PCPostSolve checks
    the claim against the true residual: at rtol 1e-10 a named error says what to use; at 1e-4,
    within reach, nothing is said and the answer is as right as the double cycle's (its true
    residual below 1e-4, or within 1.5 times the double one's where the left side's preconditioned
    norm decided)."""
    A = laplacian((33, 33))
    options = {"pc_amg_precision": "single", "pc_amg_coarse_size": "20", "ksp_pc_side": side,
               "ksp_norm_type": "preconditioned" if side == "left" else "unpreconditioned"}
    with pytest.raises(PETSc.Error) as err:
        amg_solve(A, options=options, ksp_type=ksp_type, rtol=1e-10, cycle="w")
    message = str(err.value.__cause__)
    assert "-pc_amg_precision single under KSP " + ksp_type in message and "fgmres, fcg or cg" in message, message
    its, res, ksp = amg_solve(A, options=options, ksp_type=ksp_type, rtol=1e-4, cycle="w")
    _, res_double, _ = amg_solve(A, options=dict(options, pc_amg_precision="double"), ksp_type=ksp_type, rtol=1e-4,
                                 cycle="w")
    assert ksp.getConvergedReason() > 0 and res <= max(1.01e-4, 1.5 * res_double), (res, res_double)


def test_single_cycle_transpose():
    """PCApplyTranspose of the single W-cycle is the double one's transpose rounded."""
    shape = (15, 14)
    A = convection_box(shape, 3.0, complex_part=complex_scalars())
    M = meshes.petsc_matrix(A, "aij")
    x, y = M.createVecs()
    x.setArray(numpy.random.default_rng(2).random(x.getSize()))
    out = {}
    for precision in ("double", "single"):
        with petsc_options({"pc_amg_precision": precision, "pc_amg_coarse_size": "12", "pc_amg_cycle": "w"}):
            ksp = python_pc_ksp(M, AMG, ksp_type="gmres")
            ksp.setFromOptions()
            ksp.setUp()
        ksp.getPC().applyTranspose(x, y)
        out[precision] = y.getArray().copy()
    diff = numpy.linalg.norm(out["single"] - out["double"]) / numpy.linalg.norm(out["double"])
    assert 1e-9 < diff < 1e-4, diff


def test_single_precision_refuses_a_bad_value():
    """-pc_amg_precision takes double or single, by name."""
    A = meshes.petsc_matrix(laplacian((8, 8)), "aij")
    with petsc_options({"pc_amg_precision": "half"}):
        ksp = python_pc_ksp(A, AMG)
        with pytest.raises(PETSc.Error) as err:
            ksp.setFromOptions()
    message = str(err.value.__cause__)
    assert "-pc_amg_precision" in message and "half" in message and "single" in message


def test_single_precision_keeps_the_host_vectors():
    """On the host the single cycle takes and gives PETSc's scalars (a double Vec in, a double
    Vec out): the cast is the PC's."""
    A = meshes.petsc_matrix(laplacian((12, 11)), "aij")
    b, x = A.createVecs()
    b.setArray(numpy.arange(b.getSize(), dtype=float) % 7)
    with petsc_options({"pc_amg_precision": "single"}):
        ksp = python_pc_ksp(A, AMG, ksp_type="cg")
        ksp.setFromOptions()
        ksp.setTolerances(rtol=1e-10)
        ksp.solve(b, x)
    assert x.getArray().dtype == PETSc.ScalarType
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    assert r.norm() <= 1.01e-10 * b.norm()


def test_check_with_a_shell_operator():
    """A shell operator (its product only: -snes_mf_operator, a matrix-free code) with an assembled
    preconditioning matrix: the check uses the operator's product and names the option (it asks
    for A^T's product, which a shell may lack, only after a solve that applied B^T alone)."""
    S = laplacian((33, 33))
    P = meshes.petsc_matrix(S, "aij")

    class Op:
        def mult(self, mat, x, y):
            P.mult(x, y)
    A = PETSc.Mat().createPython(P.getSizes(), Op())
    A.setUp()
    b, x = P.createVecs()
    b.setArray(numpy.random.default_rng(1).random(b.getSize()))
    with petsc_options({"pc_amg_precision": "single", "pc_amg_coarse_size": "20"}):
        ksp = PETSc.KSP().create()
        ksp.setOperators(A, P)
        ksp.setType("gmres")
        ksp.getPC().setType("python")
        ksp.getPC().setPythonType(AMG)
        ksp.setTolerances(rtol=1e-10)
        ksp.setFromOptions()
        with pytest.raises(PETSc.Error) as err:
            ksp.solve(b, x)
    assert "-pc_amg_precision single under KSP gmres" in str(err.value.__cause__), err.value.__cause__


@pytest.mark.parametrize("rtol", [1e-10, 1e-4])
def test_check_of_a_transpose_solve(rtol):
    """KSPSolveTranspose under gmres around the single W-cycle's transpose: the check judges
    A^T x = b (the PC applied B^T only), an error beyond reach, the answer right within it."""
    A = convection_box((15, 14), 3.0, complex_part=complex_scalars())
    M = meshes.petsc_matrix(A, "aij")
    b, x = M.createVecs()
    b.setArray(numpy.random.default_rng(6).random(b.getSize()))
    with petsc_options({"pc_amg_precision": "single", "pc_amg_coarse_size": "12", "pc_amg_cycle": "w"}):
        ksp = python_pc_ksp(M, AMG, ksp_type="gmres")
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setTolerances(rtol=rtol)
        ksp.setFromOptions()
    if rtol < 1e-8:
        with pytest.raises(PETSc.Error) as err:
            ksp.solveTranspose(b, x)
        assert "-pc_amg_precision single under KSP gmres" in str(err.value.__cause__)
        return
    ksp.solveTranspose(b, x)
    r = b.duplicate()
    M.multTranspose(x, r)
    r.aypx(-1.0, b)
    assert ksp.getConvergedReason() > 0 and r.norm() <= 1.01 * rtol * b.norm()
