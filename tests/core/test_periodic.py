"""Periodic grids in the array core: the wrapped halo (comm.Comm), the coarsening rule (an even
periodic axis halves, an odd one is kept), the level's matrix with its couplings across the wrap,
the stencil read from a CSR matrix with wrapped columns, and multigrid cycles against a direct
solve of the singular periodic system."""
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

from pcplugins.core import coarse, csrstencil, grid, multigrid, stencil
from pcplugins.core.comm import Comm

SHAPES = [((64, 64), (True, True)), ((48, 40), (True, False)), ((40, 48), (False, True)),
          ((30, 20), (True, True)), ((21, 32), (True, True)), ((16, 16, 16), (True, True, True)),
          ((12, 10, 14), (True, False, True)), ((9, 8, 12), (False, True, False))]
# shape and, per axis, p (periodic) or d (Dirichlet values eliminated)
IDS = ["x".join(map(str, s)) + "-" + "".join("p" if p else "d" for p in per) for s, per in SHAPES]


def laplacian_1d(m, periodic):
    """The 1D -Laplacian (h = 1) on m points: Dirichlet values eliminated, or periodic."""
    T = scipy.sparse.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1], format="lil")
    if periodic:
        T[0, m - 1] = T[m - 1, 0] = -1
    return T.tocsr()


def reference_matrix(shape, periodic):
    """The d-dimensional -Laplacian as a sum of Kronecker products, x fastest (natural order)."""
    d = len(shape)
    A = 0
    for a in range(d):
        factors = [laplacian_1d(m, p) if b == a else scipy.sparse.identity(m) for b, (m, p) in
                   enumerate(zip(shape, periodic))]
        term = factors[0]
        for f in factors[1:]:
            term = scipy.sparse.kron(term, f)
        A = A + term
    return scipy.sparse.csr_matrix(A)


def solve_reference(A, b, singular):
    """The direct solve; of a singular (all periodic) system the mean-free solution, from the
    system bordered by the constant."""
    if not singular:
        return scipy.sparse.linalg.spsolve(A.tocsc(), b)
    n = A.shape[0]
    e = scipy.sparse.csr_matrix(np.ones((n, 1)))
    B = scipy.sparse.bmat([[A, e], [e.T, None]]).tocsc()
    return scipy.sparse.linalg.spsolve(B, np.append(b, 0.0))[:n]


def pcg(A, b, mg, shape, rtol=1e-10):
    """Preconditioned CG with one multigrid cycle as the preconditioner: (x, iterations)."""
    x, r = np.zeros_like(b), b.copy()
    z = grid.interior(mg.cycle(r.reshape(shape))).ravel().copy()
    p, rz = z.copy(), r @ z
    for its in range(1, 60):
        Ap = A @ p
        alpha = rz / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        if np.linalg.norm(r) <= rtol * np.linalg.norm(b):
            break
        z = grid.interior(mg.cycle(r.reshape(shape))).ravel().copy()
        rz, old = r @ z, rz
        p = z + rz / old * p
    return x, its


def test_the_halo_wraps_along_periodic_axes_only():
    u = np.arange(1.0, 1 + 6 * 7).reshape(6, 7)
    u[0], u[-1], u[:, 0], u[:, -1] = 0, 0, 0, 0
    inner = u[1:-1, 1:-1].copy()
    Comm((False, True)).exchange(0, u)
    assert (u[1:-1, 0] == inner[:, -1]).all() and (u[1:-1, -1] == inner[:, 0]).all()
    assert not u[0].any() and not u[-1].any()          # the Dirichlet axis keeps its zero halo
    batch = np.zeros((2, 4, 5))
    batch[:, 1:-1, 1:-1] = np.arange(2 * 2 * 3).reshape(2, 2, 3)
    Comm((True, True)).exchange(0, batch)               # a batch of arrays (leading axis)
    assert (batch[:, 0, 1:-1] == batch[:, -2, 1:-1]).all() and (batch[:, 0, 0] == batch[:, -2, -2]).all()


def test_coarsening_rule():
    box = grid.Box((64, 21, 12), periodic=(True, True, False))
    assert box.coarsenable() == (True, False, True)       # 21 is odd: kept
    c = box.coarsen(box.coarsenable())
    assert c.global_shape == (32, 21, 6) and c.periodic == box.periodic
    assert c.keep_ends == (True, True, False)               # coarse point k on fine point 2k
    assert grid.Box((8,), periodic=True).coarsenable() == (True,)
    # 2 coarse points would be each other's neighbours on both sides
    assert grid.Box((4,), periodic=True).coarsenable() == (False,)


@pytest.mark.parametrize("shape,periodic", SHAPES, ids=IDS)
def test_level_matrix_couples_across_the_wrap(shape, periodic):
    op = stencil.laplacian(grid.Box(shape, periodic=periodic), [-1.0] * len(shape), np)
    assert abs(op.to_scipy() - reference_matrix(shape, periodic)).max() == 0


@pytest.mark.parametrize("shape,periodic", SHAPES, ids=IDS)
def test_stencil_read_from_wrapped_columns(shape, periodic):
    """The matrix's wrapped columns are neighbours along a periodic axis, and reported as wide
    (more than one point apart) along any other."""
    A = reference_matrix(shape, periodic)
    periods = [m if p else 0 for m, p in zip(shape, periodic)]
    found = csrstencil.stencil_of_csr(A.indptr, A.indices, A.data, shape, np.float64, periods)
    assert not found.wide
    op = stencil.StencilOperator(grid.Box(shape, periodic=periodic), found.offsets, found.coefs, np)
    assert abs(op.to_scipy() - A).max() == 0
    if any(periodic):
        assert csrstencil.stencil_of_csr(A.indptr, A.indices, A.data, shape, np.float64).wide


@pytest.mark.parametrize("shape,periodic", SHAPES, ids=IDS)
def test_cycles_against_a_direct_solve(shape, periodic):
    """Preconditioned CG with the V(2,2) cycle: the direct solve's answer (mean-free where every
    axis is periodic), in the iterations of a Dirichlet grid where every periodic axis halves."""
    box = grid.Box(shape, periodic=periodic)
    op = stencil.laplacian(box, [-1.0] * len(shape), np)
    mg = multigrid.Multigrid(op, multigrid.Options(pre=2, post=2), comm=Comm(periodic))
    assert len(mg.levels) > 1
    A = reference_matrix(shape, periodic)
    b = np.random.default_rng(0).standard_normal(box.size)
    singular = all(periodic)
    if singular:
        b -= b.mean()
    x, its = pcg(A, b, mg, shape)
    assert np.linalg.norm(b - A @ x) <= 1e-10 * np.linalg.norm(b)
    ref = solve_reference(A, b, singular)
    if singular:
        x -= x.mean()
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    halving = all(m % 2 == 0 for m, p in zip(shape, periodic) if p)
    assert its <= (8 if halving else 12), its


@pytest.mark.parametrize("shape,periodic", [((8, 8), (True, True)), ((6, 5, 4), (True, True, True)),
                                            ((9, 7), (True, False))], ids=["8x8-pp", "6x5x4-ppp", "9x7-pd"])
def test_singular_coarse_solves_are_the_pseudo_inverse(shape, periodic, monkeypatch):
    """The coarsest solves of a singular (periodic, pure Neumann) level: the dense inverse by one
    LU of A + 1 1^T / n and the sparse LU of A bordered by the constants give the pseudo-inverse's
    answer, with no SVD; a nonsingular level takes the plain LU."""
    A = reference_matrix(shape, periodic)
    dense = A.toarray()
    pinv = np.linalg.pinv(dense)
    f = np.random.default_rng(1).standard_normal(A.shape[0])
    if all(periodic):
        f -= f.mean()

    def no_svd(a):
        raise AssertionError("an SVD where one LU does")
    monkeypatch.setattr(np.linalg, "pinv", no_svd)
    inv = coarse.dense_inverse(dense, np)
    assert np.abs(inv - pinv).max() <= 1e-10 * np.abs(inv).max()
    x = coarse.sparse_lu(A)(f)
    assert np.linalg.norm(x - pinv @ f) <= 1e-10 * np.linalg.norm(x)


def test_large_host_coarsest_level_takes_the_sparse_lu():
    """A grid that does not coarsen (odd periodic axes) is solved whole: on the host by the sparse
    LU past coarse.HOST_INVERSE unknowns (the dense inverse's setup is cubic), still exactly."""
    shape = (33, 21)
    box = grid.Box(shape, periodic=(True, True))
    mg = multigrid.Multigrid(stencil.laplacian(box, [-1.0, -1.0], np), comm=Comm(box.periodic))
    solve = mg.levels[-1].coarse_solve
    assert len(mg.levels) == 1 and solve.inv is None and "sparse LU" in solve.describe()
    f = np.random.default_rng(2).standard_normal(shape)
    f -= f.mean()
    u = grid.interior(mg.cycle(f)).ravel()
    A = reference_matrix(shape, (True, True))
    assert np.linalg.norm(A @ u - f.ravel()) <= 1e-12 * np.linalg.norm(f)


def periodic_kappa_operator(shape, periodic, jump=2.0, seed=0):
    """-div(kappa grad u) with kappa = 10^(jump U), U uniform in [0, 1) per point, the harmonic
    mean on each face, across the wrap along periodic axes (Dirichlet values eliminated along the
    others): a symmetric variable-coefficient star stencil."""
    d = len(shape)
    box = grid.Box(shape, periodic=periodic)
    kappa = 10.0 ** (jump * np.random.default_rng(seed).random(shape))
    offsets, coefs, diag = [], [], np.zeros(shape)
    for a in range(d):
        for s in (-1, 1):
            nb = np.roll(kappa, -s, axis=a)
            face = 2 * kappa * nb / (kappa + nb)
            diag += face
            o = tuple(s if b == a else 0 for b in range(d))
            inside = np.zeros(shape)
            inside[stencil.inside_slices(box, o)] = 1
            offsets.append(o)
            coefs.append(-face * inside)
    offsets.append((0,) * d)
    coefs.append(diag)
    return stencil.StencilOperator(box, offsets, coefs, np)


def prolongation_matrix(T, fine, coarse_box):
    """The transfer's P as a dense matrix, column by column from coarse unit vectors (halos
    wrapped as the cycle's ghost update wraps them)."""
    cols = []
    for J in range(coarse_box.size):
        e = np.zeros(coarse_box.padded_shape)
        grid.interior(e).flat[J] = 1.0
        Comm(coarse_box.periodic).exchange(0, e)
        p = np.zeros(fine.padded_shape)
        T.prolong_add(p, e)
        cols.append(grid.interior(p).ravel().copy())
    return np.array(cols).T


@pytest.mark.parametrize("shape,periodic", [((10, 8), (True, True)), ((10, 14, 8), (True, False, True)),
                                            ((16, 14), (False, True))], ids=["10x8-pp", "10x14x8-pdp", "16x14-dp"])
@pytest.mark.parametrize("transfer_kind", ["linear", "blackbox"])
def test_galerkin_by_probing_across_the_wrap(shape, periodic, transfer_kind):
    """Probing's classes stay apart across a periodic wrap whose coarse length is no multiple of 3
    (5, 4, 7 points: up to 5 classes along such an axis): the coarse operator is R A P exactly."""
    op = periodic_kappa_operator(shape, periodic)
    mg = multigrid.Multigrid(op, multigrid.Options(transfer=transfer_kind, coarse_operator="galerkin", levels=2),
                             comm=Comm(periodic))
    fine, coarse_level = mg.levels
    P = prolongation_matrix(fine.transfer, fine.box, coarse_level.box)
    A = op.to_scipy().toarray()
    ref = P.T @ A @ P * fine.transfer.rscale
    got = coarse_level.op.to_scipy().toarray()
    assert any(m % 3 for m, p in zip(coarse_level.box.global_shape, periodic) if p)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("shape,periodic", [((64, 48), (True, True)), ((40, 30), (True, False)),
                                            ((16, 12, 20), (True, True, True))],
                         ids=["64x48-pp", "40x30-pd", "16x12x20-ppp"])
def test_variable_coefficients_with_black_box_transfers(shape, periodic):
    """kappa jumps of 10^2 between random points, periodic: black box transfers and Galerkin coarse
    operators (the default for a variable operator) in the iterations of the constant Laplacian's
    hierarchy, against a direct solve."""
    op = periodic_kappa_operator(shape, periodic)
    mg = multigrid.Multigrid(op, multigrid.Options(pre=2, post=2), comm=Comm(periodic))
    assert mg.transfer_kind == "blackbox" and len(mg.levels) >= 3
    A = op.to_scipy()
    b = np.random.default_rng(0).standard_normal(op.box.size)
    singular = all(periodic)
    if singular:
        b -= b.mean()
    x, its = pcg(A, b, mg, shape)
    ref = solve_reference(A, b, singular)
    if singular:
        x -= x.mean()
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    assert its <= 10, its
