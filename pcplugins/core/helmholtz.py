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

from . import grid, sparse


def coefficients(box, k, shift=(1.0, 0.0), boundary="absorbing", xp=numpy):
    """The operator's stencil on ``box`` (a grid.Box: this rank's part of the global grid of n
    points per axis): star offsets (the diagonal last) and complex128 coefficient arrays over the
    box, zero where the neighbour lies outside the grid. ``k``: a number or an array over the box."""
    if boundary not in ("absorbing", "dirichlet"):
        raise ValueError(f"unknown boundary {boundary!r} (absorbing or dirichlet)")
    dim, n = box.dim, box.global_shape[0]
    if dim not in (2, 3):
        raise ValueError(f"dimension {dim}: 2 or 3")
    k = xp.broadcast_to(xp.asarray(k, dtype=float), box.shape)
    h = 1.0 / (n - 1) if boundary == "absorbing" else 1.0 / (n + 1)
    diag = (2.0 * dim - (shift[0] - 1j * shift[1]) * k ** 2 * h * h).astype(complex)
    scale = xp.ones(box.shape)        # absorbing: rows halved per face they lie on (complex symmetric)
    offsets, coefs = [], []
    for axis in range(dim):
        g = xp.arange(box.start[axis], box.start[axis] + box.shape[axis])
        g = g.reshape([-1 if a == axis else 1 for a in range(dim)])
        low, high = g == 0, g == n - 1
        for s, outside, opposite in ((-1, low, high), (1, high, low)):
            w = xp.where(outside, 0.0, -1.0) * xp.ones(box.shape)
            if boundary == "absorbing":
                # no neighbour outside: its ghost value u_in + 2 i h k u doubles the inward
                # coupling of the opposite face's rows and moves onto the diagonal
                w = xp.where(opposite, 2 * w, w)
            offsets.append(tuple(s if a == axis else 0 for a in range(dim)))
            coefs.append(w.astype(complex))
        if boundary == "absorbing":
            face = low | high
            diag = diag + xp.where(face, 2j * h * k, 0)
            scale = scale * xp.where(face, 0.5, 1.0)
    offsets.append((0,) * dim)
    coefs.append(diag)
    return offsets, [c * scale for c in coefs]


def operator(n, k, shift=(1.0, 0.0), boundary="absorbing", xp=numpy, dim=2):
    """The operator on the grid of n points per axis (``dim`` 2 or 3) as a complex128 CSR matrix of
    ``xp`` (SciPy, or cupyx on the GPU)."""
    box = grid.Box((n,) * dim)
    offsets, coefs = coefficients(box, k, shift, boundary, xp)
    idx = xp.arange(n ** dim).reshape(box.shape)
    rows, cols, vals = [], [], []
    for o, c in zip(offsets, coefs):
        m = (c != 0) if any(o) else xp.ones(box.shape, bool)
        rows.append(idx[m])
        cols.append(idx[m] + sum(v * n ** (dim - 1 - a) for a, v in enumerate(o)))
        vals.append(c[m])
    rows, cols, vals = xp.concatenate(rows), xp.concatenate(cols), xp.concatenate(vals)
    A = sparse.module(xp).coo_matrix((vals, (rows, cols)), shape=(n ** dim, n ** dim)).tocsr()
    A.sum_duplicates()
    A.sort_indices()
    return A


def point_source(n, dim=2):
    """MP1's right-hand side: a unit point source at the centre node."""
    f = numpy.zeros((n,) * dim)
    f[(n // 2,) * dim] = 1.0
    return f.ravel()
