"""core.csrstencil: the stencil of a natural-ordering CSR matrix, against the operator it came
from (the GPU kernels against this twin: tests/gpu/test_kernels.py)."""
import numpy as np
import pytest

from pcplugins.core import csrstencil, stencil

from conftest import random_stencil_matrix


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


@pytest.mark.parametrize("shape", [(5, 7), (4, 6, 3), (2, 3, 5), (3, 3, 3)])
def test_entry_slots_by_difference_match_the_positions(shape):
    """The host's table lookup on column - row gives the slots and far entries that the grid
    positions give, wide entries and wrapped columns included."""
    d = len(shape)
    op, A = random_stencil_matrix(shape, stencil.box_offsets(d), zeros=False)
    A = A.tolil()
    n = A.shape[0]
    rng = np.random.default_rng(3)
    for i, j in zip(rng.integers(0, n, 12), rng.integers(0, n, 12)):
        A[i, j] = 1.0                             # far couplings, some wrapping around an axis
    for k in (1, shape[-1], shape[-1] + 1, int(np.prod(shape[1:]))):
        for i in range(n - k):                    # every stencil difference from every row: the
            A[i, i + k] = A[i + k, i] = 1.0       # face rows' columns wrap around
    A = A.tocsr()
    rows, slot, far = csrstencil._entry_slots_by_difference(A.indptr, A.indices, shape)
    pos = csrstencil.natural_positions(A.indices.astype(np.int64), shape)
    rpos = csrstencil.natural_positions(rows, shape)
    offs = np.stack([p - q for p, q in zip(pos, rpos)], axis=1)
    want_far = np.abs(offs).max(axis=1) > 1
    assert np.array_equal(far, want_far)
    box = np.array(stencil.box_offsets(d))
    assert np.array_equal(box[slot[~far]], offs[~far])
    assert far.any() and (~far).any()
