"""pcplugins.AMG where an aggregate's energy cancels (energies.zero_energies): a floating part of
the matrix aggregated whole (its coarse diagonal is rounding), and ksp ex9's matrix, whose
indefinite symmetric part gives a coarse diagonal of exactly zero. Before, the smoothers divided
by those diagonals: a NaN cycle (DIVERGED_PC_FAILED) or a failed eigenvalue estimate."""
import numpy
import pytest

from pcplugins.core import energies, kcycle, sparse

from conftest import amg_solve
from problems import ex9_matrix, floating_part

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def test_relative_energies_are_the_galerkin_diagonal_over_the_members():
    """rho = diag(P^T A P) / diag(P^T |D| P), from the aggregates and from P itself alike."""
    A, _ = floating_part(6)
    rng = numpy.random.default_rng(0)
    agg = rng.integers(0, 9, A.shape[0]).astype(numpy.int32)
    agg[:9] = numpy.arange(9)
    P = sparse.module(numpy).csr_matrix((numpy.ones(A.shape[0]), (numpy.arange(A.shape[0]), agg)))
    Ac = (P.T @ A @ P).tocsr()
    want = abs(Ac.diagonal()) / (P.T @ abs(A.diagonal()))
    for kw in ({"agg": agg}, {"P": P}):
        rho, s = energies.relative_energies(Ac, A, numpy, **kw)
        assert numpy.allclose(rho, want) and numpy.allclose(s, P.T @ abs(A.diagonal()))


@pytest.mark.parametrize("ksp_type", ["cg", "gmres", "bcgs"])
@pytest.mark.parametrize("n", [63, 64])
@pytest.mark.parametrize("nsmooths", ["0", "1"])
def test_floating_part_is_solved(ksp_type, n, nsmooths):
    """A Dirichlet Laplacian beside a floating Neumann chain, a consistent right-hand side: the
    chain's aggregate has a coarse diagonal of rounding, which now takes its members' diagonal.
    Measured 10 (smoothed) and 16 (unsmoothed) cg iterations at 64^2; before, the unsmoothed
    cycle was NaN and the smoothed setup failed in its eigenvalue estimate."""
    A, z = floating_part(n)
    b = numpy.random.default_rng(1).random(A.shape[0])
    b -= (z @ b) * z
    its, res, ksp = amg_solve(A, ksp_type=ksp_type, rtol=1e-8, rhs=b, cycle=None,
                              options={"pc_amg_agg_nsmooths": nsmooths})
    assert res <= 1e-8 and its <= 30, (its, res)
    mg = ksp.getPC().getPythonContext().mg
    # every smoothed level's diagonal is of its members' size, not rounding
    assert all(float(abs(L.A.diagonal()).min()) > 1e-3 for L in mg.levels[:-1])


def test_kcycle_on_a_floating_part():
    A, z = floating_part(40)
    b = numpy.random.default_rng(2).random(A.shape[0])
    b -= (z @ b) * z
    its, res, _ = amg_solve(A, ksp_type="fgmres", rtol=1e-8, rhs=b, options={"pc_amg_agg_nsmooths": "0"})
    assert res <= 1e-8 and its <= 25, (its, res)


def test_indefinite_matrix_stops_coarsening_where_energies_cancel():
    """ksp ex9's matrix at its second step: a level-2 aggregate of seven rows has a coarse diagonal
    of exactly zero. That level becomes the coarsest (a direct solve), -ksp_view says why, and the
    cycle is finite; at the first step (a definite symmetric part) nothing changes."""
    mg = kcycle.AggregationMG(ex9_matrix(3000, 1), numpy, kcycle.Options(aggregation="pairwise", cycle="w"))
    assert "no energy" in mg.stalled and len(mg.levels) == 3, mg.stalled
    assert all(float(abs(L.A.diagonal()).min()) > 0 for L in mg.levels[:-1])
    assert numpy.isfinite(mg.cycle(numpy.random.default_rng(0).random(6000))).all()
    its, res, ksp = amg_solve(ex9_matrix(3000, 1), ksp_type="gmres", rtol=1e-8, cycle=None)
    assert ksp.getConvergedReason() != -11                    # not DIVERGED_PC_FAILED
    assert any("no energy" in line for line in ksp.getPC().getPythonContext().describe())
    its, res, ksp = amg_solve(ex9_matrix(3000, 0), ksp_type="gmres", rtol=1e-8, cycle=None)
    assert res <= 1e-8 and its <= 20 and ksp.getPC().getPythonContext().mg.stalled is None, (its, res)
