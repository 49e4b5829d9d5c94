"""pcplugins.GMG under PETSc KSP: against direct solves, PETSc's PCMG, option strings and bad input."""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg
from petsc4py import PETSc

import pcplugins

from conftest import ROOT, petsc_solve, real_scalars, true_relative_residual
from problems import (
    convection_system,
    half_volumes,
    neumann_rows,
    neumann_rows_system,
    neumann_system,
    poisson_csr,
    poisson_system,
    row_coefficient_system,
    stencil_system,
)

# GMG refuses a PETSc built with complex scalars (tested in test_shifted_laplace)
pytestmark = real_scalars


def solve(da, A, b, options, ksp_type="cg", rtol=1e-10, prefix=None):
    return petsc_solve(da, A, b, options, ksp_type, prefix=prefix or "", rtol=rtol, max_it=500)


GMG = {"pc_type": "python", "pc_python_type": "pcplugins.GMG"}


@pytest.mark.parametrize("dim,n,convention", [(2, 31, "interior"), (2, 33, "petsc"), (3, 15, "interior"),
                                              (3, 17, "petsc"), (3, 12, "interior")])
def test_cg_gmg_matches_direct_solve(dim, n, convention):
    da, A, b = poisson_system(n, dim, convention, rhs="random")
    ksp, x = solve(da, A, b, GMG)
    assert ksp.getConvergedReason() > 0
    assert ksp.getIterationNumber() <= 14
    _, indptr, cols, vals = poisson_csr(n, dim, convention)
    S = sp.csr_matrix((vals, cols, indptr))
    ref = scipy.sparse.linalg.spsolve(S.tocsc(), b.getArray())
    assert np.linalg.norm(x.getArray() - ref) <= 1e-7 * np.linalg.norm(ref)


@pytest.mark.parametrize("smoother", ["redblack", "multicolor", "jacobi", "chebyshev", "line_x", "adi"])
@pytest.mark.parametrize("cycle", ["v", "w", "f"])
def test_every_smoother_and_cycle_under_cg(smoother, cycle):
    da, A, b = poisson_system(17, 2, "petsc", jump=2.0)
    ksp, _ = solve(da, A, b, dict(GMG, pc_gmg_smoother=smoother, pc_gmg_cycle=cycle))
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() < 40


# CG's (or the given KSP's) stopping test on the true residual b - A x
TRUE_NORM = dict(rtol=1e-8, norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)


def pcmg_solve(da, A, b, levels, ksp_type="cg", max_it=200, **options):
    """PETSc PCMG on the DMDA (Q1 interpolation, Galerkin coarse operators, its default smoothers)
    to TRUE_NORM: the reference GMG's iteration counts are held to. Returns the KSP."""
    da.setInterpolationType(PETSc.DMDA.InterpolationType.Q1)
    opts = dict({"pc_type": "mg", "pc_mg_levels": levels, "pc_mg_galerkin": "both"}, **options)
    ksp, _ = petsc_solve(da, A, b, opts, ksp_type, max_it=max_it, **TRUE_NORM)
    return ksp


def mixed_system(n):
    """-Laplace u = f on an n x n DMDA: zero flux through the faces across x (the boundary nodes
    are unknowns, graph-Laplacian rows), Dirichlet values eliminated across y (the first and last
    rows of unknowns keep the eliminated neighbour's coupling on their diagonal)."""
    return stencil_system(n, 2, lambda idx, a, step: 1.0 if a == 1 else 0.0)


def test_mixed_boundary_conditions_per_axis():
    """Neumann across x, Dirichlet across y: the ends stay coarse points along x only, and CG
    iterations stay flat under refinement (measured 5, 6; with V(1,1) 8, 8; with zero halos on
    every face and linear transfers 17, 33)."""
    its = []
    for n in (33, 129):
        da, A, b = mixed_system(n)
        ksp, x = solve(da, A, b, dict(GMG, ksp_norm_type="unpreconditioned"), rtol=1e-8)
        assert ksp.getConvergedReason() > 0
        ctx = ksp.getPC().getPythonContext()
        assert ctx.mg.levels[0].box.keep_ends == (False, True)          # array axes (y, x)
        assert "across axes x" in " ".join(ctx.describe())
        its.append(ksp.getIterationNumber())
    assert its[-1] <= its[0] + 1 and max(its) <= 10, its


def one_neumann_face_system(n, dim):
    """Cell-centred -Laplace u = f on an n^dim DMDA: zero flux through the face x = 0 only, Dirichlet
    values (half a cell beyond the last unknowns) eliminated on every other face."""
    return stencil_system(n, dim, lambda idx, a, step: 0.0 if a == 0 and step < 0 else 2.0)


@pytest.mark.parametrize("dim,sizes", [(2, (32, 128)), (3, (16, 32))])
def test_a_neumann_face_opposite_a_dirichlet_face(dim, sizes):
    """Neumann on one face of an axis and Dirichlet on the other: the axis cannot keep its ends,
    and linear interpolation from zero halos loses the constants at the Neumann face (CG 10, 14,
    20, 27 from 32^2 to 256^2); the operator-dependent transfers take them from the rows
    (weight 1 from the one coarse neighbour where the flux through the face is zero): 6 at every
    size. The true residual decides."""
    its = []
    for n in sizes:
        da, A, b = one_neumann_face_system(n, dim)
        ksp, x = petsc_solve(da, A, b, GMG, max_it=100, **TRUE_NORM)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8
        its.append(ksp.getIterationNumber())
    assert max(its) <= 7 and its[-1] <= its[0], its


def identity_faces_system(n, dim):
    """Vertex-centred -Laplace u = f on an n^dim DMDA: identity rows (ex45's Dirichlet convention,
    the interior rows keeping their couplings to them) on the faces across x only, zero flux
    through the others (half control volumes)."""
    return stencil_system(n, dim, lambda idx, a, step: 0.0, half_volumes(n, range(1, dim)),
                          identity=lambda idx: idx[0] in (0, n - 1))


@pytest.mark.parametrize("ksp_type", ["cg", "gmres"])
@pytest.mark.parametrize("dim,sizes", [(2, (33, 129)), (3, (17,))])
def test_identity_rows_on_some_faces_only(dim, sizes, ksp_type):
    """ex45's identity rows on two faces and Neumann rows on the others: no outer layer to
    eliminate, so the identity rows stay unknowns of the grid; the operator-dependent transfers
    give them no coarse correction (their rows couple to nothing), and CG and GMRES take at most
    PETSc PCMG's iterations (2D: 5-6 against 6; 3D: 6 against 7), flat under refinement."""
    for n in sizes:
        da, A, b = identity_faces_system(n, dim)
        ksp, x = petsc_solve(da, A, b, GMG, ksp_type, max_it=100, **TRUE_NORM)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8
        pcmg = pcmg_solve(da, A, b, int(np.log2(n - 1)), ksp_type, max_it=100)
        assert ksp.getIterationNumber() <= pcmg.getIterationNumber(), n


@pytest.mark.parametrize("centring", ["vertex", "cell"])
@pytest.mark.parametrize("dim,sizes", [(2, (33, 129)), (3, (17, 33))])
def test_neumann_iterations_bounded_under_refinement(dim, sizes, centring):
    """Pure Neumann problems: the boundary nodes are unknowns whose rows sum to zero, so they stay
    coarse points on every level and interpolation keeps the constants. CG iterations stay flat
    under refinement (measured 8, 8 in 2D and 10, 10 in 3D, both centrings; PETSc PCMG with
    Galerkin levels and an SVD coarse solve: 6 and 7); before, the zero halos made them grow (75 and
    33 at these sizes' larger ends, 110 on ksp ex50 at -da_refine 6). The true residual decides."""
    its = []
    for n in sizes:
        da, A, b = neumann_system(n, dim, centring)
        ksp, x = solve(da, A, b, dict(GMG, ksp_norm_type="unpreconditioned"), rtol=1e-8)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8
        its.append(ksp.getIterationNumber())
        assert ksp.getPC().getPythonContext().mg.levels[0].box.keep_ends
    assert its[-1] <= its[0] + 1 and max(its) <= (8 if dim == 2 else 10) + 1, its


@pytest.mark.parametrize("n,dim", [(129, 2), ((64, 41), 2), ((17, 12, 9), 3)])
@pytest.mark.parametrize("ksp_type", ["gmres", "bcgs", "fgmres"])
def test_rows_that_are_multiples_of_one_stencil(n, dim, ksp_type, monkeypatch):
    """PETSc's ksp ex29 rows with -rho 1e5 (row i is rho_i times the Laplacian's, rho jumping by
    1e5 in the middle third: nonsymmetric there): the PC reads D^-1 A as the constant Laplacian
    (detect.row_scaled), takes its matrix-free path, applies it to D^-1 x, and converges to 1e-8
    in at most 12 iterations (measured: gmres 9, 10, 11; bcgs 5, 6, 7; fgmres 9, 10, 11 at 129^2,
    64x41, 17x12x9), the true residual below 1e-7 (the KSPs' own residuals at 1e-8; the true one
    measured up to 5.6e-8). Without the scaling (detect.row_scaled made to decline) the Galerkin
    hierarchy of A needs at least 1.5 times the iterations or fails: gmres broke down at 60 with a
    true residual of 1.3 at 129^2 and took 51 and 18; bcgs diverged at 64x41 (true residual 1.8e5);
    fgmres did not converge in 100 at 129^2."""
    from pcplugins.core import detect
    da, A, b = row_coefficient_system(n, dim, 1e5)
    opts = {"ksp_pc_side": "right"} if ksp_type == "gmres" else {}
    unpre = PETSc.KSP.NormType.UNPRECONDITIONED
    ksp, x = petsc_solve(da, A, b, opts, ksp_type, pc="pcplugins.GMG", rtol=1e-8, max_it=100, norm_type=unpre)
    kind = next(line for line in ksp.getPC().getPythonContext().describe() if line.startswith("operator"))
    assert "rows scaled" in kind and "constant-coefficient" in kind, kind
    its = ksp.getIterationNumber()
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1e-7 and its <= 12, its
    if ksp_type == "gmres":
        monkeypatch.setattr(detect, "row_scaled", lambda box, offsets, coefs, comm, stats=None: (coefs, None))
        ksp, x = petsc_solve(da, A, b, opts, ksp_type, pc="pcplugins.GMG", rtol=1e-8, max_it=100, norm_type=unpre)
        assert ksp.getConvergedReason() <= 0 or ksp.getIterationNumber() >= 1.5 * its, ksp.getIterationNumber()


@pytest.mark.parametrize("n,dim", [(65, 2), (64, 2), ((40, 33), 2), ((17, 12, 9), 3), (16, 3)])
@pytest.mark.parametrize("ksp_type", ["gmres", "bcgs", "fgmres"])
def test_neumann_rows_at_another_scale(n, dim, ksp_type, monkeypatch):
    """PETSc's ts ex15 Jacobian with -boundary 1 (problems.neumann_rows: first-order Neumann rows
    u_b - u_i = 0 of scale 1 beside interior rows of scale 1/h^2): the PC reads D^-1 A, whose
    Neumann rows mirror the interior's couplings (detect.mirror_scaled), and converges to 1e-8 in
    at most 12 iterations, the true residual below 1e-7. Measured (gmres, bcgs, fgmres) at 65^2,
    64^2, 40x33, 17x12x9, 16^3: 6 4 6, 7 4 7, 7 4 7, 11 7 11, 7 4 7; without the scaling
    (detect.mirror_scaled made to decline) the Galerkin hierarchy of A: gmres broke down at 30
    (65^2, 64^2), bcgs diverged at 65^2 and stopped at 64^2 with a true residual of 9e-4, and the
    rest took 22 to 89; in ts ex15 itself 12-19 iterations a step at 65^2, 46 at 129^2 and over
    90 at 257^2 (3-4 with it)."""
    from pcplugins.core import detect
    da, A, b = neumann_rows_system(n, dim)
    opts = {"ksp_pc_side": "right"} if ksp_type == "gmres" else {}
    unpre = PETSc.KSP.NormType.UNPRECONDITIONED
    ksp, x = petsc_solve(da, A, b, opts, ksp_type, pc="pcplugins.GMG", rtol=1e-8, max_it=100, norm_type=unpre)
    kind = next(line for line in ksp.getPC().getPythonContext().describe() if line.startswith("operator"))
    assert "rows scaled" in kind, kind
    its = ksp.getIterationNumber()
    assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1e-7 and its <= 12, its
    if ksp_type == "gmres" and n == 65:
        monkeypatch.setattr(detect, "mirror_scaled", lambda box, offsets, coefs, comm, stats=None: (coefs, None))
        ksp, x = petsc_solve(da, A, b, opts, ksp_type, pc="pcplugins.GMG", rtol=1e-8, max_it=100, norm_type=unpre)
        assert ksp.getConvergedReason() <= 0 or ksp.getIterationNumber() >= 3 * its, ksp.getIterationNumber()


def test_mirror_scaling_leaves_symmetric_and_dirichlet_rows_alone():
    """detect.mirror_scaled scales ex15's Neumann rows by 1/h^2 along their normal (its corners,
    coupled one way, by 1), also where the entries are a finite-difference Jacobian's (ex15 with
    -Jtype 2 -nstencilpts 9: 9, 15, 24 GMRES iterations a step at 33^2, 65^2, 129^2 without, 3-4
    with), and declines where there is nothing to mirror: the same rows at the interior's scale,
    and identity rows of boundary values."""
    from pcplugins.core import detect, grid
    from pcplugins.core.comm import Comm
    from pcplugins.core.csrstencil import stencil_of_csr

    def scaled(S, shape):
        found = stencil_of_csr(S.indptr, S.indices, S.data, shape, np.float64, (0, 0))
        return detect.mirror_scaled(grid.Box(shape), found.offsets, found.coefs, Comm())[1]
    S = neumann_rows((9, 11))
    m = scaled(S, (9, 11))                    # h = 1/8 along axis 0, 1/10 along axis 1
    assert m[0, 5] == 64.0 and m[4, 0] == 100.0 and m[0, 0] == 1.0 and m[4, 5] == 1.0, m
    T = S.tolil()
    for r in range(S.shape[0]):
        i, j = divmod(r, 11)
        if (i in (0, 8)) != (j in (0, 10)):
            T.data[r] = [v * (64.0 if i in (0, 8) else 100.0) for v in T.data[r]]
    assert scaled(T.tocsr(), (9, 11)) is None
    _, indptr, cols, vals = poisson_csr(9, 2, "petsc")
    assert scaled(sp.csr_matrix((vals, cols, indptr)), (9, 9)) is None
    # a finite-difference Jacobian's entries (ts ex15 -Jtype 2): symmetric to about 1e-8
    F = S.copy()
    F.data *= 1 + 1e-9 * np.random.default_rng(0).standard_normal(F.nnz)
    m = scaled(F, (9, 11))
    assert abs(m[0, 5] / 64.0 - 1) < 1e-7 and abs(m[4, 0] / 100.0 - 1) < 1e-7 and m[0, 0] == 1.0, m


@pytest.mark.parametrize("dim,n,levels", [(2, 65, 5), (2, 129, 6), (3, 17, 3), (3, 33, 4)])
def test_defaults_take_at_most_pcmgs_iterations_on_the_laplacian(dim, n, levels):
    """Out of the box (no GMG option) CG takes at most PETSc PCMG's iterations + 1 (Galerkin, its
    defaults) on the constant-coefficient Laplacian; on the even grids of the same size (n - 1
    interior points, which PCMG cannot coarsen) too. The true residual decides convergence."""
    da, A, b = poisson_system(n, dim, "petsc")
    pcmg = pcmg_solve(da, A, b, levels, max_it=100)
    for m, convention in ((n, "petsc"), (n - 3, "interior")):   # n - 3: an even number of unknowns
        da, A, b = poisson_system(m, dim, convention)
        ksp, x = petsc_solve(da, A, b, GMG, max_it=100, **TRUE_NORM)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8
        assert ksp.getIterationNumber() <= pcmg.getIterationNumber() + 1, (m, convention)


@pytest.mark.parametrize("dim,n,levels,pattern", [(2, 129, 6, "checkerboard"), (2, 129, 6, "boxes"),
                                                  (3, 33, 4, "checkerboard"), (3, 65, 5, "boxes")])
def test_jumps_take_at_most_pcmgs_iterations_whatever_their_size(dim, n, levels, pattern):
    """kappa jumps of 1e2, 1e4 and 1e6 on cells whose faces lie on no coarse grid line: with its
    defaults (the operator-dependent transfer, chosen for the variable coefficients) GMG takes at
    most PETSc PCMG's CG iterations (Galerkin, its defaults) and as many for every jump size, within
    20%. (With linear transfers the counts grow with the jump: 33^3 checkerboard 13, 20, 25 with
    V(2,2); PCMG 11, 15, 20. On 33^3 and 41^3 boxes GMG takes 6, 7, 8.) The true residual decides
    convergence."""
    its = []
    for jump in (2.0, 4.0, 6.0):
        da, A, b = poisson_system(n, dim, "petsc", jump=jump, pattern=pattern)
        ksp, x = petsc_solve(da, A, b, GMG, max_it=200, **TRUE_NORM)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8
        assert "transfer operator-dependent" in " ".join(ksp.getPC().getPythonContext().describe())
        its.append(ksp.getIterationNumber())
        pcmg = pcmg_solve(da, A, b, levels)
        assert its[-1] <= pcmg.getIterationNumber(), (jump, its, pcmg.getIterationNumber())
    assert max(its) <= 1.2 * min(its), its


@pytest.mark.parametrize("ksp_type", ["gmres", "bcgs"])
@pytest.mark.parametrize("dim,n", [(2, 65), (3, 17)])
def test_convection_diffusion_at_most_pcmgs_iterations(dim, n, ksp_type):
    """Upwind convection-diffusion (a nonsymmetric constant stencil) at cell Peclet numbers 0.1 to
    100: the defaults (Galerkin coarse operators with operator-dependent transfers) converge under
    GMRES and Bi-CGSTAB, by the true residual, in at most PCMG's iterations where PCMG converges
    (its linear transfers diverge from Peclet 1 in 2D and 10 in 3D, as ours do with -pc_gmg_transfer
    linear)."""
    for peclet in (0.1, 1.0, 10.0, 100.0):
        da, A, b = convection_system(n, dim, peclet)
        opts = dict(GMG, ksp_gmres_restart=100)
        ksp, x = petsc_solve(da, A, b, opts, ksp_type, max_it=200, **TRUE_NORM)
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1.01e-8, peclet
        assert ksp.getIterationNumber() <= 40
        pcmg = pcmg_solve(da, A, b, int(np.log2(n - 1)), ksp_type, ksp_gmres_restart=100)
        if pcmg.getConvergedReason() > 0:
            assert ksp.getIterationNumber() <= pcmg.getIterationNumber(), peclet


@pytest.mark.parametrize("ksp_type", ["cg", "gmres", "bcgs", "fgmres"])
@pytest.mark.parametrize("n", [17, 16])
def test_operator_dependent_transfer_under_every_ksp(n, ksp_type):
    """The black box transfer on odd and even grids with jumps of 1e4 converges under each KSP,
    by the true residual, in at most 15 iterations."""
    da, A, b = poisson_system(n, 3, "interior", jump=4.0, pattern="checkerboard")
    ksp, x = petsc_solve(da, A, b, GMG, ksp_type, rtol=1e-8, max_it=100,
                         norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 15
    assert true_relative_residual(A, b, x) <= 1.01e-8


@pytest.mark.parametrize("ksp_type", ["cg", "bcgs", "gmres"])
def test_option_string_in_subprocess(ksp_type):
    cmd = [sys.executable, os.path.join(ROOT, "examples", "poisson.py"), "-n", "17", "-dim", "3",
           "-ksp_type", ksp_type, "-pc_type", "python", "-pc_python_type", "pcplugins.GMG",
           "-pc_gmg_smoother", "multicolor", "-ksp_rtol", "1e-8", "-ksp_view", "-ksp_converged_reason"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "pcplugins.GMG: geometric multigrid on the DMDA grid 17x17x17" in out.stdout
    assert "8-colour Gauss-Seidel" in out.stdout
    assert "CONVERGED" in out.stdout
    resid = float(out.stdout.split("true relative residual ")[1].split(",")[0])
    assert resid < 1e-7


def test_help_lists_options_and_log_view_shows_events():
    cmd = [sys.executable, os.path.join(ROOT, "examples", "poisson.py"), "-n", "33", "-dim", "2",
           "-help", "-log_view"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    for name in ("-pc_gmg_levels", "-pc_gmg_cycle <v>", "-pc_gmg_smoother <redblack>", "-pc_gmg_device <auto>"):
        assert name in out.stdout
    for ev in ("GMGSetUp", "GMGApply", "GMGSmooth", "GMGRestrict", "GMGProlong", "GMGCoarse"):
        assert ev in out.stdout


def test_prefixed_pcs_differ():
    da, A, b = poisson_system(17, 2, "interior")
    k1, _ = solve(da, A, b, dict(GMG, pc_gmg_cycle="w"), prefix="a_")
    k2, _ = solve(da, A, b, dict(GMG, pc_gmg_smoother="jacobi"), prefix="b_")
    d1 = " ".join(k1.getPC().getPythonContext().describe())
    d2 = " ".join(k2.getPC().getPythonContext().describe())
    assert "W-cycle" in d1 and "red-black" in d1
    assert "V-cycle" in d2 and "Jacobi" in d2


def test_new_operator_values_trigger_setup_and_reuse_is_honoured():
    da, A, b = poisson_system(17, 2, "interior")
    ksp, x = solve(da, A, b, GMG)
    ctx = ksp.getPC().getPythonContext()
    first = ctx.mg
    A.scale(2.0)
    ksp.setOperators(A)
    x2 = b.duplicate()
    ksp.solve(b, x2)
    assert ctx.mg is not first
    assert np.allclose(x2.getArray(), 0.5 * x.getArray(), rtol=1e-8, atol=1e-12)
    assert ksp.getIterationNumber() <= 12
    second = ctx.mg
    A.scale(2.0)
    ksp.setOperators(A)
    ksp.getPC().setReusePreconditioner(True)
    ksp.solve(b, x2)   # the hierarchy of 2A preconditions 4A: same iterates up to scaling
    assert ctx.mg is second
    assert np.allclose(x2.getArray(), 0.25 * x.getArray(), rtol=1e-6, atol=1e-10)
    assert "boundary" in " ".join(ksp.getPC().getPythonContext().describe())


def test_declared_laplacian_matches_detected():
    da, A, b = poisson_system(33, 3, "petsc")
    k1, x1 = solve(da, A, b, dict(GMG, ksp_max_it=4, ksp_norm_type="none"))
    k2, x2 = solve(da, A, b, dict(GMG, pc_gmg_operator="laplacian", ksp_max_it=4, ksp_norm_type="none"))
    assert "declared" in " ".join(k2.getPC().getPythonContext().describe())
    assert np.allclose(x1.getArray(), x2.getArray(), rtol=1e-12, atol=1e-14)


def _read_systems():
    shifted = stencil_system(9, 2, lambda idx, a, step: 1.0)        # Dirichlet values eliminated
    shifted[1].shift(0.5)
    shifted[1].assemble()
    return {"interior 3D odd": lambda: poisson_system(9, 3, "interior"),
            "interior 3D box": lambda: poisson_system((8, 5, 6), 3, "interior"),
            "petsc 3D even": lambda: poisson_system(10, 3, "petsc"),
            "petsc 2D box": lambda: poisson_system((12, 7), 2, "petsc"),
            "shifted 2D": lambda: shifted,
            # planes coupled along x and y only: the z faces' rows sum to zero (Neumann-type)
            "planes 3D": lambda: stencil_system(7, 3, lambda idx, a, step: 0.0 if a == 2 else 1.0,
                                                lambda idx, a: 0.0 if a == 2 else 1.0),
            "neumann vertex 2D": lambda: neumann_system(9, 2, "vertex"),
            "jumps 3D": lambda: poisson_system(9, 3, "interior", jump=100.0)}


@pytest.mark.parametrize("case", list(_read_systems()))
def test_constant_read_builds_what_the_arrays_path_builds(case, monkeypatch):
    """A constant stencil read from the matrix is decided from the class statistics
    (dmda.constant_stencil); the arrays' own tests (identity layer, Neumann faces, compress) decide
    the same: the same fine operator, boundary handling and preconditioner output."""
    da, A, b = _read_systems()[case]()
    opts = dict(GMG, ksp_max_it=3, ksp_norm_type="none")
    k1, x1 = solve(da, A, b, opts)
    import pcplugins.petsc.dmda as dmda
    read = []
    monkeypatch.setattr(dmda, "constant_stencil", lambda *a: read.append(a) or None)
    k2, x2 = solve(da, A, b, opts)
    assert read
    c1, c2 = k1.getPC().getPythonContext(), k2.getPC().getPythonContext()
    op1, op2 = c1.mg.levels[0].op, c2.mg.levels[0].op
    assert op1.constant == op2.constant == (case not in ("neumann vertex 2D", "jumps 3D"))
    b1, b2 = c1.mg.fine_box, c2.mg.fine_box
    assert c1.layer == c2.layer
    assert (b1.global_shape, b1.start, b1.shape, b1.keep_ends) == (b2.global_shape, b2.start, b2.shape, b2.keep_ends)
    assert op1.offsets == op2.offsets and (not op1.constant or op1.coefs == op2.coefs)
    if c1.layer:
        assert np.array_equal(c1._invdb, c2._invdb) and (c1._elim_fused is None) == (c2._elim_fused is None)
    assert np.array_equal(x1.getArray(), x2.getArray())


@pytest.mark.parametrize("shape", [(5, 6, 7), (6, 5), (2, 5)])
def test_dirichlet_layer_from_statistics_matches_the_arrays(shape):
    """dmda.dirichlet_layer decided from the arrays' class statistics (one rank: the GPU reading
    kernel takes them) and from the arrays' faces alike: an identity layer whose diagonal varies
    (and its range), a layer row with a coupling, a zero diagonal on the layer, a negative one (a
    matrix negated whole: a layer too) and one of both signs (none); a grid too thin."""
    from pcplugins.core import detect, grid, stencil
    from pcplugins.petsc import dmda

    class OneRank:
        size = 1
        allmin = allmax = allsum = staticmethod(lambda v: v)
    box = grid.Box(shape, (0,) * len(shape), shape)
    offsets = stencil.star_offsets(box.dim)
    layer = dmda.layer_mask(box)
    rng = np.random.default_rng(2)
    coefs = [np.where(layer, 0.0, -1.0) if any(o) else np.where(layer, rng.uniform(1, 3, shape), 6.0)
             for o in offsets]
    for o, c in zip(offsets, coefs):      # no coupling beyond the grid
        c *= stencil.inside_mask(box, o, np)
    centre = offsets.index((0,) * box.dim)
    variants = [list(coefs) for _ in range(5)]
    variants[1][0] = np.where(layer, 1.0, -1.0) * stencil.inside_mask(box, offsets[0], np)
    variants[2][centre] = np.where(layer, 0.0, 6.0)
    variants[3] = [-c for c in coefs]
    variants[4][centre] = coefs[centre] * np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
    got = []
    for cs in variants:
        arrays = dmda.dirichlet_layer(box, offsets, cs, OneRank())
        stats = detect.class_stats(box, offsets, cs)
        assert dmda.dirichlet_layer(box, offsets, cs, OneRank(), stats) == arrays
        got.append(arrays)
        d = cs[centre]
        if arrays:        # the layer's diagonal: from the statistics as from the faces
            assert dmda.layer_diagonal_range(box, d, OneRank(), stats[centre, detect.LAYER]) == \
                dmda.layer_diagonal_range(box, d, OneRank()) == (d[layer].min(), d[layer].max())
    assert got == ([True, False, False, True, False] if min(shape) >= 3 else [False] * 5)


def test_matrix_free_shell_with_declared_laplacian():
    n = 15
    da, A, b = poisson_system(n, 2, "interior")

    class Shell:
        def mult(self, mat, x, y):
            A.mult(x, y)
    S = PETSc.Mat().createPython(A.getSizes(), Shell())
    S.setUp()
    ksp = PETSc.KSP().create()
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(S)
    ksp.setType("cg")
    pc = ksp.getPC()
    pc.setType("python")
    ctx = pcplugins.GMG()
    pc.setPythonContext(ctx)
    PETSc.Options()["pc_gmg_operator"] = "laplacian"
    ksp.setTolerances(rtol=1e-10)
    ksp.setFromOptions()
    x = b.duplicate()
    ksp.solve(b, x)
    PETSc.Options().delValue("pc_gmg_operator")
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 12


# -- bad input -----------------------------------------------------------------------------------

def setup_error(da, A, options=None, ksp_type="cg"):
    opts = PETSc.Options()
    options = dict(GMG, **(options or {}))
    for k, v in options.items():
        opts[k] = v
    ksp = PETSc.KSP().create()
    if da is not None:
        ksp.setDM(da)
        ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    try:
        with pytest.raises(PETSc.Error) as err:
            ksp.setFromOptions()
            ksp.setUp()
    finally:
        for k in options:
            opts.delValue(k)
    cause = err.value.__cause__ or err.value.__context__
    return str(cause)


def test_error_no_dm():
    _, A, _ = poisson_system(9, 2)
    assert "needs a DMDA" in setup_error(None, A)


def test_error_dm_not_dmda():
    _, A, _ = poisson_system(9, 2)
    plex = PETSc.DMPlex().createBoxMesh([2, 2], simplex=False)
    assert "type 'plex'" in setup_error(plex, A)


def test_error_dof():
    _, A, _ = poisson_system(9, 2)
    da = PETSc.DMDA().create([9, 9], dof=2, stencil_width=1)
    assert "dof 2" in setup_error(da, A)


def test_error_mis_sized_operator():
    da, _, _ = poisson_system(9, 2)
    _, A, _ = poisson_system(7, 2)
    msg = setup_error(da, A)
    assert "49 rows but the DMDA grid 9x9 has 81 points" in msg and "takes pcplugins.AMG" in msg, msg


def test_error_unknown_option_value():
    da, A, _ = poisson_system(9, 2)
    msg = setup_error(da, A, {"pc_gmg_smoother": "ilu"})
    assert "-pc_gmg_smoother" in msg and "ilu" in msg and "redblack" in msg


def test_error_wide_stencil():
    da, A, _ = poisson_system(9, 2)
    B = A.duplicate(copy=True)
    B.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
    B.setValue(0, 40, -0.1)
    B.assemble()
    assert "stencils of width 1" in setup_error(da, B)


def negated_rows(da, A, b, convention):
    """D A and D b for D = -1 on the unknowns' rows and +1 on PETSc's identity rows of the outer
    layer (convention petsc): the operator's sign flipped, as div(k grad u) = -f (snes ex25)."""
    shape = da.getSizes()[::-1]
    outer = np.zeros(shape, bool)
    if convention == "petsc":
        for a, m in enumerate(shape):
            outer[(slice(None),) * a + ([0, m - 1],)] = True
    d = da.createGlobalVec()
    d.setArray(np.where(outer, 1.0, -1.0).ravel())
    A2, b2 = A.duplicate(copy=True), b.duplicate()
    A2.diagonalScale(L=d)
    b2.pointwiseMult(b, d)
    return A2, b2


@pytest.mark.parametrize("dim,n,convention,jump,operator", [
    (2, 33, "interior", 0.0, "auto"), (2, 32, "interior", 2.0, "auto"), (3, 17, "interior", 0.0, "auto"),
    (2, 33, "petsc", 0.0, "auto"), (2, 20, "petsc", 2.0, "auto"), (3, 16, "petsc", 2.0, "auto"),
    (2, 33, "petsc", 0.0, "laplacian"), (3, 16, "interior", 0.0, "laplacian")])
@pytest.mark.parametrize("ksp_type", ["richardson", "gmres", "bcgs"])
def test_negative_definite_operator(dim, n, convention, jump, operator, ksp_type):
    """A negative definite operator (the unknowns' rows negated, PETSc's identity rows on the outer
    layer kept: div(k grad u) = -f, as snes ex25 writes it; constant and jumping coefficients, and
    the Laplacian declared): GMG builds the hierarchy of -A and negates its output, so each KSP
    takes the steps it takes on A, to the last digits; Richardson, which a preconditioner of the
    wrong sign sends diverging, included."""
    da, A, b = poisson_system(n, dim, convention, jump=jump, rhs="random")
    options = dict(GMG, pc_gmg_operator=operator)
    ref, x_ref = solve(da, A, b, options, ksp_type=ksp_type, rtol=1e-8)
    A2, b2 = negated_rows(da, A, b, convention)
    ksp, x = solve(da, A2, b2, options, ksp_type=ksp_type, rtol=1e-8)
    ctx = ksp.getPC().getPythonContext()
    assert ctx.negated and "negative definite" in "\n".join(ctx.describe())
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() == ref.getIterationNumber() <= 30
    assert np.linalg.norm(x.getArray() - x_ref.getArray()) <= 1e-10 * np.linalg.norm(x_ref.getArray())
    assert true_relative_residual(A2, b2, x) <= 1e-6


@pytest.mark.parametrize("dim,n,jump,pc", [(2, 33, 0.0, "pcplugins.GMG"), (2, 20, 2.0, "pcplugins.GMG"),
                                           (3, 16, 2.0, "pcplugins.GMG"), (2, 33, 0.0, "pcplugins.FFTPoisson"),
                                           (3, 17, 0.0, "pcplugins.FFTPoisson")])
@pytest.mark.parametrize("ksp_type", ["richardson", "cg", "bcgs", "gmres", "fgmres"])
def test_matrix_negated_whole(dim, n, jump, pc, ksp_type):
    """-A x = -b with PETSc's identity rows on the outer layer negated too (A.scale(-1)): the
    layer of negative identity rows is eliminated as the positive one is, the rest is -A's
    operator, and each KSP takes the steps it takes on A to the same answer (FFTPoisson exact)."""
    runs = []
    for sign in (1.0, -1.0):
        da, A, b = poisson_system(n, dim, "petsc", jump=jump, rhs="random")
        A.scale(sign)
        b.scale(sign)
        side = {"ksp_pc_side": "right"} if "gmres" in ksp_type else {}
        ksp, x = petsc_solve(da, A, b, side, ksp_type, pc=pc, rtol=1e-10, max_it=60,
                             norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
        view = "\n".join(ksp.getPC().getPythonContext().describe())
        assert ksp.getConvergedReason() > 0 and true_relative_residual(A, b, x) <= 1e-9, (sign, view)
        runs.append((ksp.getIterationNumber(), x.getArray().copy(), view))
    (its, x, view), (its2, x2, view2) = runs
    assert its2 == its <= (1 if pc == "pcplugins.FFTPoisson" else 30)
    assert "negative definite" in view2 and "negative definite" not in view
    assert all("boundary: identity rows on the grid's outer layer eliminated" in v for v in (view, view2))
    assert np.linalg.norm(x2 - x) <= 1e-10 * np.linalg.norm(x)


def test_error_mixed_sign_diagonal_stays():
    """Diagonals of both signs are no definite operator: still the error naming the point."""
    da, A, _ = poisson_system(9, 2)
    A2, _ = negated_rows(da, A, da.createGlobalVec(), "interior")
    A2.setValue(40, 40, 4.0)
    A2.assemble()
    assert "positive diagonal" in setup_error(da, A2)


def test_error_negative_diagonal():
    da, A, _ = poisson_system(9, 2)
    A.setValue(40, 40, -1.0)
    A.assemble()
    assert "positive diagonal" in setup_error(da, A)


@pytest.mark.skipif(pcplugins.backend.gpu_available(), reason="this machine has a GPU")
def test_error_gpu_without_gpu():
    da, A, _ = poisson_system(9, 2)
    msg = setup_error(da, A, {"pc_gmg_device": "gpu"})
    assert "-pc_gmg_device gpu" in msg and ("CuPy" in msg)


def test_nan_in_rhs_stops_the_ksp():
    da, A, b = poisson_system(9, 2)
    b.setValue(3, np.nan)
    b.assemble()
    ksp, _ = solve(da, A, b, GMG)
    assert ksp.getConvergedReason() < 0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")    # inf - inf in the cycle
@pytest.mark.parametrize("extra", [{}, {"pc_gmg_operator": "laplacian", "pc_gmg_precision": "single"}])
def test_nan_reaching_the_pc_sets_its_failed_reason(extra):
    """PCApply directly (a KSP would see the NaN in its own dot products first): on the host the
    flag is read at once."""
    da, A, b = poisson_system(9, 3, "petsc")
    ksp, _ = solve(da, A, b, dict(GMG, **extra))
    pc, y, bad = ksp.getPC(), b.duplicate(), b.copy()
    pc.apply(b, y)
    assert pc.getFailedReason() == PETSc.PC.FailedReason.NOERROR
    bad.setValue(20, np.inf)
    bad.assemble()
    pc.apply(bad, y)
    assert pc.getFailedReason() == PETSc.PC.FailedReason.SUBPC_ERROR


@pytest.mark.parametrize("dim,n,convention,jump", [(2, 65, "interior", 0.0), (3, 33, "petsc", 0.0),
                                                   (3, 17, "petsc", 4.0)])
def test_single_precision_cycle_inside_double_cg(dim, n, convention, jump):
    """-pc_gmg_precision single: float32 hierarchy and cycle, float64 CG; the same iteration
    count within one, and the double-precision accuracy of the Krylov solution."""
    da, A, b = poisson_system(n, dim, convention, jump=jump)
    its, xs = [], []
    for prec in ("double", "single"):
        ksp, x = solve(da, A, b, dict(GMG, pc_gmg_precision=prec), rtol=1e-10)
        assert ksp.getConvergedReason() > 0
        its.append(ksp.getIterationNumber())
        xs.append(x.getArray().copy())
        ctx = ksp.getPC().getPythonContext()
        assert ctx.mg.levels[0].u.dtype == (np.float32 if prec == "single" else np.float64)
    assert abs(its[0] - its[1]) <= 1
    assert np.linalg.norm(xs[0] - xs[1]) <= 1e-8 * np.linalg.norm(xs[0])


def test_fmg_as_solver_and_preconditioner():
    """-pc_gmg_cycle fmg: one cycle under preonly is already a good solve (the algebraic error is
    of the size of the discretization error, tests/core/test_multigrid.py); under GMRES few iterations."""
    da, A, b = poisson_system(65, 2, "petsc", rhs="sine")
    ksp, x = solve(da, A, b, dict(GMG, pc_gmg_cycle="fmg", pc_gmg_pre=1, pc_gmg_post=2), ksp_type="preonly")
    assert true_relative_residual(A, b, x) < 0.01          # measured 1e-3
    ksp, _ = solve(da, A, b, dict(GMG, pc_gmg_cycle="fmg"), ksp_type="gmres", rtol=1e-10)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 8


def test_gmg_as_the_coarse_solver_of_pcmg():
    """Inside a PETSc composite PC: PCMG hands its coarse DMDA (and a Galerkin 27-point coarse
    operator) to pcplugins.GMG, options under the sub-PC's prefix."""
    da, A, b = poisson_system(33, 3, "petsc")
    da.setInterpolationType(PETSc.DMDA.InterpolationType.Q1)
    ksp, _ = solve(da, A, b, {"pc_type": "mg", "pc_mg_levels": 2, "pc_mg_galerkin": "both",
                              "mg_coarse_ksp_type": "preonly", "mg_coarse_pc_type": "python",
                              "mg_coarse_pc_python_type": "pcplugins.GMG", "mg_coarse_pc_gmg_cycle": "w"},
                   rtol=1e-8)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 10
    coarse = ksp.getPC().getMGCoarseSolve().getPC()
    ctx = coarse.getPythonContext()
    assert ctx.mg.options.cycle == "w" and "17x17x17" in ctx.describe()[0]


@pytest.mark.parametrize("dim,n", [(2, 129), (3, 33)])
def test_homg_restarted_by_richardson(dim, n):
    """Restarting HOMG's MFMG cycle on the residual equation is PETSc's Richardson iteration."""
    da, A, b = poisson_system(n, dim, "petsc")
    ksp, x = solve(da, A, b, dict(GMG, pc_gmg_cycle="homg"), ksp_type="richardson", rtol=1e-8)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 14
    assert "HOMG" in " ".join(ksp.getPC().getPythonContext().describe())
    with pytest.raises(PETSc.Error):           # needs 2^k + 1 points per axis
        da, A, b = poisson_system(30, 2, "petsc")
        solve(da, A, b, dict(GMG, pc_gmg_cycle="homg"), ksp_type="richardson")


def test_mixed_precision_defect_correction():
    """Richardson (float64 residual and update, PETSc) around a float32 cycle is the mixed-precision
    defect correction of Goddeke and Strzodka: it reaches a residual far below float32's precision
    in the same number of iterations as the double cycle (measured 21 and 21)."""
    da, A, b = poisson_system(65, 2, "petsc", jump=2.0)
    res = {}
    for prec in ("double", "single"):
        ksp, x = solve(da, A, b, dict(GMG, pc_gmg_precision=prec, pc_gmg_smoother="adi"),
                       ksp_type="richardson", rtol=1e-11)
        res[prec] = (ksp.getIterationNumber(), true_relative_residual(A, b, x))
    assert res["single"][1] < 1e-10 and abs(res["single"][0] - res["double"][0]) <= 1


@pytest.mark.parametrize("dim,n,jump", [(2, 65, 2.0), (3, 17, 0.0)])
def test_mixed_inner_digits_reaches_double_accuracy(dim, n, jump):
    """-pc_gmg_mixed_inner_digits: the PC itself runs the defect correction (float64 residual and
    update, float32 cycles) until the residual fell by that many digits, so preonly solves to double
    accuracy: the solution equals the double-precision CG solution to 1e-8 (the paper's Table 2: the
    same l2 error as double), in as many float32 cycles as Richardson needs double cycles (+-1) to
    reduce the same (true) residual norm."""
    da, A, b = poisson_system(n, dim, "petsc", jump=jump)
    ksp, x = solve(da, A, b, dict(GMG, pc_gmg_mixed_inner_digits=10), ksp_type="preonly")
    ctx = ksp.getPC().getPythonContext()
    _, ref = solve(da, A, b, dict(GMG), rtol=1e-13)
    kr, _ = petsc_solve(da, A, b, dict(GMG), "richardson", rtol=1e-10, max_it=500,
                        norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
    assert true_relative_residual(A, b, x) < 1e-10 * 1.5
    assert (x - ref).norm() <= 1e-8 * ref.norm()
    assert abs(ctx.inner_cycles[-1] - kr.getIterationNumber()) <= 1
    assert "mixed defect correction" in "\n".join(ctx.describe())


def test_mixed_inner_cycles_inside_cg():
    """-pc_gmg_mixed_inner_cycles 2: two float32 cycles with a float64 residual between them per
    application, a fixed linear operator, so plain CG keeps working (and needs fewer iterations)."""
    da, A, b = poisson_system(33, 3, "interior", jump=1.0)
    k1, _ = solve(da, A, b, dict(GMG), rtol=1e-10)
    k2, _ = solve(da, A, b, dict(GMG, pc_gmg_mixed_inner_cycles=2), rtol=1e-10)
    assert k2.getConvergedReason() > 0 and k2.getIterationNumber() < k1.getIterationNumber()


def test_multiplicative_cycles_trade_cg_iterations_for_cycles():
    """-pc_gmg_multiplicative_cycles 2 with V(2,2), as in the benchmark's fastest row: a symmetric
    operator, so CG converges, in fewer iterations than with one V(1,1) (10 -> 4 at 257^3), and
    -ksp_view says so."""
    da, A, b = poisson_system(33, 3, "petsc")
    true_norm = dict(rtol=1e-8, max_it=100, norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
    k1, _ = petsc_solve(da, A, b, dict(GMG, pc_gmg_operator="laplacian", pc_gmg_pre=1, pc_gmg_post=1), **true_norm)
    opts = dict(GMG, pc_gmg_operator="laplacian", pc_gmg_pre=2, pc_gmg_post=2, pc_gmg_multiplicative_cycles=2)
    k2, x = petsc_solve(da, A, b, opts, **true_norm)
    assert k2.getConvergedReason() > 0 and k2.getIterationNumber() <= k1.getIterationNumber() - 3
    assert true_relative_residual(A, b, x) <= 1e-8
    assert any("2 V-cycles" in line for line in k2.getPC().getPythonContext().describe())
    msg = setup_error(da, A, dict(GMG, pc_gmg_multiplicative_cycles=0))
    assert "-pc_gmg_multiplicative_cycles" in msg
    homg = dict(GMG, pc_gmg_operator="laplacian", pc_gmg_cycle="homg", pc_gmg_multiplicative_cycles=2)
    msg = setup_error(da, A, homg)
    assert "-pc_gmg_multiplicative_cycles" in msg and "HOMG" in msg


def test_mixed_inner_digits_not_reached_is_a_pc_failure():
    """On 17^3 with kappa jumps and linear transfers the V-cycle alone stalls: 50 float32 cycles do
    not gain 10 digits, and preonly reports a failure (KSP_DIVERGED_PC_FAILED, -11) instead of an
    inaccurate answer."""
    da, A, b = poisson_system(17, 3, "petsc", jump=2.0)
    ksp, x = solve(da, A, b, dict(GMG, pc_gmg_mixed_inner_digits=10, pc_gmg_transfer="linear"),
                   ksp_type="preonly")
    assert ksp.getConvergedReason() == -11
    assert "short of the digits" in "\n".join(ksp.getPC().getPythonContext().describe())


def two_field_system(n, coupling):
    """A DMDA with dof 2: field c is (1 + c) times the 5-point Laplacian, the fields coupled by
    ``coupling`` at each point."""
    da = PETSc.DMDA().create([n, n], dof=2, stencil_width=1)
    da.setUp()
    A = da.createMat()
    (xs, xe), (ys, ye) = da.getRanges()
    row, col = PETSc.Mat.Stencil(), PETSc.Mat.Stencil()
    for j in range(ys, ye):
        for i in range(xs, xe):
            for c in range(2):
                row.index, row.field = (i, j), c
                A.setValueStencil(row, row, 4.0 * (1 + c))
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    if 0 <= i + di < n and 0 <= j + dj < n:
                        col.index, col.field = (i + di, j + dj), c
                        A.setValueStencil(row, col, -1.0 * (1 + c))
                col.index, col.field = (i, j), 1 - c
                A.setValueStencil(row, col, coupling)
    A.assemble()
    b = da.createGlobalVec()
    b.setRandom()
    return da, A, b


def test_gmg_as_fieldsplit_block_solver():
    """PCFIELDSPLIT on a DMDA with dof 2 hands each split a dof-1 DMDA, so pcplugins.GMG runs on
    each block: fgmres needs about as many iterations as with exact (LU) blocks (25 here, where
    the coupling limits block-diagonal preconditioning; one V-cycle a block takes 28, and 25 where
    the coarsest grid is 15^2, -pc_gmg_coarse_size 256)."""
    da, A, b = two_field_system(33, 0.1)
    split = {"pc_type": "fieldsplit", "pc_fieldsplit_type": "additive",
             "fieldsplit_0_ksp_type": "preonly", "fieldsplit_1_ksp_type": "preonly"}
    its = {}
    for sub in ("gmg", "lu"):
        opts = dict(split)
        for f in ("0", "1"):
            if sub == "gmg":
                opts.update({f"fieldsplit_{f}_pc_type": "python", f"fieldsplit_{f}_pc_python_type": "pcplugins.GMG"})
            else:
                opts[f"fieldsplit_{f}_pc_type"] = "lu"
        ksp, x = solve(da, A, b, opts, ksp_type="fgmres", rtol=1e-8)
        assert ksp.getConvergedReason() > 0
        its[sub] = ksp.getIterationNumber()
        if sub == "gmg":
            sub_ksps = ksp.getPC().getFieldSplitSubKSP()
            assert all("pcplugins.GMG" in "\n".join(k.getPC().getPythonContext().describe()) for k in sub_ksps)
    assert its["gmg"] <= its["lu"] + 3, its


@pytest.mark.parametrize("kind", ["baij", "sbaij"])
@pytest.mark.parametrize("n,dim", [(17, 2), (16, 3)])
@pytest.mark.parametrize("ksp_type", ["cg", "gmres", "bcgs"])
def test_block_matrices_are_read_through_a_converted_copy(kind, n, dim, ksp_type):
    """A DMDA's matrix of type BAIJ or SBAIJ (-dm_mat_type; ksp ex45 and ex29 take it) is read
    through an AIJ copy, as pcplugins.AMG reads it: the AIJ matrix's iterations and a true
    residual to the tolerance; -ksp_view says so, and the user's matrix keeps its type. Before:
    "reads assembled AIJ matrices"."""
    from petsc4py import PETSc
    da, A, b = poisson_system(n, dim, "interior")
    A.setOption(PETSc.Mat.Option.SYMMETRIC, True)         # so that MatConvert makes SBAIJ of it
    B = A.convert(kind, PETSc.Mat())
    its = []
    for M in (A, B):
        ksp, x = petsc_solve(da, M, b, ksp_type=ksp_type, pc="pcplugins.GMG", rtol=1e-8,
                             norm_type=PETSc.KSP.NormType.UNPRECONDITIONED)
        assert true_relative_residual(A, b, x) <= 1e-8
        its.append(ksp.getIterationNumber())
    assert its[0] == its[1] and B.getType() == "seq" + kind, (its, B.getType())
    assert f"converted from seq{kind} to AIJ" in ksp.getPC().getPythonContext().operator_kind
