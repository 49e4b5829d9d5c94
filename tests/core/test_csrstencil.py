"""core.csrstencil: the stencil of a natural-ordering CSR matrix, against the operator it came
from (the GPU kernels against this twin: tests/gpu/test_kernels.py)."""
import numpy as np
import pytest
import scipy.sparse

from pcplugins.core import csrstencil, grid, stencil


def random_stencil_matrix(shape, offsets, seed=0, zeros=True):
    """A StencilOperator with random coefficients on ``offsets`` and its CSR, with explicit zeros
    stored for every other box offset (as DMCreateMatrix preallocates)."""
    rng = np.random.default_rng(seed)
    box = grid.Box(shape)
    coefs = [rng.uniform(1, 2, shape) * stencil.inside_mask(box, o, np) * (10 if not any(o) else -1)
             for o in offsets]
    op = stencil.StencilOperator(box, offsets, coefs, np)
    A = op.to_scipy().tocoo()
    if zeros:
        pattern = stencil.StencilOperator(box, stencil.box_offsets(box.dim),
                                          [np.ones(shape)] * 3 ** box.dim, np).to_scipy().tocoo()
        A = scipy.sparse.coo_matrix((np.concatenate([A.data, np.zeros(pattern.nnz)]),
                                     (np.concatenate([A.row, pattern.row]), np.concatenate([A.col, pattern.col]))),
                                    shape=A.shape).tocsr()        # duplicates summed, zeros kept
        A.sort_indices()
        assert A.nnz == pattern.nnz           # the zeros are stored
    return op, A.tocsr()


@pytest.mark.parametrize("shape", [(5, 7), (4, 6, 3), (1, 9)])
@pytest.mark.parametrize("kind", ["star", "box"])
def test_twin_reads_the_stencil_back(shape, kind):
    d = len(shape)
    offsets = stencil.star_offsets(d) if kind == "star" else stencil.box_offsets(d)
    op, A = random_stencil_matrix(shape, offsets)
    found = csrstencil.stencil_of_csr(A.indptr, A.indices, A.data, shape, np.float64)
    assert not found.wide and not found.nonfinite
    got = dict(zip(found.offsets, found.coefs))
    for o, c in zip(op.offsets, op.coef_arrays()):
        if c.any():
            assert np.array_equal(got[o], c), o
    assert set(got) == {o for o, c in zip(op.offsets, op.coef_arrays()) if c.any() or not any(o)}


def test_twin_reports_wide_and_nonfinite_entries():
    op, A = random_stencil_matrix((6, 6), stencil.star_offsets(2), zeros=False)
    A = A.tolil()
    A[0, 2] = 0.0                              # a stored zero two apart: no coupling
    B = A.tocsr()
    found = csrstencil.stencil_of_csr(B.indptr, B.indices, B.data, (6, 6), np.float64)
    assert not found.wide and (0, 0) in found.offsets
    A[0, 2] = 1.0
    B = A.tocsr()
    assert csrstencil.stencil_of_csr(B.indptr, B.indices, B.data, (6, 6), np.float64).wide
    A[0, 2] = 0.0
    A[3, 3] = np.nan
    B = A.tocsr()
    assert csrstencil.stencil_of_csr(B.indptr, B.indices, B.data, (6, 6), np.float64).nonfinite
