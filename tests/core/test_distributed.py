"""distributed.py's row blocks against their definitions, on one process: the split of rows into
the owned and ghost column blocks (canonical rows without a sort, others through triplets), the
terms sent to their rows' owners, and a Transfer's product."""
import numpy as np
import scipy.sparse as sp

from pcplugins.core import distributed
from pcplugins.core.comm import Comm


class Ranks(Comm):
    """``size`` ranks of which this is ``rank``, for the alltoall of owned_rows: what the other
    ranks send is given (``incoming``), what this rank sends is kept (``sent``)."""

    def __init__(self, rank, size, incoming):
        super().__init__()
        self.rank, self.size, self.incoming, self.sent = rank, size, incoming, None

    def alltoall(self, parts):
        self.sent = parts
        return [parts[r] if r == self.rank else self.incoming[r] for r in range(self.size)]


def blocks(M, starts, rank):
    """The owned and ghost blocks of M's rows by slicing (the definition)."""
    lo, hi = starts[rank], starts[rank + 1]
    ghosts = np.array([c for c in np.unique(M.indices) if not lo <= c < hi], np.int64)
    return M[:, lo:hi].toarray(), (M[:, ghosts].toarray() if len(ghosts) else np.zeros((M.shape[0], 0))), ghosts


def test_split_columns_canonical_and_not():
    rng = np.random.default_rng(0)
    M = sp.random(9, 30, density=0.3, format="csr", random_state=1) + sp.eye(9, 30, 12)
    M.sort_indices()
    starts = np.array([0, 12, 21, 30])
    own_ref, ghost_ref, ghosts_ref = blocks(M.tocsr(), starts, 1)
    # canonical rows, and the same rows with each row's entries shuffled
    order = np.concatenate([M.indptr[i] + rng.permutation(M.indptr[i + 1] - M.indptr[i]) for i in range(9)])
    for indices, data in ((M.indices, M.data), (M.indices[order], M.data[order])):
        own, ghost, ghosts = distributed.split_columns(M.indptr, indices, data, starts, 1, np)
        assert np.array_equal(ghosts, ghosts_ref)
        assert np.allclose(own.toarray(), own_ref) and np.allclose(ghost.toarray(), ghost_ref)
        assert own.has_canonical_format and ghost.has_canonical_format


def test_owned_rows_keeps_its_rows_and_sends_the_others():
    """Rank 1 of 3 (rows 4..7 of 12): its own rows of C plus what ranks 0 and 2 send it; the rows
    it holds of other ranks go to them, grouped by owner."""
    C = sp.random(12, 5, density=0.5, format="csr", random_state=2)
    starts = np.array([0, 4, 8, 12])
    incoming = {0: (np.array([5, 4]), np.array([1, 3]), np.array([10.0, 20.0])),
                2: (np.array([7]), np.array([0]), np.array([30.0]))}
    comm = Ranks(1, 3, incoming)
    got = distributed.owned_rows(C, starts, comm)
    ref = C[4:8].toarray()
    ref[1, 1] += 10.0
    ref[0, 3] += 20.0
    ref[3, 0] += 30.0
    assert np.allclose(got.toarray(), ref)
    for r in (0, 2):
        rows, cols, vals = comm.sent[r]
        assert np.all((rows >= starts[r]) & (rows < starts[r + 1]))
        assert np.allclose(vals, C[rows, cols].A1)
    assert len(comm.sent[1][0]) == 0 and sum(len(comm.sent[r][0]) for r in (0, 2)) == C[:4].nnz + C[8:].nnz


def test_transfer_product_and_rows():
    """One rank owning every column: the product is M x, and global_rows gives M back."""
    M = sp.random(7, 11, density=0.4, format="csr", random_state=3)
    T = distributed.Transfer(M, np.array([0, 11]), Comm(), np)
    x = np.arange(11.0)
    assert np.allclose(T @ x, M @ x)
    assert abs(T.global_rows() - M).max() == 0 and T.shape == (7, 11)
