"""Smoothed aggregation's pieces (core/smoothed.py) against their definitions: the distance-k
maximal independent sets, the aggregates about them, and the smoothed prolongation."""
import numpy as np
import pytest
import scipy.sparse as sp

from pcplugins.core import kcycle, nullspace, smoothed

from conftest import laplacian


def within(S, distance):
    """The boolean pattern of the nodes within ``distance`` of each other (the diagonal included)."""
    G = (abs(S) + sp.identity(S.shape[0])).astype(bool).astype(int)
    N = G
    for _ in range(distance - 1):
        N = N @ G
    return N.astype(bool).astype(int)


CASES = {"2d-odd": laplacian((31, 31)), "2d-even": laplacian((32, 32)), "3d-box": laplacian((12, 7, 9)),
         "1d": laplacian((50,))}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("distance", [1, 2])
def test_mis_is_independent_and_maximal(case, distance):
    """No two roots within ``distance`` of each other, and every node within ``distance`` of a root."""
    S = smoothed.strong_graph(CASES[case], 0.0, np)
    root = smoothed.mis(S, np, distance)
    cover = within(S, distance) @ root.astype(int)
    assert (cover[root] == 1).all()
    assert (cover > 0).all()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("distance", [1, 2])
def test_aggregates_are_connected_about_their_roots(case, distance):
    """Every node is in an aggregate; an aggregate holds one root, and each member is the root's
    neighbour or (distance 2) a neighbour's neighbour joined through a member."""
    A = CASES[case]
    S = smoothed.strong_graph(A, 0.0, np)
    agg, nc = smoothed.aggregates(S, np, distance)
    root = smoothed.mis(S, np, distance)
    assert (agg >= 0).all() and agg.max() == nc - 1 and nc == root.sum()
    assert (agg[root] == np.arange(nc)).all()             # numbered in the order of their roots
    near = within(S, 2 if distance == 2 else 1)
    roots = np.flatnonzero(root)
    # each node within 2 (distance 2: joined to a root's neighbour) or 1 of its own root
    assert near[np.arange(len(agg)), roots[agg]].all()
    if distance == 2:                                     # standard aggregates: most have 2^dim or more
        assert len(agg) / nc >= 2


def test_isolated_nodes_are_in_no_aggregate():
    """Identity rows (Dirichlet nodes kept as unknowns) and nodes of weak couplings only are left
    out (aggregate -1): the smoother solves them."""
    A = laplacian((10, 10)).tolil()
    for i in (0, 37, 99):
        A[i, :] = 0
        A[:, i] = 0
        A[i, i] = 1.0
    S = smoothed.strong_graph(A.tocsr(), 0.0, np)
    agg, nc = smoothed.aggregates(S, np, 2)
    assert (agg[[0, 37, 99]] == -1).all() and (np.delete(agg, [0, 37, 99]) >= 0).all()
    weak = smoothed.strong_graph(A.tocsr(), 0.6, np)         # every coupling 0.5: all dropped
    assert weak.nnz == 0 and (smoothed.aggregates(weak, np, 2)[0] == -1).all()


def test_nonsymmetric_strength_is_symmetric():
    """The strength graph of an upwind matrix is symmetric (so roots are independent both ways)."""
    A = laplacian((20, 20)) + sp.diags([-0.5], [1], (400, 400))
    S = smoothed.strong_graph(A.tocsr(), 0.0, np)
    assert abs(S - S.T).max() == 0
    root = smoothed.mis(S, np, 2)
    assert (within(S, 2) @ root.astype(int))[root].max() == 1


def test_smoothed_prolongation_is_the_damped_jacobi_step():
    """P = (I - 4/3 / rho D^-1 A) P_tent, rho Gershgorin's bound on rho(D^-1 A), against the
    dense product; on the Laplacian the bound is rho's (2)."""
    A = laplacian((15, 15))
    S = smoothed.strong_graph(A, 0.0, np)
    agg, nc = smoothed.aggregates(S, np, 2)
    Pt, _, _ = nullspace.tentative(agg, nc, np.ones((A.shape[0], 1)), 1, np)
    rho = smoothed.gershgorin(A, np)
    assert rho == pytest.approx(2.0)
    D = np.diag(A.diagonal())
    want = (np.eye(A.shape[0]) - 4 / 3 / rho * np.linalg.solve(D, A.toarray())) @ Pt.toarray()
    assert np.allclose(smoothed.smooth(A, Pt, np).toarray(), want, atol=1e-14)


def _rate(A, **options):
    """The residual's mean reduction a cycle over 8 cycles of the stationary iteration x += B (b - A x)."""
    mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", **options))
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    x = np.zeros_like(b)
    for _ in range(8):
        x += mg.cycle(b - A @ x)
    return (np.linalg.norm(b - A @ x) / np.linalg.norm(b)) ** (1 / 8), mg


@pytest.mark.parametrize("shape", [(63, 63), (64, 64), (100, 37), (17, 16, 15), (127, 127)])
def test_smoothed_aggregation_hierarchy_converges(shape):
    """The smoothed hierarchy of the Laplacian (W-cycle, Gauss-Seidel (1, 1)) coarsens to the
    coarse size, and its cycle reduces the true residual by 2x or more (measured 0.36-0.45, the
    same at 63^2 and 127^2; pyamg's smoothed aggregation 0.30 at 63^2) and by 0.8x the cycle of the
    same aggregates unsmoothed (0.52-0.68)."""
    A = laplacian(shape)
    rate, mg = _rate(A, nsmooths=1)
    assert mg.method == "mis" and mg.levels[0].P is not None and mg.levels[-1].n <= 400
    unsmoothed, plain = _rate(A, aggregation="mis", nsmooths=0)
    # the same aggregates, their tentative prolongation unsmoothed: one entry a row
    assert plain.levels[0].P.nnz == A.shape[0] and mg.levels[0].P.nnz > A.shape[0]
    assert [lev.n for lev in plain.levels][:2] == [lev.n for lev in mg.levels][:2]
    assert rate < 0.5 and rate < 0.8 * unsmoothed, (rate, unsmoothed)


def test_asymmetry_and_positive_couplings():
    """The two measures the default's choice reads, against their definitions: on a symmetric
    pattern (compared in place) and on an unsymmetric one (the sums of sparse matrices)."""
    A = laplacian((9, 8)).tolil()
    A[3, 4] -= 0.5
    A[10, 50] = -0.25                          # no mirror entry: an unsymmetric pattern
    for M in (A.tocsr(), laplacian((9, 8)) + sp.diags([-0.3], [1], (72, 72)).tocsr()):
        M = M.tocsr()
        want = sp.linalg.norm(M - M.T) / sp.linalg.norm(M + M.T)
        assert smoothed.measures(M, np)[0] == pytest.approx(want, rel=1e-12)
    L = laplacian((9, 8))
    assert smoothed.measures(L, np) == (0, 0)
    a, b = np.divmod(np.arange(72), 8)
    d = np.where((a + b) % 2 == 0, -1.0, 1.0)          # red-black signs: every coupling positive
    assert smoothed.measures((sp.diags(d) @ L @ sp.diags(d)).tocsr(), np)[1] == pytest.approx(1.0)


def test_constant_residual():
    """The rows' sums over their weight, over the rows that couple to others: 0 for a Laplacian's
    rows that sum to zero (identity rows left out), 1 for red-black signs (every coupling positive,
    each interior row summing to its whole weight), and the explicit sums for one changed row; a
    rank's ghost block adds its rows' couplings."""
    L = laplacian((9, 8)).tolil()
    for i in range(72):                                 # rows that sum to zero, one identity row
        L[i, i] = -L[i].sum() + L[i, i]
    L[0, :] = 0
    L[0, 0] = 1.0
    L = L.tocsr()
    assert smoothed.constant_residual(L, np) == pytest.approx(0, abs=1e-15)
    M = L.tolil()
    M[5, 5] += 2.0
    M = M.tocsr()
    coupled = np.flatnonzero(abs(M).sum(axis=1).A1 > abs(M.diagonal()))
    want = abs(M @ np.ones(72))[coupled].sum() / abs(M).sum(axis=1).A1[coupled].sum()
    assert smoothed.constant_residual(M, np) == pytest.approx(want, rel=1e-12) and want > 0
    a, b = np.divmod(np.arange(72), 8)
    d = np.where((a + b) % 2 == 0, -1.0, 1.0)
    R = laplacian((9, 8))
    full = smoothed.constant_residual((sp.diags(d) @ R @ sp.diags(d)).tocsr(), np)
    assert full > 0.9
    own, ghost = L[:, :40].tocsr()[:40], L[:40, 40:].tocsr()
    assert smoothed.constant_residual(own, np, ghost) == pytest.approx(0, abs=1e-15)
    assert smoothed.constant_residual(own, np) > 0.01


def test_positive_couplings_on_rows_that_sum_to_zero():
    """Where the GPU smooths too (smoothed._positive_rows_residual at most CONSTANT): ksp ex3's
    matrix (positive corner couplings on rows that sum to zero); not the Laplacian (no positive
    coupling) nor D A D (rows far from summing to zero)."""
    from problems import zero_sum_q1

    def gpu_smooths(A):
        residual = smoothed._positive_rows_residual(A, np)
        return residual is not None and residual <= smoothed.CONSTANT
    L = laplacian((9, 8))
    d = np.where(np.random.default_rng(1).random(72) < 0.3, -1.0, 1.0)
    assert gpu_smooths(zero_sum_q1(16))
    assert not gpu_smooths(L)
    assert not gpu_smooths((sp.diags(d) @ L @ sp.diags(d)).tocsr())


def upwind(n, peclet):
    """2D first-order upwind convection-diffusion on n^2 points, the wind (1, 1/2) at cell Peclet
    number ``peclet`` (examples/problems.py's form): nonsymmetric, an M-matrix."""
    T = lambda w: sp.diags([-1.0 - 2 * w, 2.0 + 2 * w, -1.0], [-1, 0, 1], (n, n))   # noqa: E731
    one = sp.identity(n)
    return (sp.kron(one, T(peclet)) + sp.kron(T(peclet / 2), one)).tocsr()


@pytest.mark.parametrize("A,kind", [(laplacian((12, 11)), "symmetric"), (laplacian((6, 7, 5)), "symmetric"),
                                    (upwind(15, 1.0), "capped"), (upwind(14, 10.0), "far")],
                         ids=["2d", "3d", "peclet1", "peclet10"])
def test_chebyshev_bound(A, kind):
    """CSRChebyshev's upper end b covers the spectral radius of D^-1 A. On a symmetric matrix it is
    1.1 times CG's Lanczos estimate. On a nearly symmetric one (|A - A^T| / |A + A^T| 0.2 here)
    that estimate overshoots (18x Gershgorin's bound here) and the bound caps it; far from
    symmetric (0.4) the estimate stays (the polynomial's small steps keep it convergent)."""
    from pcplugins.core.smoothers import CSRChebyshev, lanczos_lambda_max
    from pcplugins.core.smoothers.stencil import NEAR_SYMMETRIC, probe_vector
    d = A.diagonal()
    radius = np.abs(np.linalg.eigvals(A.toarray() / d[:, None])).max()
    S = CSRChebyshev(A, np)
    lam = lanczos_lambda_max(lambda p: A @ p, 1.0 / d, np.array(probe_vector((0,), (A.shape[0],))),
                             lambda x, y: float(x @ y), 12)
    bound = smoothed.gershgorin(A, np)
    asymmetry = smoothed.measures(A, np)[0]
    assert S.b >= 1.1 * 0.9 * radius and S.a == pytest.approx(0.1 * S.b)
    if kind == "symmetric":
        assert asymmetry == 0 and lam <= bound and S.b == pytest.approx(1.1 * lam)
    elif kind == "capped":
        assert asymmetry <= NEAR_SYMMETRIC and lam > 2 * bound and S.b == pytest.approx(1.1 * bound)
    else:
        assert asymmetry > NEAR_SYMMETRIC and lam > 2 * bound and S.b == pytest.approx(1.1 * lam)


class _Counted:
    """A matrix that counts its products (products.residual's A @ u on the host)."""

    def __init__(self, A):
        self.A, self.products = A, 0

    def __matmul__(self, u):
        self.products += 1
        return self.A @ u


@pytest.mark.parametrize("sweeps", [1, 2, 3])
def test_chebyshev_from_zero_skips_the_first_product(sweeps):
    """From a zero guess the first Chebyshev step's residual is f itself: the same iterate as the
    steps from an explicit zero, one product of A fewer."""
    from pcplugins.core.smoothers import CSRChebyshev
    A = upwind(9, 0.5)
    f = np.random.default_rng(3).standard_normal(A.shape[0])
    S = CSRChebyshev(A, np)
    S.A = counted = _Counted(A)
    u0 = S.smooth(np.zeros_like(f), f, sweeps)
    full = counted.products
    u1 = S.smooth(np.full_like(f, np.nan), f, sweeps, zero_guess=True)
    assert full == sweeps and counted.products - full == sweeps - 1
    assert np.allclose(u1, u0, rtol=1e-14, atol=1e-14)


def _measure(X, keep):
    """||X - X^T||_F / ||X + X^T||_F over the kept couplings, densely (the definition)."""
    X = X.toarray() * keep
    s = np.linalg.norm(X + X.T)
    return np.linalg.norm(X - X.T) / s if s else 0.0


@pytest.mark.parametrize("pattern", ["symmetric", "nonsymmetric"])
@pytest.mark.parametrize("base", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_diagonal_scaling_measures_match_their_definition(pattern, base, dtype):
    """diagonal_scaling's asymmetries before and after D^-1 (the rows scaled by ``base`` first, or
    not) are ||X - X^T|| / ||X + X^T|| over the couplings of rows that are more than their
    diagonal: the shared rows and kept entries give what each measure computes alone. Identity
    rows (boundary values) with entries in other rows' columns, a symmetric or a one-sided
    pattern, real and complex values."""
    rng = np.random.default_rng(3)
    n = 40
    A = laplacian((8, 5)).astype(dtype).tolil()
    for i in range(n):                          # rows of their own scale: D^-1 A is not A's multiple
        A[i, :] = A[i, :] * (1 + 3 * rng.random())
    if pattern == "nonsymmetric":
        A[3, 17] = -0.4
    A[0, :] = 0
    A[0, 0] = 2.0                               # an identity row; its column keeps couplings
    A = A.tocsr()
    if dtype == np.complex128:
        A.data = A.data + 0.1j * rng.standard_normal(A.nnz) * (A.data != 0)
    d = A.diagonal()
    scale = 1 + rng.random(n) if base else None
    _, before, after = smoothed.diagonal_scaling(A, d, np, scale)
    lone = np.asarray(abs(A).sum(axis=1)).ravel() - abs(d) == 0
    keep = ~(lone[:, None] | lone[None, :])
    S = sp.diags(scale) @ A if base else A
    assert before == pytest.approx(_measure(S, keep), rel=1e-12, abs=1e-15)
    assert after == pytest.approx(_measure(sp.diags(1 / d) @ A, keep), rel=1e-12, abs=1e-15)
    assert after > 0 and (pattern == "nonsymmetric" or base or before > 0)


def _dirichlet_rows(m, bs=1):
    """The 5-point Laplacian on (m + 2)^2 points with identity rows on the boundary, as ksp ex45
    assembles it: the interior rows keep their couplings to the boundary points, so the four
    corners are coupled to nothing; ``bs`` > 1: that many copies, interleaved node by node."""
    n = m + 2
    A = sp.lil_matrix((n * n, n * n))
    for i in range(n):
        for j in range(n):
            k = i * n + j
            if i in (0, n - 1) or j in (0, n - 1):
                A[k, k] = 1.0
                continue
            A[k, k] = 4.0
            for q in (k - 1, k + 1, k - n, k + n):
                A[k, q] = -1.0
    return sp.kron(A.tocsr(), sp.identity(bs), format="csr")


@pytest.mark.parametrize("bs", [1, 2])
@pytest.mark.parametrize("nsmooths", [0, 1])
def test_mis_leaves_nodes_coupled_to_nothing_out(bs, nsmooths):
    """mis aggregates put no node coupled to nothing (a corner's identity row) in an aggregate; the
    hierarchy gives it an empty row of the tentative prolongation, unsmoothed as smoothed, scalar
    as a system of components (aggregates of the components would send it to coarse unknown -bs:
    a SciPy ValueError at setup on ksp ex45 and ex55 with -pc_amg_aggregation mis). The cycle
    converges to the direct solve's answer."""
    A = _dirichlet_rows(30, bs)
    mg = kcycle.AggregationMG(A, np, kcycle.Options(cycle="w", aggregation="mis", nsmooths=nsmooths, coarse_size=40),
                              block_size=bs)
    assert len(mg.levels) >= 3 and mg.levels[0].P is not None
    empty = np.diff(mg.levels[0].P.indptr) == 0
    assert empty.sum() == 4 * bs                  # the corners' unknowns, and only they
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    x = np.zeros_like(b)
    for _ in range(80):                          # unsmoothed: about 0.7 a cycle
        x += mg.cycle(b - A @ x)
    exact = sp.linalg.spsolve(A.tocsc(), b)
    assert np.linalg.norm(x - exact) <= 1e-8 * np.linalg.norm(exact)
