"""The host twins of the pairwise matching, and the host hierarchy renumbered colour by colour
(core/colouring.py): the same pairs, and the same cycle, as without them."""
import numpy as np
import pytest
import scipy.sparse

from pcplugins.core import aggregation, colouring, kcycle, nullspace, sparse

from conftest import amg_galerkin_error, cell_levels, colour_graphs
from problems import convection_diffusion


def _matrices():
    """A 2D Laplacian, upwind convection (nonsymmetric), D A D (positive couplings), a random
    nonsymmetric pattern, all as int32 CSR."""
    rng = np.random.default_rng(3)
    A = convection_diffusion(31, 1.0, 2)
    D = scipy.sparse.diags(rng.choice([-1.0, 1.0], A.shape[0]))
    out = {"laplace": convection_diffusion(33, 0.0, 2), "convection": convection_diffusion(17, 10.0, 3),
           "signed": D @ A @ D, "random": colour_graphs()["random"]}
    for name, M in out.items():
        M = scipy.sparse.csr_matrix(M)
        M.indices, M.indptr = M.indices.astype(np.int32), M.indptr.astype(np.int32)
        out[name] = M
    return out


def _rounds(S, score, rounds=4):
    """The matching's rounds as whole-array operations (the device kernels' rule): every unmatched
    unknown picks its unmatched neighbour of the largest score, the last of equal ones; mutual
    picks pair."""
    n = S.shape[0]
    rows, cols = np.repeat(np.arange(n), np.diff(S.indptr)), S.indices
    partner, i = np.full(n, -1), np.arange(n)
    for _ in range(rounds):
        free = partner < 0
        s = np.where(free[rows] & free[cols], score, 0.0)
        best = sparse.row_max(s, S, np)
        pick = (s > 0) & (s == best[rows])
        choice = np.full(n, -1)
        choice[rows[pick]] = cols[pick]
        mutual = (choice >= 0) & (choice[np.maximum(choice, 0)] == i)
        partner = np.where(mutual, choice, partner)
    return partner


@pytest.mark.parametrize("case", ["laplace", "convection", "signed", "random"])
def test_host_matching_pairs_as_the_device_rounds(case):
    """_match_host (the strong edges whose ends are free, a segmented maximum) finds the pairs of
    the device's rounds (written here with whole arrays)."""
    A = _matrices()[case]
    S = aggregation.strength(A, np)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(S.indptr))
    score = aggregation.pair_scores(S, 0.25, np)
    strong = score > 0
    host = aggregation._match_host(A.shape[0], rows[strong], S.indices[strong], score[strong], 4)
    assert (host >= 0).sum() > A.shape[0] / 2            # most unknowns are paired
    assert np.array_equal(host, _rounds(S, score))


def test_aggregates_numbered_by_their_representatives():
    """pair_matching numbers the aggregates as numpy.unique numbers their lower unknowns, and
    its restriction is sparse.members of them (made from the pairs, with no sort)."""
    from pcplugins.core import sparse
    A = _matrices()["convection"]
    agg, nc, _, R = aggregation.pair_matching(A, np)
    ref = sparse.members(agg, nc, np)
    assert (R.indptr == ref.indptr).all() and (R.indices == ref.indices).all() and (R.data == ref.data).all()
    assert (np.diff(R.indptr) == 2).sum() > nc / 2 and (np.diff(R.indptr) == 1).any()    # pairs and singletons
    S = aggregation.strength(A, np)
    partner = _rounds(S, aggregation.pair_scores(S, 0.25, np))
    i = np.arange(A.shape[0])
    _, want = np.unique(np.where(partner >= 0, np.minimum(i, partner), i), return_inverse=True)
    assert nc == want.max() + 1 and np.array_equal(agg, want)


def test_hierarchies_without_positive_couplings_take_no_signs():
    """An M-matrix's Galerkin levels have no positive coupling either (each sums A's couplings),
    so pairwise() checks the finest level once and no level of its hierarchy has signs, as
    when every pass looked; D A D (D = diag(+-1)) has them, and its passes take signs."""
    A = scipy.sparse.csr_matrix(convection_diffusion(33, 10.0, 2))
    assert not aggregation.positive_couplings(A, np)
    aggs, sizes, Acs, signs, _ = aggregation.pairwise(A, np, coarse_size=20, max_levels=10)
    assert len(Acs) >= 3 and all(s is None for s in signs)
    assert not any(aggregation.positive_couplings(C, np) for C in Acs)
    Ak = A
    for agg, C in zip(aggs, Acs):            # every pass asked for its signs: none, the same levels
        a, nc, s, _ = aggregation.pair_matching(Ak, np)
        assert s is None
        Ak = sparse.galerkin(Ak, a, nc, np)
        a2, nc2, s2, _ = aggregation.pair_matching(Ak, np)
        assert s2 is None and np.array_equal(a2[a], agg)
        Ak = sparse.galerkin(Ak, a2, nc2, np)
        assert abs(Ak - C).max() == 0
    d = np.where(np.random.default_rng(5).random(A.shape[0]) < 0.5, -1.0, 1.0)
    B = (scipy.sparse.diags(d) @ A @ scipy.sparse.diags(d)).tocsr()
    assert aggregation.positive_couplings(B, np)
    assert aggregation.pairwise(B, np, coarse_size=20, max_levels=10)[3][0] is not None


def test_row_max_on_the_host():
    """sparse.row_max: each row's largest value, 0 on an empty row."""
    A = scipy.sparse.random(300, 300, density=0.03, format="csr", random_state=7)
    A.data[A.indptr[17]:A.indptr[18]] = 0
    A.eliminate_zeros()
    v = np.random.default_rng(1).random(A.nnz)
    B = scipy.sparse.csr_matrix((v, A.indices, A.indptr), shape=A.shape)
    assert np.array_equal(sparse.row_max(v, A, np), B.toarray().max(axis=1))


def _unchanged(mats, aggs, signs, colours, transfers, members):
    return mats, aggs, signs, colours, transfers, members, [None] * len(mats)


@pytest.mark.parametrize("case", ["pairwise", "auxgrid", "system"])
@pytest.mark.parametrize("cycle", ["w", "k"])
def test_colour_order_keeps_the_cycle(case, cycle, monkeypatch):
    """The host hierarchy renumbered colour by colour (each level's colours a slice of its
    vectors) gives the cycle of the hierarchy in the matrix's numbering, and stays Galerkin."""
    if case == "system":
        from elasticity import q1_elasticity
        A, xy, _ = q1_elasticity(12, 2)
        A = scipy.sparse.csr_matrix(A)
        kw = dict(block_size=2, near_null=nullspace.rigid_body_modes(xy, np))
        opts = kcycle.Options(aggregation="pairwise", cycle=cycle, coarse_size=40)
    else:
        n = 40
        A = convection_diffusion(n, 0.5, 2).tocsr()
        xy = np.indices((n, n)).reshape(2, -1)[::-1].T.astype(float)
        kw = dict(coords=xy if case == "auxgrid" else None)
        opts = kcycle.Options(aggregation=case, cycle=cycle, coarse_size=40)
    f = np.random.default_rng(4).random(A.shape[0])
    mg = kcycle.AggregationMG(A, np, opts, **kw)
    assert all(o is not None for o in mg.orders[:-1]) and len(mg.levels) >= 3
    for lev, nxt in zip(mg.levels[:-1], mg.levels[1:]):
        assert all(isinstance(idx, slice) for idx, _, _ in lev.smoother.parts)
        if lev.agg is not None:           # the restriction renumbered with its level: P^T, signs and all
            assert abs(lev.R - sparse.members(lev.agg, nxt.n, np, lev.sign)).max() == 0
    assert amg_galerkin_error(mg) <= 1e-12
    monkeypatch.setattr(colouring, "colour_order", _unchanged)
    ref = kcycle.AggregationMG(A, np, opts, **kw)
    assert [lev.n for lev in ref.levels] == [lev.n for lev in mg.levels]
    for run in (lambda m: m.cycle(f), lambda m: m.correction(f)):
        got, want = run(mg), run(ref)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())


def test_hash_edge_is_symmetric_and_the_32_bit_hash():
    """aggregation.hash_edge against the hash written with Python integers (each product taken
    modulo 2^32), for int32 and int64 indices up to 2^31 - 1; hash_edge(i, j) = hash_edge(j, i)."""
    def ref(i, j):
        lo, hi = min(i, j), max(i, j)
        h = (lo * 0x9E3779B1 + hi * 0x85EBCA77) % 2 ** 32
        h ^= h >> 15
        h = (h * 0x2C1B3C6D) % 2 ** 32
        h ^= h >> 12
        return h & 0xFFFFF
    rng = np.random.default_rng(5)
    for dtype in (np.int32, np.int64):
        i = np.r_[0, 2 ** 31 - 1, rng.integers(0, 2 ** 31 - 1, 300)].astype(dtype)
        j = np.r_[2 ** 31 - 1, 0, rng.integers(0, 2 ** 31 - 1, 300)].astype(dtype)
        got = aggregation.hash_edge(i, j, np)
        assert got.dtype == np.int64 and np.array_equal(got, aggregation.hash_edge(j, i, np))
        assert got.tolist() == [ref(int(a), int(b)) for a, b in zip(i, j)]


@pytest.mark.parametrize("case", ["2D", "3D", "odd 2D", "odd 3D", "graded", "long"])
def test_cell_layout_slots(case, monkeypatch):
    """smoothers.csr.cell_layout: every row once, colour by colour from multiples of
    products.BLOCK, each cell's rows in a slot of their number rounded up to a power of 2,
    starting at a multiple of it (so within one block), -1 padding after them; where every
    same-colour coupling is within a cell (not the long coupling's) the rows of a
    colour couple within blocks only; relax_rows on a colour's slots, padding and all, is the
    sweep of its rows. None for cells of more than CELL_SLOTS rows, or for more than 64 colours."""
    from pcplugins.core import products
    from pcplugins.core.smoothers import csr
    A, colours, cells = cell_levels()[case]
    n, k = A.shape[0], int(colours.max()) + 1
    members = sparse.members(cells, int(cells.max()) + 1, np)
    rows, bounds = csr.cell_layout(colours, members, np)
    assert len(bounds) == k + 1
    assert np.array_equal(np.sort(rows[rows >= 0]), np.arange(n)) and bounds[-1] == rows.size
    assert (bounds % products.BLOCK == 0).all() and rows.size < 2 * n + k * products.BLOCK
    at = np.empty(n, int)
    at[rows[rows >= 0]] = np.flatnonzero(rows >= 0)
    sizes = np.bincount(cells)
    for c in np.unique(cells):
        p = np.sort(at[cells == c])
        w = 1 << int(sizes[c] - 1).bit_length()
        assert np.array_equal(p, p[0] + np.arange(sizes[c])) and p[0] % w == 0
        assert (rows[p[0] + sizes[c]:p[0] + w] == -1).all()
    for a, b, c in zip(bounds[:-1], bounds[1:], range(k)):
        part = rows[a:b]
        assert (colours[part[part >= 0]] == c).all()
    assert sizes.max() == {"2D": 4, "3D": 8, "odd 2D": 6, "odd 3D": 12, "graded": 9, "long": 4}[case]
    r, c = A.nonzero()
    same = (colours[r] == colours[c]) & (r != c)
    assert (cells[r] != cells[c])[same].any() == (case == "long")
    # relax_rows on the layout's rows (-1: padding, an empty row) is the sweep of the colour's rows
    rng = np.random.default_rng(2)
    u, f, scale = rng.standard_normal(n), rng.standard_normal(n), rng.random(rows.size)
    for a, b in zip(bounds[:-1], bounds[1:]):
        part, live = rows[a:b], rows[a:b] >= 0
        got = products.relax_rows(u.copy(), f, sparse.gathered_rows(A, part, np), part, scale[a:b], np, blocks=True)
        want = products.relax_rows(u.copy(), f, A[part[live]], part[live], scale[a:b][live], np)
        assert np.array_equal(got, want)
    assert csr.cell_layout(np.where(colours == 0, 64, colours), members, np) is None     # 65 colours
    monkeypatch.setattr(csr, "CELL_SLOTS", int(sizes.max()) - 1)
    assert csr.cell_layout(colours, members, np) is None
