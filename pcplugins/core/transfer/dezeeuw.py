"""De Zeeuw's matrix-dependent prolongation (P. M. de Zeeuw, "Matrix-dependent prolongations and
restrictions in a blackbox multigrid solver", J. Comput. Appl. Math. 33, 1990), in the complex
form of Erlangga, Oosterlee and Vuik (|.| the modulus): the weights once (``dezeeuw_weights``),
applied on the stencil levels (``MatrixDependent``, any number of ranks) and as a CSR matrix
(``dezeeuw_prolongation``, slmg.ShiftedLaplaceMG's levels).
"""
import numpy

from .. import grid, sparse
from .linear import Transfer


def dezeeuw_weights(low, high, xp, where=None):
    """De Zeeuw's weights of a fine node between two coarse nodes, from its stencil's two sides
    (``low``, ``high``: each the three coefficients along that side, e.g. a_sw, a_w, a_nw): the
    strength d = max(|a + b + c|, |a|, |c|) of each side (|.| the modulus, Erlangga, Oosterlee and
    Vuik's complex form), weights d_low / (d_low + d_high) and d_high / (d_low + d_high).
    ``where``: compute them only there (zero elsewhere)."""
    def strength(side):
        a, m, b = side
        return xp.maximum(xp.maximum(abs(a + m + b), abs(a)), abs(b))

    d_lo, d_hi = strength(low), strength(high)
    if where is None:
        return d_lo / (d_lo + d_hi), d_hi / (d_lo + d_hi)
    total = xp.where(where, d_lo + d_hi, 1.0)
    return xp.where(where, d_lo / total, 0), xp.where(where, d_hi / total, 0)


class MatrixDependent:
    """De Zeeuw's matrix-dependent prolongation from the fine level's stencil (2D, every axis
    coarsened, grids that keep their ends: coarse point k on fine point 2k), the formula of
    dezeeuw_prolongation, with the linear transfer's full-weighting restriction.

    A prolongation builds P e in a padded work array: the coarse values injected (the halo too),
    the edge points from their two coarse neighbours, then ``exchange`` (the fine level's ghost
    update: a cell centre needs its neighbours' edge values, which other ranks may own), then the
    cell centres from their stencil rows; the result is added to the fine array."""
    kind = "dezeeuw"

    def __init__(self, fine, coarse, coarsened, op, exchange):
        if fine.dim != 2 or not all(fine.keep_ends) or not all(coarsened):
            raise ValueError("de Zeeuw's prolongation is built for 2D grids that keep their ends, "
                             "both axes coarsened")
        self.linear = Transfer(fine, coarse, coarsened, "linear")
        self.exchange = exchange
        xp, dtype = op.xp, op.dtype
        self.t = xp.zeros(fine.padded_shape, dtype)
        # injection: the padded fine points with even global indices inside the grid (and the
        # virtual ones past an even axis's end, grid.Box's virtual_end), from the padded coarse
        # array (coarse global g // 2 at padded index g // 2 - coarse start + 1)
        self._inject = []
        m = fine.global_shape
        virtual = [fine.virtual_end and m[a] % 2 == 0 for a in range(2)]
        for a in range(2):
            g = fine.start[a] - 1 + numpy.arange(fine.shape[a] + 2)
            ok = (g % 2 == 0) & (g >= 0) & (g < m[a] + virtual[a])
            ok &= (g // 2 - coarse.start[a] + 1 >= 0) & (g // 2 - coarse.start[a] + 1 < coarse.shape[a] + 2)
            p = numpy.nonzero(ok)[0].tolist()
            c0 = int(g[p[0]] // 2 - coarse.start[a] + 1) if p else 0
            self._inject.append((slice(p[0], p[-1] + 1, 2), slice(c0, c0 + len(p))) if p else None)
        coef = {o: (xp.full(fine.shape, c, dtype) if numpy.isscalar(c) else c)
                for o, c in zip(op.offsets, op.coefs)}
        zero = xp.zeros(fine.shape, dtype)
        get = lambda o: coef.get(o, zero)                          # noqa: E731
        gy = (xp.arange(fine.shape[0]) + fine.start[0])[:, None]
        gx = (xp.arange(fine.shape[1]) + fine.start[1])[None, :]
        even_y, even_x = gy % 2 == 0, gx % 2 == 0

        def pair(low, high, where):                  # the two weights on the points ``where``
            return (w.astype(dtype) for w in dezeeuw_weights(low, high, xp, where))

        # the last line of an even axis lies between a coarse point and a virtual one, beyond
        # which the stencil has nothing to weigh: bilinear there (dezeeuw_prolongation's rule)
        last_y, last_x = (virtual[0] & (gy == m[0] - 1)), (virtual[1] & (gx == m[1] - 1))
        x_edge, y_edge = even_y & ~even_x, ~even_y & even_x
        self.w_w, self.w_e = pair([get((dy, -1)) for dy in (-1, 0, 1)], [get((dy, 1)) for dy in (-1, 0, 1)], x_edge)
        self.w_s, self.w_n = pair([get((-1, dx)) for dx in (-1, 0, 1)], [get((1, dx)) for dx in (-1, 0, 1)], y_edge)
        half = xp.asarray(0.5, dtype)
        self.w_w, self.w_e = (xp.where(x_edge & last_x, half, w) for w in (self.w_w, self.w_e))
        self.w_s, self.w_n = (xp.where(y_edge & last_y, half, w) for w in (self.w_s, self.w_n))
        last = ~even_y & ~even_x & (last_x | last_y)
        centre = ~even_y & ~even_x & ~last
        diag = xp.where(centre, get((0, 0)), 1.0)
        self.centre = [(o, xp.where(centre, -c / diag, 0).astype(dtype)) for o, c in coef.items() if o != (0, 0)]
        self.centre += [(o, xp.where(last, 0.25, 0).astype(dtype)) for o in ((-1, -1), (-1, 1), (1, -1), (1, 1))]

    def restrict(self, coarse_out, fine_pad):
        return self.linear.restrict(coarse_out, fine_pad)

    def prolong_add(self, fine_pad, coarse_pad):
        t = self.t
        t[...] = 0
        if all(self._inject):
            (fy, cy), (fx, cx) = self._inject
            view = t[fy, fx]
            view[...] = coarse_pad[cy, cx][:view.shape[0], :view.shape[1]]
        own = grid.interior(t)
        own += (self.w_w * t[1:-1, :-2] + self.w_e * t[1:-1, 2:]
                + self.w_s * t[:-2, 1:-1] + self.w_n * t[2:, 1:-1])
        self.exchange(t)
        n0, n1 = own.shape
        own += sum(c * t[1 + o[0]:1 + o[0] + n0, 1 + o[1]:1 + o[1] + n1] for o, c in self.centre)
        grid.interior(fine_pad)[...] += own
        return fine_pad


def dezeeuw_prolongation(A, n, xp=numpy):
    """De Zeeuw's matrix-dependent prolongation on the grid of n x n points (the boundary nodes
    unknowns, coarse node J at fine node 2J; an even n adds the virtual coarse nodes on fine node n,
    one cell beyond the grid, grid.Box's ``virtual_end``), from A's 9-point (or 5-point) stencils,
    in the complex form of Erlangga, Oosterlee and Vuik: |.| is the modulus.

    A fine node between two coarse nodes along x takes the weights d_w / (d_w + d_e) and
    d_e / (d_w + d_e) from its west and east neighbours, with d_w = max(|a_nw + a_w + a_sw|,
    |a_nw|, |a_sw|) the strength of its west column (along y: its north and south rows;
    dezeeuw_weights, which the stencil levels' MatrixDependent uses too). A node in
    the middle of a coarse cell makes its own row of A P vanish: its value is -(sum of its
    neighbours' a_j e_j) / a_c, the neighbours' e_j being the coarse values and the interpolated
    edge values. The last column and row of an even n lie between a coarse node and a virtual one,
    beyond which A has no couplings to weigh: they interpolate bilinearly (edges 1/2 and 1/2,
    cell centres 1/4 from each corner), the corner's only weight. For the constant-coefficient
    Laplacian it is bilinear interpolation. A is a CSR
    matrix of ``xp`` (SciPy or cupyx) with no duplicate entries; so is the result (n^2 x nc^2)."""
    sp = sparse.module(xp)
    N = n * n
    nc = n // 2 + 1
    rows = sparse.rows_of(A, xp).astype(numpy.int64)
    cols = A.indices.astype(numpy.int64)
    dy, dx = cols // n - rows // n, cols % n - rows % n
    near = (abs(dx) <= 1) & (abs(dy) <= 1)
    S = xp.zeros((3, 3, N), dtype=A.dtype)          # S[dy + 1, dx + 1, row]
    S[dy[near] + 1, dx[near] + 1, rows[near]] = A.data[near]
    j, i = xp.divmod(xp.arange(N), n)
    r, c, v = [], [], []

    def add(p, jj, ii, w):                           # row p, coarse node at fine (jj, ii), weight w
        r.append(p), c.append((jj // 2) * nc + ii // 2), v.append(w)

    p = xp.nonzero((j % 2 == 0) & (i % 2 == 0))[0]   # coarse nodes: injection
    add(p, j[p], i[p], xp.ones(p.shape[0], A.dtype))
    p = xp.nonzero((j % 2 == 0) & (i % 2 == 1) & (i + 1 < n))[0]   # between west and east coarse nodes
    w_w, w_e = dezeeuw_weights(*([S[a, side, p] for a in range(3)] for side in (0, 2)), xp)
    add(p, j[p], i[p] - 1, w_w)
    add(p, j[p], i[p] + 1, w_e)
    p = xp.nonzero((j % 2 == 1) & (i % 2 == 0) & (j + 1 < n))[0]   # between south and north coarse nodes
    w_s, w_n = dezeeuw_weights(*([S[side, a, p] for a in range(3)] for side in (0, 2)), xp)
    add(p, j[p] - 1, i[p], w_s)
    add(p, j[p] + 1, i[p], w_n)
    # an even n: the last column (row) lies between a coarse node and a virtual one, bilinearly
    last_x, last_y = (i == n - 1) & (i % 2 == 1), (j == n - 1) & (j % 2 == 1)
    for edge, (sj, si) in (((j % 2 == 0) & last_x, (0, 1)), ((i % 2 == 0) & last_y, (1, 0))):
        p = xp.nonzero(edge)[0]
        for s in (-1, 1):
            add(p, j[p] + s * sj, i[p] + s * si, xp.full(p.shape[0], 0.5, A.dtype))
    last = (j % 2 == 1) & (i % 2 == 1) & (last_x | last_y)
    p = xp.nonzero(last)[0]
    for sj in (-1, 1):
        for si in (-1, 1):
            add(p, j[p] + sj, i[p] + si, xp.full(p.shape[0], 0.25, A.dtype))
    P = sp.coo_matrix((xp.concatenate(v).astype(A.dtype), (xp.concatenate(r), xp.concatenate(c))),
                      shape=(N, nc * nc)).tocsr()
    # cell centres: (A P) vanishes on their rows; they couple only to non-centre nodes
    centre = (j % 2 == 1) & (i % 2 == 1) & ~last
    D = A.diagonal()
    off = A - sp.diags(D)
    scale = xp.where(centre, -1.0 / xp.where(centre, D, 1.0), 0.0).astype(A.dtype)
    return (P + sp.diags(scale) @ (off @ P)).tocsr()
