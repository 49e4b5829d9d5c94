"""rows.py against its definitions, on one process: the lone rows found (stored zeros absent, zero
diagonals and partly lone nodes not), A_II against the dense submatrix, and the preconditioner
(2) and its transpose with an exact inner solve against the dense inverse of A and A^T."""
import numpy as np
import pytest
import scipy.sparse as sp

from pcplugins.core import kcycle, rows
from pcplugins.core.comm import Comm

from conftest import laplacian


def boundary_rows(shape, coupled=True, diagonal=1.0, bs=1, penalty=None):
    """The 5-point Laplacian (plus 0.3 on the diagonal) on a box of ``shape`` points whose boundary
    points have lone rows of ``diagonal`` (an array: one a point, in order); ``coupled``: the
    interior rows keep their couplings to the boundary points (ksp ex45, ts ex15), else they are
    dropped too (MatZeroRowsColumns: A symmetric). ``bs`` > 1: that many copies interleaved node
    by node, each block's coupling between its components -0.1. ``penalty``: the boundary rows
    keep the Laplacian's couplings, ``penalty`` added to their diagonal (A symmetric)."""
    nx, ny = shape
    wall = np.zeros(nx * ny, bool)
    for j in range(ny):
        for i in range(nx):
            wall[j * nx + i] = i in (0, nx - 1) or j in (0, ny - 1)
    if penalty is not None:
        A = (laplacian((ny, nx)) + sp.diags(0.3 + penalty * wall)).tolil()
    else:
        A = sp.lil_matrix((nx * ny, nx * ny))
        d = np.broadcast_to(np.asarray(diagonal, float), (int(wall.sum()),))
        for k, v in zip(np.nonzero(wall)[0], d):
            A[k, k] = v
        for k in np.nonzero(~wall)[0]:
            A[k, k] = 4.3
            for q in (k - 1, k + 1, k - nx, k + nx):
                if coupled or not wall[q]:
                    A[k, q] = -1.0
    A = sp.kron(A.tocsr(), sp.identity(bs), format="csr")
    if bs > 1:
        coupling = np.full((bs, bs), -0.1) + 0.1 * np.eye(bs)            # zero on the block's diagonal
        block = sp.kron(sp.diags((~wall).astype(float)), coupling)
        A = (A + block).tocsr()
    return A, np.repeat(wall, bs)


CASES = [((7, 5), True, 1.0, 1), ((8, 6), True, 1.0, 1), ((9, 9), False, 1.0, 1), ((6, 7), True, "mixed", 1),
         ((7, 6), True, 1.0, 2), ((6, 6), False, 1.0, 2)]


@pytest.mark.parametrize("shape,coupled,diagonal,bs", CASES, ids=lambda c: str(c))
def test_lone_rows_with_an_exact_inner_solve_invert_A(shape, coupled, diagonal, bs):
    """(2) with B = A_II^-1 is A^-1, its transpose A^-T; A_II is the dense submatrix of the other
    rows and columns, and the coupling is moved to the right-hand side only where there is one."""
    nb = 2 * (shape[0] + shape[1]) - 4
    if diagonal == "mixed":               # scaled boundary rows, one negative
        diagonal = np.linspace(0.5, 40.0, nb) * np.where(np.arange(nb) == 3, -1, 1)
    A, wall = boundary_rows(shape, coupled, diagonal, bs)
    L = rows.LoneRows.find(A, np, Comm(), bs)
    assert L is not None and L.count == wall.sum() and np.array_equal(L.lone, wall)
    dense = A.toarray()
    inner = dense[~wall][:, ~wall]
    assert np.allclose(L.interior.toarray(), inner) and L.interior.has_canonical_format
    assert L.coupled == coupled
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    y = L.apply(b, lambda t: np.linalg.solve(inner, t))
    assert np.allclose(y, np.linalg.solve(dense, b), rtol=1e-10, atol=1e-12)
    y = L.apply_transpose(b, lambda t: np.linalg.solve(inner.T, t))
    assert np.allclose(y, np.linalg.solve(dense.T, b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("penalty", [1e7, 1e30])
def test_penalty_rows_are_lone(penalty):
    """A penalty's boundary rows (the Laplacian's couplings kept, ``penalty`` on the diagonal) are
    lone (couplings at most rows.LONE of the diagonal); (2) with an exact inner solve is then the
    inverse of A with their couplings dropped, within rows.LONE of A^-1 on the interior."""
    A, wall = boundary_rows((9, 7), penalty=penalty)
    L = rows.LoneRows.find(A, np, Comm())
    assert np.array_equal(L.lone, wall) and L.coupled
    dense = A.toarray()
    inner = dense[~wall][:, ~wall]
    dropped = dense.copy()
    dropped[wall] = np.diag(np.diag(dense))[wall]
    b = np.random.default_rng(2).standard_normal(A.shape[0])
    y = L.apply(b, lambda t: np.linalg.solve(inner, t))
    assert np.allclose(y, np.linalg.solve(dropped, b), rtol=1e-12, atol=1e-14)
    exact = np.linalg.solve(dense, b)
    assert np.linalg.norm((y - exact)[~wall]) <= 10 * rows.LONE * np.linalg.norm(exact)
    weak, _ = boundary_rows((9, 7), penalty=1e4)           # couplings 2-3e-4 of the diagonal: not lone
    assert rows.LoneRows.find(weak, np, Comm()) is None


def test_what_is_not_a_lone_row():
    """A stored zero is no coupling; a zero diagonal is not lone (an empty row: a singular matrix,
    which the checks name); a node is lone only where all of its rows are; no lone row, or no
    other, leaves A as it is (None)."""
    A, wall = boundary_rows((5, 5))
    A = (A + sp.csr_matrix(([1.0], ([0], [1])), shape=A.shape)).tocsr()
    A.data[A.indptr[0] + 1] = 0.0       # a stored zero in a boundary row
    A.data[A.indptr[24]] = 0.0          # a corner's row emptied
    assert A[0, 1] == 0 and 1 in A[0].indices and A[24].nnz == 1
    L = rows.LoneRows.find(A, np, Comm())
    assert L.lone[0] and not L.lone[24] and L.count == wall.sum() - 1
    A2, _ = boundary_rows((5, 5), bs=2)
    A2 = A2.tolil()
    A2[0, 2] = -0.5                   # one row of node 0 coupled: the node stays
    L2 = rows.LoneRows.find(A2.tocsr(), np, Comm(), 2)
    assert not L2.lone[0] and not L2.lone[1] and L2.lone[2] and L2.lone[3]
    assert rows.LoneRows.find(sp.csr_matrix(np.diag([2.0, 3.0, 4.0])), np, Comm()) is None
    interior, _ = boundary_rows((5, 5))
    assert rows.LoneRows.find(interior[6:9][:, 6:9].tocsr(), np, Comm()) is None


def test_aggregation_of_the_interior_converges_faster():
    """What the elimination is for: ts ex15's matrix kind (identity boundary rows against 4/h^2
    inside): the pairwise W-cycle's rate with the lone rows aggregated, and with them taken out."""
    n = 48
    A, wall = boundary_rows((n, n))
    A = sp.diags(np.where(wall, 1.0, (n - 1) ** 2)) @ A          # 1 on the boundary, about 4/h^2 inside
    A = A.tocsr()
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    o = kcycle.Options(cycle="w", aggregation="pairwise", coarse_size=50)

    def rate(apply):
        x = np.zeros_like(b)
        r0 = np.linalg.norm(b)
        for _ in range(10):
            x += apply(b - A @ x)
        return (np.linalg.norm(b - A @ x) / r0) ** 0.1

    whole = kcycle.AggregationMG(A, np, o)
    L = rows.LoneRows.find(A, np, Comm())
    inner = kcycle.AggregationMG(L.interior, np, o)
    kept, taken = rate(whole.cycle), rate(lambda r: L.apply(r, inner.cycle))
    assert taken < 0.6 and kept > 1, (kept, taken)          # 0.49 against 1.97: divergence
