"""Transfers as CSR matrices (SciPy) for the shifted-Laplace CSR levels: the 1D linear
interpolation whose Kronecker products give the (bi/tri)linear prolongation."""
import numpy
import scipy.sparse


def prolongation_1d(n, keep_boundary):
    """The 1D linear interpolation from the coarse grid to n points, and the coarse size."""
    if keep_boundary:
        nc = (n + 1) // 2
        fine_of = 2 * numpy.arange(nc)
    else:
        nc = (n - 1) // 2
        fine_of = 2 * numpy.arange(nc) + 1
    rows, cols, vals = [fine_of], [numpy.arange(nc)], [numpy.ones(nc)]
    for s in (-1, 1):
        f = fine_of + s
        ok = (f >= 0) & (f < n)
        rows.append(f[ok])
        cols.append(numpy.arange(nc)[ok])
        vals.append(numpy.full(int(ok.sum()), 0.5))
    P = scipy.sparse.csr_matrix((numpy.concatenate(vals), (numpy.concatenate(rows), numpy.concatenate(cols))),
                                shape=(n, nc))
    return P, nc
