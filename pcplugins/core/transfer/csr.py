"""Transfers as CSR matrices (SciPy) for the shifted-Laplace CSR levels: the 1D linear
interpolation whose Kronecker products give the (bi/tri)linear prolongation."""
import numpy
import scipy.sparse


def prolongation_1d(n, keep_boundary):
    """The 1D linear interpolation from the coarse grid to n points, and the coarse size, by
    grid.py's rule: coarse point k on fine point 2k (``keep_boundary``: the boundary nodes are
    unknowns) or 2k + 1 (Dirichlet values eliminated; an even n makes the last fine point a coarse
    point, a shorter last coarse cell, so that every fine point has a coarse neighbour; an even n
    with the boundary nodes as unknowns leaves the last node beyond the last coarse point)."""
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
    if keep_boundary and n % 2 == 0:
        # the last node has a coarse neighbour on one side only and is an unknown of the boundary
        # condition, no eliminated zero beyond it: it takes that neighbour's value (as
        # dezeeuw_prolongation's last column and row do)
        vals[rows == n - 1] = 1.0
    P = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, nc))
    return P, nc
