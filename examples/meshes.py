"""Triangular meshes and P1 finite-element Poisson matrices for the AMG examples, tests and benchmarks
(SciPy's Delaunay; no mesh generator needed).

mesh(kind, n, seed) -> (points, triangles) on the unit square ('uniform': the structured
triangulation of an (n+1) x (n+1) grid, 'quasi': a jittered grid, Delaunay) or the unit disk
('disk': rings of points, Delaunay).
p1_poisson(points, triangles, kappa) -> (A, xy): the stiffness matrix of -div(kappa grad u) with
homogeneous Dirichlet conditions (boundary vertices eliminated) as SciPy CSR, and the coordinates
of its unknowns. kappa is per triangle (None: 1).
"""
import numpy
import scipy.sparse
import scipy.spatial


def mesh(kind, n, seed=0):
    if kind in ("uniform", "quasi"):
        x, y = numpy.meshgrid(numpy.linspace(0, 1, n + 1), numpy.linspace(0, 1, n + 1))
        p = numpy.stack([x.ravel(), y.ravel()], 1)
        if kind == "uniform":
            i = numpy.arange(n * (n + 1)).reshape(n, n + 1)[:, :-1].ravel()
            a, b, c, d = i, i + 1, i + n + 1, i + n + 2
            return p, numpy.concatenate([numpy.stack([a, b, d], 1), numpy.stack([a, d, c], 1)])
        inner = (p[:, 0] > 0) & (p[:, 0] < 1) & (p[:, 1] > 0) & (p[:, 1] < 1)
        rng = numpy.random.default_rng(seed)
        p[inner] += rng.uniform(-0.3, 0.3, (int(inner.sum()), 2)) / n
    elif kind == "disk":
        pts = [numpy.zeros((1, 2))]
        for k in range(1, n + 1):
            r = k / n
            m = int(round(2 * numpy.pi * k))
            t = numpy.arange(m) * 2 * numpy.pi / m + 0.5 * k
            pts.append(numpy.stack([r * numpy.cos(t), r * numpy.sin(t)], 1))
        p = numpy.concatenate(pts)
    else:
        raise ValueError(f"unknown mesh {kind!r}")
    return p, scipy.spatial.Delaunay(p).simplices


def p1_poisson(points, triangles, kappa=None):
    t = triangles
    P = points[t]                                      # (nt, 3, 2)
    e1, e2 = P[:, 1] - P[:, 0], P[:, 2] - P[:, 0]
    area = 0.5 * numpy.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    keep = area > 1e-14                                # Delaunay may leave slivers on the hull
    t, P, area = t[keep], P[keep], area[keep]
    # gradients of the barycentric functions: rotated opposite edges over twice the area
    E = numpy.stack([P[:, 2] - P[:, 1], P[:, 0] - P[:, 2], P[:, 1] - P[:, 0]], 1)
    K = numpy.einsum("tid,tjd->tij", E, E) / (4 * area)[:, None, None]
    if kappa is not None:
        K *= numpy.asarray(kappa)[keep][:, None, None]
    n = len(points)
    rows = numpy.repeat(t, 3, axis=1).ravel()
    cols = numpy.tile(t, (1, 3)).ravel()
    A = scipy.sparse.csr_matrix((K.ravel(), (rows, cols)), shape=(n, n))
    edges = numpy.sort(numpy.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    key, count = numpy.unique(edges[:, 0].astype(numpy.int64) * n + edges[:, 1], return_counts=True)
    boundary = numpy.zeros(n, dtype=bool)
    once = key[count == 1]                             # edges of one triangle: the boundary
    boundary[once // n] = boundary[once % n] = True
    used = numpy.zeros(n, dtype=bool)
    used[t.ravel()] = True
    inner = numpy.nonzero(~boundary & used)[0]
    A = A[inner][:, inner].tocsr()
    A.sum_duplicates()
    A.sort_indices()
    return A, points[inner]


def centroid_kappa(points, triangles, jump):
    """10^jump on the triangles whose centroid lies in [0.25, 0.6]^2 or [0.65, 0.9] x [0.1, 0.4], else 1."""
    c = points[triangles].mean(axis=1)
    inside = ((c[:, 0] > 0.25) & (c[:, 0] < 0.6) & (c[:, 1] > 0.25) & (c[:, 1] < 0.6)) | \
             ((c[:, 0] > 0.65) & (c[:, 0] < 0.9) & (c[:, 1] > 0.1) & (c[:, 1] < 0.4))
    return numpy.where(inside, 10.0 ** jump, 1.0)


def petsc_matrix(A, mat_type=None, comm=None, block_size=1):
    """A SciPy CSR matrix as a PETSc AIJ matrix (type from -mat_type unless given). With ``comm``
    of several ranks each rank keeps its block of consecutive rows (``row_range`` of the nodes:
    whole blocks of ``block_size`` rows, the matrix's block size)."""
    from petsc4py import PETSc
    comm = comm or PETSc.COMM_SELF
    lo, hi = (block_size * i for i in row_range(A.shape[0] // block_size, comm))
    M = PETSc.Mat().create(comm=comm)
    M.setSizes(((hi - lo, A.shape[0]), (hi - lo, A.shape[1])), bsize=block_size)
    M.setType(mat_type or "aij")
    if mat_type is None:
        M.setFromOptions()
    B = A[lo:hi]
    M.setPreallocationCSR((B.indptr.astype(PETSc.IntType), B.indices.astype(PETSc.IntType), B.data))
    M.assemble()
    return M


def row_range(n, comm):
    """This rank's rows [lo, hi) of n split as PETSc splits them (PETSC_DECIDE)."""
    size, rank = comm.getSize(), comm.getRank()
    lo = rank * (n // size) + min(rank, n % size)
    return lo, lo + n // size + (rank < n % size)


# -- Goddeke and Strzodka's meshes for the anisotropic (line/ADI) smoothers -------------------------

def graded_axis(level, nu):
    """Nodes of [0, 1] after ``level`` refinements in which the interval at 0 is split at nu/2 of
    its width (the small piece at the boundary) and every other interval is halved: Goddeke and
    Strzodka's anisotropic refinement towards an edge (A1-A5: nu = 0.75, 0.5, 0.25, 0.0625,
    0.03125; nu = 1 is uniform). The smallest width is (nu/2)^level."""
    x = numpy.array([0.0, 1.0])
    for _ in range(level):
        mid = (x[:-1] + x[1:]) / 2
        mid[0] = x[0] + nu / 2 * (x[1] - x[0])
        x = numpy.insert(x, numpy.arange(1, len(x)), mid)
    return x


def q1_stencil(xs, ys):
    """Bilinear (Q1) finite elements for -Laplace u on the tensor-product mesh xs x ys, Dirichlet
    boundary: the 9-point stencil of the interior nodes as (offsets (dy, dx), coefficient arrays of
    shape (len(ys) - 2, len(xs) - 2)), couplings to boundary nodes dropped."""
    hx, hy = numpy.diff(xs)[None, :], numpy.diff(ys)[:, None]
    a, b = hy / hx / 6, hx / hy / 6                     # per element (ny, nx)
    # local nodes (dy, dx): (0,0), (0,1), (1,1), (1,0); K = a Kx + b Ky
    Kx = numpy.array([[2, -2, -1, 1], [-2, 2, 1, -1], [-1, 1, 2, -2], [1, -1, -2, 2]])
    Ky = numpy.array([[2, 1, -1, -2], [1, 2, -2, -1], [-1, -2, 2, 1], [-2, -1, 1, 2]])
    local = [(0, 0), (0, 1), (1, 1), (1, 0)]
    ny, nx = len(ys), len(xs)
    offsets = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    coefs = {o: numpy.zeros((ny, nx)) for o in offsets}
    for p, (py, px) in enumerate(local):
        for q, (qy, qx) in enumerate(local):
            k = a * Kx[p, q] + b * Ky[p, q]             # element e couples its node p to node q
            coefs[(qy - py, qx - px)][py:py + ny - 1, px:px + nx - 1] += k
    inner = (slice(1, -1), slice(1, -1))
    out = []
    for o in offsets:
        c = coefs[o][inner].copy()
        if o[0] == -1:
            c[0, :] = 0
        if o[0] == 1:
            c[-1, :] = 0
        if o[1] == -1:
            c[:, 0] = 0
        if o[1] == 1:
            c[:, -1] = 0
        out.append(c)
    return offsets, out
