"""The matrix an aggregation hierarchy is built of, from the one the user gives (pcplugins.AMG):
checked (``finite``, ``signs``) and without its lone rows (``LoneRows``).

A lone row is its diagonal alone: every off-diagonal entry is zero, or together at most ``LONE``
of the diagonal. A boundary value's identity row is one (PETSc's MatZeroRows leaves them, and
DMDA codes write them: ksp ex45, ts ex15), and so is a penalty's boundary row (a_ii + 1e8).
Ordered interior unknowns I first and lone ones L last, the matrix is block triangular,

    A = [[A_II, A_IL],
         [0,    D_L ]],                                                             (1)

the lone unknowns are x_L = D_L^-1 b_L, and the others solve A_II x_I = b_I - A_IL x_L. For B a
preconditioner of A_II the preconditioner of A is

    y_L = D_L^-1 x_L,   y_I = B (x_I - A_IL y_L),                                   (2)

whose product with A is block diagonal, diag(B A_II, I): the Krylov method sees A_II's
preconditioned operator. For a symmetric A with exactly lone rows A_IL = 0 (it is A_LI^T) and
(2) is diag(B, D_L^-1), symmetric where B is. The transpose of (2) is y_I = B^T x_I,
y_L = D_L^-1 (x_L - A_IL^T y_I).

Left in, a lone unknown joins an aggregate with interior ones, and the coarse space holds
functions that are not zero where the boundary values are fixed: the coarse correction is then
poor near the boundary, and more so under refinement (docs/amg.md: a heat equation whose
identity rows have diagonal 1 against 4/h^2 inside took 28-83 GMRES iterations from 80^2 to
320^2 points with them left in, 14-18 with them taken out).

On several ranks (distributed.Rows) each rank takes out its own lone rows; the interior rows are
numbered anew in rank order and the ghost columns take their new numbers from their owners.
"""
import numpy

from .. import backend
from . import distributed, products, sparse

# A row is lone where its other entries weigh at most this fraction of its diagonal (the sum of
# |a_ij| against |a_ii|). With couplings A_LI and C_LL (among the lone rows) in the lone rows, (2) gives
# B A = [[B (A_II - A_IL D_L^-1 A_LI), 0], [D_L^-1 A_LI, I + D_L^-1 C_LL]]: within about this of
# diag(B A_II, I) where the couplings are of the interior's size (a penalty's boundary rows)
LONE = 1e-6


def finite(A, xp, comm):
    """Raise ValueError on every rank where some rank's rows of ``A`` hold NaN or Inf."""
    blocks = (A.own, A.ghost) if isinstance(A, distributed.Rows) else (A,)
    if comm.allmax(int(not all(backend.all_true(xp.isfinite(B.data)) for B in blocks))):
        raise ValueError("the matrix has NaN or Inf entries")


def signs(A, xp, comm, number=None):
    """The signs of A's rows (an array) where A is negative definite, else None; ValueError on
    every rank where a diagonal is not positive. A negative definite matrix (div(k grad u) = -f)
    has a negative diagonal (real part) on every row but its lone ones: its preconditioner is then
    D A's applied to D x (D the signs), and for an A of negative diagonal everywhere -A's with its
    output negated (every sweep, transfer and coarse solve of -A gives the negative of A's). A
    complex matrix (Helmholtz-like) needs a diagonal of positive real part. ``number(k)``: the
    global row of this rank's row k, for the message (default: its index in A)."""
    parallel = isinstance(A, distributed.Rows)
    own = A.own if parallel else A
    first = int(A.starts[comm.rank]) if parallel else 0
    d = own.diagonal()
    negative = d.real < 0
    if comm.allmax(int(backend.any_true(negative))):
        off = sparse.l1_norms(own, xp) + (A.ghost_l1() if parallel else 0) - abs(d)
        if comm.allmin(int(backend.all_true(negative | (off == 0)))):
            return xp.where(negative, -1, 1).astype(d.dtype)
    bad = xp.nonzero(d.real <= 0)[0]
    row = (number(int(bad[0])) if number else first + int(bad[0])) if bad.size else -1
    where = [r for r in comm.allgather((row, complex(d[bad[0]]) if bad.size else 0.0)) if r[0] >= 0]
    if where:
        value = where[0][1]
        value = f"{value.real:g}" if not value.imag else f"{value:g}"
        raise ValueError(f"the matrix needs a positive diagonal; row {where[0][0]} has diagonal {value}"
                         + (" (a complex matrix needs a positive real part)" if d.dtype.kind == "c" else ""))
    return None


def _taken(M, r, keep, place, n, columns, width, xp):
    """The entries of CSR ``M`` where ``keep`` (a boolean per entry; ``r``: the entries' rows,
    sparse.rows_of), row i becoming row ``place[i]`` of ``n`` (None: i) and column c
    ``columns[c]`` (None: c) of ``width``. Entries keep their order, so canonical rows stay
    canonical."""
    rows = r[keep] if place is None else place[r[keep]]
    counts = xp.bincount(rows, minlength=n) if n else xp.zeros(0, numpy.int64)
    indptr = xp.concatenate([xp.zeros(1, numpy.int64), xp.cumsum(counts)]).astype(M.indptr.dtype)
    c = M.indices[keep]
    c = (columns[c] if columns is not None else c).astype(M.indices.dtype)
    T = sparse.module(xp).csr_matrix((M.data[keep], c, indptr), shape=(n, width))
    T.has_canonical_format = bool(getattr(M, "has_canonical_format", False))
    return T


class LoneRows:
    """A's lone rows taken out (the module's (1), (2)): ``interior`` A_II (a CSR matrix, or a
    distributed.Rows on several ranks), ``inside`` and ``lone`` this rank's boolean masks, ``count``
    the lone rows of every rank. ``find`` builds one where A has some, on whole nodes of
    ``block_size`` unknowns."""

    def __init__(self, A, xp, comm, lone, d):
        """``d``: A's diagonal on this rank."""
        parallel = isinstance(A, distributed.Rows)
        own = A.own if parallel else A
        r = sparse.rows_of(own, xp)
        self.xp, self.comm, self.parallel = xp, comm, parallel
        self.lone, self.inside = lone, ~lone
        self.count = comm.allsum(int(lone.sum()))
        self.d = d[lone]
        self.L, self.I = xp.nonzero(lone)[0], xp.nonzero(self.inside)[0]
        n, m = own.shape[0], int(self.I.size)
        # A_IL on A's own numbering (n x n, rows I, columns L): the product (2) takes the
        # whole vector, and on several ranks A's exchange brings the other ranks' lone values
        inside, to_lone = self.inside[r], lone[own.indices]
        coupling = [_taken(own, r, inside & to_lone, None, n, None, n, xp)]
        renumbered = xp.cumsum(self.inside) - 1
        own_ii = _taken(own, r, inside & ~to_lone, renumbered, m, renumbered, m, xp)
        if not parallel:
            self.interior, self.coupling = own_ii, coupling[0]
        else:
            G, gr = A.ghost, sparse.rows_of(A.ghost, xp)
            starts = distributed.starts_of(m, comm)
            number = (renumbered + int(starts[comm.rank])).astype(numpy.int64)
            number = xp.where(lone, -1, number)
            ghost_number = backend.to_host(A.halo(number)).astype(numpy.int64)     # -1: a lone ghost
            ghost_lone = xp.asarray(ghost_number < 0)
            inside, to_lone = self.inside[gr], ghost_lone[G.indices]
            coupling.append(_taken(G, gr, inside & to_lone, None, n, None, G.shape[1], xp))
            kept = ghost_number[ghost_number >= 0]        # increasing: the renumbering keeps the order
            place = numpy.full(ghost_number.size, -1, numpy.int64)
            place[ghost_number >= 0] = numpy.arange(kept.size)
            ghost_ii = _taken(G, gr, inside & ~to_lone, renumbered, m, xp.asarray(place), kept.size, xp)
            self.interior = distributed.Rows(own_ii, ghost_ii, kept, starts, comm, xp)
            self.coupling = distributed.Rows(coupling[0], coupling[1], A.ghosts, A.starts, comm, xp, halo=A.halo)
        self.coupled = comm.allsum(sum(int(B.nnz) for B in (
            (self.coupling.own, self.coupling.ghost) if parallel else (self.coupling,)))) > 0
        self.first = int(A.starts[comm.rank]) if parallel else 0
        self._transposed = None

    @classmethod
    def find(cls, A, xp, comm, block_size=1):
        """A LoneRows of A (a CSR matrix or a distributed.Rows), or None where no rank has a lone
        row, or every row is one, or a rank (on the GPU) would be left with none of the others. A
        row is lone where its diagonal is not zero and its other entries weigh at most LONE of it
        (stored zeros count as absent); with ``block_size`` > 1 a node is, where each of its rows
        is."""
        parallel = isinstance(A, distributed.Rows)
        own = A.own if parallel else A
        n = own.shape[0]
        d = own.diagonal()
        couplings = sparse.l1_norms(own, xp) - abs(d) + (A.ghost_l1() if parallel else 0)
        lone = (couplings <= LONE * abs(d)) & (d != 0)
        if block_size > 1 and n % block_size == 0:
            lone = xp.repeat(lone.reshape(-1, block_size).all(axis=1), block_size)
        inside = n - int(lone.sum())
        if comm.allsum(n - inside) == 0 or comm.allsum(inside) == 0:
            return None
        if parallel and backend.is_gpu(xp) and comm.allmin(inside) == 0:
            return None           # the device kernels are not run on empty ranks (petsc/mat.py)
        return cls(A, xp, comm, lone, d)

    def nodes(self, block_size):
        """This rank's nodes that stay (a boolean per node of ``block_size`` unknowns)."""
        return self.inside[::block_size]

    def number(self, k):
        """The global row in A of this rank's row k of A_II."""
        return self.first + int(self.I[k])

    def _product(self, M, v):
        return M.spmv(v) if self.parallel else products.spmv(M, v, self.xp)

    def apply(self, x, inner):
        """(2): y with y_I = ``inner``(x_I - A_IL y_L), y_L = D_L^-1 x_L (a new array)."""
        xp = self.xp
        y = xp.zeros_like(x)
        y[self.L] = x[self.L] / self.d
        t = x[self.I]
        if self.coupled:
            t = t - self._product(self.coupling, y)[self.I]
        y[self.I] = inner(t)
        return y

    def apply_transpose(self, x, inner):
        """(2)'s transpose: y_I = ``inner``(x_I) (B^T), y_L = D_L^-1 (x_L - A_IL^T y_I). A_IL^T is
        formed at the first call (on several ranks collective)."""
        xp = self.xp
        y = xp.zeros_like(x)
        y[self.I] = inner(x[self.I])
        t = x[self.L]
        if self.coupled:
            if self._transposed is None:
                self._transposed = self.coupling.transposed() if self.parallel else self.coupling.T.tocsr()
            t = t - self._product(self._transposed, y)[self.L]
        y[self.L] = t / self.d
        return y

    def describe(self):
        return (f"{self.count} lone rows (their diagonal alone: boundary values) solved by their diagonal, "
                "the hierarchy built of the others" + (", their couplings to the lone unknowns moved to the "
                                                      "right-hand side" if self.coupled else ""))
