"""Transfers as CSR matrices (SciPy) for the shifted-Laplace CSR levels: the 1D linear
interpolation whose Kronecker products give the (bi/tri)linear prolongation."""
import numpy
import scipy.sparse


def prolongation_1d(n, keep_boundary):
    """The 1D linear interpolation from the coarse grid to n points, and the coarse size, by
    grid.py's rule: coarse point k on fine point 2k (``keep_boundary``: the boundary nodes are
    unknowns) or 2k + 1 (Dirichlet values eliminated; an even n makes the last fine point a coarse
    point, a shorter last coarse cell, so that every fine point has a coarse neighbour). An even n
    with the boundary nodes as unknowns leaves the last node beyond the last coarse point, with
    weight 1/2: on MP1's absorbing boundary weight 1 there took more Bi-CGSTAB iterations (N = 63,
    127, 255: bilinear 31, 59, 87 against 15, 31, 54)."""
    if keep_boundary:
        nc = (n + 1) // 2
        fine_of = 2 * numpy.arange(nc)
    else:
        nc = n // 2
        fine_of = 2 * numpy.arange(nc) + 1
    rows, cols, vals = [fine_of], [numpy.arange(nc)], [numpy.ones(nc)]
    for s in (-1, 1):
        f = fine_of + s
        ok = (f >= 0) & (f < n)
        rows.append(f[ok])
        cols.append(numpy.arange(nc)[ok])
        vals.append(numpy.full(int(ok.sum()), 0.5))
    rows, cols, vals = (numpy.concatenate(v) for v in (rows, cols, vals))
    P = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, nc))
    return P, nc
