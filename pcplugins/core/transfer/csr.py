"""Transfers as CSR matrices (SciPy) for the shifted-Laplace CSR levels: the 1D linear
interpolation whose Kronecker products give the (bi/tri)linear prolongation."""
import numpy
import scipy.sparse


def prolongation_1d(n, keep_boundary):
    """The 1D linear interpolation from the coarse grid to n points, and the coarse size, by
    grid.py's rule: coarse point k on fine point 2k (``keep_boundary``: the boundary nodes are
    unknowns) or 2k + 1 (Dirichlet values eliminated; an even n makes the last fine point a coarse
    point, a shorter last coarse cell, so that every fine point has a coarse neighbour). An even n
    with the boundary nodes as unknowns takes a virtual coarse point on fine point n, one cell
    beyond the grid (grid.Box's ``virtual_end``): the last node lies halfway between two coarse
    points. On MP1's absorbing boundary that brings the even grids' Bi-CGSTAB counts to their odd
    neighbours' (random right-hand side, 1e-6, n = 64/65, 100/101, 128/129: 22/24, 31/33, 41/40,
    against 26, 36, 47 with the last node beyond the last coarse point, weight 1/2)."""
    if keep_boundary:
        nc = n // 2 + 1
        fine_of = 2 * numpy.arange(nc)
    else:
        nc = n // 2
        fine_of = 2 * numpy.arange(nc) + 1
    rows, cols, vals = [], [], []
    for s, w in ((0, 1.0), (-1, 0.5), (1, 0.5)):
        f = fine_of + s
        ok = (f >= 0) & (f < n)
        rows.append(f[ok])
        cols.append(numpy.arange(nc)[ok])
        vals.append(numpy.full(int(ok.sum()), w))
    rows, cols, vals = (numpy.concatenate(v) for v in (rows, cols, vals))
    P = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, nc))
    return P, nc
