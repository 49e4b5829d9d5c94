"""The W-cycle's over-correction (cycle.py, kcycle.OVERCORRECTION): fewer iterations than the
unscaled W-cycle, and a symmetric positive definite preconditioner for every factor below 2, with
V-cycles below the truncation left unscaled (the bound in cycle.py's docstring)."""
import numpy as np
import pytest

from pcplugins.core import kcycle

from conftest import laplacian


def coordinates(shape):
    return np.indices(shape).reshape(len(shape), -1).T[:, ::-1].astype(float)


def pcg(A, mg, b, rtol=1e-8, maxit=200):
    """CG preconditioned by mg's cycle; the iterations to a true relative residual of rtol."""
    x = np.zeros_like(b)
    r = b.copy()
    z = mg.cycle(r)
    p = z.copy()
    rz = r @ z
    for it in range(1, maxit + 1):
        Ap = A @ p
        alpha = rz / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        if np.linalg.norm(b - A @ x) <= rtol * np.linalg.norm(b):
            return it
        z = mg.cycle(r)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return maxit


@pytest.mark.parametrize("shape, gain", [((127, 127), 0.8), ((128, 128), 0.8), ((200, 37), 1.0), ((31, 30, 29), 1.0)])
@pytest.mark.parametrize("aggregation", ["auxgrid", "pairwise"])
def test_overcorrection_takes_fewer_iterations(shape, gain, aggregation):
    """CG to 1e-8: at most ``gain`` times the unscaled W-cycle's iterations (2D squares: 13-15
    against 17-19, more levels, more gain; the box and 3D: the same or one fewer)."""
    A = laplacian(shape)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    xyz = coordinates(shape) if aggregation == "auxgrid" else None
    its = {}
    for alpha in (None, 1.0):
        mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", aggregation=aggregation, nsmooths=0,
                                                        overcorrection=alpha, coarse_size=64), xyz)
        its[alpha] = pcg(A, mg, b)
    assert mg.opts.overcorrection == 1.0 and len(mg.levels) >= 3
    assert its[None] <= gain * its[1.0], its


def dense(mg, n):
    """The preconditioner B of mg's cycle as a dense matrix."""
    return np.column_stack([mg.cycle(e) for e in np.identity(n)])


@pytest.mark.parametrize("alpha", [1.5, 1.9])
@pytest.mark.parametrize("shape", [(23, 22), (9, 8, 7)])
def test_overcorrected_w_cycle_is_spd(shape, alpha):
    """B is symmetric positive definite, with V-cycles on the coarse levels (truncation) and
    without; a V-cycle is not scaled at all (its B is the same with any factor)."""
    A = laplacian(shape)
    n = A.shape[0]
    for size in (0, 60):
        mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", aggregation="pairwise", nsmooths=0,
                                                        overcorrection=alpha, coarse_size=4, kcycle_size=size))
        assert len(mg.levels) >= 4 and (mg.v_from is not None) == (size > 0)
        B = dense(mg, n)
        assert np.allclose(B, B.T, atol=1e-12 * abs(B).max())
        assert np.linalg.eigvalsh((B + B.T) / 2).min() > 0
    v = [dense(kcycle.AggregationMG(A, np, kcycle.Options(cycle="v", aggregation="pairwise", nsmooths=0,
                                                          overcorrection=a, coarse_size=4)), n) for a in (1.0, alpha)]
    assert np.array_equal(*v)


def test_default_needs_real_diagonally_dominant_rows():
    """The default factor: 1.5 for a Laplacian (also upwind convection: dominant, not symmetric);
    1 for an indefinite matrix (-Laplace - k^2, not dominant), a complex one and smoothed
    aggregation; the factor given is kept."""
    import scipy.sparse as sp
    L = laplacian((40, 40))
    wind = sp.diags([-0.5], [-1], L.shape, format="csr")
    cases = [(L, {}, 1.5), ((L + 0.5 * sp.identity(L.shape[0]) + wind).tocsr(), {}, 1.5),
             ((L - 0.05 * sp.identity(L.shape[0])).tocsr(), {}, 1.0), ((L * (1 + 1j)).tocsr(), {}, 1.0),
             (L, {"nsmooths": 1}, 1.0), ((L - 0.05 * sp.identity(L.shape[0])).tocsr(), {"overcorrection": 1.7}, 1.7)]
    for A, options, want in cases:
        mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", aggregation="pairwise", **options))
        assert mg.opts.overcorrection == want, (options, want)
