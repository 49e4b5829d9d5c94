"""The Helmholtz operator and its shifted Laplacian, assembled as SciPy/cupyx CSR matrices.

-Laplace u - (b1 - i b2) k^2 u on the unit square (5-point stencil) or cube (7-point), scaled by h^2:

- ``absorbing``: the grid includes the boundary (h = 1/(n-1)) and the first-order absorbing
  (Sommerfeld) condition du/dn - i k u = 0 holds there; the ghost value is eliminated by the
  central difference u_out = u_in + 2 i h k u, and the boundary rows are halved once per face
  they lie on (corners quartered in 2D) so the matrix stays complex symmetric.
- ``dirichlet``: the interior points of a grid with h = 1/(n+1), u = 0 outside.

(b1, b2) = (1, 0) is the Helmholtz operator; b2 > 0 the shifted Laplacian preconditioner of
Erlangga, Oosterlee and Vuik (Knibbe, Oosterlee, Vuik: b1 = 1, b2 = 0.6 with Bi-CGSTAB). k is a
scalar or an array over the grid (heterogeneous media). Unknowns are numbered x fastest (PETSc's
DMDA order).
"""
import numpy

from . import sparse


def operator(n, k, shift=(1.0, 0.0), boundary="absorbing", xp=numpy, dim=2):
    """The operator on the grid of n points per axis (``dim`` 2 or 3) as a complex128 CSR matrix of
    ``xp`` (SciPy, or cupyx on the GPU)."""
    if boundary not in ("absorbing", "dirichlet"):
        raise ValueError(f"unknown boundary {boundary!r} (absorbing or dirichlet)")
    if dim not in (2, 3):
        raise ValueError(f"dimension {dim}: 2 or 3")
    shape = (n,) * dim
    k = xp.broadcast_to(xp.asarray(k, dtype=float), shape)
    sigma = (shift[0] - 1j * shift[1]) * k ** 2
    h = 1.0 / (n - 1) if boundary == "absorbing" else 1.0 / (n + 1)
    idx = xp.arange(n ** dim).reshape(shape)
    diag = (2.0 * dim - sigma * h * h).astype(complex)
    scale = xp.ones(shape)           # absorbing: boundary rows halved per face they lie on (complex symmetric)
    rows, cols, vals = [], [], []
    for axis in range(dim):
        for s in (-1, 1):
            w = -xp.ones(shape, complex)        # the coupling to the neighbour at s along axis
            edge = [slice(None)] * dim
            edge[axis] = 0 if s == -1 else -1
            edge = tuple(edge)
            w[edge] = 0
            if boundary == "absorbing":
                # no neighbour outside: its ghost value u_in + 2 i h k u doubles the inward
                # coupling (added below from the other side) and moves onto the diagonal
                diag[edge] += 2j * h * k[edge]
                inward = [slice(None)] * dim
                inward[axis] = 0 if s == 1 else -1
                w[tuple(inward)] *= 2
                scale[edge] *= 0.5
            nb = xp.roll(idx, -s, axis=axis)
            m = w != 0
            rows.append(idx[m])
            cols.append(nb[m])
            vals.append(w[m])
    rows.append(idx.ravel())
    cols.append(idx.ravel())
    vals.append(diag.ravel())
    rows, cols = xp.concatenate(rows), xp.concatenate(cols)
    vals = xp.concatenate(vals) * scale.ravel()[rows]
    A = sparse.module(xp).coo_matrix((vals, (rows, cols)), shape=(n ** dim, n ** dim)).tocsr()
    A.sum_duplicates()
    A.sort_indices()
    return A


def point_source(n, dim=2):
    """MP1's right-hand side: a unit point source at the centre node."""
    f = numpy.zeros((n,) * dim)
    f[(n // 2,) * dim] = 1.0
    return f.ravel()
