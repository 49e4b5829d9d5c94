"""The GPU kernels and cycles against their NumPy twins, on arrays only (no PETSc; skipped where
CuPy or a GPU is missing)."""
import itertools

import numpy as np
import pytest

from pcplugins import backend
from pcplugins.core import fused, grid, kernels, multigrid, stencil, transfer

from conftest import cell_levels, coarse_matrices, gpu, halo_fill_cases, on_threads, random_stencil_matrix

pytestmark = gpu


def both(a):
    return a, backend.cupy.asarray(a)

def test_kernels_match_numpy():
    cp = backend.cupy
    rng = np.random.default_rng(0)
    u = rng.standard_normal((3, 12, 13))
    c = rng.standard_normal((12, 13))
    f = rng.standard_normal((12, 13))
    for xp in (np, cp):
        uu, cc, ff = (xp.asarray(a) for a in (u, c, f))
        out = xp.zeros((12, 13))
        kernels.lincomb(out, [2.0, cc], [uu[0], uu[1]])
        kernels.lincomb(out, [0.5], [uu[2]], add=True)
        r = xp.zeros((12, 13))
        kernels.residual(r, ff, [cc, -1.0], [uu[0], uu[1]])
        x = uu[2].copy()
        kernels.relax(x[::2, 1::2], ff[::2, 1::2], 0.25, 0.9, 4.0, [cc[::2, 1::2]], [uu[0][::2, 1::2]])
        res = [backend.to_host(a) for a in (out, r, x)]
        if xp is np:
            ref = res
    for a, b in zip(ref, res):
        assert np.allclose(a, b, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dim,n", [(2, 63), (3, 31), (3, 20)])
@pytest.mark.parametrize("smoother", ["redblack", "multicolor", "jacobi", "chebyshev", "adi"])
@pytest.mark.parametrize("variable", [False, "linear", "blackbox"])
def test_cycles_numpy_and_cupy_agree(dim, n, smoother, variable):
    """The same cycles on the host and the device: the constant Laplacian, and variable
    coefficients with linear and with operator-dependent transfers."""
    rng = np.random.default_rng(1)
    box = grid.Box((n,) * dim)
    f = rng.standard_normal(box.shape)
    outs = []
    for xp in (np, backend.cupy):
        if variable:
            offs = stencil.star_offsets(dim)
            k = np.exp(np.random.default_rng(2).uniform(-2, 2, box.shape))
            coefs = [(-k if any(o) else 2 * dim * k + 0.1) * stencil.inside_mask(box, o, np) for o in offs]
            op = stencil.StencilOperator(box, offs, [xp.asarray(c) for c in coefs], xp)
        else:
            op = stencil.laplacian(box, [-1.0] * dim, xp)
        mg = multigrid.Multigrid(op, multigrid.Options(smoother=smoother, cycle="w", transfer=variable or "auto"))
        assert mg.transfer_kind == (variable or "linear")
        u = xp.zeros(box.padded_shape)
        for _ in range(3):
            mg.cycle(xp.asarray(f), u)
        outs.append(backend.to_host(grid.interior(u)))
    assert np.linalg.norm(outs[0] - outs[1]) <= 1e-12 * np.linalg.norm(outs[0])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 63, 64, 1025, 2049, 4097])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("threads", [None, 32, 96, 256])
def test_cyclic_reduction_matches_thomas(n, dtype, tol, threads):
    """The partition + cyclic-reduction kernel against the Thomas twin (float64 on the host) on
    diagonally dominant systems, batched over two axes, into an output poisoned with NaN: short
    systems leave most threads past the end, 32 threads put up to 128 unknowns in a chunk, and
    n = 4097 in double needs 131 KB of shared memory (the opt-in limit)."""
    from pcplugins.core import tridiag
    cp = backend.cupy
    rng = np.random.default_rng(n)
    shape = (3, 7, n)
    lo, up = rng.uniform(-1, 0, shape), rng.uniform(-1, 0, shape)
    dg, rhs = 2.2 + rng.random(shape), rng.standard_normal(shape)
    ref = tridiag.thomas(lo, dg, up, rhs, np)
    out = cp.full(shape, cp.nan, dtype)
    got = tridiag.cyclic_reduction(*(cp.asarray(a, dtype=dtype) for a in (lo, dg, up, rhs)), out=out, threads=threads)
    assert got is out and got.dtype == dtype and got.shape == shape
    assert np.abs(got.get() - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.parametrize("smoother", ["adi", "line_x", "line_y"])
@pytest.mark.parametrize("omega", [None, 0.8])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_line_smoothers_on_a_box_stencil_numpy_and_cupy_agree(smoother, omega, dtype, tol):
    """2D line smoothers on the GPU (a colour's right-hand sides made inside the tridiagonal
    kernel, the lines relaxed in place) against the NumPy twin (residual, then Thomas), on the
    Q1 stencil of a graded mesh: 9 points, variable coefficients, Galerkin coarse levels."""
    from meshes import graded_axis, q1_stencil
    x = graded_axis(6, 0.25)
    offs, coefs = q1_stencil(x, x[::-1])
    m = len(x) - 2
    box = grid.Box((m, m))
    f = np.random.default_rng(3).standard_normal(box.shape)
    outs = []
    for xp in (np, backend.cupy):
        op = stencil.compress(box, offs, [xp.asarray(c) for c in coefs], xp, dtype)
        mg = multigrid.Multigrid(op, multigrid.Options(smoother=smoother, omega=omega, pre=2, post=2))
        u = xp.zeros(box.padded_shape, dtype)
        for _ in range(2):
            mg.cycle(xp.asarray(f, dtype), u)
        outs.append(backend.to_host(grid.interior(u)))
    assert np.linalg.norm(outs[0] - outs[1]) <= tol * np.linalg.norm(outs[0])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("omega", [1.0, 0.7])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_cyclic_reduction_in_place_on_strided_lines(axis, omega, dtype, tol):
    """Every other line of a padded grid along either axis, right-hand sides and unknowns read and
    written through strided views (a line smoother's colour), relaxed by omega, against the Thomas
    twin; the points off the colour's lines keep their values."""
    from pcplugins.core import tridiag
    cp = backend.cupy
    rng = np.random.default_rng(axis)
    u = rng.standard_normal((67, 69))
    f = rng.standard_normal((67, 69))
    inner = (slice(1, -1), slice(1, -1))
    lines = lambda a: np.moveaxis(a[inner], axis, -1)[1::2]    # noqa: E731
    shape = lines(u).shape
    lo, up = rng.uniform(-1, 0, shape), rng.uniform(-1, 0, shape)
    dg = 2.2 + rng.random(shape)
    ref = u.copy()
    old = lines(ref).copy()
    lines(ref)[...] = old + omega * (tridiag.thomas(lo, dg, up, lines(f), np) - old)
    ud, fd = cp.asarray(u, dtype), cp.asarray(f, dtype)
    got = tridiag.solve(*(cp.asarray(a, dtype) for a in (lo, dg, up)), lines(fd), cp, out=lines(ud), omega=omega)
    assert got.data.ptr == lines(ud).data.ptr
    assert np.abs(ud.get() - ref).max() <= tol * np.abs(ref).max()


def test_cyclic_reduction_rejects_bad_threads():
    from pcplugins.core import tridiag
    a = backend.cupy.ones((2, 9))
    with pytest.raises(ValueError, match="threads=48"):
        tridiag.cyclic_reduction(-a, 3 * a, -a, a, threads=48)


@pytest.fixture(params=[1, 2, 3], ids=lambda r: f"rows{r}")
def rows(request):
    """Rows per thread in the fused kernels (fused.ROWS), in both precisions, restored after."""
    saved = dict(fused.ROWS)
    for dtype in saved:
        fused.set_rows(dtype, request.param)
    yield request.param
    for dtype, r in saved.items():
        fused.set_rows(dtype, r)


# A rank's box inside a global grid, with odd and even starts (transfer phase 0 and 1).
SUBBOXES = [grid.Box((31, 30, 29), (5, 6, 7), (10, 11, 12)), grid.Box((31, 30, 29), (0, 9, 0), (9, 8, 29)),
            grid.Box((45, 38), (7, 4), (20, 13)), grid.Box((17, 33), (0, 0), (17, 33))]


@pytest.mark.parametrize("box", SUBBOXES, ids=str)
@pytest.mark.parametrize("coarsened", ["all", "first-kept", "last-kept"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_transfers_match_twin(box, coarsened, dtype):
    cp = backend.cupy
    kept = {"all": -1, "first-kept": 0, "last-kept": box.dim - 1}[coarsened]   # x is the last axis
    ax = tuple(a != kept for a in range(box.dim))
    cbox = box.coarsen(ax)
    twin = transfer.Transfer(box, cbox, ax, "linear")
    fast = fused.LinearTransfer(twin)
    rng = np.random.default_rng(3)
    rf, ec = rng.standard_normal(box.padded_shape), rng.standard_normal(cbox.padded_shape)
    uf = rng.standard_normal(box.padded_shape)
    ref_r = twin.restrict(np.zeros(cbox.shape), rf)
    ref_p = twin.prolong_add(uf.copy(), ec)
    got_r = fast.restrict(cp.zeros(cbox.shape, dtype), cp.asarray(rf, dtype))
    got_p = fast.prolong_add(cp.asarray(uf, dtype), cp.asarray(ec, dtype))
    tol = 1e-14 if dtype == "float64" else 1e-6     # float32 against the float64 twin
    assert got_r.dtype == got_p.dtype == np.dtype(dtype)
    assert np.allclose(backend.to_host(got_r), ref_r, rtol=tol, atol=tol)
    assert np.allclose(backend.to_host(got_p), ref_p, rtol=tol, atol=tol)


@pytest.mark.parametrize("box", SUBBOXES, ids=str)
@pytest.mark.parametrize("omega,zero", [(1.0, False), (1.3, False), (1.0, True)])
def test_fused_smoother_and_residual_match_twin(box, omega, zero, rows):
    from pcplugins.core import smoothers
    cp = backend.cupy
    w = [-1.0, -4.0, -0.5][:box.dim]
    rng = np.random.default_rng(4)
    u, f = rng.standard_normal(box.padded_shape), rng.standard_normal(box.shape)
    if zero:   # the interior is ignored; the halo holds ghosts (zero on the physical boundary)
        u = np.pad(grid.interior(u) + 7.0, 1)
    op = stencil.laplacian(box, w, np)
    ref = smoothers.ColourGS(op, "redblack", omega).smooth(u.copy(), f, 2, reverse=True, zero_guess=zero)
    ref_r = op.residual(np.zeros(box.shape), f, ref)
    lap = fused.Laplacian(stencil.laplacian(box, w, cp), w)
    got = smoothers.RedBlack(lap, omega).smooth(cp.asarray(u), cp.asarray(f), 2, reverse=True, zero_guess=zero)
    got_r = lap.residual(cp.zeros(box.padded_shape), cp.asarray(f), got)
    assert np.allclose(backend.to_host(got), ref, rtol=1e-13, atol=1e-13)
    assert np.allclose(backend.to_host(grid.interior(got_r)), ref_r, rtol=1e-12, atol=1e-12)


# rank boxes with odd and even starts, and grids that keep their ends (the colours count from 0)
STORED_BOXES = SUBBOXES + [grid.Box((12, 13, 14), (3, 0, 5), (9, 13, 8), keep_ends=(True, False, True)),
                           grid.Box((16, 17), keep_ends=True)]


@pytest.mark.parametrize("box", STORED_BOXES, ids=lambda b: f"{b}{'-ends' if any(b.keep_ends) else ''}")
@pytest.mark.parametrize("kind", ["redblack", "multicolor"])
@pytest.mark.parametrize("dtype,coefficients", [("float64", None), ("float32", None), ("float64", "float32")])
@pytest.mark.parametrize("omega,zero,reverse", [(1.0, False, False), (1.3, False, True), (1.0, True, False)])
def test_fused_stored_stencil_matches_twin(box, kind, dtype, coefficients, omega, zero, reverse, monkeypatch):
    """kernels/stored.cu against the generic residual and ColourGS on random variable
    coefficients: star stencils (red-black and 2^d colours) and box stencils (2^d colours), on
    rank boxes and on grids that keep their ends; float32 coefficients under a float64 sweep
    against the twin on the same coefficients rounded, to float64's accuracy. The sweeps run a
    kernel per colour and in one block (stored_sweeps), bit for bit alike."""
    from pcplugins.core import fused_stored, smoothers
    cp = backend.cupy
    rng = np.random.default_rng(5)
    offs = stencil.star_offsets(box.dim) if kind == "redblack" else stencil.box_offsets(box.dim)
    coefs = [rng.uniform(1, 2, box.shape) * (4 * len(offs) if not any(o) else -1) for o in offs]
    rounded = [c.astype(coefficients or dtype).astype(np.float64) for c in coefs]
    u, f = rng.standard_normal(box.padded_shape), rng.standard_normal(box.shape)
    if zero:
        u = np.pad(grid.interior(u) + 7.0, 1)
    op = stencil.StencilOperator(box, offs, rounded if coefficients else coefs, np)
    ref = smoothers.ColourGS(op, kind, omega).smooth(u.copy(), f, 2, reverse=reverse, zero_guess=zero)
    ref_r = op.residual(np.zeros(box.shape), f, ref)
    dop = stencil.StencilOperator(box, offs, [cp.asarray(c) for c in coefs], cp, dtype)
    fast = fused_stored.Stored(dop, coefficients)
    assert fast.split.dtype == (coefficients or dtype)
    runs = []
    for limit in (0, 10 ** 9):          # a kernel per colour; the whole sweeps in one block
        monkeypatch.setattr(fused_stored, "BLOCK_SWEEPS_SIZE", limit)
        smoother = smoothers.make(kind, dop, omega, fused_level=fast)
        assert isinstance(smoother, fused_stored.StoredGS) and (smoother._block is not None) == bool(limit)
        runs.append(smoother.smooth(cp.asarray(u, dtype), cp.asarray(f, dtype), 2, reverse=reverse,
                                    zero_guess=zero))
    # the same updates in the same order
    assert bool((runs[0] == runs[1]).all())
    got = runs[1]
    got_r = fast.residual(cp.zeros(box.padded_shape, dtype), cp.asarray(f, dtype), got)
    got_r2 = fast.residual(cp.zeros(box.shape, dtype), cp.asarray(np.pad(f, 1), dtype), got)
    tol = 1e-12 if dtype == "float64" else 2e-5
    scale = np.abs(ref).max()
    assert np.abs(backend.to_host(got) - ref).max() <= tol * scale
    for r in (grid.interior(got_r), got_r2):
        assert np.abs(backend.to_host(r) - ref_r).max() <= tol * 10 * np.abs(ref_r).max()


def blackbox_cases(test):
    """The black box kernels' tests' parameters (blackbox_case's arguments, and a value type)."""
    marks = [pytest.mark.parametrize("shape,keep", [((9, 11), False), ((10, 12), True), ((7, 8, 9), False),
                                                    ((6, 7, 5), True), ((17, 16, 15), False)]),
             pytest.mark.parametrize("coarsened", ["all", "first-kept", "last-kept"]),
             pytest.mark.parametrize("points", ["star", "box", "constant"]),
             pytest.mark.parametrize("dtype", ["float64", "float32"])]
    for mark in reversed(marks):        # applied bottom-up, as a stack of decorators is
        test = mark(test)
    return test


def blackbox_case(shape, keep, coarsened, points, seed):
    """(fine box, coarsened axes, coarse box, offsets, coefficients) for the black box kernels'
    tests: random variable star or box stencils (zero across the boundary), or the constant
    27-point stencil ('constant'); ``coarsened``: all axes, or all but the first or the last."""
    box = grid.Box(shape, keep_ends=keep)
    d = len(shape)
    kept = {"all": -1, "first-kept": 0, "last-kept": d - 1}[coarsened]
    axes = tuple(a != kept for a in range(d))
    offs = stencil.star_offsets(d) if points == "star" else stencil.box_offsets(d)
    if points == "constant":
        coefs = [26.0 if not any(o) else -1.0 for o in offs]
    else:
        rng = np.random.default_rng(seed)
        coefs = [rng.uniform(1, 2, shape) * (4 * len(offs) if not any(o) else -1) * stencil.inside_mask(box, o, np)
                 for o in offs]
    return box, axes, box.coarsen(axes), offs, coefs


@blackbox_cases
def test_blackbox_galerkin_kernel_matches_twin(shape, keep, coarsened, points, dtype, monkeypatch):
    """kernels/stored.cu's blackbox_rap against galerkin.stencil_product (NumPy) on variable
    coefficients: odd and even sizes, grids that keep their ends, semi-coarsening; a thread per
    coarse point and (3D) 9 (fused_stored.SPLIT_RAP_SIZE); the coarse operator keeps the offsets
    with a neighbour in the grid (galerkin.coarse_operator)."""
    from pcplugins.core import fused_stored, galerkin
    cp = backend.cupy
    # constant: couplings across the boundary given, which the kernel skips
    box, axes, cbox, offs, coefs = blackbox_case(shape, keep, coarsened, points, seed=6)
    ops = [stencil.StencilOperator(box, offs, [c if np.isscalar(c) else xp.asarray(c) for c in coefs], xp)
           for xp in (np, cp)]
    Ts = [transfer.BlackBox(box, cbox, axes, op, lambda u: u) for op in ops]
    ref = galerkin.stencil_product(ops[0], Ts[0], cbox, np.float64)
    Dr = ref.to_dense()
    for split in (0, 2 ** 62):
        monkeypatch.setattr(fused_stored, "SPLIT_RAP_SIZE", split)
        coefs = fused_stored.galerkin_product(ops[1], Ts[1], cbox, dtype)   # zero beyond the grid
        coarse = galerkin.coarse_operator(ops[1], Ts[1], cbox, cp, dtype, None)
        if points != "constant":      # a constant fine stencil's coarse one is searched for constants
            assert coarse.offsets == [o for o in coefs if all(m > 1 for m, v in zip(cbox.shape, o) if v)]
            for plane, o in zip(coarse.coefs, coarse.offsets):
                assert bool((plane == coefs[o]).all())
        Dg = coarse.to_dense()
        tol = 1e-13 if dtype == "float64" else 1e-5
        assert np.abs(Dr - Dg).max() <= tol * np.abs(Dr).max(), split


@pytest.mark.parametrize("box", [grid.Box((9, 8, 7)), SUBBOXES[0], SUBBOXES[2], grid.Box((1, 5))], ids=str)
@pytest.mark.parametrize("dtype,tol", [("float64", 0.0), ("float32", 1e-6), ("complex128", None)])
def test_compress_statistics_batched_match_per_offset(box, dtype, tol):
    """stencil.compress's batched and class-kernel GPU statistics against the per-offset ones: a
    zero offset, a constant one (other values only where the neighbour is missing), variable ones."""
    cp = backend.cupy
    rng = np.random.default_rng(7)
    offs = stencil.box_offsets(box.dim)
    coefs = []
    for k, o in enumerate(offs):
        c = rng.uniform(-2, -1, box.shape)
        if k == 1:
            c = 0 * c
        elif k == 2:
            c = np.where(stencil.inside_mask(box, o, np) > 0, -1.5, 9.0)
        coefs.append(cp.asarray(c, dtype))
    ref = stencil._stats(box, offs, coefs, cp, tol)
    got = backend.to_host(stencil._stats_batched(box, offs, coefs, cp, tol))
    assert np.array_equal(ref, got)
    if dtype != "complex128" and not any(box.periodic):
        # the class kernel's (real, no wrap), on coefficients that are zero where the neighbour
        # is missing, as compress takes them
        coefs = [c * cp.asarray(stencil.inside_mask(box, o, np), dtype) for c, o in zip(coefs, offs)]
        ref = stencil._stats(box, offs, coefs, cp, tol)
        by_class = stencil._stats_by_class(box, offs, coefs)
        assert np.array_equal(ref[:, 0], by_class[:, 0])
        assert tol is None or np.array_equal(ref, by_class)


@blackbox_cases
def test_blackbox_weight_kernel_matches_twin(shape, keep, coarsened, points, dtype):
    """kernels/stored.cu's blackbox_class against BlackBox._class (NumPy): every weight plane,
    halo included, on variable star and box stencils (with a zero collapsed row: the fallback)
    and on a constant stencil (its couplings across the boundary kept); blackbox_columns against
    BlackBox._columns."""
    cp = backend.cupy
    box, axes, cbox, offs, coefs = blackbox_case(shape, keep, coarsened, points, seed=8)
    if points != "constant":
        for c in coefs:                  # a point whose collapsed rows vanish: the fallback weights
            c[(0,) * box.dim] = 0.0
    planes = []
    for xp in (np, cp):
        op = stencil.StencilOperator(box, offs, [c if np.isscalar(c) else xp.asarray(c) for c in coefs], xp, dtype)
        T = transfer.BlackBox(box, cbox, axes, op, lambda u: u)
        planes.append(backend.to_host(T.weight_planes))
    tol = 1e-13 if dtype == "float64" else 1e-5
    assert np.abs(planes[0] - planes[1]).max() <= tol
    # blackbox_columns against BlackBox._columns on the same planes
    assert np.array_equal(backend.to_host(T.columns), backend.to_host(T._columns(T.weights(), cp)))


@blackbox_cases
def test_blackbox_transfer_kernels_match_twin(shape, keep, coarsened, points, dtype):
    """kernels/stored.cu's blackbox_restrict and blackbox_prolong_add against BlackBox's lattice
    sums over the same columns, with random values in the fine and coarse halos (the coarse
    halo's columns hold the weights of the first fine points)."""
    _check_blackbox_transfers(*blackbox_case(shape, keep, coarsened, points, seed=9), dtype)
    if dtype == "float64":     # float32 columns under float64 vectors (the GPU's default)
        _check_blackbox_transfers(*blackbox_case(shape, keep, coarsened, points, seed=9), dtype, "float32")


@pytest.mark.parametrize("box", SUBBOXES + [grid.Box((30, 31), (10, 0), (20, 31), keep_ends=True)], ids=str)
@pytest.mark.parametrize("coarsened", ["all", "first-kept"])
def test_blackbox_transfer_kernels_match_twin_on_a_ranks_part(box, coarsened):
    """The same on one rank's part of a grid (its phases, its coarse part)."""
    kept = {"all": -1, "first-kept": 0}[coarsened]
    axes = tuple(a != kept for a in range(box.dim))
    rng = np.random.default_rng(10)
    offs = stencil.box_offsets(box.dim)
    coefs = [rng.uniform(1, 2, box.shape) * (4 * len(offs) if not any(o) else -1) * stencil.inside_mask(box, o, np)
             for o in offs]
    _check_blackbox_transfers(box, axes, box.coarsen(axes), offs, coefs, "float64")


def _check_blackbox_transfers(box, axes, cbox, offs, coefs, dtype, coefficients=None):
    """The fused transfers against the twin's; ``coefficients`` float32: the columns rounded
    (the twin then takes the same columns rounded, in ``dtype``)."""
    from pcplugins.core import fused_stored
    cp = backend.cupy
    op = stencil.StencilOperator(box, offs, [c if np.isscalar(c) else cp.asarray(c) for c in coefs], cp, dtype)
    T = transfer.BlackBox(box, cbox, axes, op, lambda u: u)
    assert cp.array_equal(T.columns, T._columns(T.weights(), cp))      # blackbox_columns' twin
    fast = fused_stored.BlackBoxTransfer(T, len(offs), dtype, coefficients)
    assert fast.columns.dtype == (coefficients or dtype)
    if coefficients:
        T.columns = T.columns.astype(coefficients).astype(dtype)
    rng = np.random.default_rng(3)
    r, u = (cp.asarray(rng.standard_normal(box.padded_shape), dtype) for _ in range(2))
    e = cp.asarray(rng.standard_normal(cbox.padded_shape), dtype)
    tol = 1e-13 if dtype == "float64" else 1e-5
    ref, got = (t.restrict(cp.zeros(cbox.shape, dtype), r) for t in (T, fast))
    assert float(cp.abs(ref - got).max()) <= tol * float(cp.abs(ref).max())
    ref, got = (t.prolong_add(u.copy(), e) for t in (T, fast))
    assert float(cp.abs(ref - got).max()) <= tol * float(cp.abs(ref).max())
    assert float(cp.abs(ref - u).max()) > 0.1        # the prolongation added something


# boxes holding the grid's last points (and one that does not), for the non-uniform last cell
END_BOXES = [grid.Box((31, 30, 29), (20, 19, 17), (11, 11, 12)), grid.Box((31, 30, 29)),
             grid.Box((31, 30, 29), (5, 6, 7), (10, 11, 12)), grid.Box((45, 38), (25, 20), (20, 18)),
             grid.Box((17, 33))]


@pytest.mark.parametrize("box", END_BOXES, ids=str)
@pytest.mark.parametrize("omega,zero", [(1.0, False), (1.3, False), (1.0, True)])
def test_fused_axis_laplacian_matches_twin(box, omega, zero):
    """The TAIL kernels (a coarse level of an even grid: stencil.AxisLaplacian) against the
    generic red-black smoother and residual on the same operator."""
    from pcplugins.core import smoothers
    cp = backend.cupy
    w, r = [-1.0, -4.0, -0.5][:box.dim], [0.5, 0.75, 0.625][:box.dim]
    rng = np.random.default_rng(4)
    u, f = rng.standard_normal(box.padded_shape), rng.standard_normal(box.shape)
    if zero:
        u = np.pad(grid.interior(u) + 7.0, 1)
    op = stencil.AxisLaplacian(box, w, r, np)
    ref = smoothers.ColourGS(op, "redblack", omega).smooth(u.copy(), f, 2, reverse=True, zero_guess=zero)
    ref_r = op.residual(np.zeros(box.shape), f, ref)
    lap = fused.Laplacian(stencil.AxisLaplacian(box, w, r, cp), w)
    assert lap.tail
    got = smoothers.RedBlack(lap, omega, scratch=cp.zeros(box.padded_shape)).smooth(
        cp.asarray(u), cp.asarray(f), 2, reverse=True, zero_guess=zero)
    got_r = lap.residual(cp.zeros(box.padded_shape), cp.asarray(f), got)
    assert np.allclose(backend.to_host(got), ref, rtol=1e-13, atol=1e-13)
    assert np.allclose(backend.to_host(grid.interior(got_r)), ref_r, rtol=1e-12, atol=1e-12)
    # the coarsest solve's matrix, made from host arrays, is the device level's
    assert np.array_equal(stencil.AxisLaplacian(box, w, r, cp).to_dense(), op.to_dense())


@pytest.mark.parametrize("box", END_BOXES, ids=str)
@pytest.mark.parametrize("coarsened", ["all", "first-kept", "last-kept"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_transfers_with_omegas_match_twin(box, coarsened, dtype):
    """Transfers onto a non-uniform last cell (transfer.Transfer's omegas, on every coarsened
    axis of an odd number of points) against the generic S P and P^T S / 2^c."""
    cp = backend.cupy
    kept = {"all": -1, "first-kept": 0, "last-kept": box.dim - 1}[coarsened]
    ax = tuple(a != kept for a in range(box.dim))
    omegas = [0.3 + 0.1 * a if c and m % 2 else None for a, (c, m) in enumerate(zip(ax, box.global_shape))]
    cbox = box.coarsen(ax)
    if all(w is None for w in omegas):
        pytest.skip("no coarsened axis of an odd number of points")
    twin = transfer.Transfer(box, cbox, ax, "linear", omegas)
    fast = fused.LinearTransfer(twin, dtype)
    rng = np.random.default_rng(3)
    rf, ec = rng.standard_normal(box.padded_shape), rng.standard_normal(cbox.padded_shape)
    uf = rng.standard_normal(box.padded_shape)
    # the coarse halo past the grid's end is the Dirichlet zero
    for a, (s, n, m) in enumerate(zip(cbox.start, cbox.shape, cbox.global_shape)):
        if s + n == m:
            ec[tuple(-1 if b == a else slice(None) for b in range(box.dim))] = 0
    ref_r = twin.restrict(np.zeros(cbox.shape), rf)
    ref_p = twin.prolong_add(uf.copy(), ec)
    got_r = fast.restrict(cp.zeros(cbox.shape, dtype), cp.asarray(rf, dtype))
    got_p = fast.prolong_add(cp.asarray(uf, dtype), cp.asarray(ec, dtype))
    tol = 1e-14 if dtype == "float64" else 1e-6
    assert np.allclose(backend.to_host(got_r), ref_r, rtol=tol, atol=tol)
    assert np.allclose(backend.to_host(got_p), ref_p, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", [c for c in halo_fill_cases(("linear",)) if not c[0].virtual_end],
                         ids=lambda c: f"{c[0].global_shape}-{c[3]}-{c[0].keep_ends[0]}")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_prolongation_fills_the_halo_as_twin(case, dtype):
    """prolong_add with the twin's fill_halo, on every part of a grid split over ranks: the
    whole grid's generic prolongation on each part's padded array, and each part's halo between
    the parts bit for bit what its neighbour computed for the points it owns (so the ranks' copies
    of a point never differ, as after a ghost update)."""
    cp = backend.cupy
    whole, cwhole, parts, ax, kind, omegas = case
    rng = np.random.default_rng(5)
    U, E = np.pad(rng.standard_normal(whole.shape), 1), np.pad(rng.standard_normal(cwhole.shape), 1)
    W = transfer.Transfer(whole, cwhole, ax, kind, omegas).prolong_add(U.copy(), E)
    U, E = U.astype(dtype), E.astype(dtype)
    G, out = U.copy(), []
    for box, cbox in parts:
        fast = fused.LinearTransfer(transfer.Transfer(box, cbox, ax, kind, omegas, fill_halo=True), dtype)
        assert fast.fills_halo
        pad = tuple(slice(s, s + n + 2) for s, n in zip(box.start, box.shape))
        cpad = tuple(slice(s, s + n + 2) for s, n in zip(cbox.start, cbox.shape))
        got = backend.to_host(fast.prolong_add(cp.asarray(U[pad]), cp.asarray(E[cpad])))
        out.append((pad, got))
        G[tuple(slice(s + 1, s + n + 1) for s, n in zip(box.start, box.shape))] = grid.interior(got)
    tol = 1e-14 if dtype == "float64" else 1e-6
    assert np.allclose(G, W, rtol=tol, atol=tol)
    for pad, got in out:
        assert np.array_equal(got, G[pad])


@pytest.fixture(params=[(4, None), (8, None), (8, 1)], ids=lambda p: f"pair_rows{p[0]}-minb{p[1] or 'default'}")
def pair_rows(request):
    """relax_pair's tile height (fused.PAIR_ROWS) and the blocks an SM it is compiled for
    (fused.PAIR_MINB: the default's register budget, and the compiler's own), in both precisions,
    and relax_pair on levels of every size (fused.PAIR_MIN_SIZE), restored after."""
    rows, minb = request.param
    saved, saved_minb, min_size = dict(fused.PAIR_ROWS), dict(fused.PAIR_MINB), fused.PAIR_MIN_SIZE
    for dtype in saved:
        fused.set_rows(dtype, pair_rows=rows, pair_minb=minb)
    fused.PAIR_MIN_SIZE = 0
    yield rows
    fused.PAIR_MIN_SIZE = min_size
    for dtype, r in saved.items():
        fused.set_rows(dtype, pair_rows=r, pair_minb=saved_minb[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pair_launch_is_one_wave_without_spills(dtype):
    """relax_pair is compiled, for the tile width each row takes, without spilling registers to
    local memory, for PAIR_MINB blocks an SM (the widest tile) or as many threads (a narrower one,
    if that compiles without spills), and pair_planes covers a grid with at most one wave of the
    blocks the SMs hold."""
    cp = backend.cupy
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for shape in [(255, 255, 255), (200, 200, 200), (257, 257, 257), (300, 300, 300), (512, 256, 128),
                  (9, 70, 130)]:
        planes, (chunks, t1, t2), width = fused.pair_planes(shape, dtype)
        assert fused._kernel(3, dtype, "relax_pair", width=width).local_size_bytes == 0
        wave = fused.pair_wave(dtype, width)
        assert wave >= fused._pair_minb(dtype, width) * sms
        assert (chunks - 1) * planes < shape[0] <= chunks * planes
        assert t1 == -(-shape[1] // fused.PAIR_ROWS[dtype]) and t2 == -(-shape[2] // width)
        assert chunks * t1 * t2 <= wave or planes == fused.PAIR_MIN_PLANES


# tiles cut short along x and y, plane chunks of 8 with a short last one, a grid smaller than a tile
@pytest.mark.parametrize("shape", [(31, 30, 29), (9, 70, 130), (3, 5, 7)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("sweeps,zero,reverse", [(1, True, False), (2, True, True), (3, True, False),
                                                 (1, False, True), (2, False, False), (3, False, True)])
def test_fused_sweep_pairs_match_twin(shape, dtype, sweeps, zero, reverse, pair_rows):
    """relax_pair (both colours a pass, u and scratch in turn) gives the twin's sweeps, and
    leaves scratch's halo zero."""
    from pcplugins.core import smoothers
    cp = backend.cupy
    box, w = grid.Box(shape), [-1.0, -4.0, -0.5]
    rng = np.random.default_rng(6)
    u, f = np.pad(rng.standard_normal(shape), 1), rng.standard_normal(shape)
    ref = smoothers.ColourGS(stencil.laplacian(box, w, np), "redblack", 1.3).smooth(
        u.copy(), f, sweeps, reverse=reverse, zero_guess=zero)
    scratch = cp.zeros(box.padded_shape, dtype)
    sm = smoothers.RedBlack(fused.Laplacian(stencil.laplacian(box, w, cp, dtype), w), 1.3, scratch=scratch)
    assert "one fused kernel per sweep" in sm.describe()
    got = sm.smooth(cp.asarray(u, dtype), cp.asarray(f, dtype), sweeps, reverse=reverse, zero_guess=zero)
    tol = 1e-13 if dtype == "float64" else 1e-5
    assert np.allclose(backend.to_host(got), ref, rtol=tol, atol=tol)
    halo = backend.to_host(scratch).copy()
    halo[(slice(1, -1),) * 3] = 0
    assert not halo.any()


# process grids that split one axis (two or three uneven parts), two axes, or all three
@pytest.mark.parametrize("shape,dims", [((21, 20, 19), (1, 1, 2)), ((20, 23, 18), (3, 1, 1)),
                                        ((17, 22, 26), (1, 2, 2)), ((16, 15, 17), (2, 2, 2))])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("sweeps,zero,reverse", [(1, True, False), (2, True, True), (3, True, False),
                                                 (2, False, False), (3, False, True)])
def test_distributed_pair_sweeps_match_twin(shape, dims, dtype, sweeps, zero, reverse, monkeypatch):
    """On a grid split over thread ranks, RedBlack with ``faces`` (relax_face on the faces
    between the parts, a ghost update, relax_pair skipping those faces' first colour, a ghost
    update) gives the twin's sweeps on the whole grid, with two ghost updates a sweep as the
    colour kernels take."""
    from pcplugins.core import smoothers
    monkeypatch.setattr(fused, "PAIR_MIN_SIZE", 0)
    cp = backend.cupy
    w = [-1.0, -4.0, -0.5]
    rng = np.random.default_rng(7)
    u, f = np.pad(rng.standard_normal(shape), 1), rng.standard_normal(shape)
    ref = smoothers.ColourGS(stencil.laplacian(grid.Box(shape), w, np), "redblack", 1.3).smooth(
        u.copy(), f, sweeps, reverse=reverse, zero_guess=zero)
    cuts = [np.linspace(0, m, d + 1).round().astype(int) for m, d in zip(shape, dims)]
    coords = list(itertools.product(*(range(d) for d in dims)))

    def work(arg):
        rank, common = arg
        c = coords[rank]
        start = [int(cuts[a][c[a]]) for a in range(3)]
        box = grid.Box(shape, start, [int(cuts[a][c[a] + 1]) - s for a, s in enumerate(start)])
        inner = tuple(slice(s, s + n) for s, n in zip(start, box.shape))
        padded = tuple(slice(s, s + n + 2) for s, n in zip(start, box.shape))
        slots, barrier, count = common["slots"], common["barrier"], [0]

        def exchange(a):          # the neighbours' faces into a's halo, as DMDAComm.exchange
            count[0] += 1
            cp.cuda.Device().synchronize()
            slots[rank] = a
            barrier.wait()
            for ax in range(3):
                for side, step in ((0, -1), (1, 1)):
                    nc = list(c)
                    nc[ax] += step
                    if 0 <= nc[ax] < dims[ax]:
                        theirs = slots[coords.index(tuple(nc))]
                        dst, src = [slice(1, -1)] * 3, [slice(1, -1)] * 3
                        dst[ax], src[ax] = (0, -2) if side == 0 else (-1, 1)
                        a[tuple(dst)] = theirs[tuple(src)]
            cp.cuda.Device().synchronize()
            barrier.wait()
            return a
        sm = smoothers.RedBlack(fused.Laplacian(stencil.laplacian(box, w, cp, dtype), w), 1.3,
                                scratch=cp.zeros(box.padded_shape, dtype), faces=box.rank_faces())
        assert "one fused kernel per sweep" in sm.describe() and sm._faces
        got = sm.smooth(cp.asarray(u[padded], dtype), cp.asarray(f[inner], dtype), sweeps, exchange=exchange,
                        reverse=reverse, zero_guess=zero)
        return backend.to_host(got)[(slice(1, -1),) * 3], inner, count[0]
    tol = 1e-13 if dtype == "float64" else 1e-5
    for got, inner, count in on_threads(len(coords), work, lambda rank, common: (rank, common)):
        assert count == 2 * sweeps
        assert np.allclose(got, ref[tuple(slice(s.start + 1, s.stop + 1) for s in inner)], rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(31, 31, 31), (20, 17, 9), (5, 33, 65), (127, 127), (40, 63), (32, 30, 100),
                                   (256, 100)])
@pytest.mark.parametrize("cycle", ["v", "w"])
@pytest.mark.parametrize("pair_min_size", [fused.PAIR_MIN_SIZE, 0], ids=["pairs-on-large-levels", "pairs-everywhere"])
def test_fused_cycle_matches_generic(shape, cycle, rows, pair_min_size, monkeypatch):
    monkeypatch.setattr(fused, "PAIR_MIN_SIZE", pair_min_size)
    cp = backend.cupy
    box = grid.Box(shape)
    f = cp.asarray(np.random.default_rng(5).standard_normal(shape))
    out = []
    for fast in (True, False):
        op = stencil.laplacian(box, [-1.0, -2.0, -1.0][:box.dim], cp)
        mg = multigrid.Multigrid(op, multigrid.Options(cycle=cycle, fused=fast))
        assert (mg.levels[0].fused is not None) == fast
        # an even axis: coarse levels of stencil.AxisLaplacian, on the fused (TAIL) kernels too
        assert all((lev.fused is not None) == fast for lev in mg.levels[:-1])
        assert any(isinstance(lev.op, stencil.AxisLaplacian) for lev in mg.levels) == (
            any(m % 2 == 0 for m in shape) or shape == (5, 33, 65))
        u = cp.zeros(box.padded_shape)
        for _ in range(3):
            mg.cycle(f, u)
        out.append(backend.to_host(grid.interior(u)))
    assert np.linalg.norm(out[0] - out[1]) <= 1e-12 * np.linalg.norm(out[1])


@pytest.mark.parametrize("shape,fast", [((65, 65, 65), True), ((33, 40, 47), False), ((255, 257), True)])
@pytest.mark.parametrize("cycle,cycles", [("v", 1), ("v", 2), ("w", 1), ("f", 1), ("fmg", 2)])
def test_coarse_levels_graph_replays_the_same_cycle(shape, fast, cycle, cycles):
    """replay_coarse_levels: every visit of the coarse levels (V, W, F, FMG) as one captured
    graph gives the eager cycle's result exactly (the same kernels)."""
    cp = backend.cupy
    box = grid.Box(shape)
    f = cp.asarray(np.random.default_rng(8).standard_normal(shape))
    out, starts = [], []
    for replay in (False, True):
        op = stencil.laplacian(box, [-1.0, -2.0, -1.0][:box.dim], cp)
        mg = multigrid.Multigrid(op, multigrid.Options(cycle=cycle, cycles=cycles, fused=fast, pre=2, post=2))
        starts.append(mg.replay_coarse_levels(max_unknowns=3000) if replay else None)
        for _ in range(3):
            u = mg.cycle(f)
        if replay:
            assert mg._coarse_graphs and all(g.graphs for g in mg._coarse_graphs.values()), "not captured"
        out.append(backend.to_host(u).copy())
    assert starts[1] is not None and 0 < starts[1] < len(mg.levels) - 1
    assert np.array_equal(out[0], out[1])


@pytest.mark.parametrize("shape", [(9, 10, 11), (12, 13)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_elimination_matches_twin(shape, dtype, rows):
    """x and y are PETSc's (double); f is in the cycle's precision."""
    cp = backend.cupy
    box = grid.Box(shape)
    w = [-1.0, -2.0, -3.0][:box.dim]
    c = 0.3
    x = np.random.default_rng(6).standard_normal(box.padded_shape)
    y_ref = x * c
    grid.interior(y_ref)[...] = 0
    f_ref = stencil.laplacian(box, w, np).residual(np.zeros(shape), grid.interior(x), y_ref)
    y = cp.full(box.padded_shape, 5.0)
    f = fused.eliminate(cp.zeros(shape, dtype), cp.asarray(x), y, c, [0.0] * (3 - box.dim) + w)
    y = backend.to_host(y)
    assert np.all(grid.interior(y) == 5.0)            # the inside is the cycle's to write
    grid.interior(y)[...] = 0
    assert np.allclose(y, y_ref, rtol=1e-15, atol=0)
    tol = 1e-14 if dtype == "float64" else 1e-6       # f rounded once to float32
    assert f.dtype == np.dtype(dtype)
    assert np.allclose(backend.to_host(f), f_ref, rtol=tol, atol=tol)
    with pytest.raises(TypeError, match="float64"):
        fused.eliminate(cp.zeros(shape, dtype), cp.asarray(x, np.float32), cp.asarray(y), c)
    # the counterpart: the cycle's padded result into y inside the layer, the layer left alone
    u = np.random.default_rng(7).standard_normal(box.padded_shape)
    y = cp.asarray(x)
    fused.copy_inside(y, cp.asarray(u, dtype))
    expect = x.copy()
    grid.interior(expect)[...] = grid.interior(u.astype(dtype))
    assert np.array_equal(backend.to_host(y), expect)
    with pytest.raises(TypeError, match="copy_inside"):
        fused.copy_inside(y, cp.asarray(u[1:], dtype))


@pytest.mark.parametrize("shape", [(9, 10, 11), (12, 13)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("per_point", [False, True])
def test_stored_level_elimination_matches_twin(shape, dtype, per_point, rows):
    """A stored stencil's elimination (dmdapc's fused path): the kernel writes y = c x on the
    layer, the same into yb in the cycle's precision and f = x inside; the stencil's residual on
    the disjoint face lattices, in place, finishes f_I = x_I - A_IB y_B. Against the generic code:
    y = c x on the layer, f = x_I - A y on the overlapping face lattices, from x_I."""
    cp = backend.cupy
    box = grid.Box(shape)
    rng = np.random.default_rng(8)
    offsets = stencil.star_offsets(box.dim)
    coefs = [rng.uniform(-2.0, -1.0, shape) if any(o) else rng.uniform(8.0, 9.0, shape) for o in offsets]
    x = rng.standard_normal(box.padded_shape)
    layer = np.ones(box.padded_shape, bool)
    layer[tuple(slice(1, -1) for _ in shape)] = False
    c = np.where(layer, rng.uniform(0.5, 2.0, box.padded_shape), 0.0) if per_point else 0.7
    y_ref = np.where(layer, x * c, 0.0)
    op_ref = stencil.StencilOperator(box, offsets, coefs, np)
    f_ref = grid.interior(x).copy()
    for lat in grid.face_lattices(box):
        op_ref.residual(grid.view(f_ref, lat), grid.view(grid.interior(x), lat), y_ref, lat)
    op = stencil.StencilOperator(box, offsets, [cp.asarray(a, dtype) for a in coefs], cp, dtype)
    cd = c if not per_point else cp.asarray(c, dtype)
    y, yb, f = cp.full(box.padded_shape, 5.0), cp.zeros(box.padded_shape, dtype), cp.zeros(shape, dtype)
    fused.eliminate(f, cp.asarray(x), y, cd, (0.0, 0.0, 0.0), yb)
    for lat in grid.face_lattices(box, disjoint=True):
        face = grid.view(f, lat)
        op.residual(face, face, yb, lat)
    tol = 1e-13 if dtype == "float64" else 1e-5
    y, yb = backend.to_host(y), backend.to_host(yb)
    assert np.all(y[~layer] == 5.0) and np.all(yb[~layer] == 0.0)
    assert np.allclose(y[layer], y_ref[layer], rtol=tol, atol=0) and np.allclose(yb, y_ref, rtol=tol, atol=0)
    assert np.allclose(backend.to_host(f), f_ref, rtol=tol, atol=tol * np.abs(f_ref).max())
    with pytest.raises(TypeError, match="eliminate"):          # a per-point c with the star's weights
        fused.eliminate(cp.zeros(shape, dtype), cp.asarray(x), cp.asarray(y), cp.asarray(c, dtype), (1.0, 1.0, 1.0))


@pytest.mark.parametrize("shape,variable", [((31, 31, 31), False), ((63, 63), True)])
def test_hybrid_cycle_same_iterates_for_every_split(shape, variable):
    """Feng et al. Algorithm 3: the finest L levels on the GPU, the rest on the host."""
    cp = backend.cupy
    box = grid.Box(shape)
    dim = len(shape)
    f = np.random.default_rng(7).standard_normal(shape)
    if variable:
        offs = stencil.star_offsets(dim)
        k = np.exp(np.random.default_rng(2).uniform(-2, 2, shape))
        coefs = [(-k if any(o) else 2 * dim * k + 0.1) * stencil.inside_mask(box, o, np) for o in offs]
    outs = []
    for L in (None, 0, 1, 2, 3, 9):
        xp = np if L == 0 else cp
        op = (stencil.StencilOperator(box, offs, [xp.asarray(c) for c in coefs], xp) if variable
              else stencil.laplacian(box, [-1.0] * dim, xp))
        mg = multigrid.Multigrid(op, multigrid.Options(gpu_levels=L, cycle="w"))
        if L not in (None, 0, 9):
            assert mg.host_levels == len(mg.levels) - L
        u = xp.zeros(box.padded_shape)
        for _ in range(3):
            mg.cycle(xp.asarray(f), u)
        outs.append(backend.to_host(grid.interior(u)))
    for o in outs[1:]:
        assert np.linalg.norm(o - outs[0]) <= 1e-12 * np.linalg.norm(outs[0])


@pytest.mark.parametrize("shape", [(63, 63), (15, 31, 15), (31, 7)])
def test_homg_cupy_matches_numpy(shape):
    """NumPy, the CuPy expressions and the fused kernel (fused.homg_iterate), float64 to
    rounding, and the fused kernel in float32."""
    from pcplugins.core import homg
    f = np.random.default_rng(8).standard_normal(shape)
    w = [-1.0, -2.0, -1.5][:len(shape)]
    outs = []
    for xp, dtype, kernel in ((np, np.float64, False), (backend.cupy, np.float64, False),
                              (backend.cupy, np.float64, True), (backend.cupy, np.float32, True)):
        op = stencil.laplacian(grid.Box(shape), w, xp, dtype)
        solver = homg.HOMG(op, w, 8, fused_kernel=kernel)
        assert solver.fused == kernel
        u = solver.cycle(xp.asarray(f, dtype))
        u = solver.cycle(xp.asarray(f, dtype))     # a second cycle starts from zero again
        outs.append(backend.to_host(u))
    ref = np.linalg.norm(outs[0])
    for out, tol in zip(outs[1:], (1e-12, 1e-12, 1e-5)):
        assert np.linalg.norm(out - outs[0]) <= tol * ref


@pytest.mark.parametrize("shape", [(63, 63), (31, 31, 31)])
def test_fmg_cupy_matches_numpy(shape):
    f = np.random.default_rng(9).standard_normal(shape)
    outs = []
    for xp in (np, backend.cupy):
        op = stencil.laplacian(grid.Box(shape), [-1.0] * len(shape), xp)
        mg = multigrid.Multigrid(op, multigrid.Options(cycle="fmg", pre=2, post=2))
        outs.append(backend.to_host(grid.interior(mg.cycle(xp.asarray(f)))))
    assert np.linalg.norm(outs[0] - outs[1]) <= 1e-12 * np.linalg.norm(outs[0])


@pytest.mark.parametrize("shape", [(9, 17), (5, 9, 7)])
def test_fused_cubic_upsample_matches_twin(shape):
    cp = backend.cupy
    c = np.random.default_rng(10).standard_normal(shape)
    fine_shape = tuple(2 * k - 1 for k in shape)
    ref = transfer.cubic_upsample(c, np)
    got = fused.cubic_upsample(cp.zeros(fine_shape), cp.asarray(c))
    assert np.allclose(backend.to_host(got), ref, rtol=1e-14, atol=1e-14)


# -- pcplugins.AMG -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["5-point", "9-point", "random", "clique"])
def test_colour_graph_kernels_match_twins(case):
    """colouring.colour_graph on CuPy (first-fit colours: the atomic-OR and lowest-free-bit
    kernels) equals the NumPy twin's colours exactly."""
    from pcplugins.core import colouring, sparse

    from conftest import colour_graphs
    cp = backend.cupy
    A = colour_graphs()[case]
    Ad = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], cp)
    want = colouring.colour_graph(A, np)
    got = backend.to_host(colouring.colour_graph(Ad, cp))
    assert np.array_equal(got, want)


def test_row_max_kernel_matches_twin():
    """sparse.row_max: the row kernel against its host twin (a segmented maximum), on random
    rows and an empty one."""
    import scipy.sparse

    from pcplugins.core import sparse
    cp = backend.cupy
    rng = np.random.default_rng(6)
    A = scipy.sparse.random(500, 500, density=0.04, format="csr", random_state=7)
    A.data[A.indptr[17]:A.indptr[18]] = 0
    A.eliminate_zeros()
    v = rng.random(A.nnz)
    want = sparse.row_max(v, A, np)
    Ad = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], cp)
    got = backend.to_host(sparse.row_max(cp.asarray(v), Ad, cp))
    assert A.indptr[18] == A.indptr[17] and got[17] == 0
    assert np.array_equal(got, want)


@pytest.mark.parametrize("case", ["laplace", "convection", "signed", "unsorted", "nonsymmetric"])
def test_pair_kernels_match_twins(case):
    """aggregation.cu: pair_scores (the symmetrized strength on A's pattern, the strong entries'
    hashed scores) equals pair_scores(strength(A)) bit for bit on a structurally symmetric
    pattern, sorted or not, and declines (None) a nonsymmetric one; the matching rounds
    (pair_choose, pair_mutual) pair as _match_host does."""
    import scipy.sparse

    from pcplugins.core import aggregation, sparse

    from problems import convection_diffusion
    cp = backend.cupy
    rng = np.random.default_rng(3)
    A = scipy.sparse.csr_matrix(convection_diffusion(33 if case == "laplace" else 17, 0.0 if case == "laplace"
                                                     else 10.0, 2 if case == "laplace" else 3))
    if case == "signed":
        D = scipy.sparse.diags(rng.choice([-1.0, 1.0], A.shape[0]))
        A = (D @ A @ D).tocsr()
    if case == "nonsymmetric":
        A = A.tolil()
        A[0, A.shape[0] - 1] = -0.5
        A = A.tocsr()
    Ad = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], cp)
    if case == "unsorted":                 # each row's entries reversed
        for r in range(A.shape[0]):
            A.indices[A.indptr[r]:A.indptr[r + 1]] = A.indices[A.indptr[r]:A.indptr[r + 1]][::-1].copy()
            A.data[A.indptr[r]:A.indptr[r + 1]] = A.data[A.indptr[r]:A.indptr[r + 1]][::-1].copy()
        Ad = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], cp)
        Ad.has_sorted_indices = False
    # the pattern the scores are for, taken first (as pair_matching does): cupyx's diagonal() may
    # sort an unsorted matrix's rows into new arrays
    indptr, indices = Ad.indptr, Ad.indices
    got = aggregation.pair_scores_gpu(Ad, 0.25, cp)
    if case == "nonsymmetric":
        assert got is None
        return
    S = aggregation.strength(A, np)
    want = aggregation.pair_scores(S, 0.25, np)
    mine = scipy.sparse.csr_matrix((backend.to_host(got), A.indices.copy(), A.indptr.copy()), shape=A.shape)
    mine.eliminate_zeros()
    mine.sort_indices()
    ref = scipy.sparse.csr_matrix((want.copy(), S.indices.copy(), S.indptr.copy()), shape=A.shape)
    ref.eliminate_zeros()
    assert mine.nnz == ref.nnz > A.shape[0] and np.array_equal(mine.indptr, ref.indptr)
    assert np.array_equal(mine.indices, ref.indices) and np.array_equal(mine.data, ref.data)
    partner = backend.to_host(aggregation._match_gpu(indptr, indices, got, cp, 4))
    rows = np.repeat(np.arange(A.shape[0]), np.diff(S.indptr))
    strong = want > 0
    host = aggregation._match_host(A.shape[0], rows[strong], S.indices[strong], want[strong], 4)
    assert (host >= 0).sum() > A.shape[0] / 2
    paired = np.flatnonzero(partner >= 0)
    assert np.array_equal(partner[partner[paired]], paired) and (partner[paired] != paired).all()
    if case != "unsorted":                 # (equal scores go to the last in the row's own order)
        assert np.array_equal(partner, host)
    # the aggregates and member lists of the matching (pair_lists' scan and kernel), and the
    # prolongation's signs (pair_flip), against their NumPy twins on the same partners
    agg, nc, R = aggregation.pair_lists(cp.asarray(partner), cp)
    agg0, nc0, R0 = aggregation.pair_lists(partner, np)
    assert nc == nc0 and np.array_equal(backend.to_host(agg), agg0)
    for a, b in ((R.indptr, R0.indptr), (R.indices, R0.indices), (R.data, R0.data)):
        assert np.array_equal(backend.to_host(a), b)
    assert aggregation.positive_couplings(Ad, cp) == aggregation.positive_couplings(A, np) == (case == "signed")
    sign = aggregation._pair_signs(Ad, cp.asarray(partner), cp)
    sign0 = aggregation._pair_signs(A, partner, np)
    assert (sign is None) == (sign0 is None) and (sign0 is not None) == (case == "signed")
    if sign0 is not None:
        assert np.array_equal(backend.to_host(sign), sign0) and (sign0 < 0).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_gathered_rows_match_scipy(dtype, index):
    """sparse.gathered_rows (a thread a row copies its entries to the row's new place) equals
    SciPy's fancy row index M[order] for a permutation, with empty rows and unsorted entries; with
    -1 in the order, its NumPy twin, which inserts empty rows there."""
    import scipy.sparse

    from pcplugins.core import sparse
    cp = backend.cupy
    rng = np.random.default_rng(4)
    M = scipy.sparse.random(400, 300, density=0.05, format="csr", random_state=5, dtype=np.float64)
    M.data[M.indptr[7]:M.indptr[9]] = 0
    M.eliminate_zeros()
    M = M.astype(dtype)
    if np.iscomplexobj(M.data):
        M.data = M.data + 1j * rng.random(M.nnz)
    M.indices[M.indptr[20]:M.indptr[21]] = M.indices[M.indptr[20]:M.indptr[21]][::-1].copy()
    order = rng.permutation(400).astype(index)
    want = M[order]
    Md = sparse.module(cp).csr_matrix((cp.asarray(M.data), cp.asarray(M.indices), cp.asarray(M.indptr)), shape=M.shape)
    got = sparse.gathered_rows(Md, cp.asarray(order), cp)
    assert got.shape == want.shape and M.indptr[9] == M.indptr[7]
    for a, b in ((got.indptr, want.indptr), (got.indices, want.indices), (got.data, want.data)):
        assert np.array_equal(backend.to_host(a), b)
    none = sparse.module(cp).csr_matrix((cp.zeros(0, dtype), cp.zeros(0, np.int32), cp.zeros(1, np.int32)),
                                        shape=(0, 300))
    empty = sparse.gathered_rows(none, cp.zeros(0, index), cp)
    assert empty.shape == (0, 300) and empty.nnz == 0
    padded = np.insert(order, [0, 5, 5, 400], -1)          # -1: an empty row there (the cell layout's padding)
    want = sparse.gathered_rows(M, padded, np)
    assert want.shape == (404, 300) and want.nnz == M.nnz and want[[0, 6, 7, 403]].nnz == 0
    assert (want[np.flatnonzero(padded >= 0)] != M[order]).nnz == 0
    got = sparse.gathered_rows(Md, cp.asarray(padded), cp)
    for a, b in ((got.indptr, want.indptr), (got.indices, want.indices), (got.data, want.data)):
        assert np.array_equal(backend.to_host(a), b)


def _matrix_order(mg, k, values, coarse=None):
    """Level k's ``values`` (one per unknown; ``coarse``: unknowns of level k + 1, as aggregates
    are) in the numbering of the level's matrix, which the host renumbers colour by colour
    (colouring.colour_order, mg.orders)."""
    values = backend.to_host(values)
    if coarse is not None and mg.orders[k + 1] is not None:
        values = mg.orders[k + 1][values]
    order = mg.orders[k]
    if order is None:
        return values
    out = np.empty_like(values)
    out[order] = values
    return out


@pytest.mark.parametrize("method", ["auxgrid", "pairwise"])
@pytest.mark.parametrize("smoother", ["gs", "l1jacobi", "chebyshev"])
@pytest.mark.parametrize("kcycle_size", [0, 1000])
def test_amg_cupy_matches_numpy(method, smoother, kcycle_size, monkeypatch):
    """The hierarchy and one K-cycle on CuPy equal NumPy's, whole or truncated (V-cycles from the
    first level below ``kcycle_size`` unknowns). The GPU's smoothers (auto: l1-Jacobi for
    Gauss-Seidel on the V-cycle levels and on the levels but the finest below SMALL_JACOBI_SIZE,
    all of them here) are NumPy's where NumPy takes the GPU's rules."""
    from pcplugins.core import kcycle, sparse

    import meshes
    _gpu_smoother_rules(monkeypatch)
    cp = backend.cupy
    p, t = meshes.mesh("quasi", 48)
    A, xy = meshes.p1_poisson(p, t)
    f = np.random.default_rng(4).random(A.shape[0])
    out = {}
    for xp in (np, cp):
        Ax = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], xp)
        opts = kcycle.Options(aggregation=method, smoother=smoother, coarse_size=50, kcycle_size=kcycle_size)
        mg = kcycle.AggregationMG(Ax, xp, opts, xp.asarray(xy))
        assert (mg.v_from is None) == (kcycle_size == 0)
        kinds = [type(lev.smoother).__name__ for lev in mg.levels[:-1]]
        if smoother == "gs":
            assert kinds == ["CSRColourGS"] + ["CSRL1Jacobi"] * (len(kinds) - 1), kinds
        out[xp] = ([lev.n for lev in mg.levels], [_matrix_order(mg, k, lev.agg, coarse=True)
                                                  for k, lev in enumerate(mg.levels[:-1])],
                   backend.to_host(mg.cycle(xp.asarray(f))))
    assert out[np][0] == out[cp][0]
    for a, b in zip(out[np][1], out[cp][1]):
        assert np.array_equal(a, b)
    assert np.allclose(out[np][2], out[cp][2], rtol=1e-10, atol=1e-12 * np.abs(out[np][2]).max())


@pytest.mark.parametrize("smoother", ["gs", "chebyshev"])
@pytest.mark.parametrize("dim,n,peclet", [(2, 47, 0.0), (3, 16, 0.1)])
def test_smoothed_aggregation_cupy_matches_numpy(dim, n, peclet, smoother, monkeypatch):
    """Smoothed aggregation (core/smoothed.py) on CuPy: the same strength graph, independent sets,
    aggregates and smoothed prolongation as NumPy's, and the same hierarchy and W-cycle with either
    smoother (the smoother is named: auto takes Chebyshev on the host, Gauss-Seidel on the GPU;
    the host takes the GPU's l1-Jacobi levels too)."""
    from pcplugins.core import kcycle, nullspace, smoothed, sparse

    from problems import convection_diffusion
    _gpu_smoother_rules(monkeypatch)
    cp = backend.cupy
    A = convection_diffusion(n, peclet, dim).tocsr()
    f = np.random.default_rng(4).random(A.shape[0])
    out = {}
    for xp in (np, cp):
        Ax = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], xp)
        S = smoothed.strong_graph(Ax, 0.0, xp)
        roots = [smoothed.mis(S, xp, d) for d in (1, 2)]
        agg, nc = smoothed.aggregates(S, xp, 2)
        Pt, _, _ = nullspace.tentative(agg, nc, xp.ones((A.shape[0], 1)), 1, xp)
        P = smoothed.smooth(Ax, Pt, xp)
        mg = kcycle.AggregationMG(Ax, xp, kcycle.Options(cycle="w", nsmooths=1, coarse_size=50, kcycle_size=0,
                                                         smoother=smoother))
        out[xp] = ([sparse.to_host(S).toarray(), sparse.to_host(P).toarray()] + [backend.to_host(r) for r in roots]
                   + [backend.to_host(agg), [lev.n for lev in mg.levels], backend.to_host(mg.cycle(xp.asarray(f)))])
    for a, b in zip(out[np][:-1], out[cp][:-1]):
        assert np.array_equal(np.asarray(a), np.asarray(b)) or np.allclose(a, b, rtol=1e-12, atol=1e-14)
    assert np.allclose(out[np][-1], out[cp][-1], rtol=1e-10, atol=1e-12 * np.abs(out[np][-1]).max())


def _gpu_smoother_rules(monkeypatch):
    """NumPy hierarchies take the GPU's choice of smoothers (kcycle.VCYCLE_SMOOTHER,
    SMALL_JACOBI_SIZE, PAIRWISE_JACOBI), so that host and GPU cycles can be compared."""
    from pcplugins.core import kcycle
    for table in (kcycle.VCYCLE_SMOOTHER, kcycle.SMALL_JACOBI_SIZE, kcycle.PAIRWISE_JACOBI):
        monkeypatch.setitem(table, "cpu", table["gpu"])


@pytest.mark.parametrize("cycle", ["w", "k"])
def test_amg_signed_prolongation_cupy_matches_numpy(cycle, monkeypatch):
    """Positive couplings (D A D, D = diag(+-1)): the same signs, aggregates and cycle on the GPU
    (with the GPU's smoothers on the host too)."""
    import scipy.sparse

    from pcplugins.core import kcycle, sparse

    import meshes
    _gpu_smoother_rules(monkeypatch)
    cp = backend.cupy
    p, t = meshes.mesh("quasi", 48)
    A, _ = meshes.p1_poisson(p, t)
    d = np.where(np.random.default_rng(5).random(A.shape[0]) < 0.5, -1.0, 1.0)
    B = (scipy.sparse.diags(d) @ A @ scipy.sparse.diags(d)).tocsr()
    f = np.random.default_rng(4).random(A.shape[0])
    out = {}
    for xp in (np, cp):
        Bx = sparse.csr(B.indptr, B.indices, B.data, B.shape[0], xp)
        mg = kcycle.AggregationMG(Bx, xp, kcycle.Options(aggregation="pairwise", cycle=cycle, coarse_size=400,
                                                         kcycle_size=0))
        out[xp] = ([None if lev.sign is None else _matrix_order(mg, k, lev.sign)
                    for k, lev in enumerate(mg.levels[:-1])],
                   backend.to_host(mg.cycle(xp.asarray(f))))
    assert out[np][0][0] is not None
    for a, b in zip(out[np][0], out[cp][0]):
        assert (a is None and b is None) or np.array_equal(a, b)
    assert np.allclose(out[np][1], out[cp][1], rtol=1e-10, atol=1e-12 * np.abs(out[np][1]).max())


@pytest.mark.parametrize("shape", [(1024, 1024), (5, 70), (1, 1)])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.complex128, 1e-13), (np.float32, 1e-5),
                                       (np.complex64, 1e-5)])
def test_gemv_matches_numpy(shape, dtype, tol):
    """products.gemv (kernel dense_rows, a warp a row: rows longer and shorter than a warp) against
    NumPy's matmul, into the given output; and a strided input takes the CuPy reduction."""
    from pcplugins.core import products
    cp = backend.cupy
    rng = np.random.default_rng(3)
    A, x = rng.standard_normal(shape), rng.standard_normal(shape[1])
    if np.dtype(dtype).kind == "c":
        A, x = A + 1j * rng.standard_normal(shape), x + 0.5j
    A, x = A.astype(dtype), x.astype(dtype)
    ref = A @ x
    out = cp.zeros(shape[0], dtype)
    assert products.gemv(out, cp.asarray(A), cp.asarray(x)) is out
    assert np.allclose(out.get(), ref, rtol=tol, atol=tol * np.abs(A).sum(axis=1).max())
    strided = cp.asarray(np.repeat(x, 2))[::2]
    assert np.allclose(products.gemv(cp.zeros(shape[0], dtype), cp.asarray(A), strided).get(), ref,
                       rtol=tol, atol=tol * np.abs(A).sum(axis=1).max())


@pytest.mark.parametrize("density", [0.03, 0.3])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.complex128, 1e-13), (np.float32, 1e-5),
                                       (np.complex64, 1e-5)])
def test_csr_row_kernels_match_twins(dtype, tol, density):
    """products.spmv / residual / relax_rows / jacobi / restricted_residual / jacobi_prolonged (with
    and without signs): the row kernels (CSR and ELL storage, compiled per value type; rows of
    about 10 and 90 entries: a thread a row, and csr_rows_warp) against the SciPy expressions, with
    an improper colouring (same-colour neighbours) where the update order would matter, and the
    kernel (not cuSPARSE) is what ran."""
    import scipy.sparse

    from pcplugins.core import products, sparse
    cp = backend.cupy
    rng = np.random.default_rng(5)
    A = scipy.sparse.random(300, 300, density=density, random_state=6, format="csr") + scipy.sparse.identity(300)
    A = A.tocsr()
    assert (A.nnz >= products.WARP_ROWS * 300) == (density > 0.1)
    u, f = rng.random(300), rng.random(300)
    if np.dtype(dtype).kind == "c":
        A = A + 0.5j * scipy.sparse.random(300, 300, density=density, random_state=7, format="csr")
        u = u + 1j * rng.random(300)
    u, f = u.astype(dtype), f.astype(dtype)
    rows = np.arange(0, 300, 3).astype(np.int32)          # neighbours of each other: improper
    scale = rng.random(rows.size).astype(dtype)
    inv = rng.random(300).astype(dtype)
    agg = rng.permutation(np.arange(300) % 80)          # 80 aggregates, members in R's rows unsorted
    R = scipy.sparse.csr_matrix((rng.choice([-1.0, 1.0], 300), (agg, np.arange(300))), shape=(80, 300)).astype(dtype)
    e, sign = rng.random(80).astype(dtype), rng.choice([-1.0, 1.0], 300).astype(dtype)
    out = {}
    for xp in (np, cp):
        for ell in (False, True):
            Ax = sparse.storage(sparse.csr(A.indptr, A.indices, A.data, 300, xp, dtype), xp, ell)
            Ar = Ax[xp.asarray(rows)]
            uu = xp.asarray(u)
            assert xp is np or products._kernel_types(Ax, uu)
            res = [products.spmv(Ax, uu, xp), products.residual(Ax, xp.asarray(f), uu, xp),
                   products.relax_rows(uu.copy(), xp.asarray(f), Ar, xp.asarray(rows), xp.asarray(scale), xp)]
            res.append(products.jacobi(Ax, xp.asarray(f), uu, xp.asarray(inv), xp))
            assert res[-1] is not uu and np.array_equal(backend.to_host(uu), u)    # out of place
            Rx = sparse.module(xp).csr_matrix((xp.asarray(R.data), xp.asarray(R.indices.astype(np.int32)),
                                               xp.asarray(R.indptr.astype(np.int32))), shape=R.shape)
            assert xp is np or products._kernel_types(Rx, uu)     # the kernel's types (short rows: density 0.03)
            res.append(products.restricted_residual(Rx, Ax, xp.asarray(f), uu, xp))
            for sg in (None, xp.asarray(sign)):            # u + 1.5 P e, then a Jacobi sweep
                res.append(products.jacobi_prolonged(Ax, xp.asarray(f), uu.copy(), xp.asarray(e),
                                                     xp.asarray(agg.astype(np.int32)), sg, 1.5, xp.asarray(inv), xp))
            out[xp, ell] = [backend.to_host(a) for a in res]
    for key in [(np, True), (cp, False), (cp, True)]:
        for a, b in zip(out[np, False], out[key]):       # R (f - A u) sums hundreds of terms at density 0.3
            assert b.dtype == dtype and np.allclose(a, b, rtol=tol, atol=tol * max(1, np.abs(a).max())), key


@pytest.mark.parametrize("boundary", ["absorbing", "dirichlet"])
def test_helmholtz_operator_built_on_the_device(boundary):
    from pcplugins.core import helmholtz
    cp = backend.cupy
    k = np.linspace(5.0, 9.0, 19 * 19).reshape(19, 19)
    ref = helmholtz.operator(19, k, (1.0, 0.6), boundary)
    got = helmholtz.operator(19, cp.asarray(k), (1.0, 0.6), boundary, cp).get()
    assert (got.indptr == ref.indptr).all() and (got.indices == ref.indices).all()
    assert np.allclose(got.data, ref.data, rtol=1e-15, atol=0)


@pytest.mark.parametrize("coarse_solve", ["direct", "polynomial"])
@pytest.mark.parametrize("dim,n,prolongation", [(2, 33, "bilinear"), (2, 33, "dezeeuw"), (3, 17, "bilinear"),
                                                (2, 32, "dezeeuw"), (3, 16, "bilinear")])
def test_shifted_laplace_cupy_matches_numpy(coarse_solve, dim, n, prolongation):
    """The shifted-Laplace F-cycle (complex CSR levels on cupyx, the complex row kernels) against
    NumPy, with either coarsest-grid solve, in 2D (bilinear and de Zeeuw's prolongation) and 3D,
    on odd and even point counts (the virtual last coarse point)."""
    from pcplugins.core import helmholtz, slmg
    cp = backend.cupy
    k = 0.625 * (n - 1)
    M = helmholtz.operator(n, k, shift=(1.0, 0.6), dim=dim)
    z = np.random.default_rng(2).standard_normal(n ** dim) + 1j
    kw = dict(coarse_solve=coarse_solve, dim=dim, prolongation=prolongation)
    ref = slmg.ShiftedLaplaceMG(M, n, np, k, **kw).cycle(z)
    got = slmg.ShiftedLaplaceMG(M, n, cp, k, **kw).cycle(cp.asarray(z))
    # the polynomial's roots come from Arnoldi on each device's own Galerkin matrix, equal only to
    # rounding, and harmonic Ritz values amplify that: the two polynomials differ slightly
    tol = 1e-10 if coarse_solve == "direct" else 1e-6
    err = np.abs(cp.asnumpy(got) - ref).max() / np.abs(ref).max()
    assert err <= tol, err


@pytest.mark.parametrize("pairs", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("n", [1, 255, 256, 257, 100003, 3000000])
def test_device_dots_match_numpy(n, dtype, pairs):
    """products.dots's two-stage device reduction (per-block partial sums of two pairs at once,
    then their sums) against NumPy, for one, two and three pairs, on sizes around the block size
    and beyond the 1024 blocks of the first stage; complex values unconjugated, as the K-cycle's
    products of a complex symmetric matrix take them."""
    from pcplugins.core import products
    rng = np.random.default_rng(n)
    vectors = [rng.standard_normal(n).astype(dtype) for _ in range(2 * pairs)]
    if np.dtype(dtype).kind == "c":
        vectors = [v + 1j * rng.standard_normal(n) for v in vectors]
    cp = backend.cupy
    on = [(cp.asarray(vectors[2 * i]), cp.asarray(vectors[2 * i + 1])) for i in range(pairs)]
    got = products.dots(on, cp).get()
    assert got.shape == (pairs,) and got.dtype == dtype
    host = products.dots([(vectors[2 * i], vectors[2 * i + 1]) for i in range(pairs)], np)      # the twin
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for i, (a, b) in enumerate(zip(vectors[::2], vectors[1::2])):
        ref = np.dot(a.astype(np.complex128), b.astype(np.complex128))
        scale = np.dot(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
        assert abs(got[i] - ref) <= tol * scale
        assert abs(got[i] - host[i]) <= 2 * tol * scale


@pytest.mark.parametrize("dtype, pap", [(t, e) for t in (np.float64, np.float32, np.complex128, np.complex64)
                                         for e in (2.0, 0.0, -1.0) + ((1j,) if np.dtype(t).kind == "c" else ())])
@pytest.mark.parametrize("first,residual", [(True, True), (False, True), (True, False), (False, False)])
def test_fcg_update_matches_numpy(dtype, first, residual, pap):
    """products.fcg_update's kernels against their twin: u (new or updated in place) and
    r - alpha ap with alpha = rp / pap, 0 where pap gives no step (real: pap <= 0; complex:
    pap = 0); and axpy_ratio's, which takes the same guard."""
    from pcplugins.core import products
    cp = backend.cupy
    complex_ = np.dtype(dtype).kind == "c"
    rng = np.random.default_rng(5)
    u, p, r, ap = (rng.standard_normal(1001).astype(dtype) for _ in range(4))
    if complex_:
        u, p, r, ap = (v + 1j * rng.standard_normal(1001).astype(dtype) for v in (u, p, r, ap))
    rp, pp = np.asarray(0.7, dtype), np.asarray(pap, dtype)
    assert products.energy(pp) == (pap != 0 if complex_ else pap > 0)
    y = products.axpy_ratio(cp.asarray(u), cp.asarray(rp), cp.asarray(pp), cp.asarray(p), cp)
    np.testing.assert_allclose(y.get(), products.axpy_ratio(u.copy(), rp, pp, p, np), rtol=1e-5, atol=1e-5)
    kw = dict(r=r, ap=ap) if residual else {}
    ref = products.fcg_update(None if first else u.copy(), p, rp, pp, np, **kw)
    du = None if first else cp.asarray(u)
    got = products.fcg_update(du, cp.asarray(p), cp.asarray(rp), cp.asarray(pp), cp,
                              **({k: cp.asarray(v) for k, v in kw.items()}))
    ref, got = (ref, got) if residual else ((ref,), (got,))
    if not first:
        assert got[0] is du                         # in place
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-13     # the GPU may fuse a multiply and an add
    for a, b in zip(got, ref):
        np.testing.assert_allclose(cp.asnumpy(a), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(1, 1), (37, 37), (300, 120)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_dense_matches_scipy(dtype, shape):
    """sparse.dense's kernel (a thread a row adding its entries, duplicates summed) against its
    twin, SciPy's toarray, bit for bit."""
    import scipy.sparse

    from pcplugins.core import sparse
    cp = backend.cupy
    rng = np.random.default_rng(shape[0])
    coo = scipy.sparse.random(*shape, density=0.2, random_state=rng, format="coo")
    coo = scipy.sparse.coo_matrix((np.r_[coo.data, 1.5], (np.r_[coo.row, 0], np.r_[coo.col, 0])), shape=shape)
    host = coo.tocsr().astype(dtype)          # a duplicate at (0, 0), summed by tocsr
    dup = scipy.sparse.csr_matrix((np.r_[dtype(0.25), host.data], np.r_[0, host.indices],
                                   np.r_[0, host.indptr[1:] + 1]), shape=shape)   # one more at (0, 0), kept
    for A in (host, dup):
        got = sparse.dense(sparse.module(cp).csr_matrix(A), cp)
        assert got.dtype == dtype and got.shape == shape
        assert np.array_equal(cp.asnumpy(got), sparse.dense(A, np))


@pytest.mark.parametrize("route", ["segments", "sorted"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_segment_sum_and_galerkin_product_match_the_host(dtype, route, monkeypatch):
    """Kernel segment_sum against its twin (numpy.add.reduceat), and the GPU's Galerkin product
    (kernel galerkin_rows, or sparse.sum_sorted where a coarse row has more than GALERKIN_ROW
    columns), with and without signs, against SciPy's on the host: same pattern, same values to
    rounding, the same bits on a second run (no atomics)."""
    import scipy.sparse

    from pcplugins.core import sparse
    cp = backend.cupy
    rng = np.random.default_rng(3)
    data = rng.standard_normal(100000).astype(dtype)
    order = rng.permutation(data.size)
    starts = np.unique(np.concatenate([[0], rng.integers(1, data.size, 20000)]))
    tol = 1e-5 if dtype == np.float32 else 1e-12      # relative to the sums of magnitudes
    ref = sparse.segment_sum(data, order, starts)
    scale = sparse.segment_sum(np.abs(data), order, starts)
    got = sparse.segment_sum(cp.asarray(data), cp.asarray(order), cp.asarray(starts))
    assert got.dtype == dtype and (np.abs(got.get() - ref) <= tol * scale).all()
    A = scipy.sparse.random(4000, 4000, density=0.002, random_state=4, format="csr", dtype=np.float64)
    A = (A + scipy.sparse.identity(4000)).astype(dtype).tocsr()
    agg = rng.integers(0, 900, 4000).astype(np.int32)
    agg[agg == 17] = 18                       # an aggregate with no members: an empty coarse row
    if route == "segments":                 # rows of up to about 100 distinct columns
        monkeypatch.setattr(sparse, "sum_sorted", None)
        monkeypatch.setattr(sparse, "GALERKIN_ROW", 256)
    else:
        monkeypatch.setattr(sparse, "GALERKIN_ROW", 1)
    Ad = sparse.csr(A.indptr, A.indices, A.data, 4000, cp, dtype)
    for sign in (None, rng.choice([-1.0, 1.0], 4000)):
        host = sparse.galerkin(A, agg, 900, np, sign)
        runs = [sparse.galerkin(Ad, cp.asarray(agg), 900, cp, None if sign is None else cp.asarray(sign))
                for _ in range(2)]
        assert runs[0].dtype == dtype and runs[0].indptr[18] == runs[0].indptr[17]
        assert (runs[0].indptr.get() == host.indptr).all() and (runs[0].indices.get() == host.indices).all()
        assert abs(runs[0].get() - host).max() <= tol * abs(sparse.galerkin(abs(A), agg, 900, np)).max()
        assert (runs[0].data == runs[1].data).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_rows_of_and_colour_diagonal_match_numpy(dtype):
    """Kernels rows_of (a thread a row writes its index over its entries), colour_diagonal
    (colour Gauss-Seidel's l1 diagonal, whether a colour couples to itself, and whether across
    cells: none given, two halves of the unknowns, or each unknown its own), row_l1
    (sparse.l1_norms) and ell_fill (sparse.ELL.from_csr) against their NumPy twins: empty rows, an
    empty matrix, unsorted columns, a proper colouring (no same-colour coupling) and random
    colours."""
    import scipy.sparse

    from pcplugins.core import sparse
    from pcplugins.core.smoothers import csr as csr_smoothers
    cp = backend.cupy
    rng = np.random.default_rng(7)
    A = scipy.sparse.random(3000, 3000, density=0.003, random_state=8, format="csr")
    A = (A + scipy.sparse.diags(rng.random(3000) + 1)).tocsr()
    A = (scipy.sparse.diags((np.arange(3000) % 97 != 3).astype(float)) @ A).tocsr()
    A.eliminate_zeros()                                          # rows 3, 100, ... empty
    A.indices[A.indptr[10]:A.indptr[11]] = A.indices[A.indptr[10]:A.indptr[11]][::-1].copy()
    A = scipy.sparse.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape, dtype=dtype)
    assert A.has_sorted_indices == 0 and (np.diff(A.indptr) == 0).sum() >= 30
    grid = scipy.sparse.diags([np.ones(59), 2 * np.ones(60), np.ones(59)], [-1, 0, 1], format="csr", dtype=dtype)
    for M, colours in ((A, rng.integers(0, 4, 3000).astype(np.int32)),
                       (grid, (np.arange(60) % 2).astype(np.int32)),
                       (grid, (np.arange(60) // 2 % 2).astype(np.int32)),     # pairs: cells i // 2
                       (scipy.sparse.csr_matrix((0, 0), dtype=dtype), np.zeros(0, np.int32))):
        Md = sparse.csr(M.indptr, M.indices, M.data, M.shape[0], cp, dtype)
        assert (sparse.rows_of(Md, cp).get() == sparse.rows_of(M, np)).all()
        n = M.shape[0]
        pairs = M is grid and colours[1] == 0
        for cells in (None, np.arange(n, dtype=np.int32) // 2, np.arange(n, dtype=np.int32)):
            D, same, across = csr_smoothers.colour_diagonal(M, colours, np, cells)
            Dd, samed, acrossd = csr_smoothers.colour_diagonal(Md, cp.asarray(colours), cp,
                                                               None if cells is None else cp.asarray(cells))
            assert (same, across) == (samed, acrossd) and same == (M is A or pairs)
            assert across == (M is A or (pairs and (cells is None or cells[-1] == n - 1)))
            assert Dd.dtype == D.dtype and np.allclose(cp.asnumpy(Dd), D, rtol=1e-12, atol=0)
        l1, l1d = sparse.l1_norms(M, np), sparse.l1_norms(Md, cp)
        assert l1d.dtype == l1.dtype and np.allclose(cp.asnumpy(l1d), l1, rtol=1e-6, atol=0)
        E, Ed = sparse.ELL.from_csr(M, np), sparse.ELL.from_csr(Md, cp)
        assert Ed.nnz == E.nnz and Ed.shape == E.shape and Ed.data.dtype == E.data.dtype
        assert (Ed.indices.get() == E.indices).all() and (Ed.data.get() == E.data).all()


def test_upload_through_pinned_buffers_matches_asarray(monkeypatch):
    """backend.upload (and to_namespace onto the GPU) against cupy.asarray, bit for bit: with small
    buffers so that an array takes many of them, the last one partly filled; sizes that no thread
    count divides; strided and transposed inputs; several dtypes; and arrays under the staging
    threshold, which go up directly. Each result is complete on return (checked on another
    stream) and leaves the host array unchanged."""
    cp = backend.cupy
    monkeypatch.setattr(backend, "STAGED_BYTES", 1000)
    monkeypatch.setattr(backend, "STAGE_CHUNK", 4096)
    rng = np.random.default_rng(5)
    base = rng.standard_normal(30011)
    cases = [base, base[::3], base[:12000].reshape(120, 100).T, base.astype(np.float32),
             (base[:20000] + 1j * base[10000:30000]), rng.integers(-9, 9, 9001).astype(np.int32), base[:100]]
    for a in cases:
        keep = a.copy()
        with cp.cuda.Stream(non_blocking=True):
            got = backend.upload(a)
        assert got.dtype == a.dtype and got.shape == a.shape and got.flags.c_contiguous
        assert (got.get() == a).all() and (a == keep).all()
        assert (backend.to_namespace(a, cp).get() == a).all()
    big = rng.standard_normal(3 << 20)                  # 24 MB, the default buffers
    monkeypatch.undo()
    assert backend.STAGED_BYTES <= big.nbytes
    assert (backend.upload(big) == cp.asarray(big)).all()


def test_any_all_through_device_wide_reductions():
    """backend.any_true / all_true (maxima and minima of the bytes, no CUB block reduction to
    compile per size) against NumPy's any() / all(), empty and strided masks included."""
    rng = np.random.default_rng(2)
    for n in (0, 1, 7, 1000, 3001, 100003):
        for p in (0.0, 1e-4, 0.5, 1.0):
            m = rng.random(n) < p
            d = backend.cupy.asarray(m)
            for host, dev in ((m, d), (m[::3], d[::3])):
                assert backend.any_true(dev) == bool(host.any()), (n, p)
                assert backend.all_true(dev) == bool(host.all()), (n, p)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_all_finite_kernel_matches_numpy(dtype):
    """kernels.all_finite's one-kernel reduction (captured in the PC's graph) against NumPy."""
    cp = backend.cupy
    rng = np.random.default_rng(4)
    for n in (1, 7, 1000, 100003):
        for bad in (None, np.nan, np.inf, -np.inf):
            a = rng.standard_normal(n).astype(dtype)
            if bad is not None:
                a[rng.integers(n)] = bad
            d = cp.asarray(a)
            for host, dev in ((a, d), (a[::3], d[::3])):
                want = bool(np.isfinite(host).all())
                out = cp.asarray(not want)              # the kernel must overwrite it
                kernels.all_finite(dev, out)
                assert bool(out) == want, (n, bad)


@pytest.mark.parametrize("shape", [(6, 7), (5, 4, 6), (3, 3, 9)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_csr_stencil_reads_a_stencil_in_one_pass(shape, dtype, monkeypatch):
    """The central row's offsets are tried first (csr_scatter_stats alone, no offsets pass); a
    nonzero entry at another offset, a nonzero column wrapped around the grid or a NaN sends the
    matrix to the offsets' pass, which reads or reports what the twin does."""
    import scipy.sparse

    from pcplugins.core import csrstencil, detect
    cp = backend.cupy
    called = []
    kernel = csrstencil.kernel
    monkeypatch.setattr(csrstencil, "kernel", lambda name, *a, **k: called.append(name) or kernel(name, *a, **k))
    _, A = random_stencil_matrix(shape, stencil.star_offsets(len(shape)), seed=3)
    strides = [int(np.prod(shape[a + 1:])) for a in range(len(shape))]
    centre = int(np.dot([m // 2 for m in shape], strides))
    cases = {"stencil": A}
    B = A.tolil()
    B[centre, centre + 1] = 0.0                    # the central row lacks an offset the others have
    cases["central zero"] = B.tocsr()
    B = A.tolil()
    B[shape[-1] - 1, shape[-1]] = -1.0             # the last point of the first line to the next's first
    cases["wrapped"] = B.tocsr()
    B = A.copy()
    B.data[B.indptr[centre + 2]] = np.nan
    cases["nan"] = B
    for name, M in cases.items():
        M = scipy.sparse.csr_matrix(M)
        M.sort_indices()
        called.clear()
        got = csrstencil.stencil_of_csr(cp.asarray(M.indptr), cp.asarray(M.indices), cp.asarray(M.data), shape, dtype)
        ref = csrstencil.stencil_of_csr_twin(M.indptr, M.indices, M.data, shape, dtype)
        assert called[0] == "csr_scatter_stats" and ("csr_offsets" in called) == (name != "stencil"), (name, called)
        assert (got.offsets, got.wide, got.nonfinite) == (ref.offsets, ref.wide, ref.nonfinite), name
        assert (name == "wrapped") == got.wide and (name == "nan") == got.nonfinite
        for g, r in zip(got.coefs, ref.coefs):
            assert np.array_equal(backend.to_host(g), r), name
        if got.coefs:
            assert np.array_equal(got.stats, detect.class_stats_twin(grid.Box(shape), got.offsets, ref.coefs))


@pytest.mark.parametrize("box", [grid.Box((5, 7)), grid.Box((300, 9), (40, 2), (70, 6)), grid.Box((4, 6, 3)),
                                 grid.Box((33, 17, 300)), grid.Box((9, 8, 7), (3, 0, 2), (6, 5, 5))], ids=str)
@pytest.mark.parametrize("kind", ["star", "box"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_class_stats_kernel_matches_twin(box, kind, dtype):
    """core.detect's class_stats kernel against its twin: planes of one array (as the scatter
    makes them) and separate arrays, whole grids and rank boxes, lines longer than a block."""
    from pcplugins.core import detect
    cp = backend.cupy
    offsets = stencil.star_offsets(box.dim) if kind == "star" else stencil.box_offsets(box.dim)
    rng = np.random.default_rng(2)
    host = np.where(rng.random((len(offsets), *box.shape)) < 0.2, 0.0,
                    rng.integers(-4, 5, (len(offsets), *box.shape))).astype(dtype)
    ref = detect.class_stats_twin(box, offsets, list(host))
    planes = cp.asarray(host.reshape(len(offsets), -1))
    for coefs in ([c.reshape(box.shape) for c in planes], [cp.asarray(c) for c in host]):
        assert np.array_equal(detect.class_stats(box, offsets, coefs), ref)


@pytest.mark.parametrize("shape", [(5, 7), (4, 6, 3), (33, 17, 9), (3, 300, 260)])
@pytest.mark.parametrize("kind", ["star", "box"])
@pytest.mark.parametrize("index", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_csr_stencil_kernels_match_twin(shape, kind, index, dtype):
    """core.csrstencil's kernels (offsets present, then the scatter) against its twin, on a
    matrix with the stored zeros of DMCreateMatrix; and the wide and NaN reports."""

    from pcplugins.core import csrstencil, detect
    cp = backend.cupy
    offsets = stencil.star_offsets(len(shape)) if kind == "star" else stencil.box_offsets(len(shape))
    _, A = random_stencil_matrix(shape, offsets, seed=5)
    arrays = [cp.asarray(A.indptr.astype(index)), cp.asarray(A.indices.astype(index)), cp.asarray(A.data)]
    assert csrstencil.kernels_apply(*arrays)
    got = csrstencil.stencil_of_csr(*arrays, shape, dtype)
    ref = csrstencil.stencil_of_csr_twin(A.indptr, A.indices, A.data, shape, dtype)
    assert got.offsets == ref.offsets and not got.wide and not got.nonfinite
    for g, r in zip(got.coefs, ref.coefs):
        assert g.dtype == np.dtype(dtype) and np.array_equal(backend.to_host(g), r)
    # up to 9 offsets one kernel also takes the class statistics of the arrays
    assert (got.stats is not None) == (len(offsets) <= csrstencil.SCATTER_STATS_MAX)
    if got.stats is not None:
        assert np.array_equal(got.stats, detect.class_stats_twin(grid.Box(shape), got.offsets, ref.coefs))
    bad = A.data.copy()
    bad[A.indptr[3] + 1] = np.inf
    assert csrstencil.stencil_of_csr(arrays[0], arrays[1], cp.asarray(bad), shape, dtype).nonfinite
    far = A.tolil()
    far[0, A.shape[1] - 1] = 1.0
    far = far.tocsr()
    assert csrstencil.stencil_of_csr(cp.asarray(far.indptr.astype(index)), cp.asarray(far.indices.astype(index)),
                                     cp.asarray(far.data), shape, dtype).wide


@pytest.mark.parametrize("dim", [2, 3])
def test_system_setup_on_cupy_matches_numpy(dim):
    """core/nullspace.py on CuPy against NumPy: the node graph, the node colours, the tentative
    prolongation (P, the coarse near null space, the empty columns) and the Galerkin product."""
    import cupy
    import numpy
    from elasticity import q1_elasticity

    from pcplugins.core import nullspace, sparse
    A, xy, _ = q1_elasticity(6 if dim == 2 else 3, dim)
    rng = numpy.random.default_rng(2)
    nodes = xy.shape[0]
    agg = numpy.concatenate([numpy.arange(9), rng.integers(0, 9, nodes - 10), [9]]).astype(numpy.int32)
    out = {}
    for xp in (numpy, cupy):
        Ax = sparse.csr(A.indptr, A.indices, A.data, A.shape[0], xp)
        B = nullspace.rigid_body_modes(xp.asarray(xy), xp)
        G = nullspace.node_graph(Ax, dim, xp)
        colours = nullspace.node_colours(G, dim, xp, 1000)
        P, Bc, empty = nullspace.tentative(xp.asarray(agg), 10, B, dim, xp)
        C = nullspace.galerkin(Ax, P, empty, xp)
        left = xp.asarray(numpy.where(numpy.arange(nodes) % 7 == 3, -1, agg).astype(numpy.int32))
        P2, _, _ = nullspace.tentative(left, 10, B, dim, xp)      # nodes of aggregate -1: empty rows
        joined, nj = nullspace.join_singletons(xp.asarray(agg), G, xp)
        dropped, nd = nullspace.drop_isolated(joined, G, xp)
        out[xp] = [sparse.to_host(M).toarray() for M in (G, P, C, P2)] + \
            [cupy.asnumpy(v) if xp is cupy else v for v in (colours, Bc, empty, joined, dropped)] + [nj, nd]
    for host, dev in zip(out[numpy], out[cupy]):
        assert numpy.shape(host) == numpy.shape(dev) and numpy.allclose(host, dev, atol=1e-12), (host, dev)


@pytest.mark.parametrize("shapes", [((7, 5), (5, 9)), ((3, 7, 5), (5, 9)), ((7, 5), (3, 5, 9)), ((4, 6, 5), (4, 5, 2)),
                                    ((1, 1), (1, 1)), ((0, 5), (5, 3))])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_matmul_matches_numpy_eager_and_captured(shapes, dtype, tol):
    """backend.matmul (cuBLAS through ctypes) against numpy.matmul: unbatched, either operand
    batched, both; eager and recorded in a CUDA graph capture (what CuPy's matmul refuses)."""
    cp = backend.cupy
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    ref = np.matmul(a, b)
    da, db = cp.asarray(a), cp.asarray(b)
    out = cp.full(ref.shape, cp.nan, dtype)
    backend.matmul(da, db, out)
    assert np.allclose(out.get(), ref, rtol=tol, atol=tol)
    out[...] = cp.nan
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        backend.matmul(da, db, out)
        graph = stream.end_capture()
        assert np.isnan(out.get()).all() or out.size == 0      # captured, not run
        graph.launch(stream)
        stream.synchronize()
    assert np.allclose(out.get(), ref, rtol=tol, atol=tol)


def test_matmul_refuses_what_it_cannot_do():
    cp = backend.cupy
    a = cp.ones((3, 4))
    with pytest.raises(ValueError, match="one real dtype"):
        backend.matmul(a.astype(cp.complex128), a.T.copy().astype(cp.complex128), cp.empty((3, 3), cp.complex128))
    with pytest.raises(ValueError, match="C-contiguous"):
        backend.matmul(a, a.T, cp.empty((3, 3)))
    with pytest.raises(ValueError, match="shapes"):
        backend.matmul(a, a, cp.empty((3, 4)))


@pytest.mark.parametrize("shape,periodic", [((40, 33, 17), (False,) * 3), ((16, 30), (False, False)),
                                            ((12, 9, 20), (True, False, False))])
@pytest.mark.parametrize("dense", [0, 30, None])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_laplacian_fft_cupy_matches_numpy(shape, periodic, dense, dtype, tol):
    """fft.LaplacianFFT on the GPU (cuFFT, cuBLAS or both, by axis length) against the host's
    double solve, eager and captured in a CUDA graph."""
    from pcplugins.core import fft
    cp = backend.cupy
    box = grid.Box(shape, periodic=list(periodic))
    w = [-1.0, -2.0, -0.5][:len(shape)]
    f = np.random.default_rng(5).standard_normal(shape)
    ref = grid.interior(fft.LaplacianFFT(stencil.laplacian(box, w, np), w).cycle(f)).copy()
    solver = fft.LaplacianFFT(stencil.laplacian(box, w, cp, dtype), w, dense=dense)
    fd = cp.asarray(f, dtype)
    eager = grid.interior(solver.cycle(fd)).get()
    assert np.linalg.norm(eager - ref) <= tol * np.linalg.norm(ref)
    out = cp.full(box.padded_shape, cp.nan, dtype)
    graphs = backend.CycleGraphs(lambda x, y: y.__setitem__(Ellipsis, solver.cycle(x)))
    for _ in range(2):                                      # the capture, then its replay
        out[...] = cp.nan
        graphs(fd, out)
    assert graphs.note.startswith("on") and graphs.graphs
    assert np.linalg.norm(grid.interior(out).get() - ref) <= tol * np.linalg.norm(ref)


def test_graph_pool_gives_its_memory_back_to_the_default_pool():
    """backend.graph_pool's chunks come from CuPy's default pool and go back there when the graphs
    are freed, so the capture of the same cycle by a new preconditioner takes no new device memory."""
    cp = backend.cupy
    default = cp.get_default_memory_pool()
    x = cp.arange(1 << 20, dtype=cp.float64)
    ref = (x * 2 + 1) * x
    out = cp.zeros_like(x)

    def run(a, o):
        o[...] = (a * 2 + 1) * a                # two temporaries
    totals = []
    for _ in range(3):
        graphs = backend.CycleGraphs(run, backend.graph_pool())
        out[...] = 0
        graphs(x, out)
        assert graphs.on and len(graphs.graphs) == 1
        assert cp.array_equal(out, ref)
        used = default.used_bytes()
        graphs.free()
        assert default.used_bytes() <= used - x.nbytes       # the chunks went back
        totals.append(default.total_bytes())
    assert totals[0] == totals[1] == totals[2]


@pytest.mark.parametrize("cycle, kcycle_size", [("w", None), ("w", 300), ("k", None), ("k", 300)])
@pytest.mark.parametrize("method", ["auxgrid", "pairwise"])
def test_shared_coarse_visits_replay_the_eager_cycle(cycle, kcycle_size, method):
    """A W- or K-cycle captured with its coarse visits captured once each and inserted as child
    graph nodes (backend.Subgraphs, cycle.Cycle.coarse_correction) replays the eager cycle bit for
    bit, three times over (each replay overwrites the visits' buffers), with one captured visit a
    level from the second to the one above the coarsest."""
    from pcplugins.core import kcycle, sparse

    from conftest import laplacian
    cp = backend.cupy
    shape = (96, 95)
    A = laplacian(shape)
    xy = np.indices(shape).reshape(2, -1).T[:, ::-1].astype(float) if method == "auxgrid" else None
    opts = kcycle.Options(cycle=cycle, aggregation=method, coarse_size=16, kcycle_size=kcycle_size)
    mg = kcycle.AggregationMG(sparse.csr(A.indptr, A.indices, A.data, A.shape[0], cp), cp, opts,
                              None if xy is None else cp.asarray(xy))
    assert len(mg.levels) >= 5
    f = cp.asarray(np.random.default_rng(5).standard_normal(A.shape[0]))
    eager = mg.cycle(f)

    def run(x, out):
        out[...] = mg.cycle(x)
    graphs = backend.CycleGraphs(run, cp.cuda.MemoryPool())
    x, out = f.copy(), cp.zeros_like(f)
    for _ in range(3):
        out[...] = 0
        graphs(x, out)
        assert graphs.on and len(graphs.graphs) == 1
        assert cp.array_equal(out, eager)
    assert sorted(k for k, _ in mg._cycle.subgraphs.entries) == list(range(2, len(mg.levels) - 1))
    assert cp.array_equal(mg.cycle(f), eager)          # eager again, after the capture
    graphs.free()
    mg._cycle.subgraphs.free()


@pytest.mark.parametrize("n", [600, 1100])
@pytest.mark.parametrize("kind", ["spd", "upwind", "indefinite", "neumann"])
def test_queued_dense_inverse_matches_host(kind, n, monkeypatch):
    """coarse.dense_inverse_queued on the GPU: the Cholesky path queued on backend.fork's second
    stream; the main stream's product with the finished inverse, queued at once (no synchronisation
    between), reads the whole inverse: each matrix kind by its own path, the
    inverse NumPy's LAPACK gives."""
    from pcplugins.core import coarse
    cp = backend.cupy
    d, path = coarse_matrices(n)[kind]
    calls = []
    checked = coarse._checked_inverse
    monkeypatch.setattr(coarse, "_checked_inverse", lambda *a, **k: calls.append(k) or checked(*a, **k))
    x = np.random.default_rng(3).standard_normal(d.shape[0])
    y = (coarse.dense_inverse_queued(cp.asarray(d), cp)() @ cp.asarray(x)).get()
    # the pseudo-inverse's reference cuts the null space's singular value (rounding, 1e-16 relative)
    ref = (np.linalg.pinv(d, rcond=1e-10) if path == "pseudo-inverse" else np.linalg.inv(d)) @ x
    assert np.linalg.norm(y - ref) <= 1e-9 * np.linalg.norm(ref)
    assert [("shift" in k) for k in calls] == {"cholesky": [], "lu": [False], "pseudo-inverse": [False, True]}[path]


@pytest.mark.parametrize("case", ["2D", "3D", "odd 2D", "odd 3D", "graded", "long"])
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("ell", [False, True])
def test_cell_layout_sweeps_match_the_scatter(case, dtype, tol, ell):
    """CSRColourGS on the GPU with the aux grid's cells (smoothers.csr.cell_layout: a colour one
    row kernel in place, blocks of whole cells) against the same smoother without them (a row
    kernel and a scatter a colour) and against the NumPy smoother: two sweeps from a random u,
    forward and reversed, CSR and ELL storage (padded slots: empty CSR rows); the layout taken
    where every same-colour coupling is within a cell (not the long coupling's). And the layout
    itself the NumPy twin's."""
    from pcplugins.core import sparse
    from pcplugins.core.smoothers import csr as csr_smoothers
    cp = backend.cupy
    A, colours, cells = cell_levels()[case]
    A = A.astype(dtype)
    n = A.shape[0]
    Ad = sparse.csr(A.indptr, A.indices, A.data, n, cp, dtype)
    M = sparse.ELL.from_csr(Ad, cp) if ell else None
    members = sparse.members(cp.asarray(cells), int(cells.max()) + 1, cp)
    by_cells = csr_smoothers.CSRColourGS(Ad, cp.asarray(colours), cp, M=M, cells=cp.asarray(cells), members=members)
    scattered = csr_smoothers.CSRColourGS(Ad, cp.asarray(colours), cp, M=M)
    host = csr_smoothers.CSRColourGS(A, colours, np)
    assert by_cells.blocks == (case != "long") and not scattered.blocks and not by_cells.proper
    layout, twin = (csr_smoothers.cell_layout(cp.asarray(colours), members, cp),
                    csr_smoothers.cell_layout(colours, sparse.members(cells, int(cells.max()) + 1, np), np))
    assert np.array_equal(layout[0].get(), twin[0]) and np.array_equal(layout[1], twin[1])
    rng = np.random.default_rng(4)
    u0, f = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    for reverse in (False, True):
        a = by_cells.smooth(cp.asarray(u0), cp.asarray(f), 2, reverse).get()
        b = scattered.smooth(cp.asarray(u0), cp.asarray(f), 2, reverse).get()
        c = host.smooth(u0.copy(), f, 2, reverse)
        assert np.linalg.norm(a - b) <= tol * np.linalg.norm(b)
        assert np.linalg.norm(a - c) <= tol * np.linalg.norm(c)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_no_energy_flags_match_relative_energies(dtype):
    """energies.no_energy (one kernel a level) flags the levels that energies.relative_energies
    (its twin) finds below eps: ksp ex9's indefinite matrix and a floating part, random
    aggregates, at thresholds around the smallest ratio."""
    from pcplugins.core import energies, sparse

    from problems import ex9_matrix, floating_part
    cp = backend.cupy
    rng = np.random.default_rng(5)
    for A in (ex9_matrix(200, 1).astype(dtype), floating_part(12)[0].astype(dtype)):
        n = A.shape[0]
        agg = np.sort(rng.integers(0, n // 3, n)).astype(np.int32)
        agg = np.unique(agg, return_inverse=True)[1].astype(np.int32)
        nc = int(agg.max()) + 1
        Ac = sparse.galerkin(A, agg, nc, np)
        rho, _ = energies.relative_energies(Ac, A, np, agg)
        for eps in (0.999 * rho.min(), 1.001 * rho.min(), np.median(rho), 1e-8):
            flags = cp.zeros(3, np.int32)
            R = sparse.members(cp.asarray(agg), nc, cp)
            energies.no_energy(*(sparse.csr(M.indptr, M.indices, M.data, M.shape[0], cp, dtype) for M in (Ac, A)), R,
                               float(eps), flags, 2)
            assert flags.get().tolist() == [0, 0, int((rho <= eps).any())], (eps, rho.min())
