"""core.csrstencil: the stencil of a natural-ordering CSR matrix, against the operator it came
from (the GPU kernels against this twin: tests/gpu/test_kernels.py)."""
import numpy as np
import pytest

from pcplugins.core import csrstencil, detect, grid, stencil

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
@pytest.mark.parametrize("periodic", [False, True])
def test_entry_slots_by_difference_match_the_positions(shape, periodic):
    """The host's table lookup on column - row gives the slots and far entries that the grid
    positions give, wide entries and wrapped columns included; along a periodic axis a column
    m - 1 apart is the neighbour across the wrap."""
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
    periods = tuple(m if periodic and m >= 3 else 0 for m in shape)     # a periodic axis has 3 points at least
    rows, slot, far = csrstencil._entry_slots_by_difference(A.indptr, A.indices, shape, periods)
    pos = csrstencil.natural_positions(A.indices.astype(np.int64), shape)
    rpos = csrstencil.natural_positions(rows, shape)
    offs = np.stack([p - q for p, q in zip(pos, rpos)], axis=1)
    m = np.array([p or 10 ** 9 for p in periods])
    offs = np.where(offs == m - 1, -1, np.where(offs == 1 - m, 1, offs))
    want_far = np.abs(offs).max(axis=1) > 1
    assert np.array_equal(far, want_far)
    box = np.array(stencil.box_offsets(d))
    assert np.array_equal(box[slot[~far]], offs[~far])
    assert (far.any() or all(p == 3 for p in periods)) and (~far).any()   # 3^3 periodic: all neighbours


def class_stats_by_points(box, offsets, coefs):
    """class_stats from its definition, point by point."""
    out = np.empty((len(offsets), 3, 3))
    out[:] = (0.0, np.inf, -np.inf)
    m = box.global_shape

    def on_layer(g):
        return any(x in (0, mm - 1) for x, mm in zip(g, m))
    for k, (o, c) in enumerate(zip(offsets, coefs)):
        for i in np.ndindex(*box.shape):
            g = [s + x for s, x in zip(box.start, i)]
            q = [x + v for x, v in zip(g, o)]
            if on_layer(g):
                if not all(0 <= x < mm for x, mm in zip(q, m)):
                    continue
                cls = detect.LAYER
            else:
                cls = detect.TO_LAYER if on_layer(q) else detect.INNER
            v = c[i]
            out[k, cls] = (max(out[k, cls, 0], float(v != 0)), min(out[k, cls, 1], v), max(out[k, cls, 2], v))
    return out


@pytest.mark.parametrize("box", [grid.Box((6, 5), (0, 0), (6, 5)), grid.Box((7, 8), (2, 0), (3, 8)),
                                 grid.Box((4, 6, 5), (0, 0, 0), (4, 6, 5)), grid.Box((5, 4, 7), (1, 2, 3), (3, 2, 4)),
                                 grid.Box((2, 5), (0, 0), (2, 5))], ids=str)
def test_class_stats_twin_follows_the_definition(box):
    rng = np.random.default_rng(1)
    offsets = stencil.box_offsets(box.dim)
    coefs = [np.where(rng.random(box.shape) < 0.3, 0.0, rng.integers(-3, 4, box.shape).astype(float))
             for _ in offsets]
    assert np.array_equal(detect.class_stats(box, offsets, coefs), class_stats_by_points(box, offsets, coefs))


def constant_stats(box, offsets, values):
    return [detect.class_stats(box, offsets, [np.full(box.shape, v) if np.isscalar(v) else v for v in values])]


def test_constant_read_of_a_laplacian_with_an_identity_layer():
    """ex45's convention: identity rows on the layer, the interior rows coupled to them."""
    box = grid.Box((5, 6, 7), (0, 0, 0), (5, 6, 7))
    offsets = stencil.star_offsets(3)
    layer = np.zeros(box.shape, bool)
    for a in range(3):
        layer[(slice(None),) * a + (0,)] = layer[(slice(None),) * a + (-1,)] = True
    coefs = [np.where(layer, 0.0, -1.0) if any(o) else np.where(layer, 4.0, 6.0) for o in offsets]
    found = detect.constant_read(box, offsets, [detect.class_stats(box, offsets, coefs)], np.float64)
    assert found.layer and found.layer_diagonal == 4.0 and found.keep_ends == (False,) * 3
    assert found.consts == [-1.0 if any(o) else 6.0 for o in offsets] and found.elim == found.consts
    # couplings to the layer unlike the interior ones: the elimination is no constant stencil
    coefs[-1] = np.where(layer, 0.0, -1.0) * np.where(np.roll(layer, -1, axis=0), 0.5, 1.0)
    assert detect.constant_read(box, offsets, constant_stats(box, offsets, coefs), np.float64) is None
    coefs[-1] = np.where(layer, 0.0, -1.0)
    coefs[3] = np.where(layer, np.where(np.arange(7) % 2, 4.0, 2.0), 6.0)   # the layer's diagonal varies
    assert detect.constant_read(box, offsets, constant_stats(box, offsets, coefs), np.float64) is None
    coefs[0] = np.where(layer, 1.0, -1.0)         # a layer row with a coupling: no identity layer
    assert detect.constant_read(box, offsets, constant_stats(box, offsets, coefs), np.float64) is None


@pytest.mark.parametrize("layer", [True, False])
@pytest.mark.parametrize("case", ["variable", "constant", "zero offset", "variable near the layer"])
def test_varying_offsets_say_what_compress_keeps(layer, case):
    """detect.varying_offsets from the class statistics: where the pairs whose neighbour is an
    unknown hold no constant stencil, compress given its flags (no pass over the arrays) builds
    what compress with tolerance 0 builds; None where they hold one."""
    box = grid.Box((6, 5, 7), (0, 0, 0), (6, 5, 7))
    mgbox = grid.Box((4, 3, 5), (0, 0, 0), (4, 3, 5)) if layer else box
    offsets = stencil.star_offsets(3)
    rim = np.zeros(box.shape, bool)
    for a in range(3):
        rim[(slice(None),) * a + (0,)] = rim[(slice(None),) * a + (-1,)] = True
    rng = np.random.default_rng(4)
    coefs = [np.full(box.shape, -1.0) if any(o) else np.full(box.shape, 6.0) for o in offsets]
    if case == "variable":
        coefs[1] = -rng.uniform(1, 2, box.shape)
    if case == "zero offset":
        coefs[1] = -rng.uniform(1, 2, box.shape)
        coefs[0] = np.zeros(box.shape)
    if case == "variable near the layer":      # varies on the layer's pairs only
        coefs[1] = np.where(rim, -2.0, -1.0)
    if layer:
        coefs = [np.where(rim, 0.0 if any(o) else 4.0, c) for o, c in zip(offsets, coefs)]
    coefs = [c * stencil.inside_mask(box, o, np) for o, c in zip(offsets, coefs)]
    flags = detect.varying_offsets(offsets, detect.class_stats(box, offsets, coefs), layer)
    inner = tuple(slice(1, -1) for _ in range(3)) if layer else (Ellipsis,)
    masked = stencil.inside_planes(mgbox, offsets, [c[inner] for c in coefs], np, np.float64)
    ref = stencil.compress(mgbox, offsets, masked, np, np.float64, tol=0.0)
    assert (flags is None) == ref.constant == (case == "constant" or layer and case == "variable near the layer")
    if flags is not None:
        got = stencil.compress(mgbox, offsets, masked, np, np.float64, tol=None, nonzero=flags)
        assert got.offsets == ref.offsets and all(a is b for a, b in zip(got.coefs, ref.coefs))


@pytest.mark.parametrize("shape", [(5, 6), (4, 5, 3)])
def test_constant_read_without_a_layer(shape):
    """Interior unknowns (the couplings beyond the grid absent): a constant operator, no Neumann
    axis; a shifted operator likewise; varying coefficients, none."""
    box = grid.Box(shape, (0,) * len(shape), shape)
    d = box.dim
    offsets = stencil.star_offsets(d)
    values = [-2.0 if any(o) else 4.0 * d + 1.0 for o in offsets]
    found = detect.constant_read(box, offsets, constant_stats(box, offsets, values), np.float64)
    assert not found.layer and found.consts == values and found.keep_ends == (False,) * d
    values[0] = np.arange(box.size, dtype=float).reshape(shape)
    assert detect.constant_read(box, offsets, constant_stats(box, offsets, values), np.float64) is None


def test_constant_read_finds_neumann_axes_of_a_constant_stencil():
    """A 2D Laplacian stored on a 3D grid (no z coupling): the z faces' rows sum to zero."""
    box = grid.Box((4, 5, 6), (0, 0, 0), (4, 5, 6))
    offsets = [o for o in stencil.star_offsets(3) if o[0] == 0]
    values = [-1.0 if any(o) else 4.0 for o in offsets]
    found = detect.constant_read(box, offsets, constant_stats(box, offsets, values), np.float64)
    assert found.keep_ends == (True, False, False)


@pytest.mark.parametrize("one_array", [True, False])
def test_nonzero_stats_say_which_offsets_have_a_nonzero(one_array):
    """stencil.compress's statistics of stored coefficients (detect.nonzero_stats): any nonzero per
    offset, from the planes of one array (a Galerkin product's) or from separate arrays and
    numbers (a nonzero number counts)."""
    rng = np.random.default_rng(2)
    planes = rng.random((5, 4, 3, 6))
    planes[1] = 0.0
    planes[3] = 0.0
    planes[3, 2, 1, 5] = -1e-300             # one nonzero anywhere counts
    coefs = list(planes) if one_array else [planes[0], 0.0, planes[2], planes[3].copy(), 2.5]
    want = [True, False, True, True, True]
    got = detect.nonzero_stats(coefs)
    assert got.shape == (5, 3) and [bool(v) for v in got[:, 0]] == want
    if not one_array:
        assert not detect.nonzero_stats([0.0, np.zeros((2, 3))])[:, 0].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compress_keeps_stored_coefficients_as_planes_of_one_array(dtype):
    """A stored operator's coefficients come out of compress as consecutive planes of one array in
    the operator's precision (fused_stored.coefficient_planes then takes them as they are, not a
    copy at each use), equal to the arrays it was given, an all-zero offset dropped."""
    rng = np.random.default_rng(3)
    box = grid.Box((5, 4, 6))
    offsets = stencil.star_offsets(3)
    coefs = [rng.uniform(6.0, 7.0, box.shape) if not any(o) else -rng.random(box.shape) for o in offsets]
    coefs[0] = np.zeros(box.shape)
    masked = stencil.inside_planes(box, offsets, coefs, np, np.float64)
    op = stencil.compress(box, offsets, masked, np, dtype, tol=None)
    assert op.offsets == offsets[1:] and len(op.coefs) == len(offsets) - 1
    first = op.coefs[0].__array_interface__["data"][0]
    assert all(c.dtype == dtype and c.flags.c_contiguous and c.__array_interface__["data"][0] == first + k * c.nbytes
               for k, c in enumerate(op.coefs))
    assert all(np.array_equal(c, m.astype(dtype)) for c, m in zip(op.coefs, masked[1:]))
