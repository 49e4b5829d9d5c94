"""The CSR cycle's shared coarse visits (cycle.Cycle with backend.Subgraphs on the GPU), run on
the host through a stand-in that keeps Subgraphs' protocol as a capture sees it: a key's input is
a buffer of its own from its second visit on, and its result is one array that every visit
overwrites. The cycle must give the same iterate as without (the GPU test replays real graphs)."""
import collections

import numpy as np
import pytest

from pcplugins.core import kcycle

from conftest import laplacian


class SharedVisits:
    """backend.Subgraphs on the host: ``run`` on the key's own input buffer, the result written
    into the key's one result array (a replayed graph writes where its capture did)."""

    def __init__(self):
        self.entries, self.visits, self.copies = {}, collections.Counter(), 0

    def input(self, key):
        entry = self.entries.get(key)
        return entry[0] if entry else None

    def __call__(self, key, run, f):
        self.visits[key] += 1
        if key not in self.entries:
            buf = f.copy()
            self.entries[key] = [buf, run(buf)]
            return self.entries[key][1]
        buf, out = self.entries[key]
        if f is not buf:
            self.copies += 1
            buf[...] = f
        out[...] = run(buf)
        return out


@pytest.mark.parametrize("cycle", ["w", "k"])
@pytest.mark.parametrize("vcycles_below", [None, 200])
@pytest.mark.parametrize("shape, aggregation", [((63, 64), "auxgrid"), ((65, 64), "pairwise"),
                                                ((17, 16, 15), "pairwise")])
def test_shared_coarse_visits_give_the_same_cycle(cycle, vcycles_below, shape, aggregation):
    """W and K, with V-cycles from some level on (-pc_amg_kcycle_size) and without."""
    A = laplacian(shape)
    xyz = np.indices(shape).reshape(len(shape), -1).T[:, ::-1].astype(float) if aggregation == "auxgrid" else None
    opts = kcycle.Options(cycle=cycle, aggregation=aggregation, nsmooths=0, coarse_size=16, kcycle_size=vcycles_below)
    f = np.random.default_rng(3).standard_normal(A.shape[0])
    plain = kcycle.AggregationMG(A, np, opts, xyz)
    mg = kcycle.AggregationMG(A, np, opts, xyz)
    assert plain._cycle.subgraphs is None and len(mg.levels) >= 4
    assert (mg.v_from is not None) == (vcycles_below is not None)
    mg._cycle.subgraphs = shared = SharedVisits()
    for _ in range(2):
        assert np.array_equal(mg.cycle(f), plain.cycle(f))
    # every level from the second down to the one above the coarsest is shared, visited more
    # than once an application, and its input restricted straight into its buffer
    assert {k for k, _ in shared.visits} == set(range(2, len(mg.levels) - 1))
    assert all(v > 2 for v in shared.visits.values()) and shared.copies == 0


@pytest.mark.parametrize("aggregation", ["auxgrid", "pairwise"])
def test_gpu_smoother_rules(aggregation, monkeypatch):
    """The GPU's choice of smoothers, taken on the host: Gauss-Seidel on the finest level, and on
    the others of at least kcycle.SMALL_JACOBI_SIZE unknowns unless pairwise (PAIRWISE_JACOBI),
    l1-Jacobi on the rest."""
    shape = (64, 63)
    for table, value in ((kcycle.VCYCLE_SMOOTHER, {"gs": "l1jacobi"}), (kcycle.SMALL_JACOBI_SIZE, 300),
                         (kcycle.PAIRWISE_JACOBI, True)):
        monkeypatch.setitem(table, "cpu", value)
    A = laplacian(shape)
    xyz = np.indices(shape).reshape(2, -1).T[:, ::-1].astype(float) if aggregation == "auxgrid" else None
    mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", aggregation=aggregation, coarse_size=16,
                                                    kcycle_size=0), xyz)
    kinds = [type(lev.smoother).__name__ for lev in mg.levels[:-1]]
    gs = [k == 0 or (aggregation == "auxgrid" and lev.n >= 300) for k, lev in enumerate(mg.levels[:-1])]
    assert sum(gs) >= 1 + (aggregation == "auxgrid") and len(kinds) >= 3
    assert kinds == ["CSRColourGS" if g else "CSRL1Jacobi" for g in gs], kinds


@pytest.mark.parametrize("shape", [(9, 8), (6, 5, 4)])
@pytest.mark.parametrize("cycle", ["w", "k"])
def test_coarse_solve_array_is_never_a_kept_result(shape, cycle):
    """The dense coarse solve writes every solve into one array of its own (no copy a visit): a
    hierarchy that is the coarse solve alone hands out copies, so two cycles' results stay those of
    their right-hand sides (A^-1 f against a direct solve), and within a multilevel cycle each
    coarse result is read before the next solve overwrites it (the cycle against the same cycle
    with a coarse solve that makes a new array each time)."""
    A = laplacian(shape)
    rng = np.random.default_rng(7)
    f1, f2 = rng.standard_normal((2, A.shape[0]))
    alone = kcycle.AggregationMG(A, np, kcycle.Options(cycle=cycle, aggregation="pairwise", coarse_size=1000))
    assert len(alone.levels) == 1
    u1 = alone.cycle(f1)
    u2 = alone.cycle(f2)
    dense = A.toarray()
    for u, f in ((u1, f1), (u2, f2)):
        assert np.linalg.norm(dense @ u - f) <= 1e-10 * np.linalg.norm(f)
    opts = kcycle.Options(cycle=cycle, aggregation="pairwise", coarse_size=4)
    mg, fresh = kcycle.AggregationMG(A, np, opts), kcycle.AggregationMG(A, np, opts)
    assert len(mg.levels) >= 3 and mg.coarse.solve(f1[:mg.coarse.n]) is mg.coarse.solve(f2[:mg.coarse.n])
    solve = fresh.coarse.solve
    fresh.coarse.solve = lambda f: solve(f).copy()
    assert np.array_equal(mg.cycle(f1), fresh.cycle(f1))


def test_complex_kcycle_steps_on_complex_energies():
    """The K-cycle's flexible CG on a complex symmetric matrix (a shifted Laplacian, shift
    0.2 + 0.5i): its energies (p, A p) are complex, and each nonzero one gives a step
    (products.energy). Skipping those with a negative real part (NumPy's order of complex numbers,
    the guard's first form) left Richardson at 3e-3 after 8 cycles; with the steps, 5e-5."""
    import scipy.sparse

    n = 48
    A = (laplacian((n, n)) + (0.2 + 0.5j) * scipy.sparse.identity(n * n)).tocsr()
    xy = np.stack([c.ravel() for c in np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float))], 1)
    mg = kcycle.AggregationMG(A, np, kcycle.Options(aggregation="auxgrid", cycle="k"), xy)
    rng = np.random.default_rng(0)
    b = rng.random(n * n) + 1j * rng.random(n * n)
    u = np.zeros(n * n, complex)
    for _ in range(8):
        u += mg.cycle(b - A @ u)
    assert np.linalg.norm(b - A @ u) <= 3e-4 * np.linalg.norm(b)
