"""The auxiliary grid's aggregates (core/auxgrid.py) on the index grids of boxes."""
import numpy as np
import pytest

from pcplugins.core import auxgrid


def index_grid(shape):
    return np.indices(shape).reshape(len(shape), -1).T.astype(np.float64)


@pytest.mark.parametrize("shape", [(64, 64, 64), (128, 32, 32), (31, 63, 127), (256, 64), (1000, 37), (50, 1, 40)])
def test_auxgrid_leaf_aggregates_are_as_wide_along_every_axis(shape):
    """Cubic cells: on a box k times as long as wide a leaf aggregate spans as many points along
    the long axis as along the others (cells of the box's proportions made 2k x 2 x 2 ones), and
    holds about 2^dim of them where the box is at least 2 points wide."""
    coords = index_grid(shape)
    aggs, sizes, *_ = auxgrid.auxgrid(coords, np, coarse_size=10, max_levels=10)
    agg = aggs[0]
    order = np.argsort(agg, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(agg, minlength=sizes[1]))[:-1]]
    dims = [a for a, m in enumerate(shape) if m > 1]
    # each aggregate's extent along each axis the box extends along (points apart)
    spans = np.array([np.maximum.reduceat(coords[order, a], starts) - np.minimum.reduceat(coords[order, a], starts)
                      for a in dims])
    typical = np.median(spans, axis=1)
    assert typical.max() - typical.min() <= 1, (shape, typical)
    per_aggregate = sizes[0] / sizes[1]
    assert 2 ** len(dims) / 2 <= per_aggregate <= 2 ** len(dims) * 2, (shape, per_aggregate)


@pytest.mark.parametrize("shape", [(33, 20), (17, 9, 12)])
def test_auxgrid_restrictions_are_the_members_of_its_aggregates(shape):
    """auxgrid makes each level's restriction from the sort that numbers its cells: the same
    matrix as sparse.members(agg) (members in order, aggregates numbered by their cells' keys,
    none empty), on shuffled vertices so that the sort has work to do."""
    from pcplugins.core import sparse
    coords = index_grid(shape)[np.random.default_rng(2).permutation(int(np.prod(shape)))]
    aggs, sizes, _, members = auxgrid.auxgrid(coords, np, coarse_size=4, max_levels=10)
    assert len(aggs) == len(members) >= 2
    for agg, nc, n, R in zip(aggs, sizes[1:], sizes, members):
        ref = sparse.members(agg, nc, np)
        assert R.shape == ref.shape == (nc, n) and np.bincount(agg, minlength=nc).min() >= 1
        assert (R.indptr == ref.indptr).all() and (R.indices == ref.indices).all() and (R.data == ref.data).all()
