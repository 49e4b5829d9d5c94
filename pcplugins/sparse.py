"""Sparse (CSR) matrices on NumPy or CuPy, and the aggregate transfers of unsmoothed aggregation.

The CSR matrices are SciPy's (host) or cupyx's (GPU, cuSPARSE products), chosen by the array
namespace. With aggregates ``agg`` (agg[i] = the coarse unknown of fine unknown i) the
piecewise-constant prolongation P (P[i, agg[i]] = 1) is never formed as a matrix:

- restriction P^T r sums r over each aggregate (one scatter-add),
- prolongation P e copies e[agg[i]] to i (one gather),
- the Galerkin product P^T A P adds a_ij into entry (agg[i], agg[j]) (Wang, Hu, Cohen, Xu, eq. 4):
  the fine COO triplets relabelled and their duplicates summed.
"""
import numpy

from . import backend


def module(xp):
    """scipy.sparse or cupyx.scipy.sparse, matching ``xp``."""
    if backend.is_gpu(xp):
        import cupyx.scipy.sparse as sp
    else:
        import scipy.sparse as sp
    return sp


def csr(indptr, indices, data, n, xp, dtype=numpy.float64):
    """An n x n CSR matrix on ``xp`` from its three arrays (copied to ``xp`` where they are not)."""
    to = backend.to_namespace
    return module(xp).csr_matrix((to(data, xp).astype(dtype), to(indices, xp).astype(numpy.int32),
                                  to(indptr, xp).astype(numpy.int32)), shape=(n, n))


def rows_of(A, xp):
    """The row index of every stored entry (the COO rows of a CSR matrix)."""
    return (xp.searchsorted(A.indptr, xp.arange(A.nnz, dtype=A.indptr.dtype), side="right") - 1).astype(numpy.int32)


def diagonal(A):
    return A.diagonal()


def l1_norms(A, xp):
    """Row sums of |a_ij| (the l1 smoothers' diagonal, Baker, Falgout, Kolev, Yang 2011)."""
    B = A.copy()
    B.data = xp.abs(B.data)
    return xp.asarray(B.sum(axis=1)).ravel()


def galerkin(A, agg, nc, xp):
    """P^T A P for the piecewise-constant P of ``agg``: a_ij summed into (agg[i], agg[j])."""
    rows = agg[rows_of(A, xp)]
    cols = agg[A.indices]
    sp = module(xp)
    C = sp.coo_matrix((A.data, (rows, cols)), shape=(nc, nc)).tocsr()
    C.sum_duplicates()
    return C


def restrict(out, r, agg, xp):
    """out = P^T r: r summed over every aggregate."""
    out[...] = xp.bincount(agg, weights=r, minlength=out.shape[0])
    return out


def prolong_add(u, e, agg):
    """u += P e."""
    u += e[agg]
    return u


def complexity(levels):
    """Operator complexity (stored entries of all levels over the finest) and grid complexity."""
    nnz = [A.nnz for A in levels]
    n = [A.shape[0] for A in levels]
    return sum(nnz) / nnz[0], sum(n) / n[0]
