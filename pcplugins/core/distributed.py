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
"""
import numpy

from .. import backend
from . import sparse


def starts_of(n, comm):
    """The first global row of each rank's ``n`` local rows, and the total (size + 1 numbers)."""
    return numpy.concatenate([[0], numpy.cumsum(comm.allgather(int(n)))]).astype(numpy.int64)


class Rows:
    """This rank's rows of a distributed square matrix: ``own`` (n x n CSR on ``xp``), ``ghost``
    (n x len(ghosts) CSR), ``ghosts`` (sorted global column indices, host int64), ``starts``
    (starts_of) and the exchange ``halo``."""

    def __init__(self, own, ghost, ghosts, starts, comm, xp):
        self.own, self.ghost, self.ghosts, self.starts = own, ghost, ghosts, starts
        self.comm, self.xp = comm, xp
        self.halo = comm.halo(ghosts, starts, xp)
        self.shape = (starts[-1], starts[-1])        # the global matrix
        self.nnz = comm.allsum(int(own.nnz) + int(ghost.nnz))

    @classmethod
    def from_csr(cls, indptr, indices, data, comm, xp):
        """From this rank's rows with global column indices (host arrays; columns owned like rows)."""
        indptr, indices = numpy.asarray(indptr, numpy.int64), numpy.asarray(indices, numpy.int64)
        data = numpy.asarray(data)
        n = len(indptr) - 1
        starts = starts_of(n, comm)
        lo, hi = starts[comm.rank], starts[comm.rank + 1]
        rows = numpy.repeat(numpy.arange(n), numpy.diff(indptr))
        mine = (indices >= lo) & (indices < hi)
        ghosts, cols = numpy.unique(indices[~mine], return_inverse=True)
        data = data.astype(numpy.result_type(data.dtype, numpy.float64))     # complex stays complex
        own = csr_of_triplets(data[mine], rows[mine], indices[mine] - lo, (n, n), xp)
        ghost = csr_of_triplets(data[~mine], rows[~mine], cols.ravel(), (n, len(ghosts)), xp)
        return cls(own, ghost, ghosts, starts, comm, xp)

    @property
    def n(self):
        return self.own.shape[0]

    def ghost_l1(self):
        """Row sums of |a_ij| over the ghost columns (added to the smoothers' diagonals)."""
        return sparse.l1_norms(self.ghost, self.xp) if self.ghost.shape[1] else self.xp.zeros(self.n)

    def off_rank(self, x):
        """The ghost block times the other ranks' values of x. The exchange is collective: every
        rank calls it, ghost columns or not."""
        return sparse.spmv(self.ghost, self.halo(x), self.xp)

    def spmv(self, x):
        return sparse.spmv(self.own, x, self.xp) + self.off_rank(x)

    def residual(self, f, x):
        """f - A x."""
        return sparse.residual(self.own, f - self.off_rank(x), x, self.xp)

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
        through 2 m exchanges (each entry's global coarse column and its value), collective."""
        xp, comm = self.xp, self.comm
        nc = P.shape[1]
        starts = starts_of(nc, comm)
        Ph = sparse.to_host(P).tocsr()
        width = comm.allmax(int(numpy.diff(Ph.indptr).max()) if Ph.shape[0] else 0)
        cols = numpy.full((Ph.shape[0], width), -1, numpy.int64)
        vals = numpy.zeros((Ph.shape[0], width))
        rows = numpy.repeat(numpy.arange(Ph.shape[0]), numpy.diff(Ph.indptr))
        slot = numpy.arange(Ph.nnz) - Ph.indptr[rows]
        cols[rows, slot] = Ph.indices + starts[comm.rank]
        vals[rows, slot] = Ph.data
        gcols = numpy.stack([backend.to_host(self.halo(xp.asarray(cols[:, k]))) for k in range(width)], 1)
        gvals = numpy.stack([backend.to_host(self.halo(xp.asarray(vals[:, k]))) for k in range(width)], 1)
        import scipy.sparse
        ng = len(self.ghosts)
        used = gcols >= 0
        Pg = scipy.sparse.csr_matrix((gvals[used], (numpy.nonzero(used)[0], gcols[used])),
                                     shape=(ng, int(starts[-1])))
        G = (Ph.T @ (sparse.to_host(self.ghost) @ Pg)).tocoo()
        ghosts, c = numpy.unique(G.col, return_inverse=True)
        ghost = csr_of_triplets(G.data, G.row, c.ravel(), (nc, len(ghosts)), xp)
        return Rows(own_coarse, ghost, ghosts, starts, comm, xp)

    def gathered(self):
        """The whole matrix as a CSR matrix of ``xp``, on every rank (for the coarsest solve)."""
        lo = int(self.starts[self.comm.rank])
        own, gh = sparse.to_host(self.own).tocoo(), sparse.to_host(self.ghost).tocoo()
        part = (numpy.concatenate([own.row, gh.row]) + lo,
                numpy.concatenate([own.col + lo, self.ghosts[gh.col]]),
                numpy.concatenate([own.data, gh.data]))
        parts = self.comm.allgather(part)
        r, c, v = (numpy.concatenate([p[i] for p in parts]) for i in range(3))
        import scipy.sparse
        N = int(self.starts[-1])
        A = scipy.sparse.csr_matrix((v, (r, c)), shape=(N, N))
        return sparse.module(self.xp).csr_matrix(A) if backend.is_gpu(self.xp) else A


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
