"""Bad input gets one error that names the PC, the option or object and what is accepted; edge
inputs get the answer PETSc's own PCs give. The table below is the contract: each row is an input
and the words its error must contain (tests/mpi/test_mpi.py checks that every rank stops together)."""
import gc
import warnings

import numpy
import pytest
from petsc4py import PETSc

from conftest import (
    ROOT,
    pcplugins_env,
    petsc_options,
    python_pc_ksp,
    real_scalars,
    setup_error_on,
    true_relative_residual,
)
from problems import helmholtz_system, poisson_system

pytestmark = real_scalars

GMG, FFT, AMG, SL = "pcplugins.GMG", "pcplugins.FFTPoisson", "pcplugins.AMG", "pcplugins.ShiftedLaplace"


def setup_error(pc_type, options, problem="poisson", ksp_type="cg"):
    """The message of the error that setting up ``pc_type`` with ``options`` raises."""
    if problem == "poisson":
        da, A, b = poisson_system(9, 2)
    elif problem == "helmholtz":
        da, A, b = helmholtz_system(16, 10.0, dim=2)
    else:
        raise ValueError(problem)
    with petsc_options(options):
        ksp = python_pc_ksp(A, pc_type, da=None if pc_type == AMG else da, ksp_type=ksp_type)
        with pytest.raises(PETSc.Error) as err:
            ksp.setFromOptions()
            ksp.setUp()
    return str(err.value.__cause__ or err.value.__context__)


OUT_OF_RANGE = [
    (GMG, {"pc_gmg_pre": -1}, "option -pc_gmg_pre: -1 is out of range; the value must be in [0, inf)"),
    (GMG, {"pc_gmg_pre": 0, "pc_gmg_post": 0}, "-pc_gmg_pre and -pc_gmg_post are both 0"),
    (GMG, {"pc_gmg_homg_max_it": 0}, "option -pc_gmg_homg_max_it: 0 is out of range"),
    (GMG, {"pc_gmg_homg_max_it": -4}, "option -pc_gmg_homg_max_it: -4 is out of range"),
    (GMG, {"pc_gmg_levels": 0}, "option -pc_gmg_levels: 0 is out of range; the value must be in [1, inf)"),
    (GMG, {"pc_gmg_levels": -3}, "option -pc_gmg_levels: -3 is out of range"),
    # poisson_system(9, 2): the 9x9 grid coarsens to 4x4 and 2x2, three levels
    (GMG, {"pc_gmg_levels": 10}, "option -pc_gmg_levels 10: 10 levels asked for, but the 9x9 grid has 3: its "
                                 "coarsest grid, 2x2, has fewer than 3 points along every axis"),
    (GMG, {"pc_gmg_coarse_size": 0}, "option -pc_gmg_coarse_size: 0 is out of range"),
    (GMG, {"pc_gmg_coarse_size": -5}, "option -pc_gmg_coarse_size: -5 is out of range"),
    (GMG, {"pc_gmg_omega": "nan"}, "option -pc_gmg_omega: nan is out of range; the value must be finite and in (0, 2)"),
    (GMG, {"pc_gmg_omega": "inf"}, "option -pc_gmg_omega: inf is out of range"),
    (GMG, {"pc_gmg_omega": 5}, "option -pc_gmg_omega: 5 is out of range"),
    (GMG, {"pc_gmg_omega": -1}, "option -pc_gmg_omega: -1 is out of range"),
    (GMG, {"pc_gmg_multiplicative_cycles": 0}, "option -pc_gmg_multiplicative_cycles: 0 is out of range"),
    (GMG, {"pc_gmg_gpu_levels": -1}, "option -pc_gmg_gpu_levels: -1 is out of range"),
    (GMG, {"pc_gmg_mixed_inner_cycles": -2}, "option -pc_gmg_mixed_inner_cycles: -2 is out of range"),
    (GMG, {"pc_gmg_cycle": "x"}, "option -pc_gmg_cycle: unknown value 'x'; expected one of v, w, f, fmg, homg"),
    (GMG, {"pc_gmg_pre": "two"}, "pcplugins.GMG: option -pc_gmg_pre: cannot read the value as int"),
    (FFT, {"pc_fft_device": "tpu"}, "pcplugins.FFTPoisson: option -pc_fft_device: unknown value 'tpu'"),
    (AMG, {"pc_amg_strength": -1},
     "option -pc_amg_strength: -1 is out of range; the value must be finite and in [0, 1)"),
    (AMG, {"pc_amg_strength": 1.5}, "option -pc_amg_strength: 1.5 is out of range"),
    (AMG, {"pc_amg_strength": "nan"}, "option -pc_amg_strength: nan is out of range"),
    (AMG, {"pc_amg_kcycle_its": 0}, "option -pc_amg_kcycle_its: 0 is out of range"),
    (AMG, {"pc_amg_max_levels": 1}, "option -pc_amg_max_levels: 1 is out of range; the value must be in [2, inf)"),
    (AMG, {"pc_amg_pre": 0, "pc_amg_post": 0}, "-pc_amg_pre and -pc_amg_post are both 0"),
    (AMG, {"pc_amg_coarse_size": 0}, "option -pc_amg_coarse_size: 0 is out of range"),
]


@pytest.mark.parametrize("pc_type,options,message", OUT_OF_RANGE,
                         ids=[f"{p[10:]}-{'-'.join(f'{k}={v}' for k, v in o.items())}" for p, o, _ in OUT_OF_RANGE])
def test_bad_option_value(pc_type, options, message):
    assert message in setup_error(pc_type, options)


SL_BAD = [
    ({"pc_sl_k": 10, "pc_sl_omega": 0},
     "option -pc_sl_omega: 0 is out of range; the value must be finite and in (0, 2)"),
    ({"pc_sl_k": 10, "pc_sl_beta1": "nan"},
     "option -pc_sl_beta1: nan is out of range; the value must be a finite number"),
    ({"pc_sl_k": 10, "pc_sl_max_kh": 0}, "option -pc_sl_max_kh: 0 is out of range"),
    ({"pc_sl_k": -1}, "option -pc_sl_k: -1 is out of range"),
    ({"pc_sl_k": 0}, "k = 0 everywhere with -pc_sl_boundary absorbing makes M the pure Neumann Laplacian"),
    ({"pc_sl_k": 10, "pc_sl_coarse_degree": 0}, "option -pc_sl_coarse_degree: 0 is out of range"),
]


@pytest.mark.parametrize("options,message", SL_BAD, ids=[m.split(":")[0][:40] for _, m in SL_BAD])
def test_shifted_laplace_bad_input(options, message):
    assert message in setup_error(SL, options, "helmholtz", "bcgs")


def test_fftpoisson_names_itself():
    """FFTPoisson's messages name FFTPoisson and its options, not GMG's."""
    da = PETSc.DMDA().create([9, 9], stencil_width=1, boundary_type=("periodic", "none"))
    A = da.createMat()
    A.assemble()
    with petsc_options({}):
        ksp = python_pc_ksp(A, FFT, da=da)
        with pytest.raises(PETSc.Error) as err:
            ksp.setUp()
    msg = str(err.value.__cause__)
    assert msg.startswith("pcplugins.FFTPoisson needs a positive diagonal; the row of grid point (i, j) = (0, 0)")
    assert "GMG" not in msg


def test_zero_diagonal_names_the_grid_point():
    da, A, b = poisson_system(9, 2)
    A.setValue(4 * 9 + 5, 4 * 9 + 5, 0.0)          # grid point (i, j) = (5, 4)
    A.assemble()
    msg = setup_error_on(da, A, GMG)
    assert "pcplugins.GMG needs a positive diagonal; the row of grid point (i, j) = (5, 4) has diagonal 0" in msg


@pytest.mark.parametrize("names", [None, ("u", "v", "p")])
def test_gmg_on_a_system_says_what_to_use(names):
    """A DMDA with several fields per point (snes ex19's dof 4): the error says what takes it, with
    the options PCFIELDSPLIT reads for each block (its prefixes: a field's name, else its number;
    test_gmg.py::test_gmg_as_fieldsplit_block_solver runs such a split)."""
    da = PETSc.DMDA().create([9, 9], dof=3, stencil_width=1)
    for i, name in enumerate(names or ()):
        da.setFieldName(i, name)
    A = da.createMat()
    for i in range(A.getSize()[0]):
        A.setValue(i, i, 4.0)
    A.assemble()
    msg = setup_error_on(da, A, GMG)
    assert msg.startswith("pcplugins.GMG supports scalar problems (DMDA dof 1), the DMDA has dof 3: use "
                          "PCFIELDSPLIT"), msg
    first, *rest = names or ("0", "1", "2")
    assert (f"-pc_type fieldsplit -fieldsplit_{first}_pc_type python -fieldsplit_{first}_pc_python_type "
            f"pcplugins.GMG, and the same for fieldsplit_{rest[0]}_, fieldsplit_{rest[1]}_;") in msg, msg
    assert "pcplugins.AMG" in msg


@pytest.mark.parametrize("pc_type", [GMG, AMG])
def test_solve_after_reset_names_the_missing_operator(pc_type):
    da, A, b = poisson_system(9, 2)
    ksp = python_pc_ksp(A, pc_type, da=da)
    x = b.duplicate()
    ksp.solve(b, x)
    ksp.getPC().reset()
    with pytest.raises(PETSc.Error) as err:
        ksp.solve(b, x)
    assert "has no operator" in str(err.value.__cause__) and "KSPSetOperators" in str(err.value.__cause__)


def test_amg_empty_matrix_converges():
    """A 0 x 0 matrix: nothing to solve, as with PETSc's own PCs (no NumPy error)."""
    A = PETSc.Mat().createAIJ((0, 0), nnz=1)
    A.assemble()
    ksp = python_pc_ksp(A, AMG, ksp_type="cg")
    b, x = A.createVecs()
    ksp.solve(b, x)
    assert ksp.getConvergedReason() > 0


def test_amg_view_says_how_the_block_size_is_used(capfd):
    """A block size and no near null space or coordinates: the nodes' components are aggregated
    each on its own, and the view says so (tests/petsc/test_amg_systems.py for the counts)."""
    da, A, b = poisson_system(8, 2)
    B = PETSc.Mat().createAIJ(A.getSize(), bsize=2, nnz=5)
    B.setPreallocationCSR(A.getValuesCSR())
    B.assemble()
    ksp = python_pc_ksp(B, AMG)
    ksp.setUp()
    ksp.view()
    assert "system: nodes of 2 unknowns, each component aggregated on its own" in capfd.readouterr().out


@pytest.mark.parametrize("kind", ["inf", "huge"])
@pytest.mark.parametrize("pc_type", [GMG, AMG, FFT])
def test_inf_right_hand_side_fails_without_numpy_warnings(pc_type, kind):
    """Inf in the right-hand side, or values whose products overflow: the KSP stops with a PC
    failure or a diverged reason, and no NumPy RuntimeWarning reaches the user."""
    da, A, b = poisson_system(9, 2)
    if kind == "inf":
        b.setValue(3, numpy.inf)
    else:
        b.set(1e308)
    b.assemble()
    ksp = python_pc_ksp(A, pc_type, da=da)
    ksp.setErrorIfNotConverged(False)
    x = b.duplicate()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ksp.solve(b, x)
    assert ksp.getConvergedReason() < 0


# -- the DM of the matrix, stored zeros -------------------------------------------------------------

def dmda_laplacian(n, stencil_width=1, boundary_rows=True):
    """The 2D 5-point Laplacian on an n x n DMDA in the DMDA tutorial convention (identity rows on
    the boundary), assembled into DMCreateMatrix's matrix, whose pattern is the DMDA's whole
    stencil (stored zeros wherever the 5-point stencil has no entry)."""
    da = PETSc.DMDA().create([n, n], stencil_width=stencil_width, stencil_type=PETSc.DMDA.StencilType.BOX)
    A = da.createMat()
    (xs, xe), (ys, ye) = da.getRanges()
    row = PETSc.Mat.Stencil()
    col = PETSc.Mat.Stencil()
    for j in range(ys, ye):
        for i in range(xs, xe):
            row.index = (i, j)
            if boundary_rows and (i in (0, n - 1) or j in (0, n - 1)):
                A.setValueStencil(row, row, 1.0)
                continue
            A.setValueStencil(row, row, 4.0)
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                col.index = (i + di, j + dj)
                A.setValueStencil(row, col, -1.0)
    A.assemble()
    b = A.createVecLeft()
    b.setRandom()
    return da, A, b


def solve_without_dm(A, b, options, ksp_type="cg", pc_type=GMG):
    with petsc_options(options):
        ksp = python_pc_ksp(A, pc_type, ksp_type=ksp_type)
        ksp.setTolerances(rtol=1e-10, max_it=100)
        ksp.setFromOptions()
        x = b.duplicate()
        ksp.solve(b, x)
    return ksp, x


@pytest.mark.parametrize("stencil_width", [1, 2])
@pytest.mark.parametrize("operator", ["auto", "laplacian"])
def test_gmg_on_dmcreatematrix_without_kspsetdm(stencil_width, operator):
    """ksp ex46's situation: the matrix comes from DMCreateMatrix (its DMDA is MatGetDM's) and the
    application never calls KSPSetDM. Its stored zeros are no couplings: the stencil-width-2
    pattern is the 5-point operator, and the declared Laplacian finds the identity rows."""
    da, A, b = dmda_laplacian(33, stencil_width)
    ksp, x = solve_without_dm(A, b, {"pc_gmg_operator": operator})
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 9
    assert true_relative_residual(A, b, x) < 1e-9
    ctx = ksp.getPC().getPythonContext()
    assert ctx.layer                                       # the identity rows were found and eliminated
    assert ctx.mg.levels[0].op.nnz_per_row == 5            # the stored zeros are no couplings


# -- transposes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("pc_type,options", [(GMG, {}), (GMG, {"pc_gmg_cycle": "w"}), (AMG, {}),
                                             (FFT, {})])
def test_bicg_uses_the_transpose(pc_type, options):
    """-ksp_type bicg applies the transpose: where the preconditioner is symmetric it is its own."""
    da, A, b = poisson_system(17, 2)
    with petsc_options(options):
        ksp = python_pc_ksp(A, pc_type, da=da, ksp_type="bicg")
        ksp.setTolerances(rtol=1e-10)
        ksp.setFromOptions()
        x = b.duplicate()
        ksp.solve(b, x)
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) < 1e-8


@pytest.mark.parametrize("pc_type,options,why", [
    (GMG, {"pc_gmg_cycle": "f"}, "the F-cycle is not symmetric"),
    (GMG, {"pc_gmg_pre": 1, "pc_gmg_post": 2}, "-pc_gmg_pre 1 and -pc_gmg_post 2 differ"),
    (AMG, {"pc_amg_cycle": "k"}, "the K-cycle is nonlinear")])
def test_transpose_refused_by_name(pc_type, options, why):
    da, A, b = poisson_system(17, 2)
    with petsc_options(options):
        ksp = python_pc_ksp(A, pc_type, da=da, ksp_type="bicg")
        ksp.setFromOptions()
        x = b.duplicate()
        with pytest.raises(PETSc.Error) as err:
            ksp.solve(b, x)
    msg = str(err.value.__cause__)
    assert "PCApplyTranspose" in msg and why in msg and "MatTranspose" in msg, msg


def test_transpose_solve_of_a_nonsymmetric_matrix_says_what_to_do():
    """ksp ex53's KSPSolveTranspose on a nonsymmetric matrix under the K-cycle, which has no
    transpose: refused by name, with the ways that work (the W-cycle's transpose,
    test_amg_transpose.py; a KSP on MatTranspose's matrix), which then solve A^T x = b."""
    import scipy.sparse

    import meshes
    from conftest import pc_solve
    n = 400
    S = scipy.sparse.diags([-numpy.ones(n - 1), 2.5 * numpy.ones(n), -1.4 * numpy.ones(n - 1)], [-1, 0, 1]).tocsr()
    M = meshes.petsc_matrix(S, "aij")
    b, x = M.createVecs()
    b.set(1.0)
    with petsc_options({"pc_amg_cycle": "k"}):
        ksp = python_pc_ksp(M, AMG, ksp_type="gmres")
        ksp.setFromOptions()
        with pytest.raises(PETSc.Error) as err:
            ksp.solveTranspose(b, x)
    msg = str(err.value.__cause__)
    assert "KSPSolveTranspose" in msg and "K-cycle is nonlinear" in msg and "MatTranspose" in msg, msg
    T = M.transpose(PETSc.Mat())
    its, res, _ = pc_solve(T, AMG, "gmres", {}, 1e-8, numpy.ones(n))
    assert res <= 1e-8, res
    ksp = python_pc_ksp(M, AMG, ksp_type="gmres")
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-8)
    x.set(0.0)
    ksp.solveTranspose(b, x)
    assert numpy.linalg.norm(1.0 - S.T @ x.getArray()) <= 1e-8 * n ** 0.5


def test_f_cycle_view_says_it_is_not_symmetric(capfd):
    da, A, b = poisson_system(17, 2)
    with petsc_options({"pc_gmg_cycle": "f"}):
        ksp = python_pc_ksp(A, GMG, da=da)
        ksp.setFromOptions()
        ksp.setUp()
        ksp.view()
    assert "not a symmetric preconditioner: the F-cycle is not symmetric" in capfd.readouterr().out


# -- memory -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("pc_type", [GMG, AMG, FFT])
def test_destroy_leaves_no_cyclic_garbage(pc_type):
    """PCDestroy releases the hierarchy at once: with Python's cyclic collector off, nothing of
    ours (no array, no pcplugins object) is left for it to find. A C application or a long Newton
    loop rarely runs the collector, and on the GPU that garbage is device memory."""
    da, A, b = poisson_system(17, 2)
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            ksp = python_pc_ksp(A, pc_type, da=da)
            x = b.duplicate()
            ksp.solve(b, x)
            ksp.destroy()
            del ksp
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = [o for o in gc.garbage if isinstance(o, numpy.ndarray)
                or type(o).__module__.startswith("pcplugins")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not ours, [type(o) for o in ours][:10]


def test_poisson_example_keeps_the_users_python_type():
    """examples/poisson.py with -pc_python_type but no -pc_type runs the PC asked for."""
    import os
    import subprocess
    import sys
    res = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "poisson.py"), "-n", "17", "-dim", "2",
                          "-pc_python_type", "pcplugins.FFTPoisson", "-ksp_view"], capture_output=True, text=True,
                         env=pcplugins_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "pcplugins.FFTPoisson: fast Poisson solver" in res.stdout and "pcplugins.GMG" not in res.stdout


@pytest.mark.parametrize("ksp", ["fcg", "gmres", "fgmres"])
def test_amg_example_leaves_no_unused_option(ksp):
    """examples/amg_solve.py sets its defaults only where the KSP reads them (-ksp_fcg_mmax under
    fcg alone, the K-cycle under a flexible KSP): -options_left finds none unused."""
    import os
    import subprocess
    import sys
    res = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "amg_solve.py"), "-n", "30",
                          "-ksp_type", ksp, "-options_left"], capture_output=True, text=True,
                         env=pcplugins_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "There are no unused options." in res.stdout, res.stdout
    assert "true relative residual" in res.stdout
