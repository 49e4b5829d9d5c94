"""pcplugins.GMG on every grid size: odd, even, prime and box grids keep the star stencil and the
fast path on every level (stencil.AxisLaplacian on the coarse levels of an even axis), with the
iteration counts of the nearest 2^k - 1 grid, against a direct solve."""
import math

import numpy as np
import pytest
import scipy.sparse.linalg

from pcplugins.core import grid, multigrid, stencil

SHAPES = [(64, 64), (100, 100), (101, 97), (6, 6), (1000, 37), (16, 16, 16), (20, 26, 14), (17, 24, 33),
          (3, 3, 200), (13, 20, 11)]


def nearest_uniform(m):
    """The 2^k - 1 nearest m."""
    return min((2 ** k - 1 for k in range(2, 14)), key=lambda u: abs(u - m))


def solve(shape, weights=None, rtol=1e-10):
    box = grid.Box(shape)
    op = stencil.laplacian(box, weights or [-1.0] * len(shape), np)
    mg = multigrid.Multigrid(op)
    f = np.random.default_rng(0).standard_normal(shape)
    u, its, hist = mg.solve(f, rtol=rtol, maxit=60)
    return mg, op, f, grid.interior(u), its


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_size_keeps_star_stencils_and_the_counts(shape):
    mg, op, f, u, its = solve(shape)
    d = len(shape)
    assert all(lev.op.nnz_per_row == 2 * d + 1 for lev in mg.levels), [lev.op.nnz_per_row for lev in mg.levels]
    if any(m % 2 == 0 for m in shape) and len(mg.levels) > 2:
        assert any(isinstance(lev.op, stencil.AxisLaplacian) for lev in mg.levels)
        assert any("constant but for the last cell" in line for line in mg.describe())
    exact = scipy.sparse.linalg.spsolve(op.to_scipy().tocsc(), f.ravel()).reshape(shape)
    assert np.linalg.norm(u - exact) <= 1e-8 * np.linalg.norm(exact)
    ref = solve(tuple(nearest_uniform(m) for m in shape), rtol=1e-10)[4]
    assert its <= ref + 1, (its, ref)


def test_odd_grids_stay_uniform():
    """The 2^k - 1 grids are unchanged: constant stencils on every level, no non-uniform cell."""
    mg = solve((63, 31, 15))[0]
    assert all(lev.op.constant for lev in mg.levels)
    assert all(lev.transfer is None or lev.transfer.omegas is None for lev in mg.levels)


@pytest.mark.parametrize("m,levels", [(64, 5), (100, 6), (257, 7), (96, 5)])
def test_ratios_follow_the_last_cell(m, levels):
    """The last cell of each coarse axis is where the coarse points leave it: after k
    coarsenings its width is (m + 1) - 2^k (M + 1) fine spacings for M coarse points, in units of
    the coarse spacing 2^k; the transfer's omega is r / (1 + r) on an odd axis."""
    mg = multigrid.Multigrid(stencil.laplacian(grid.Box((m, 3)), [-1.0, -1.0], np), multigrid.Options(levels=levels))
    for k, lev in enumerate(mg.levels[1:], start=1):
        M = lev.box.global_shape[0]
        r = ((m + 1) - 2 ** k * M) / 2 ** k
        got = lev.op.ratios[0] if isinstance(lev.op, stencil.AxisLaplacian) else 1.0
        assert math.isclose(got, r), (k, got, r)


def test_axis_laplacian_is_symmetric_and_the_odd_stencil_inside():
    box = grid.Box((12, 9, 10))
    op = stencil.AxisLaplacian(box, [-1.0, -2.0, -0.5], [0.25, 1.0, 0.75], np)
    A = op.to_scipy()
    assert "coefs" not in op.__dict__                   # the matrix came from host-made arrays
    assert abs(A - A.T).max() < 1e-14
    assert np.array_equal(op.to_dense(), (op.coefs, A.toarray())[1])   # and equals the level's own
    ref = stencil.laplacian(box, [-1.0, -2.0, -0.5], np).to_scipy()
    inside = np.ones(box.shape, bool)
    inside[-1, :, :] = inside[:, :, -1] = False          # the axes with a short last cell
    rows = np.flatnonzero(inside.ravel())
    assert abs(A[rows] - ref[rows]).max() < 1e-14


def test_anisotropic_even_box():
    mg, op, f, u, its = solve((40, 24), weights=[-1.0, -100.0])
    mg_odd = solve((39, 23), weights=[-1.0, -100.0])[4]
    assert its <= mg_odd + 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pair_tile_fits_the_row(dtype):
    """relax_pair's tile width (fused.pair_tile): rows of 128, 255 and 256 points keep the widest
    tile, 200 takes five of 40 (no idle thread), and no row launches more warps than with the
    widest tile."""
    from pcplugins.core import fused
    rows = fused.PAIR_ROWS[dtype]

    def warps(n2, w):
        return -(-n2 // w) * -(-(w // 2) * rows // 32)
    assert fused.pair_tile(255, dtype) == fused.pair_tile(256, dtype) == fused.pair_tile(128, dtype) == 64
    assert fused.pair_tile(200, dtype) == 40
    for n2 in range(3, 700):
        w = fused.pair_tile(n2, dtype)
        assert w % 2 == 0 and 32 <= w <= fused.PAIR_X
        assert warps(n2, w) <= warps(n2, fused.PAIR_X)
