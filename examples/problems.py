"""Model problems on a DMDA for the examples, tests and benchmarks.

poisson_system(n, dim, convention, jump, rhs, seed) -> (da, A, b): the cell-face finite-difference
discretization of -div(kappa grad u) = f with homogeneous Dirichlet conditions, assembled as a PETSc
AIJ matrix in one call (the matrix type comes from -mat_type, the vectors follow it). ``n`` is the
points per dimension, or a tuple of them in the DMDA's (x, y, z) order: square cells whose h is set
by the shortest side, the domain longer along the others.

convention 'interior': the n^d grid points are the unknowns (h = 1/(n+1)), boundary values
eliminated, 1/h^2 scaling (Feng et al.). 'petsc': the grid includes the boundary (h = 1/(n-1)),
boundary points are scaled identity rows and interior rows keep their couplings to them, with the
h^(d-2)-scaled stencil of PETSc's KSP tutorial ex45.
kappa is 1, or 10^jump inside a few boxes whose faces do not line up with coarse grids
(``pattern`` 'boxes'), or on the black cells of a 3^d checkerboard whose faces at 1/3 and 2/3 lie
on no grid line of any coarse grid ('checkerboard').
``periodic``: per axis, in the DMDA's (x, y, z) order, whether the domain is periodic along it (a
DM_BOUNDARY_PERIODIC DMDA: the last point's neighbour is the first, no boundary there); periodic
along every axis the operator is singular, with the constant null space attached to the matrix and
removed from the right-hand side.
"""
import itertools
import time

import numpy
from petsc4py import PETSc


def kappa_field(shape, jump, pattern="boxes"):
    k = numpy.ones(shape)
    if jump > 0 and pattern == "checkerboard":
        x = numpy.meshgrid(*[(numpy.arange(m) + 0.5) / m for m in shape], indexing="ij")
        black = sum(numpy.floor(3 * xa).astype(int) for xa in x) % 2 == 1
        k[black] = 10.0 ** jump
    elif jump > 0 and pattern == "boxes":
        d = len(shape)
        x = numpy.meshgrid(*[(numpy.arange(m) + 0.5) / m for m in shape], indexing="ij")
        boxes = [((0.13, 0.47),) * d, ((0.55, 0.91),) * d,
                 tuple((0.21, 0.66) if a % 2 else (0.58, 0.83) for a in range(d))]
        for bx in boxes:
            inside = numpy.ones(shape, dtype=bool)
            for a, (lo, hi) in enumerate(bx):
                inside &= (x[a] > lo) & (x[a] < hi)
            k[inside] = 10.0 ** jump
    elif jump > 0:
        raise ValueError(f"unknown kappa pattern {pattern!r}")
    return k


def grid_sizes(n, dim):
    """Points per dimension in the DMDA's (x, y, z) order, from an int or a tuple."""
    return (n,) * dim if numpy.isscalar(n) else tuple(int(m) for m in n)


def poisson_csr(n, dim, convention="interior", jump=0.0, pattern="boxes", periodic=()):
    shape = grid_sizes(n, dim)[::-1]        # natural ordering: x fastest
    periodic = tuple(periodic or (False,) * dim)[::-1]
    N = int(numpy.prod(shape))
    n = min(shape)
    idx = numpy.arange(N).reshape(shape)
    kap = kappa_field(shape, jump, pattern)
    if convention == "interior":
        h = 1.0 / (n + 1)
        scale = 1.0 / h ** 2
        boundary = numpy.zeros(shape, dtype=bool)
    elif convention == "petsc":
        h = 1.0 / (n - 1)
        scale = h ** (dim - 2)
        boundary = numpy.zeros(shape, dtype=bool)
        for a in range(dim):
            if periodic[a]:
                continue
            sl = [slice(None)] * dim
            sl[a] = 0
            boundary[tuple(sl)] = True
            sl[a] = -1
            boundary[tuple(sl)] = True
    else:
        raise ValueError(convention)
    rows, cols, vals = [], [], []
    diag = numpy.zeros(shape)
    for a in range(dim):
        for s in (-1, 1):
            nb = numpy.roll(kap, -s, axis=a)
            face = 2 * kap * nb / (kap + nb) * scale
            valid = numpy.ones(shape, dtype=bool)
            sl = [slice(None)] * dim
            sl[a] = -1 if s == 1 else 0
            valid[tuple(sl)] = periodic[a]          # the neighbour across a periodic end: rolled in
            face = numpy.where(valid, face, kap * scale)   # Dirichlet face: kappa of the cell
            diag += face
            keep = valid & ~boundary
            rows.append(idx[keep])
            cols.append(numpy.roll(idx, -s, axis=a)[keep])
            vals.append(-face[keep])
    rows.append(idx.ravel())
    cols.append(idx.ravel())
    vals.append(diag.ravel())
    rows, cols, vals = map(numpy.concatenate, (rows, cols, vals))
    order = numpy.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = numpy.concatenate([[0], numpy.cumsum(numpy.bincount(rows, minlength=N))])
    return shape, indptr.astype(PETSc.IntType), cols.astype(PETSc.IntType), vals


def poisson_system(n, dim=3, convention="interior", jump=0.0, rhs="random", seed=0, comm=None,
                   pattern="boxes", periodic=()):
    """The DMDA, the matrix and the right-hand side; in parallel each rank assembles its own rows
    in PETSc's DMDA ordering, and the right-hand side does not depend on the number of ranks."""
    comm = comm or PETSc.COMM_WORLD
    shape, indptr, cols, vals = poisson_csr(n, dim, convention, jump, pattern, periodic)
    boundary = tuple("periodic" if p else "none" for p in (periodic or (False,) * dim))
    da = PETSc.DMDA().create(list(grid_sizes(n, dim)), dof=1, stencil_width=1, boundary_type=boundary,
                             comm=comm, setup=False)
    da.setFromOptions()
    da.setUp()
    N = int(numpy.prod(shape))
    if rhs == "random":
        bvals = numpy.random.default_rng(seed).standard_normal(N)
    elif rhs == "ones":
        bvals = numpy.ones(N)
    elif rhs == "sine":
        x = numpy.meshgrid(*[numpy.arange(1, m + 1) / (m + 1) for m in shape], indexing="ij")
        bvals = numpy.prod([numpy.sin(numpy.pi * xi) for xi in x], axis=0).ravel()
    else:
        raise ValueError(rhs)
    if comm.getSize() > 1:
        indptr, cols, vals, bvals = owned_rows(da, indptr, cols, vals, bvals)
    A = PETSc.Mat().create(comm=comm)
    A.setSizes(((len(indptr) - 1, N), (len(indptr) - 1, N)))
    A.setType(PETSc.Mat.Type.AIJ)
    A.setFromOptions()
    A.setPreallocationCSR((indptr, cols.astype(PETSc.IntType), vals))
    A.assemble()
    if "cusparse" in A.getType():
        da.setVecType("cuda")
    b, _ = A.createVecs()
    b.setArray(bvals)
    if periodic and all(periodic):
        null = PETSc.NullSpace().create(constant=True, comm=comm)
        A.setNullSpace(null)
        null.remove(b)
    return da, A, b


def convection_diffusion(n, peclet, dim=2):
    """-Laplace u + b . grad u on n^dim interior points (Dirichlet values eliminated), h = 1/(n + 1),
    first-order upwind, the wind b = (1, 1/2, 0) scaled so that the cell Peclet number |b_x| h / 2
    is ``peclet``: a SciPy CSR matrix in natural ordering (x fastest)."""
    import scipy.sparse
    h = 1.0 / (n + 1)
    eye = scipy.sparse.identity(n)
    D2 = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n)) / h ** 2
    U = scipy.sparse.diags([-1.0, 1.0], [-1, 0], shape=(n, n)) * (2 * peclet / h ** 2)
    if dim == 2:
        return (scipy.sparse.kron(eye, D2 + U) + scipy.sparse.kron(D2 + 0.5 * U, eye)).tocsr()
    kron = scipy.sparse.kron
    return (kron(kron(eye, eye), D2 + U) + kron(kron(eye, D2 + 0.5 * U), eye) + kron(kron(D2, eye), eye)).tocsr()


def convection_box(shape, peclet, complex_part=False):
    """convection_diffusion's matrix on a box of ``shape`` interior points (2D or 3D, x fastest:
    the rows and columns of points within it), a complex shift 0.3i times the diagonal added where
    ``complex_part``: a SciPy CSR matrix."""
    import scipy.sparse
    dim, m = len(shape), max(shape)
    A = convection_diffusion(m, peclet, dim)
    idx = numpy.indices((m,) * dim).reshape(dim, -1)[::-1]
    keep = numpy.all([idx[axis] < n for axis, n in enumerate(shape)], axis=0)
    A = A[keep][:, keep].tocsr()
    return (A + 1j * scipy.sparse.diags(0.3 * A.diagonal())).tocsr() if complex_part else A


def ex53_matrix(n):
    """PETSc's ksp ex53 matrix: the 1D Laplacian (2, -1) with one more entry, a_{0, n-1} = 0.5,
    that makes it nonsymmetric (a SciPy CSR matrix)."""
    import scipy.sparse
    A = scipy.sparse.diags([-numpy.ones(n - 1), 2.0 * numpy.ones(n), -numpy.ones(n - 1)], [-1, 0, 1]).tolil()
    A[0, n - 1] = 0.5
    return A.tocsr()


def row_coefficient_laplacian(shape, rho):
    """PETSc's ksp ex29 matrix (``-rho``) on a grid of ``shape`` points including its boundary, in
    any dimension: row i is rho_i times the h-scaled Laplacian's row (rho_i = ``rho`` where every
    index lies strictly between a third and two thirds of its axis, else 1), a boundary row its
    diagonal alone. Nonsymmetric where rho jumps (a_ij = -rho_i w, a_ji = -rho_j w). Returns the
    SciPy CSR matrix (natural ordering, the last axis fastest) and the points' indices as
    coordinates."""
    import scipy.sparse
    dim = len(shape)
    idx = numpy.indices(shape).reshape(dim, -1).T
    n = idx.shape[0]
    h = [1.0 / (m - 1) for m in shape]
    w = [numpy.prod(h) / ha ** 2 for ha in h]
    centre = numpy.all([(idx[:, a] > shape[a] / 3) & (idx[:, a] < 2 * shape[a] / 3) for a in range(dim)], 0)
    r = numpy.where(centre, rho, 1.0)
    inside = numpy.flatnonzero(~numpy.any([(idx[:, a] == 0) | (idx[:, a] == shape[a] - 1) for a in range(dim)], 0))
    strides = [int(numpy.prod(shape[a + 1:])) for a in range(dim)]
    rows, cols, vals = [numpy.arange(n)], [numpy.arange(n)], [2 * r * sum(w)]
    for a in range(dim):
        for step in (-strides[a], strides[a]):
            rows.append(inside)
            cols.append(inside + step)
            vals.append(-r[inside] * w[a])
    A = scipy.sparse.csr_matrix((numpy.concatenate(vals), (numpy.concatenate(rows), numpy.concatenate(cols))), (n, n))
    return A, idx.astype(float)


def zero_sum_q1(m):
    """PETSc's ksp ex3 matrix: m^2 bilinear elements on the unit square, the element matrix of that
    tutorial (h^2 times 1/6 on the diagonal, -1/8 along the edges, +1/12 across: positive couplings,
    rows that sum to zero), the boundary nodes' rows replaced by identity rows as MatZeroRows makes
    them (their columns kept: nonsymmetric). SciPy CSR on the (m + 1)^2 nodes, x fastest."""
    import scipy.sparse
    H = 1.0 / m ** 2
    Ke = H * numpy.array([[1 / 6, -1 / 8, 1 / 12, -1 / 8], [-1 / 8, 1 / 6, -1 / 8, 1 / 12],
                          [1 / 12, -1 / 8, 1 / 6, -1 / 8], [-1 / 8, 1 / 12, -1 / 8, 1 / 6]])
    e = numpy.arange(m * m)
    first = (m + 1) * (e // m) + e % m
    nodes = numpy.stack([first, first + 1, first + m + 2, first + m + 1], 1)     # ex3's corner order
    rows = numpy.repeat(nodes, 4, axis=1).ravel()
    cols = numpy.tile(nodes, (1, 4)).ravel()
    A = scipy.sparse.csr_matrix((numpy.tile(Ke.ravel(), m * m), (rows, cols)), shape=((m + 1) ** 2,) * 2).tolil()
    i, j = numpy.divmod(numpy.arange((m + 1) ** 2), m + 1)
    for r in numpy.flatnonzero((i == 0) | (j == 0) | (i == m) | (j == m)):
        A.rows[r], A.data[r] = [r], [1.0]
    return A.tocsr()


def floating_part(n, m=3):
    """The n^2 interior Laplacian (Dirichlet, 5-point) beside a floating part: a chain of m unknowns
    with Neumann ends (rows that sum to zero), coupled to nothing else. Returns (A, z): SciPy CSR,
    and the unit vector of the chain's constant, A's null space (the chain's unknowns are last)."""
    import scipy.sparse
    T = scipy.sparse.diags([-numpy.ones(n - 1), 2 * numpy.ones(n), -numpy.ones(n - 1)], [-1, 0, 1])
    eye = scipy.sparse.identity(n)
    chain = scipy.sparse.diags([-numpy.ones(m - 1), numpy.r_[1, 2 * numpy.ones(m - 2), 1], -numpy.ones(m - 1)],
                               [-1, 0, 1])
    A = scipy.sparse.block_diag([scipy.sparse.kron(T, eye) + scipy.sparse.kron(eye, T), chain]).tocsr()
    z = numpy.zeros(A.shape[0])
    z[-m:] = 1 / numpy.sqrt(m)
    return A, z


def ex9_matrix(m, t, n=2):
    """PETSc's ksp ex9 first matrix at its step t: an m x n grid (n fastest), 4 on the diagonal, -1
    to each neighbour, and -(t + 1/2) more to the neighbour of the row before. From t = 1 on its
    symmetric part is indefinite, and aggregates' energies cancel (energies.zero_energies)."""
    import scipy.sparse
    N = m * n
    i = numpy.arange(N)
    east, north = i[(i % n) < n - 1], i[i < N - n]
    rows = numpy.concatenate([i, east, east + 1, north, north + n])
    cols = numpy.concatenate([i, east + 1, east, north + n, north])
    vals = numpy.concatenate([4 * numpy.ones(N), -numpy.ones(2 * len(east) + len(north)),
                              -(t + 1.5) * numpy.ones(len(north))])
    return scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(N, N))


def convection_system(n, dim, peclet, seed=0, comm=None):
    """convection_diffusion's matrix on an n^dim DMDA (dmda_system): (da, A, b)."""
    return dmda_system(convection_diffusion(n, peclet, dim), n, dim, seed, comm)


def row_coefficient_system(n, dim, rho, seed=0, comm=None):
    """row_coefficient_laplacian's matrix on an n^dim DMDA, or one of the sizes ``n`` (x, y, z)
    (dmda_system): (da, A, b)."""
    sizes = [n] * dim if numpy.isscalar(n) else list(n)
    return dmda_system(row_coefficient_laplacian(tuple(sizes[::-1]), rho)[0], sizes, dim, seed, comm)


def neumann_rows(shape, shift=10.0):
    """PETSc's ts ex15 Jacobian with -boundary 1 (``shape``: points along z, y, x or y, x), SciPy
    CSR in natural order: interior rows shift + 1/h^2 (-Laplacian) (h = 1/(m - 1) along each
    axis), and on the outer layer first-order Neumann rows u_b - u_i = 0 of scale 1, i the
    neighbour inside along the layer's normal (corners and edges: the diagonal neighbour)."""
    import scipy.sparse
    shape = tuple(shape)
    idx = numpy.arange(int(numpy.prod(shape))).reshape(shape)
    pos = numpy.indices(shape)
    layer = numpy.zeros(shape, bool)
    for a, m in enumerate(shape):
        layer |= (pos[a] == 0) | (pos[a] == m - 1)
    rows, cols, vals = [idx[layer], idx[layer]], [idx[layer], None], [numpy.ones(layer.sum()), -numpy.ones(layer.sum())]
    inside = pos.copy()
    for a, m in enumerate(shape):
        inside[a] = numpy.clip(pos[a], 1, m - 2)
    cols[1] = idx[tuple(inside)][layer]
    inner = ~layer
    centre = numpy.full(inner.sum(), shift)
    for a, m in enumerate(shape):
        s = (m - 1.0) ** 2
        centre += 2 * s
        for step in (-1, 1):
            shifted = pos.copy()
            shifted[a] = numpy.clip(shifted[a] + step, 0, m - 1)     # the layer's own: masked out
            rows.append(idx[inner])
            cols.append(idx[tuple(shifted)][inner])
            vals.append(numpy.full(inner.sum(), -s))
    rows.append(idx[inner])
    cols.append(idx[inner])
    vals.append(centre)
    n = idx.size
    return scipy.sparse.csr_matrix((numpy.concatenate(vals), (numpy.concatenate(rows), numpy.concatenate(cols))),
                                   shape=(n, n))


def neumann_rows_system(n, dim, shift=10.0, seed=0, comm=None):
    """neumann_rows's matrix on an n^dim DMDA, or one of the sizes ``n`` (x, y, z) (dmda_system)."""
    sizes = [n] * dim if numpy.isscalar(n) else list(n)
    return dmda_system(neumann_rows(sizes[::-1], shift), sizes, dim, seed, comm)


def dmda_system(S, n, dim, seed=0, comm=None):
    """The SciPy CSR matrix ``S`` of a grid in natural order (x fastest) on an n^dim DMDA, or one
    of the sizes ``n`` (x, y, z), each rank assembling its own rows, and a random right-hand side
    that does not depend on the number of ranks: (da, A, b)."""
    comm = comm or PETSc.COMM_WORLD
    da = PETSc.DMDA().create([n] * dim if numpy.isscalar(n) else list(n), dof=1, stencil_width=1, comm=comm)
    indptr, cols, vals = S.indptr.astype(PETSc.IntType), S.indices.astype(PETSc.IntType), S.data
    bvals = numpy.random.default_rng(seed).standard_normal(S.shape[0])
    if comm.getSize() > 1:
        indptr, cols, vals, bvals = owned_rows(da, indptr, cols, vals, bvals)
    A = PETSc.Mat().create(comm=comm)
    A.setSizes(((len(indptr) - 1, S.shape[0]), (len(indptr) - 1, S.shape[0])))
    A.setType(PETSc.Mat.Type.AIJ)
    A.setPreallocationCSR((indptr, cols, vals))
    A.assemble()
    b, _ = A.createVecs()
    b.setArray(bvals)
    return da, A, b


def stencil_system(n, dim, outside, weight=None, identity=None):
    """-Laplace u = f on an n^dim DMDA, assembled point by point (MatSetValuesStencil), with a random
    right-hand side: (da, A, b). Indices are the DMDA's (x, y, z). ``weight(idx, a)``: the coupling
    of point idx along axis a (1 by default); ``outside(idx, a, step)``: what the diagonal gains
    where the neighbour across that face lies outside the grid (0: zero flux; else an eliminated
    Dirichlet value's coupling); ``identity(idx)``: True on identity rows (ex45's Dirichlet rows,
    diagonal 2 dim; the other rows keep their couplings to them)."""
    da = PETSc.DMDA().create([n] * dim, stencil_width=1)
    A = da.createMat()
    row, col = PETSc.Mat.Stencil(), PETSc.Mat.Stencil()
    for idx in itertools.product(*[range(s, e) for s, e in da.getRanges()]):
        row.index, diag = idx, 0.0
        if identity is not None and identity(idx):
            A.setValueStencil(row, row, 2.0 * dim)
            continue
        for a in range(dim):
            for step in (-1, 1):
                nb = list(idx)
                nb[a] += step
                if not 0 <= nb[a] < n:
                    diag += outside(idx, a, step)
                    continue
                w = 1.0 if weight is None else weight(idx, a)
                col.index = tuple(nb)
                A.setValueStencil(row, col, -w)
                diag += w
        A.setValueStencil(row, row, diag)
    A.assemble()
    # the same right-hand side on any number of ranks: drawn in natural (grid) order
    bn = da.createNaturalVec()
    lo, hi = bn.getOwnershipRange()
    bn.setArray(numpy.random.default_rng(0).standard_normal(bn.getSize())[lo:hi])
    b = A.createVecLeft()
    da.naturalToGlobal(bn, b)
    bn.destroy()
    return da, A, b


def half_volumes(n, axes):
    """stencil_system's weight of vertex-centred finite volumes: the coupling along axis a halves
    for each of ``axes`` (other than a) on which the point lies on the boundary."""
    return lambda idx, a: 0.5 ** sum(idx[c] in (0, n - 1) for c in axes if c != a)


def neumann_system(n, dim, centring):
    """The pure Neumann Laplacian on an n^dim DMDA, its null space (the constants) attached and
    removed from a random right-hand side. ``vertex``: unknowns on the grid's vertices, boundary
    ones included, half control volumes along the boundary (the finite-volume form of ksp ex29/ex50);
    ``cell``: unknowns at cell centres, zero flux through the boundary faces (the graph Laplacian)."""
    da, A, b = stencil_system(n, dim, lambda idx, a, step: 0.0,
                              half_volumes(n, range(dim)) if centring == "vertex" else None)
    null = PETSc.NullSpace().create(constant=True)
    A.setNullSpace(null)
    null.remove(b)
    return da, A, b


def owned_rows(da, indptr, cols, vals, rhs, dof=1):
    """This rank's rows of a CSR matrix in natural grid order (``dof`` unknowns per grid point,
    interleaved), columns in PETSc's DMDA ordering, and those rows of the right-hand side."""
    dim = da.getDim()
    shape = tuple(da.getSizes()[:dim][::-1])
    rng = [range(*r) for r in reversed(da.getRanges()[:dim])]
    points = numpy.ravel_multi_index(numpy.meshgrid(*rng, indexing="ij"), shape).ravel()
    rows = (points[:, None] * dof + numpy.arange(dof)).ravel()
    counts = indptr[rows + 1] - indptr[rows]
    first = numpy.repeat(indptr[rows] - numpy.concatenate([[0], numpy.cumsum(counts)[:-1]]), counts)
    take = first + numpy.arange(counts.sum())      # the entries of these rows, in order
    c = numpy.asarray(da.getAO().app2petsc(cols[take].astype(PETSc.IntType)))   # the AO maps unknowns
    local_row = numpy.repeat(numpy.arange(len(rows)), counts)
    order = numpy.lexsort((c, local_row))
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(PETSc.IntType)
    return indptr, c[order], vals[take][order], rhs[rows]


def timed_solve(ksp, A, b, x):
    """KSPSetUp and KSPSolve timed apart, and the true relative residual |b - A x| / |b|:
    (setup seconds, solve seconds, residual)."""
    t0 = time.perf_counter()
    ksp.setUp()
    t1 = time.perf_counter()
    ksp.solve(b, x)
    t2 = time.perf_counter()
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    return t1 - t0, t2 - t1, r.norm() / b.norm()


def natural_array(da, x):
    """The whole of a DMDA global Vec in natural (grid) ordering, on every rank."""
    xn = da.createNaturalVec()
    da.globalToNatural(x, xn)
    scatter, full = PETSc.Scatter.toAll(xn)
    scatter.scatter(xn, full)
    return full.getArray().copy()


def wedge_wavenumber(n, f=30.0):
    """MP2's wavenumber on the n x n grid of the unit square (the 1000 m x 1000 m wedge of Plessix
    and Mulder scaled by l = 1000 m): k = 2 pi f l / c with c = 2000 m/s above the upper interface,
    1500 m/s between, 3000 m/s below the lower one. The interfaces are our reading of the paper's
    Fig. 4 (its text gives no coordinates): y = 0.4 + 0.2 x and y = 0.8 - 0.2 x, y measured
    downwards from the source's edge."""
    x = numpy.linspace(0.0, 1.0, n)[None, :]
    y = numpy.linspace(0.0, 1.0, n)[:, None]
    c = numpy.where(y < 0.4 + 0.2 * x, 2000.0, numpy.where(y < 0.8 - 0.2 * x, 1500.0, 3000.0))
    return 2 * numpy.pi * f * 1000.0 / c


def helmholtz_system(N, k, boundary="absorbing", shift=(1.0, 0.0), source="centre", dim=2, comm=None):
    """Knibbe, Oosterlee and Vuik's model problems on a DMDA: -Laplace u - k^2 u = delta on the unit
    square, (N + 1)^2 grid points with the first-order absorbing boundary (or N - 1 interior points
    per axis with ``boundary='dirichlet'``); k a number (MP1) or an array over the grid (MP2,
    ``wedge_wavenumber``); the unit point source at the centre (MP1) or at the middle of the first
    grid row (``source='edge'``, MP2). With complex scalars the DMDA has dof 1; with a real PETSc the
    real-equivalent form, dof 2, real and imaginary parts interleaved. ``dim=3``: the same on the
    unit cube (our extension). In parallel (``comm``, default COMM_WORLD) each rank assembles its
    own rows. Returns (da, A, b); A as AIJ (type from -mat_type)."""
    import scipy.sparse

    from pcplugins.core import helmholtz
    comm = comm or PETSc.COMM_WORLD
    n = N + 1 if boundary == "absorbing" else N - 1
    H = helmholtz.operator(n, k, shift, boundary, dim=dim)
    f = helmholtz.point_source(n, dim)
    if source == "edge":
        f = numpy.zeros((n,) * dim)
        f[(0,) + (n // 2,) * (dim - 1)] = 1.0
        f = f.ravel()
    complex_scalars = numpy.dtype(PETSc.ScalarType).kind == "c"
    if not complex_scalars:       # [[Re, -Im], [Im, Re]] blocks, unknowns interleaved
        H = (scipy.sparse.kron(H.real, numpy.eye(2)) + scipy.sparse.kron(H.imag, [[0, -1], [1, 0]])).tocsr()
        f = numpy.stack([f, numpy.zeros_like(f)], 1).ravel()
    H.sort_indices()
    dof = 1 if complex_scalars else 2
    da = PETSc.DMDA().create([n] * dim, dof=dof, stencil_width=1, comm=comm)
    da.setUp()
    indptr, cols, vals = H.indptr, H.indices, H.data
    if comm.getSize() > 1:
        indptr, cols, vals, f = owned_rows(da, indptr, cols, vals, f, dof)
    A = PETSc.Mat().create(comm=comm)
    A.setSizes(((len(indptr) - 1, H.shape[0]), (len(indptr) - 1, H.shape[0])))
    A.setType("aij")
    A.setFromOptions()
    A.setPreallocationCSR((indptr.astype(PETSc.IntType), cols.astype(PETSc.IntType), vals.astype(PETSc.ScalarType)))
    A.assemble()
    # the KSP's work vectors come from the DM: of the matrix's kind (CUDA with aijcusparse), or a
    # KSP mixes host and CUDA Vecs (slow, and PETSc's PCMG broke down on it with complex scalars)
    da.setVecType(A.getVecType())
    b, _ = A.createVecs()
    b.setArray(f.astype(PETSc.ScalarType))
    return da, A, b
