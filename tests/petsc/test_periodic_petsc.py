"""pcplugins.GMG on periodic DMDAs (DM_BOUNDARY_PERIODIC) through PETSc, on one rank: periodic
along every axis (singular, the constant null space attached) or along some (Dirichlet values
eliminated across the others), even and odd sizes, 2D and 3D, under every KSP of the design card,
against a direct solve and at PETSc PCMG's iteration counts; and the named refusals of what is
not taken yet."""
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from petsc4py import PETSc

from conftest import petsc_options, petsc_solve, python_pc_ksp, real_scalars, setup_error_on, true_relative_residual
from problems import poisson_csr, poisson_system

pytestmark = real_scalars        # GMG refuses a PETSc built with complex scalars

# DMDA sizes (x, y, z) and periodic axes (x, y, z)
CASES = [((64, 64), (True, True)), ((48, 40), (True, False)), ((40, 21), (True, True)),
         ((16, 16, 16), (True, True, True)), ((12, 10, 14), (True, False, True)), ((9, 8, 12), (False, True, False))]
IDS = ["x".join(map(str, n)) + "-" + "".join("p" if p else "d" for p in per) for n, per in CASES]


def direct(n, periodic, convention="interior", jump=0.0, pattern="boxes"):
    """The direct solve of the example's system (the mean-free solution where it is singular:
    the system bordered by the constant)."""
    da, A, b = poisson_system(n, len(n), convention, jump, periodic=periodic, pattern=pattern)
    shape, indptr, cols, vals = poisson_csr(n, len(n), convention, jump, pattern, periodic)
    M = scipy.sparse.csr_matrix((vals, cols, indptr))
    rhs = b.getArray().copy()
    if not all(periodic):
        return da, A, b, scipy.sparse.linalg.spsolve(M.tocsc(), rhs)
    e = scipy.sparse.csr_matrix(np.ones((M.shape[0], 1)))
    B = scipy.sparse.bmat([[M, e], [e.T, None]]).tocsc()
    return da, A, b, scipy.sparse.linalg.spsolve(B, np.append(rhs, 0.0))[:-1]


def assert_answer(A, b, x, ref, periodic, residual, error):
    """The true residual within ``residual`` and the answer within ``error`` of the direct solve's
    (both relative; the mean removed where every axis is periodic)."""
    assert true_relative_residual(A, b, x) <= residual
    u = x.getArray().copy()
    if all(periodic):
        u -= u.mean()
    assert np.linalg.norm(u - ref) <= error * np.linalg.norm(ref)


@pytest.mark.parametrize("ksp_type", ["cg", "gmres", "bcgs", "fgmres"])
@pytest.mark.parametrize("n,periodic", CASES, ids=IDS)
def test_periodic_against_a_direct_solve(n, periodic, ksp_type):
    da, A, b, ref = direct(n, periodic)
    # right preconditioning: GMRES, FGMRES and BiCGStab stop on the true residual's norm, as CG does here
    side = None if ksp_type == "cg" else {"ksp_pc_side": "right"}
    ksp, x = petsc_solve(da, A, b, side, ksp_type, pc="pcplugins.GMG", rtol=1e-10, max_it=60)
    assert ksp.getConvergedReason() > 0
    assert_answer(A, b, x, ref, periodic, 1e-9, 1e-7)
    halving = all(m % 2 == 0 for m, p in zip(n, periodic) if p)
    assert ksp.getIterationNumber() <= (8 if halving else 12)
    view = ksp.getPC().getPythonContext().describe()
    names = ", ".join("xyz"[a] for a, p in enumerate(periodic) if p)
    assert any(line.startswith(f"boundary: periodic along {names} (the halo wraps)") for line in view), view
    assert sum(line.startswith("level ") for line in view) >= 3, view


# (DMDA sizes, periodic axes, the example's system, GMG options): variable coefficients (kappa jumps
# off the coarse grids), PETSc's identity rows on the other axes' faces, stored coefficients and
# the transfers that make every coarse level a Galerkin product by probing across the wrap
OPERATORS = [((64, 48), (True, True), {"jump": 2.0}, {}),
             ((16, 16, 16), (True, True, True), {"jump": 3.0, "pattern": "checkerboard"}, {}),
             ((48, 40), (True, False), {"convention": "petsc"}, {}),
             ((40, 20, 12), (False, True, True), {"jump": 4.0}, {}),
             ((64, 48), (True, True), {}, {"pc_gmg_operator": "assembled"}),
             ((40, 56), (True, True), {}, {"pc_gmg_transfer": "paper"})]
OPERATOR_IDS = ["jumps 2D", "checkerboard 3D", "petsc convention", "jumps, x Dirichlet", "assembled", "paper"]


@pytest.mark.parametrize("ksp_type", ["cg", "bcgs"])
@pytest.mark.parametrize("n,periodic,system,options", OPERATORS, ids=OPERATOR_IDS)
def test_periodic_operators_against_a_direct_solve(n, periodic, system, options, ksp_type):
    da, A, b, ref = direct(n, periodic, **system)
    # CG on the true residual's norm, BiCGStab preconditioned on the right: both stop on it
    side = {} if ksp_type == "cg" else {"ksp_pc_side": "right"}
    ksp, x = petsc_solve(da, A, b, {**options, **side}, ksp_type, pc="pcplugins.GMG", rtol=1e-10, max_it=60,
                         norm_type=PETSc.KSP.NormType.UNPRECONDITIONED if ksp_type == "cg" else None)
    assert ksp.getConvergedReason() > 0
    assert_answer(A, b, x, ref, periodic, 1e-9, 1e-7)
    assert ksp.getIterationNumber() <= 12
    # at most PCMG's count (Galerkin, SVD coarse solve), where the DMDA lets it coarsen as far
    if system.get("jump") and all(periodic) and ksp_type == "cg":
        levels = len(ksp.getPC().getPythonContext().mg.levels)
        assert ksp.getIterationNumber() <= pcmg_its(n, periodic, levels, rtol=1e-10, **system)


def pcmg_its(n, periodic, levels, rtol=1e-8, **system):
    da, A, b = poisson_system(n, len(n), periodic=periodic, **system)
    ksp, x = petsc_solve(da, A, b, {"pc_type": "mg", "pc_mg_levels": levels, "pc_mg_galerkin": "both",
                                    "mg_coarse_pc_type": "svd"}, "cg", rtol=rtol, max_it=100,
                         norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= rtol
    return ksp.getIterationNumber()


@pytest.mark.parametrize("dim,sizes", [(2, (64, 128, 256)), (3, (16, 32))])
def test_periodic_counts_at_pcmgs_and_bounded(dim, sizes):
    """Periodic along every axis, CG to 1e-8 on the true residual: at most PCMG's count (Galerkin,
    its default smoother, an SVD on the singular coarsest grid) + 1, and the same count within 1
    under refinement."""
    counts = []
    for m in sizes:
        n = (m,) * dim
        da, A, b = poisson_system(n, dim, periodic=(True,) * dim)
        ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", rtol=1e-8, max_it=60,
                             norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1e-8
        counts.append(ksp.getIterationNumber())
        assert counts[-1] <= pcmg_its(n, (True,) * dim, len(ksp.getPC().getPythonContext().mg.levels)) + 1
    assert max(counts) - min(counts) <= 1, counts


def setup_error(n, periodic, pc="pcplugins.GMG", options=None, **system):
    da, A, b = poisson_system(n, len(n), periodic=periodic, **system)
    return setup_error_on(da, A, pc, options)


@pytest.mark.parametrize("option", ["pc_gmg_smoother adi", "pc_gmg_cycle homg"])
def test_refused_by_name(option):
    """HOMG's hierarchy and the line solves know no wrap."""
    key, value = option.split()
    assert f"option -{option}: not on a grid periodic along x, y" in setup_error((16, 16), (True, True),
                                                                                options={key: value})


def test_levels_beyond_an_odd_periodic_grid():
    msg = setup_error((21, 21), (True, True), options={"pc_gmg_levels": 3})
    assert ("3 levels asked for, but the 21x21 grid has 1: its coarsest grid, 21x21, has no axis to coarsen "
            "(one of at least 3 points; a periodic one of an even number, at least 6)") in msg


def test_other_boundary_types_point_to_amg():
    da = PETSc.DMDA().create([12, 12], stencil_width=1, boundary_type=("periodic", "ghosted"))
    A = da.createMat()
    A.assemble()
    for pc in ("pcplugins.GMG", "pcplugins.FFTPoisson"):
        msg = setup_error_on(da, A, pc)
        assert msg == (f"{pc} supports the DMDA boundary types none, periodic, mirror; this DMDA's is ghosted "
                       "along y: use pcplugins.AMG, which takes the assembled matrix whatever the grid's boundary")


@pytest.mark.parametrize("n,periodic", CASES, ids=IDS)
def test_fftpoisson_is_the_exact_solve(n, periodic):
    """FFTPoisson with preonly: sine transforms along the Dirichlet axes, real FFTs along the
    periodic ones, odd (21, 9) and even sizes: the direct solve's answer (the mean-free one)."""
    da, A, b, ref = direct(n, periodic)
    ksp, x = petsc_solve(da, A, b, None, "preonly", pc="pcplugins.FFTPoisson")
    assert_answer(A, b, x, ref, periodic, 1e-12, 1e-11)
    assert any("real FFTs (periodic) along" in line for line in ksp.getPC().getPythonContext().describe())


def test_shifted_laplace_refuses_a_periodic_grid():
    """ShiftedLaplace builds its operator from the grid with its own boundary (absorbing or
    Dirichlet): on a periodic DMDA it would precondition another problem, so it says so."""
    da = PETSc.DMDA().create([16, 16], dof=2, stencil_width=1, boundary_type=("none", "periodic"))
    A = da.createMat()
    A.assemble()
    with petsc_options({}):
        ksp = python_pc_ksp(A, "pcplugins.ShiftedLaplace", da=da)
        with pytest.raises(PETSc.Error) as err:
            ksp.setUp()
    assert str(err.value.__cause__).startswith("pcplugins.ShiftedLaplace supports the DMDA boundary type none; "
                                               "this DMDA's is periodic along y: use pcplugins.AMG")


@pytest.mark.parametrize("ksp_type", ["cg", "bcgs"])
def test_amg_on_a_periodic_grid(ksp_type):
    """pcplugins.AMG, where the errors above send the user: the assembled periodic matrix, every
    KSP, the true residual."""
    da, A, b = poisson_system((64, 48), 2, periodic=(True, True))
    with petsc_options({}):
        ksp = python_pc_ksp(A, "pcplugins.AMG", ksp_type=ksp_type)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setTolerances(rtol=1e-8, max_it=100)
        x = b.duplicate()
        ksp.solve(b, x)
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1e-8


# (DMDA sizes, periodic axes, the example's system, PC, options)
NEGATED = [((64, 48), (True, True), {}, "pcplugins.GMG", {}),
           ((48, 40), (True, False), {"jump": 2.0}, "pcplugins.GMG", {}),
           ((12, 10, 14), (True, False, True), {}, "pcplugins.GMG", {"pc_gmg_operator": "laplacian"}),
           ((16, 16, 16), (True, True, True), {"jump": 3.0, "pattern": "checkerboard"}, "pcplugins.GMG",
            {"pc_gmg_operator": "assembled"}),
           ((40, 21), (True, True), {}, "pcplugins.FFTPoisson", {})]


@pytest.mark.parametrize("ksp_type", ["richardson", "cg", "bcgs", "gmres", "fgmres"])
@pytest.mark.parametrize("n,periodic,system,pc,options", NEGATED,
                         ids=["2D", "x periodic, jumps", "3D declared", "3D assembled", "FFTPoisson"])
def test_periodic_negative_definite_operator(n, periodic, system, pc, options, ksp_type):
    """-A x = -b (div(k grad u) = -f written with its own sign) on a periodic DMDA: the PC is -A's,
    its output negated, so every KSP takes the steps it takes on A (Richardson, which diverges under
    a preconditioner of the wrong sign, included) to the same answer."""
    runs = []
    for sign in (1.0, -1.0):
        da, A, b, ref = direct(n, periodic, **system)
        A.scale(sign)
        b.scale(sign)
        side = {"ksp_pc_side": "right"} if "gmres" in ksp_type else {}
        ksp, x = petsc_solve(da, A, b, {**options, **side}, ksp_type, pc=pc, rtol=1e-10, max_it=60,
                             norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
        assert ksp.getConvergedReason() > 0, (sign, ksp.getConvergedReason())
        assert_answer(A, b, x, ref, periodic, 1e-9, 1e-7)
        view = "\n".join(ksp.getPC().getPythonContext().describe())
        runs.append((ksp.getIterationNumber(), x.getArray().copy(), view))
    (its, x, view), (its2, x2, view2) = runs
    assert its2 == its and "negative definite" in view2 and "negative definite" not in view
    assert np.linalg.norm(x2 - x) <= 1e-10 * np.linalg.norm(x)
