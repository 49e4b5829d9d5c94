"""Smoothers of CSR levels (aggregation AMG, the shifted Laplacian's CSR levels): multicolour
Gauss-Seidel by row colours, l1-Jacobi, the hybrid form of either across ranks, and Chebyshev
(its recurrence and bounds those of the stencil levels' Chebyshev: stencil.chebyshev_steps)."""
import copy

import numpy

from ... import backend
from .. import products, smoothed, sparse
from .stencil import capped_lambda_max, chebyshev_steps, lanczos_lambda_max, probe_vector


class CSRColourGS:
    """Gauss-Seidel by colours: the unknowns of one colour are updated together,
    u_c += omega (f - A u)_c / D_c. D is the diagonal plus the absolute couplings to other unknowns
    of the same colour (the l1 idea of Baker, Falgout, Kolev, Yang 2011): with a proper colouring
    that is plain Gauss-Seidel; with the aux grid's aggregate colouring (vertices of one cell share
    a colour, Wang, Hu, Cohen, Xu section 4.5) it stays convergent for any SPD matrix.
    ``extra``: more to add to D (CSRHybrid's couplings to other ranks). ``cells``: the aggregates
    (the aux grid's cells) and ``members`` their rows (sparse.members); on the GPU, where the
    colouring is not proper but every coupling within a colour is within a cell, each colour's rows
    go in the cell layout (``cell_layout``) and a colour is one kernel in place, not a kernel and a
    scatter."""

    def __init__(self, A, colours, xp, omega=1.0, extra=None, M=None, cells=None, members=None):
        self.A, self.xp, self.omega = A, xp, omega
        self.dtype = (A if M is None else M).dtype      # the cycle's (-pc_amg_precision)
        D, same, across = colour_diagonal(A, colours, xp, cells)
        if extra is not None:
            D = D + extra
        layout = None
        if backend.is_gpu(xp) and same and members is not None and not across:
            layout = cell_layout(colours, members, xp)
        self.blocks = layout is not None
        if self.blocks:
            order, bounds = layout                # -1: a slot's padding, an empty row
            invd = (omega / D[xp.maximum(order, 0)]).astype(self.dtype)
            rows = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            self.ncolours = len(bounds) - 1
        else:
            # the rows by colour (one sort, one transfer of the counts), each colour's rows in order
            counts = backend.to_host(xp.bincount(colours)) if colours.size else []    # a rank may own no rows
            self.ncolours = len(counts)
            bounds = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(int)
            order, invd, rows = self._colour_rows(colours, D, bounds)
        self._rows = order, bounds, rows, invd
        self.parts = self._parts(A if M is None else M)
        self.proper = not same

    def _parts(self, M):
        """(rows, M's rows of them, omega / D of them) of each colour, in the sweep's order."""
        order, bounds, rows, invd = self._rows
        return [(idx, Mc, invd[a:b]) for a, b, idx, Mc in zip(bounds[:-1], bounds[1:], rows,
                                                              sparse.row_parts(M, order, bounds)) if b > a]

    def transposed(self, AT, MT, rows=None):
        """The smoother of the transposed cycle (cycle.Cycle.transposed) on AT = A^T (``MT`` its
        storage; ``rows`` unused: CSRHybrid holds a distributed level's). A forward sweep is
        u += M^-1 (f - A u) with M = D/omega + L, L the couplings to earlier colours, so
        M^T = D/omega + L^T is a backward sweep of A^T with the same colours and A's D; the
        transposed cycle runs its post-sweeps backward and its pre-sweeps forward as the cycle
        does, which swaps the two."""
        t = copy.copy(self)
        t.A, t.parts = AT, self._parts(MT)
        return t

    def _colour_rows(self, colours, D, bounds):
        """(order, omega / D in that order, each colour's rows) of the rows sorted by colour. On
        the host, unknowns numbered colour by colour (colouring.colour_order) make each colour a
        slice: updated in place, no gather or scatter, and no sort here."""
        xp, dtype = self.xp, self.dtype
        if not backend.is_gpu(xp) and bool((colours[1:] >= colours[:-1]).all()):
            return None, (self.omega / D).astype(dtype), [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        keys = colours.astype(numpy.int16 if self.ncolours < 2 ** 15 else numpy.int32)   # radix-sorted
        order = xp.argsort(keys, kind="stable") if not backend.is_gpu(xp) else xp.argsort(keys)
        order = order.astype(numpy.int32)
        return order, (self.omega / D[order]).astype(dtype), [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        parts = self.parts[::-1] if reverse else self.parts
        for _ in range(sweeps):
            for idx, Ac, invd in parts:
                products.relax_rows(u, f, Ac, idx, invd, self.xp, independent=self.proper, blocks=self.blocks)
        return u

    def describe(self):
        kind = "Gauss-Seidel" if self.proper else "l1 Gauss-Seidel (same-colour couplings in the diagonal)"
        w = "" if self.omega == 1.0 else f", omega {self.omega:g}"
        return f"{self.ncolours}-colour {kind}{w}" + (", a kernel a colour (cell layout)" if self.blocks else "")


def colour_diagonal(A, colours, xp, cells=None):
    """Colour Gauss-Seidel's diagonal (CSRColourGS): D_i = a_ii plus the sum of |a_ij|
    over the other unknowns j of i's colour, that sum in float64 (as NumPy's weighted bincount
    sums: D is float64, or complex128 for a complex A), whether any such coupling exists, and
    whether any is between two ``cells`` (always, where there are none). On the GPU one kernel, a
    thread a row, summing in the row's order, and one wait for both flags; its twin is the NumPy
    expression."""
    if backend.is_gpu(xp) and A.shape[0]:
        D = xp.empty(A.shape[0], numpy.result_type(A.dtype, numpy.float64))
        flags = xp.empty(A.shape[0], numpy.int32)
        sparse.elementwise("colour_diagonal", "raw I indptr, raw I indices, raw T data, raw C colours, "
                           "raw G cells, bool by_cells", "D d, int32 flags",
                           "T diag = 0; double l1 = 0; int same = 0, across = 0;"
                           "for (I k = indptr[i]; k < indptr[i + 1]; ++k) {"
                           "  const I j = indices[k];"
                           "  if (j == i) diag += data[k];"
                           "  else if (colours[j] == colours[i]) {"
                           "    l1 += magnitude(data[k]); same = 1;"
                           "    if (!by_cells || cells[j] != cells[i]) across = 1;"
                           "  }"
                           "}"
                           "d = D(diag) + D(l1); flags = same | across << 1",
                           preamble=sparse.MAGNITUDE)(
            A.indptr, A.indices, A.data, colours, colours if cells is None else cells, cells is not None, D, flags)
        seen = int(flags.max())
        return D, bool(seen & 1), bool(seen & 2)
    rows, cols = sparse.rows_of(A, xp), A.indices
    same = (colours[rows] == colours[cols]) & (rows != cols)
    D = A.diagonal() + xp.bincount(rows[same], weights=xp.abs(A.data[same]), minlength=A.shape[0])
    across = same if cells is None else same & (cells[rows] != cells[cols])
    return D, backend.any_true(same), backend.any_true(across)


# the most rows a cell of the cell layout may have (its slot stays within a block of products.BLOCK)
CELL_SLOTS = 32
_MOST_COLOURS = 64            # colour_graph's most


def cell_layout(colours, members, xp):
    """The rows of a colour Gauss-Seidel sweep, colour by colour, in slots: each cell's rows in a
    slot of 1, 2, 4, ... 32 rows (its size rounded up to a power of 2; -1 pads a slot), a colour's
    slots largest first and in cell order among equals, so that each slot starts at a multiple of
    its size; each colour starting at a multiple of products.BLOCK. A block of the row kernel then
    holds whole cells. ``members``: the cells' rows (sparse.members' form, a cell's rows of one
    colour). Returns (rows, bounds), bounds the colours' starts and the end; None where a cell has
    more than CELL_SLOTS rows, or there are more than 64 colours. Where every same-colour coupling
    is within a cell, the rows of one colour couple only within a block, and the row kernel may
    update them in place (products.relax_rows with ``blocks``). One sort of the cells and one wait
    for the host. On the GPU the per-cell and per-row steps are one kernel each (_CellKernels);
    the NumPy expressions here are their twin."""
    ncells, n = members.shape
    if n == 0 or ncells == 0:
        return None
    gpu = backend.is_gpu(xp)
    if gpu:
        key, size = _CELL_KERNELS.keys(members, colours, n)
    else:
        size = xp.diff(members.indptr)
        colour = colours[members.indices[xp.minimum(members.indptr[:-1], n - 1)]].astype(numpy.int16)
        code = sum((size > (1 << b)).astype(numpy.int16) for b in range(5))      # log2 of the slot's size
        key = colour * numpy.int16(6) + (numpy.int16(5) - code)          # colour by colour, larger slots first
    perm = (xp.argsort(key) if gpu else xp.argsort(key, kind="stable")).astype(numpy.int32)
    key = key[perm]
    width = _CELL_KERNELS.width(key) if gpu else xp.left_shift(1, 5 - key % 6).astype(numpy.int64)
    end = xp.cumsum(width)
    cuts = xp.searchsorted(key, xp.arange(0, 6 * _MOST_COLOURS + 1, 6, dtype=numpy.int16))
    if gpu:     # the slots before each colour, the largest cell and the last colour
        info = _CELL_KERNELS.info(cuts, end, size.max(), key)
    else:
        upto = xp.concatenate([xp.zeros(1, numpy.int64), end])[cuts]
        info = xp.concatenate([upto, size.max().astype(numpy.int64)[None], (key[-1] // 6)[None]])
    info = backend.to_host(info)
    if info[-2] > CELL_SLOTS or info[-1] >= _MOST_COLOURS:
        return None
    upto = info[:-2]
    total = numpy.diff(upto)[:int(numpy.flatnonzero(numpy.diff(upto))[-1]) + 1]
    bounds = numpy.concatenate([[0], numpy.cumsum(-(-total // products.BLOCK) * products.BLOCK)])
    shift = xp.asarray(bounds[:-1] - upto[:len(total)])     # each colour's padding before it
    if gpu:
        return _CELL_KERNELS.rows(members, perm, key, end, shift, int(bounds[-1])), bounds.astype(int)
    slot = xp.empty(ncells, numpy.int64)
    slot[perm] = end - width + shift[key // 6]
    cell = sparse.rows_of(members, xp)
    rows = xp.full(int(bounds[-1]), -1, numpy.int32)
    rows[slot[cell] + xp.arange(n) - members.indptr[cell]] = members.indices
    return rows, bounds.astype(int)


class _CellKernels:
    """cell_layout's steps on the GPU, each one kernel where the NumPy twin takes several
    operations (a setup step of many small launches is bound by the host's time for them)."""

    def keys(self, members, colours, n):
        """(key, size) of each cell: colour * 6 + 5 - log2 of its slot, and its number of rows."""
        cp = backend.cupy
        key, size = cp.empty(members.shape[0], numpy.int16), cp.empty(members.shape[0], numpy.int32)
        sparse.elementwise("cell_key", "raw I indptr, raw J indices, raw C colours, int32 n",
                           "raw int16 key, raw int32 rows",
                           "const I a = indptr[i]; const int s = (int)(indptr[i + 1] - a);"
                           "const int code = (s > 1) + (s > 2) + (s > 4) + (s > 8) + (s > 16);"
                           "key[i] = (short)((short)colours[indices[a < n - 1 ? a : n - 1]] * 6 + 5 - code);"
                           "rows[i] = s")(
            members.indptr, members.indices, colours, numpy.int32(n), key, size, size=members.shape[0])
        return key, size

    def width(self, key):
        return sparse.elementwise("cell_width", "int16 key", "int64 width", "width = 1LL << (5 - key % 6)")(key)

    def info(self, cuts, end, size_max, key):
        """The slots before each colour (cut), then the largest cell and the last colour."""
        info = backend.cupy.empty(cuts.size + 2, numpy.int64)
        sparse.elementwise("cell_info", "raw I cuts, raw int64 end, raw S size_max, raw int16 key, int32 ncuts, "
                           "int32 ncells", "int64 info",
                           "if (i < ncuts) info = cuts[i] > 0 ? end[cuts[i] - 1] : 0;"
                           "else if (i == ncuts) info = size_max[0];"
                           "else info = key[ncells - 1] / 6")(
            cuts, end, size_max, key, numpy.int32(cuts.size), numpy.int32(key.size), info)
        return info

    def rows(self, members, perm, key, end, shift, total):
        """The layout: each cell's rows from its slot's start (its place among the sorted keys
        ``perm``, ``end`` their slots' running ends, ``shift`` each colour's padding), -1 padding."""
        cp = backend.cupy
        ncells = members.shape[0]
        slot = cp.empty(ncells, numpy.int64)
        sparse.elementwise("cell_slot", "raw int32 perm, raw int16 key, raw int64 end, raw int64 shift",
                           "raw int64 slot",
                           "const int k = key[i]; slot[perm[i]] = end[i] - (1LL << (5 - k % 6)) + shift[k / 6]")(
            perm, key, end, shift, slot, size=ncells)
        rows = cp.full(total, -1, numpy.int32)
        sparse.elementwise("cell_rows", "raw I indptr, raw J indices, raw int64 slot", "raw int32 rows",
                           "const I a = indptr[i];"
                           "for (I k = a; k < indptr[i + 1]; ++k) rows[slot[i] + (k - a)] = (int)indices[k]")(
            members.indptr, members.indices, slot, rows, size=ncells)
        return rows


_CELL_KERNELS = _CellKernels()


class CSRL1Jacobi:
    """u += (f - A u) / l1, with l1 the row sums of |a_ij|: convergent for any SPD matrix.
    ``extra``: more to add to l1 (CSRHybrid's couplings to other ranks)."""

    def __init__(self, A, xp, extra=None, M=None):
        l1 = sparse.l1_norms(A, xp)
        self.A, self.xp = A if M is None else M, xp
        self.inv = sparse.astype(1.0 / (l1 if extra is None else l1 + extra), self.A.dtype)

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        """Out of place (one kernel a sweep on the GPU): returns a new array, or ``u``, written,
        for no sweeps from zero or for one (its residual is f)."""
        if zero_guess:
            if sweeps == 0:
                u[...] = 0
                return u
            u = self.xp.multiply(self.inv, f, out=u) if self.inv.dtype == u.dtype else self.inv * f
        for _ in range(sweeps - bool(zero_guess)):
            u = products.jacobi(self.A, f, u, self.inv, self.xp)
        return u

    def smooth_prolonged(self, u, e, agg, sign, alpha, f, sweeps):
        """``smooth`` of u + alpha P e (``agg``, ``sign``: P as products.prolong_add takes it),
        its first sweep one product with the prolongation (products.jacobi_prolonged)."""
        if sweeps == 0:
            return products.prolong_add(u, e, agg, sign, alpha)
        u = products.jacobi_prolonged(self.A, f, u, e, agg, sign, alpha, self.inv, self.xp)
        return self.smooth(u, f, sweeps - 1)

    def transposed(self, AT, MT, rows=None):
        """The transposed cycle's smoother (cycle.Cycle.transposed): M = diag(l1) is its own
        transpose, so the same sweep on A^T (``MT``) with A's l1 norms (``rows`` unused)."""
        t = copy.copy(self)
        t.A = MT
        return t

    def describe(self):
        return "l1-Jacobi"


class CSRHybrid:
    """A CSR smoother of this rank's rows of a distributed matrix (distributed.Rows): the values
    other ranks own are exchanged once per sweep and held fixed during it, so within a rank it is
    ``inner`` (Gauss-Seidel or l1-Jacobi), across ranks Jacobi: the hybrid smoother of Baker,
    Falgout, Kolev and Yang (2011). ``inner`` must be built with the row sums of |a_ij| over the
    other ranks' columns in its diagonal (Rows.ghost_l1), their l1 smoothers, which stay
    convergent for any SPD matrix whatever the number of ranks."""

    def __init__(self, inner, A):
        self.inner, self.A = inner, A

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        for s in range(sweeps):
            first = zero_guess and s == 0           # every rank starts from zero: no exchange
            g = f if first else f - self.A.off_rank(u)
            u = self.inner.smooth(u, g, 1, reverse=reverse, zero_guess=first)
        return u

    def transposed(self, AT, MT, rows):
        """The transposed cycle's smoother: M = blockdiag(M_p) over the ranks transposes block by
        block, so the hybrid sweep of A^T's ``rows`` with ``inner``'s transpose (A's l1 diagonal,
        its ghost couplings included)."""
        return CSRHybrid(self.inner.transposed(AT, MT), rows)

    def describe(self):
        return f"hybrid {self.inner.describe()} (Jacobi across ranks, one exchange per sweep)"


class CSRChebyshev:
    """Chebyshev polynomial in D^-1 A on [b/10, b], b = 1.1 lambda_max, with the stencil levels'
    ``Chebyshev`` recurrence and the same lambda_max estimate (stencil.lanczos_lambda_max), capped
    by Gershgorin's bound where A is nearly symmetric (stencil.capped_lambda_max).
    ``rows``: the distributed.Rows A belongs to on several ranks; the polynomial is then the global
    one (an exchange per product, global sums)."""

    def __init__(self, A, xp, its=12, rows=None, M=None):
        self.A, self.xp, self.rows = A if M is None else M, xp, rows
        invd = 1.0 / A.diagonal()
        self.invd = sparse.astype(invd, self.A.dtype)        # the cycle's precision (-pc_amg_precision)
        first = int(rows.starts[rows.comm.rank]) if rows else 0
        b = xp.asarray(probe_vector((first,), (A.shape[0],)), dtype=invd.dtype)
        dot = (lambda x, y: float(xp.vdot(x, y).real)) if rows is None else \
            (lambda x, y: float(rows.comm.allsum(float(xp.vdot(x, y).real))))
        lam = lanczos_lambda_max(rows.spmv if rows else (lambda p: A @ p), invd, b, dot, its)
        ghost = rows.ghost if rows else None
        bound = smoothed.gershgorin(A, xp, ghost)
        measure = lambda: smoothed.measures(A, xp, ghost, rows.comm.allsum if rows else None)[0]  # noqa: E731
        self.b = 1.1 * capped_lambda_max(lam, rows.comm.allmax(bound) if rows else bound, measure)
        self.a = 0.1 * self.b
        self._steps = {}

    def _residual(self, f, u):
        return self.rows.residual(f, u) if self.rows else products.residual(self.A, f, u, self.xp)

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        d = None
        for c_d, scale in self._scaled(sweeps):
            if d is None and zero_guess:
                d = f * scale            # from zero the first residual is f: a product saved
            else:
                r = self._residual(f, u)
                r *= scale               # in place: on the host a new array costs its page faults
                if d is None:
                    d = r
                else:
                    d *= c_d
                    d += r
            u += d
        return u

    def transposed(self, AT, MT, rows=None):
        """The transposed cycle's smoother (cycle.Cycle.transposed): the error propagator
        q(D^-1 A) transposes to A^-T q(A^T D^-1) A^T = q(D^-1 A^T), the same polynomial (bounds, D)
        in D^-1 A^T (``rows``: A^T's distributed.Rows on several ranks)."""
        t = copy.copy(self)
        t.A, t.rows = MT, rows
        return t

    def _scaled(self, sweeps):
        """Each step's (c_d, c_r D^-1) for ``sweeps`` steps, the second an array made once."""
        if sweeps not in self._steps:
            self._steps[sweeps] = [(c_d, self.invd * c_r) for c_d, c_r in chebyshev_steps(self.a, self.b, sweeps)]
        return self._steps[sweeps]

    def describe(self):
        return f"Chebyshev on [{self.a:.3g}, {self.b:.3g}] (Jacobi-preconditioned)"
