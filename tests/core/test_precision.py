"""A cycle in another precision than its hierarchy's (kcycle.Options.dtype, -pc_amg_precision
single), without PETSc: sparse.astype keeps index arrays and casts values, the levels are built in
the cycle's type, and the cycle is the double one rounded."""
import numpy as np
import pytest
import scipy.sparse

from pcplugins.core import kcycle, sparse

from conftest import laplacian


def test_astype_casts_values_and_shares_indices():
    """CSR and ELL: values in the new type, the same index arrays; real values of a complex type
    in its real type; None, integer arrays and an unchanged type stay the objects they were."""
    A = laplacian((6, 5))
    C = sparse.astype(A, np.float32)
    assert C.dtype == np.float32 and np.shares_memory(C.indices, A.indices) and np.shares_memory(C.indptr, A.indptr)
    assert np.array_equal(C.toarray(), A.toarray().astype(np.float32))
    E = sparse.ELL.from_csr(A, np)
    F = sparse.astype(E, np.float32)
    assert F.data.dtype == np.float32 and F.indices is E.indices and np.allclose(F @ np.ones(30), A @ np.ones(30))
    assert sparse.astype(np.ones(3), np.complex64).dtype == np.float32
    Z = (A * (1 + 1j)).tocsr()
    assert sparse.astype(Z, np.complex64).dtype == np.complex64
    ints = np.arange(4)
    assert sparse.astype(ints, np.float32) is ints and sparse.astype(None, np.float32) is None
    assert sparse.astype(A, None) is A and sparse.astype(A, np.float64) is A


@pytest.mark.parametrize("cycle", ["k", "w", "v"])
@pytest.mark.parametrize("smoother", ["gs", "l1jacobi", "chebyshev"])
@pytest.mark.parametrize("shape,coords", [((33, 31), True), ((24, 23), False), ((9, 8, 7), True)])
def test_single_cycle_is_the_double_one_rounded(cycle, smoother, shape, coords):
    """AggregationMG with dtype float32: every level's storage, restriction and smoother scaling
    and the coarse inverse are float32; its cycle (and for V and W its transpose) is the float64
    one to float32 rounding (1e-9 < d < 1e-4), on the aux grid and pairwise aggregation."""
    A = laplacian(shape)
    A = (A + scipy.sparse.diags(np.linspace(0.0, 0.3, A.shape[0]), 0)).tocsr()
    xy = np.indices(shape).reshape(len(shape), -1).T * 1.0 if coords else None
    options = dict(cycle=cycle, smoother=smoother, coarse_size=20)
    double = kcycle.AggregationMG(A, np, kcycle.Options(**options), coords=xy)
    single = kcycle.AggregationMG(A, np, kcycle.Options(dtype=np.float32, **options), coords=xy)
    assert len(single.levels) >= 3 and single.dtype == np.float32, len(single.levels)
    for lev in single.levels[:-1]:
        assert lev.M.dtype == lev.R.dtype == np.float32
    assert single.coarse.inv.dtype == np.float32
    f = np.random.default_rng(0).random(A.shape[0])
    runs = [(double.cycle, single.cycle)] + ([(double.cycle_transpose, single.cycle_transpose)] if cycle != "k" else [])
    for d, s in runs:
        u, v = d(f), s(f)
        assert v.dtype == np.float32
        diff = np.linalg.norm(v - u) / np.linalg.norm(u)
        assert 1e-9 < diff < 1e-4, diff
