"""Matrices distributed by rows (pcplugins.AMG under MPI), on arrays only.

Each rank holds its own rows of a level's matrix in two CSR blocks, as PETSc's MPIAIJ does: the
square block of the columns it owns (``own``) and the block of the columns other ranks own
(``ghost``, one column per entry of ``ghosts``, their sorted global indices). The values of
those columns come through ``halo(x)``, an exchange the communicator builds.

The communicator ``comm`` (comm.Comm's protocol) is petsc/mpi.py's CSRComm under MPI: its
reductions and ``halo(ghosts, starts, xp)``, the exchange of the ghost columns' values.

Aggregates never cross ranks, so the piecewise-constant prolongation is local and the Galerkin
product P^T A P needs one exchange at setup: the coarse index of each ghost column's aggregate (a
system's tentative prolongation, local too, needs its ghost rows: ``galerkin_prolongation``).
A smoothed prolongation reaches across: its rows next to another rank's unknowns have that
rank's coarse columns. It and its transpose are then ``Transfer`` matrices, each product a halo
exchange of the vector it multiplies, and ``galerkin_overlapping`` sends each product term to
the rank that owns its coarse row.
"""
import numpy

from .. import backend
from . import colouring, products, sparse


def starts_of(n, comm):
    """The first global row of each rank's ``n`` local rows, and the total (size + 1 numbers)."""
    return numpy.concatenate([[0], numpy.cumsum(comm.allgather(int(n)))]).astype(numpy.int64)


class Rows:
    """This rank's rows of a distributed square matrix: ``own`` (n x n CSR on ``xp``), ``ghost``
    (n x len(ghosts) CSR), ``ghosts`` (sorted global column indices, host int64), ``starts``
    (starts_of) and the exchange ``halo``."""

    def __init__(self, own, ghost, ghosts, starts, comm, xp, halo=None):
        self.own, self.ghost, self.ghosts, self.starts = own, ghost, ghosts, starts
        self.comm, self.xp = comm, xp
        self.halo = comm.halo(ghosts, starts, xp) if halo is None else halo
        self.shape = (starts[-1], starts[-1])        # the global matrix
        self.nnz = comm.allsum(int(own.nnz) + int(ghost.nnz))

    @classmethod
    def from_csr(cls, indptr, indices, data, comm, xp):
        """From this rank's rows with global column indices (host arrays; columns owned like rows)."""
        starts = starts_of(len(indptr) - 1, comm)
        return cls(*split_columns(indptr, indices, data, starts, comm.rank, xp), starts, comm, xp)

    @property
    def n(self):
        return self.own.shape[0]

    def renumbered(self, order, inverse):
        """This rank's rows taken in the order ``order`` (``inverse`` its inverse), every rank's
        alike: the global row lo + order[k] becomes lo + k (lo this rank's first). The ghost
        columns take their new numbers from their owners, in one exchange. Collective."""
        xp, lo = self.xp, int(self.starts[self.comm.rank])
        renamed = backend.to_host(self.halo(xp.asarray(inverse.astype(numpy.int64) + lo))).astype(numpy.int64)
        sort = numpy.argsort(renamed, kind="stable")
        place = numpy.empty_like(sort)
        place[sort] = numpy.arange(sort.size)
        own, ghost = colouring.moved(self.own, order, inverse), colouring.moved(self.ghost, order, place)
        return Rows(own, ghost, renamed[sort], self.starts, self.comm, xp)

    def ghost_l1(self):
        """Row sums of |a_ij| over the ghost columns (added to the smoothers' diagonals)."""
        return sparse.l1_norms(self.ghost, self.xp) if self.ghost.shape[1] else self.xp.zeros(self.n)

    def off_rank(self, x):
        """The ghost block times the other ranks' values of x. The exchange is collective: every
        rank calls it, ghost columns or not."""
        return products.spmv(self.ghost, self.halo(x), self.xp)

    def spmv(self, x):
        return products.spmv(self.own, x, self.xp) + self.off_rank(x)

    def residual(self, f, x):
        """f - A x."""
        return products.residual(self.own, f - self.off_rank(x), x, self.xp)

    def transposed(self):
        """A^T's rows (collective): each entry a_ij of this rank's rows goes to the owner of row j
        of A^T (owned_rows: one alltoall), on the host."""
        import scipy.sparse
        comm, N = self.comm, int(self.starts[-1])
        lo = int(self.starts[comm.rank])
        mine = global_csr(self.own, self.ghost, self.ghosts, lo, N).tocoo()
        T = owned_rows(scipy.sparse.csr_matrix((mine.data, (mine.col, mine.row + lo)), shape=(N, N)), self.starts,
                       comm)
        return Rows(*split_columns(T.indptr, T.indices, T.data, self.starts, comm.rank, self.xp), self.starts, comm,
                    self.xp)

    def galerkin(self, agg, nc, own_coarse=None, sign=None):
        """P^T A P for this rank's aggregates ``agg`` (local coarse indices, ``nc`` of them) and
        the signs of P (``sign``; None: all +1). ``sign`` must be None on every rank or on none:
        the ghost columns' signs come through a collective exchange. ``own_coarse``: its own
        block when already formed (aggregation.pairwise forms it)."""
        xp, comm = self.xp, self.comm
        starts = starts_of(nc, comm)
        own = own_coarse if own_coarse is not None else sparse.galerkin(self.own, agg, nc, xp, sign)
        # the global coarse index of every ghost column's aggregate, from its owner; the ghost
        # block's entries become the coarse ghost block where they are (the device, on the GPU)
        gagg = xp.asarray(self.halo(agg.astype(numpy.int64) + int(starts[comm.rank])))
        G = self.ghost
        r = sparse.rows_of(G, xp)
        ghosts, cols = xp.unique(gagg[G.indices], return_inverse=True)
        data = G.data
        if sign is not None:
            data = data * (sign[r] * xp.asarray(self.halo(sign))[G.indices])
        ghost = csr_of_triplets(data, agg[r], cols.ravel(), (nc, len(ghosts)), xp)
        return Rows(own, ghost, backend.to_host(ghosts).astype(numpy.int64), starts, comm, xp)

    def galerkin_prolongation(self, P, own_coarse):
        """P^T A P for a prolongation local to the ranks (a system's tentative prolongation,
        nullspace.py: this rank's fine rows onto its own coarse unknowns, at most m entries a row)
        with its own block ``own_coarse`` already formed. The ghost columns' rows of P come
        through 2 m exchanges (ghost_rows), collective."""
        xp, comm = self.xp, self.comm
        nc = P.shape[1]
        starts = starts_of(nc, comm)
        G = (sparse.to_host(P).T @ (sparse.to_host(self.ghost) @ self.ghost_rows(global_columns(P, starts, comm.rank))))
        G = G.tocoo()
        ghosts, c = numpy.unique(G.col, return_inverse=True)
        ghost = csr_of_triplets(G.data, G.row, c.ravel(), (nc, len(ghosts)), xp)
        return Rows(own_coarse, ghost, ghosts, starts, comm, xp)

    def ghost_rows(self, M):
        """The rows of the ghost columns' unknowns of a matrix whose rows are distributed as this
        one's (``M``: this rank's rows, a host CSR matrix of global columns), a host CSR matrix
        with one row a ghost column. Collective: 2 w exchanges for rows of at most w entries."""
        import scipy.sparse
        comm, xp = self.comm, self.xp
        M = M.tocsr()
        width = comm.allmax(int(numpy.diff(M.indptr).max()) if M.shape[0] else 0)
        if width == 0:                   # no entries on any rank
            return scipy.sparse.csr_matrix((len(self.ghosts), M.shape[1]), dtype=M.dtype)
        rows = numpy.repeat(numpy.arange(M.shape[0]), numpy.diff(M.indptr))
        slot = numpy.arange(M.nnz) - M.indptr[rows]
        cols = numpy.full((M.shape[0], width), -1, numpy.int64)
        vals = numpy.zeros((M.shape[0], width), M.dtype)
        cols[rows, slot], vals[rows, slot] = M.indices, M.data
        gcols = numpy.stack([backend.to_host(self.halo(xp.asarray(cols[:, k]))) for k in range(width)], 1)
        gvals = numpy.stack([backend.to_host(self.halo(xp.asarray(vals[:, k]))) for k in range(width)], 1)
        used = gcols >= 0
        return scipy.sparse.csr_matrix((gvals[used], (numpy.nonzero(used)[0], gcols[used])),
                                       shape=(len(self.ghosts), M.shape[1]))

    def galerkin_overlapping(self, P, nc, empty=None, cancelled=0.0):
        """(P^T A P, P, P^T) for a prolongation whose rows reach other ranks' coarse unknowns (a
        smoothed one: ``P`` this rank's fine rows, a host CSR matrix of global coarse columns;
        ``nc`` this rank's coarse unknowns; ``empty`` the local ones with no fine support, given
        an identity row). Each rank forms P_r^T (A P)_r over its fine rows and sends every term
        to the owner of its coarse row, as PETSc's MatPtAP of MPIAIJ matrices does; the terms of
        P^T likewise. Couplings at most ``cancelled`` sqrt(|c_ii c_jj|) are dropped (they cancel
        to rounding). Returns a Rows and two Transfer matrices (collective)."""
        import scipy.sparse
        comm, xp = self.comm, self.xp
        fine, coarse = self.starts, starts_of(nc, comm)
        lo = int(coarse[comm.rank])
        own, ghost = sparse.to_host(self.own), sparse.to_host(self.ghost)
        AP = (own @ P + ghost @ self.ghost_rows(P)).tocsr()
        PT = P.T.tocsr()              # once: the product's left factor and R's terms
        C = owned_rows(PT @ AP, coarse, comm)
        if empty is not None:
            e = backend.to_host(empty)
            C = (C + scipy.sparse.csr_matrix((numpy.ones(len(e)), (e, e + lo)), shape=C.shape)).tocsr()
        own_c, ghost_c, ghosts = split_columns(C.indptr, C.indices, C.data, coarse, comm.rank, xp)
        halo = comm.halo(ghosts, coarse, xp)
        if cancelled:
            d = xp.abs(own_c.diagonal())
            own_c, ghost_c = [
                sparse.kept(B, xp.abs(B.data) > cancelled * xp.sqrt(d[sparse.rows_of(B, xp)] * dc[B.indices]), xp)
                for B, dc in ((own_c, d), (ghost_c, xp.asarray(halo(d))))]
        R = owned_rows(global_columns(PT, fine, comm.rank), coarse, comm)
        return (Rows(own_c, ghost_c, ghosts, coarse, comm, xp, halo=halo), Transfer(P, coarse, comm, xp),
                Transfer(R, fine, comm, xp))

    def gathered(self):
        """The whole matrix as a CSR matrix of ``xp``, on every rank (for the coarsest solve):
        each rank's rows with global columns, already in order, joined in rank order (no
        sort of the whole)."""
        import scipy.sparse
        comm, N = self.comm, int(self.starts[-1])
        mine = global_csr(self.own, self.ghost, self.ghosts, int(self.starts[comm.rank]), N)
        lengths = comm.allgatherv(numpy.diff(mine.indptr).astype(numpy.int64), numpy.diff(self.starts))
        indptr = numpy.concatenate([[0], numpy.cumsum(lengths)])
        index = numpy.int32 if max(N, int(indptr[-1])) < 2 ** 31 else numpy.int64
        A = scipy.sparse.csr_matrix((comm.allgatherv(mine.data), comm.allgatherv(mine.indices.astype(index)),
                                     indptr.astype(index)), shape=(N, N))
        A.has_canonical_format = True
        return sparse.module(self.xp).csr_matrix(A) if backend.is_gpu(self.xp) else A


def global_csr(own, ghost, ghosts, lo, columns):
    """A rank's rows with global columns (a host CSR matrix in canonical form) from its blocks:
    ``own`` (columns from ``lo``) and ``ghost`` (its columns the global ``ghosts``, in order),
    ``columns`` in all. The sum of two canonical matrices with disjoint columns: a merge."""
    import scipy.sparse
    ghost = sparse.to_host(ghost).tocsr()
    G = scipy.sparse.csr_matrix((ghost.data, numpy.asarray(ghosts, numpy.int64)[ghost.indices], ghost.indptr),
                                shape=(ghost.shape[0], columns))
    return (_shifted(own, lo, columns) + G).tocsr()


def global_columns(P, starts, rank):
    """Rank ``rank``'s rows of P, whose columns are that rank's under ``starts`` (local indices),
    as a host CSR matrix of global columns."""
    return _shifted(P, int(starts[rank]), int(starts[-1]))


def _shifted(M, lo, columns):
    """M (local column indices from ``lo``) as a host CSR matrix of ``columns`` global columns."""
    import scipy.sparse
    M = sparse.to_host(M).tocsr()
    return scipy.sparse.csr_matrix((M.data, M.indices.astype(numpy.int64) + lo, M.indptr), shape=(M.shape[0], columns))


def csr_of_triplets(data, rows, cols, shape, xp):
    """A CSR matrix of ``xp`` from triplets (host or ``xp`` arrays), duplicates summed, indices
    sorted: on the GPU by sparse.sum_sorted, whose sums come out the same on every run."""
    to = backend.to_namespace
    data, rows, cols = to(data, xp), to(rows, xp), to(cols, xp)
    if backend.is_gpu(xp):
        return sparse.sum_sorted(rows, cols, data, shape, xp)
    A = sparse.module(xp).csr_matrix((data, (rows, cols)), shape=shape)
    A.sum_duplicates()
    A.sort_indices()
    return A


class Transfer:
    """This rank's rows of a distributed rectangular matrix, a smoothed prolongation or its
    transpose (Rows.galerkin_overlapping): ``own`` the block of the columns this rank owns under
    ``starts``, ``ghost`` the other ranks' columns, whose values come through ``halo``. From
    ``M``, this rank's rows with global columns (host CSR). ``T @ x`` is its product with this
    rank's part of x, one exchange (collective)."""

    def __init__(self, M, starts, comm, xp):
        M = M.tocsr()
        self.own, self.ghost, self.ghosts = split_columns(M.indptr, M.indices, M.data, starts, comm.rank, xp)
        self.halo = comm.halo(self.ghosts, starts, xp)
        self.shape, self.dtype, self.xp = self.own.shape, self.own.dtype, xp
        self.lo, self.columns = int(starts[comm.rank]), int(starts[-1])

    def __matmul__(self, x):
        return products.spmv(self.own, x, self.xp) + products.spmv(self.ghost, self.halo(x), self.xp)

    def global_rows(self):
        """This rank's rows with global columns (a host CSR matrix): M again."""
        return global_csr(self.own, self.ghost, self.ghosts, self.lo, self.columns)


def split_columns(indptr, indices, data, starts, rank, xp):
    """(own, ghost, ghosts) of rows with global column indices (host arrays) whose columns are
    distributed by ``starts``: the CSR blocks (on ``xp``) of the columns ``rank`` owns (local
    indices) and of the others (one column per entry of ``ghosts``, their sorted global
    indices). Values of a real type become float64, complex stay complex. Rows in canonical
    form (columns increasing: PETSc's AIJ rows, SciPy's products and sums) keep their order in
    both blocks, which are then made without a sort; others go through csr_of_triplets."""
    indptr, indices = numpy.asarray(indptr, numpy.int64), numpy.asarray(indices, numpy.int64)
    data = numpy.asarray(data)
    n = len(indptr) - 1
    lo, hi = int(starts[rank]), int(starts[rank + 1])
    rows = numpy.repeat(numpy.arange(n), numpy.diff(indptr))
    mine = (indices >= lo) & (indices < hi)
    ghosts, cols = numpy.unique(indices[~mine], return_inverse=True)
    data = data.astype(numpy.result_type(data.dtype, numpy.float64), copy=False)
    step = numpy.diff(indices)
    canonical = bool(numpy.all((step > 0) | (rows[1:] != rows[:-1])))
    blocks = []
    for keep, c, width in ((mine, indices[mine] - lo, hi - lo), (~mine, cols.ravel(), len(ghosts))):
        if canonical:
            ptr = numpy.concatenate([[0], numpy.cumsum(numpy.bincount(rows[keep], minlength=n))])
            index = numpy.int32 if len(indices) < 2 ** 31 else numpy.int64
            M = sparse.module(xp).csr_matrix((xp.asarray(data[keep]), xp.asarray(c.astype(index)),
                                              xp.asarray(ptr.astype(index))), shape=(n, width))
            M.has_canonical_format = True
            blocks.append(M)
        else:
            blocks.append(csr_of_triplets(data[keep], rows[keep], c, (n, width), xp))
    return blocks[0], blocks[1], ghosts.astype(numpy.int64)


def owned_rows(C, starts, comm):
    """This rank's rows of the sum over the ranks of their ``C`` (host CSR matrices of the global
    rows, distributed by ``starts``): the rows other ranks own go to their owners (one
    alltoall), this rank's own rows, most of the terms, stay as they are. A host CSR matrix of
    this rank's rows, C's columns."""
    import scipy.sparse
    lo, hi = int(starts[comm.rank]), int(starts[comm.rank + 1])
    C = C.tocsr()
    away = scipy.sparse.vstack([C[:lo], C[hi:]]).tocoo()
    row = numpy.where(away.row < lo, away.row, away.row + (hi - lo))      # back to global rows
    owner = numpy.searchsorted(starts, row, side="right") - 1
    order = numpy.argsort(owner, kind="stable")
    cuts = numpy.searchsorted(owner[order], numpy.arange(comm.size + 1))
    parts = [tuple(a[order[cuts[r]:cuts[r + 1]]] for a in (row, away.col, away.data)) for r in range(comm.size)]
    got = comm.alltoall(parts)
    r, c, v = (numpy.concatenate([g[i] for g in got]) for i in range(3))      # its own part is empty
    mine = C[lo:hi]
    if len(v):
        mine = mine + scipy.sparse.csr_matrix((v, (r - lo, c)), shape=mine.shape)
    mine.sum_duplicates()
    return mine
