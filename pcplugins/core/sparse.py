"""Sparse (CSR, ELL) matrices on NumPy or CuPy, and the aggregate transfers of unsmoothed aggregation.

The CSR matrices are SciPy's (host) or cupyx's (GPU, cuSPARSE products), chosen by the array
namespace. ``ELL`` is ELLPACK storage for rows of bounded length (the aux grid's coarse levels: at
most 9 entries per row in 2D, 27 in 3D), used by the cycle's products only. With aggregates
``agg`` (agg[i] = the coarse unknown of fine unknown i) the piecewise-constant prolongation P
(P[i, agg[i]] = 1) is never formed as a matrix:

- restriction P^T r sums r over each aggregate (a row kernel over the aggregates' member lists),
- prolongation P e copies e[agg[i]] to i (one gather),
- the Galerkin product P^T A P adds a_ij into entry (agg[i], agg[j]) (Wang, Hu, Cohen, Xu, eq. 4):
  the fine COO triplets relabelled and their duplicates summed.
"""
import functools

import numpy

from .. import backend, kernels


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


class ELL:
    """ELLPACK storage: every row padded to ``width`` entries (value 0, column the row itself),
    stored entry-major ((width, n) arrays), so that on the GPU one thread per row reads the k-th
    entries of consecutive rows from consecutive addresses, with no row pointers to follow. Only
    the products (spmv, residual, relax_rows) take it; setup works on the CSR matrix. ``nnz``: the
    stored entries of that CSR matrix (None for a row subset: its padding cannot be told from
    entries that are zero)."""

    def __init__(self, indices, data, ncols, nnz):
        self.indices, self.data, self.nnz = indices, data, nnz
        self.shape = (indices.shape[1], ncols)
        self.dtype = data.dtype

    @classmethod
    def from_csr(cls, A, xp):
        """A's rows as ELL (on the GPU one kernel, a thread a row, once the width is known)."""
        n = A.shape[0]
        counts = A.indptr[1:] - A.indptr[:-1]
        width = int(counts.max()) if n else 0
        if backend.is_gpu(xp) and n:
            indices, data = xp.empty((width, n), numpy.int32), xp.empty((width, n), A.dtype)
            elementwise("ell_fill", "raw I indptr, raw J cols, raw T vals, int32 width, int32 ncols",
                        "raw int32 indices, raw T data",
                        "const I p = indptr[i], len = indptr[i + 1] - p; const int n = _ind.size();"
                        "for (int k = 0; k < width; ++k) {"
                        "  indices[k * n + i] = k < len ? (int) cols[p + k] : (int) (i % ncols);"
                        "  data[k * n + i] = k < len ? vals[p + k] : T(0);"
                        "}")(A.indptr, A.indices, A.data, numpy.int32(width), numpy.int32(A.shape[1]), indices, data,
                             size=n)
            return cls(indices, data, A.shape[1], int(A.nnz))
        rows = rows_of(A, xp)
        pos = xp.arange(A.nnz, dtype=numpy.int32) - A.indptr[rows]       # the entry's place in its row
        indices = xp.tile(xp.arange(n, dtype=numpy.int32) % A.shape[1], (width, 1))
        data = xp.zeros((width, n), A.dtype)
        indices[pos, rows] = A.indices
        data[pos, rows] = A.data
        return cls(indices, data, A.shape[1], int(A.nnz))

    @property
    def width(self):
        return self.indices.shape[0]

    def __getitem__(self, rows):
        """The rows ``rows`` (an index array or a slice), as ELL."""
        return ELL(self.indices[:, rows], self.data[:, rows], self.shape[1], None)

    def __matmul__(self, u):
        return (self.data * u[self.indices]).sum(axis=0)


def astype(M, dtype):
    """M (an array, a CSR matrix of either module or ELL; None stays None) with its values in
    ``dtype`` (None: as they are; real values of a complex ``dtype`` in its real type), the index
    arrays shared: a level's storage in the cycle's precision (-pc_amg_precision single)."""
    if M is None or dtype is None or M.dtype.kind not in "fc":
        return M
    dtype = numpy.dtype(dtype)
    dtype = numpy.empty(0, dtype).real.dtype if M.dtype.kind == "f" else dtype
    if M.dtype == dtype:
        return M
    if isinstance(M, ELL):
        return ELL(M.indices, M.data.astype(dtype), M.shape[1], M.nnz)
    if hasattr(M, "indptr"):
        return module(backend.array_module(M.data)).csr_matrix((M.data.astype(dtype), M.indices, M.indptr),
                                                               shape=M.shape)
    return M.astype(dtype)


def row_parts(M, order, bounds):
    """The rows order[bounds[k]:bounds[k + 1]] of M for each k, as matrices of M's kind: one
    gather of the rows of a CSR matrix in ``order`` and slices of it (a gather per part costs the
    GPU a few waits for the host), an ELL matrix's parts gathered one by one (its kernels read
    whole arrays). ``order`` None: M's rows are in order already, the parts are slices of them;
    -1 in ``order``: an empty row (CSR; ELL: a copy of the last row, which the cell layout's
    kernels do not read)."""
    pairs = list(zip(bounds[:-1], bounds[1:]))
    if isinstance(M, ELL):
        return [M[slice(a, b) if order is None else order[a:b]] for a, b in pairs]
    xp = backend.array_module(M.data)
    P = M if order is None else gathered_rows(M, order, xp)
    at = backend.to_host(P.indptr[xp.asarray(numpy.asarray(bounds, numpy.int64))]).tolist()
    return [module(xp).csr_matrix((P.data[s:e], P.indices[s:e], P.indptr[a:b + 1] - s), shape=(b - a, M.shape[1]))
            for (a, b), s, e in zip(pairs, at[:-1], at[1:])]


def gathered_rows(M, order, xp):
    """The CSR matrix of M's rows in ``order``, a permutation of them with -1 where an empty row
    goes (so the result holds all M.nnz entries: its size needs no wait for the device), each
    row's entries in their order. On the GPU a cumsum of the lengths and one kernel, a thread a row
    (cupyx's fancy row index takes several and waits for the host); its twin is SciPy's M[order]
    with the empty rows inserted."""
    if not backend.is_gpu(xp):
        if not (order < 0).any():
            return M[order]
        G = M[order[order >= 0]]
        lengths = numpy.zeros(order.shape[0], G.indptr.dtype)
        lengths[order >= 0] = numpy.diff(G.indptr)
        return module(xp).csr_matrix((G.data, G.indices, numpy.concatenate([[0], numpy.cumsum(lengths)])),
                                     shape=(order.shape[0], M.shape[1]))
    n = order.shape[0]
    lengths = xp.where(order >= 0, (M.indptr[1:] - M.indptr[:-1])[order], 0)
    indptr = xp.concatenate([xp.zeros(1, M.indptr.dtype), xp.cumsum(lengths, dtype=M.indptr.dtype)])
    indices, data = xp.empty_like(M.indices), xp.empty_like(M.data)
    if n:
        elementwise("gathered_rows", "O src, raw I ptr, raw I idx, raw T val, raw I start", "raw I oidx, raw T oval",
                    "I d = start[i];"
                    "if (src >= 0)"
                    "  for (I k = ptr[src]; k < ptr[src + 1]; ++k, ++d) { oidx[d] = idx[k]; oval[d] = val[k]; }")(
            order, M.indptr, M.indices, M.data, indptr, indices, data)
    return module(xp).csr_matrix((data, indices, indptr), shape=(n, M.shape[1]))


def to_host(A):
    """A as a SciPy matrix: a host copy of a cupyx matrix, a SciPy one itself."""
    return A.get() if backend.array_module(A.data) is not numpy else A


def use_ell(storage, A, cells, coords):
    """Whether a level's products take ELL storage (``A`` the level's matrix, on several ranks this
    rank's own block, the smoother's): every level with ``storage`` ell; with ``coarse`` the aux
    grid's levels (``cells``) whose rows have at most 3^dim entries (a cell coupled to its
    neighbour cells: 9 in 2D, 27 in 3D; on the finest level a grid's star stencil, read coalesced
    by colour Gauss-Seidel); with csr none (pcplugins.AMG's auto: coarse on the GPU, csr on the
    host, where SciPy's CSR product beats NumPy's ELL)."""
    if storage == "csr" or A.shape[0] == 0:
        return False
    return storage == "ell" or (cells and int((A.indptr[1:] - A.indptr[:-1]).max()) <= 3 ** coords.shape[1])


def storage(A, xp, ell):
    """A as the cycle multiplies by it: ELL when ``ell``, else A itself."""
    return ELL.from_csr(A, xp) if ell else A


def rows_of(A, xp):
    """The row index of every stored entry (the COO rows of a CSR matrix): each row's index
    repeated by its length (on the GPU a thread a row writes its own)."""
    if not backend.is_gpu(xp):
        return numpy.repeat(numpy.arange(A.shape[0], dtype=numpy.int32), numpy.diff(A.indptr))
    rows = xp.empty(A.nnz, numpy.int32)
    if A.shape[0]:
        elementwise("rows_of", "raw I indptr", "raw int32 rows",
                    "for (I k = indptr[i]; k < indptr[i + 1]; ++k) rows[k] = i")(A.indptr, rows, size=A.shape[0])
    return rows


def dense(A, xp):
    """The CSR matrix A as a dense array on its device: on the GPU a thread a row adds its entries
    into zeros, one kernel (cupyx's toarray goes through cuSPARSE after its format checks, which
    wait for the device); SciPy's toarray on the host, the twin."""
    if not backend.is_gpu(xp):
        return A.toarray()
    d = xp.zeros(A.shape, A.dtype)
    if A.shape[0] and A.shape[1]:
        elementwise("dense_rows", "raw I indptr, raw J indices, raw T data, int64 n", "raw T d",
                    "for (I k = indptr[i]; k < indptr[i + 1]; ++k) d[i * n + indices[k]] += data[k]")(
            A.indptr, A.indices, A.data, numpy.int64(A.shape[1]), d.reshape(-1), size=A.shape[0])
    return d


def row_max(values, A, xp):
    """The largest of ``values`` (>= 0, one per stored entry of A) in each row: on the GPU one
    thread a row (CuPy's sparse max goes through a dense copy of each row block), its SciPy twin
    on the host."""
    if A.shape[0] == 0:                  # a rank that owns no rows
        return xp.zeros(0)
    if backend.is_gpu(xp):
        return elementwise("row_max", "raw T v, raw I indptr", "T m",
                           "T best = 0; for (I j = indptr[i]; j < indptr[i + 1]; j++) "
                           "best = v[j] > best ? v[j] : best; m = best")(values, A.indptr, size=A.shape[0])
    out = numpy.zeros(A.shape[0], values.dtype)
    full = numpy.diff(A.indptr) > 0
    if values.size:
        out[full] = numpy.maximum.reduceat(values, A.indptr[:-1][full])
    return out


def row_argmax(values, A, xp, rows=None):
    """The column of the largest positive value in each row of A (``values`` one per stored
    entry), -1 where a row has none. Of equal values (to rounding: sums in a device's own order)
    the first column, so that NumPy and CuPy pick the same."""
    n = A.shape[0]
    rows = rows_of(A, xp) if rows is None else rows
    pick = (values > 0) & (values >= (1 - 1e-12) * row_max(values, A, xp)[rows])
    first = n - row_max(xp.where(pick, n - A.indices, 0).astype(numpy.float64), A, xp)
    return xp.where(first < n, first, -1).astype(numpy.int64)


def l1_norms(A, xp):
    """Row sums of |a_ij| (the l1 smoothers' diagonal, Baker, Falgout, Kolev, Yang 2011), in the
    precision of A's values: on the GPU one kernel, a thread a row summing in the row's order."""
    if backend.is_gpu(xp) and A.shape[0]:
        out = xp.empty(A.shape[0], numpy.dtype(A.dtype).char.lower())     # the real type of A's values
        elementwise("row_l1", "raw I indptr, raw T data", "R s",
                    "R t = 0; for (I k = indptr[i]; k < indptr[i + 1]; ++k) t += magnitude(data[k]); s = t",
                    preamble=MAGNITUDE)(A.indptr, A.data, out)
        return out
    B = module(xp).csr_matrix((xp.abs(A.data), A.indices, A.indptr), shape=A.shape)   # A's pattern, shared
    return xp.asarray(B.sum(axis=1)).ravel()


# |a| of the value types, as NumPy's abs takes it (in the value's own precision), for kernels
MAGNITUDE = ("__device__ double magnitude(float v) { return fabsf(v); }\n"
             "__device__ double magnitude(double v) { return fabs(v); }\n"
             "__device__ double magnitude(complex<float> v) { return abs(v); }\n"
             "__device__ double magnitude(complex<double> v) { return abs(v); }\n")


def dominant(A, xp, ghost_l1=0):
    """Is every row diagonally dominant, a_ii >= sum_{j != i} |a_ij| (``ghost_l1``: more of that
    sum, from other ranks' columns)? A symmetric such A is positive semidefinite (Gershgorin)."""
    return backend.all_true(l1_norms(A, xp) + ghost_l1 <= (2 + 1e-12) * A.diagonal().real)


def galerkin(A, agg, nc, xp, sign=None, R=None):
    """P^T A P for the piecewise-constant P of ``agg`` (P[i, agg[i]] = 1, or sign[i] = +-1 with
    ``sign``): s_i a_ij s_j summed into (agg[i], agg[j]). SciPy's COO to CSR conversion on the
    host; on the GPU the kernel galerkin_rows (sparse.cu), a thread a coarse row, which takes
    each aggregate's members from ``R`` (members(agg, nc), made here where the caller has none),
    or ``sum_sorted`` (one sort of all the entries) where a coarse row has more than
    ``GALERKIN_ROW`` entries (cupyx's conversion sorts the pairs by a comparison sort, sums with
    atomics in an order that changes from run to run, and sorts once more for cuSPARSE)."""
    if backend.is_gpu(xp) and A.dtype in kernels.CTYPES and A.shape[0] and nc:
        C = _galerkin_rows(A, agg, nc, xp, sign, R)
        if C is not None:
            return C
    r = rows_of(A, xp)
    rows = agg[r]
    cols = agg[A.indices]
    data = A.data if sign is None else A.data * (sign[r] * sign[A.indices]).astype(A.data.real.dtype)
    if backend.is_gpu(xp):
        return sum_sorted(rows, cols, data, nc, xp)
    C = module(xp).coo_matrix((data, (rows, cols)), shape=(nc, nc)).tocsr()
    C.sum_duplicates()
    return C


def row_kernel(ctype, name):
    """A kernel of sparse.cu for values of C type ``ctype`` (kernels.kernel compiles once per
    defines: GALERKIN_ROW is read at each call)."""
    return kernels.kernel("sparse", name, VALUE=ctype, GALERKIN_ROW=GALERKIN_ROW)


# the most distinct columns a coarse row may have for galerkin's kernel (which holds the row in
# each thread's local memory); a level with longer rows goes to one sort of all the entries
GALERKIN_ROW = 64


def _galerkin_rows(A, agg, nc, xp, sign, R=None):
    """sparse.galerkin on the GPU, a thread a coarse row (kernel galerkin_rows); None where a
    coarse row is too long."""
    i32 = numpy.int32
    agg = agg.astype(i32, copy=False)
    R = members(agg, nc, xp) if R is None else R     # the members of each aggregate, side by side
    bounds, member = R.indptr, R.indices
    cptr = xp.zeros(nc + 1, i32)
    sign = numpy.uint64(0) if sign is None else sign.astype(numpy.float64, copy=False)     # 0: a null pointer
    run = row_kernel(kernels.CTYPES[A.dtype], "galerkin_rows")
    args = (bounds, member, A.indptr.astype(i32, copy=False), A.indices.astype(i32, copy=False), A.data, agg, sign)
    grid = ((nc + 255) // 256,), (256,)
    run(*grid, (i32(nc), i32(0), *args, cptr[1:], cptr, cptr, A.data))
    low = cptr[1:].min()
    xp.cumsum(cptr[1:], out=cptr[1:])
    low, nnz = (int(v) for v in xp.stack([low, cptr[-1]]).get())     # one wait for the host
    if low < 0:
        return None
    cind, cdata = xp.empty(nnz, i32), xp.empty(nnz, A.dtype)
    run(*grid, (i32(nc), i32(1), *args, cptr, cptr, cind, cdata))
    C = module(xp).csr_matrix((cdata, cind, cptr), shape=(nc, nc))
    C.has_canonical_format = True
    return C


def sum_sorted(rows, cols, data, shape, xp):
    """The CSR matrix of the COO triplets, ``shape`` (rows, columns; an int: square), duplicates
    summed: the pairs as one 64-bit key row * columns + col, sorted (a radix sort on the GPU;
    stable), each run of equal keys summed in sorted order by ``segment_sum``, so every run gives
    the same bits. The result is canonical (rows and columns in order, no duplicates)."""
    sp = module(xp)
    nr, nc = (shape, shape) if numpy.isscalar(shape) else shape
    if rows.size == 0:
        return sp.csr_matrix((nr, nc), dtype=data.dtype)
    key = rows.astype(numpy.int64) * nc + cols
    order = xp.argsort(key, kind="stable") if not backend.is_gpu(xp) else xp.argsort(key)
    key = key[order]
    new = xp.empty(key.size, bool)
    new[0] = True
    xp.not_equal(key[1:], key[:-1], out=new[1:])
    starts = xp.flatnonzero(new)
    key = key[starts]
    counts = xp.bincount((key // nc).astype(numpy.int32), minlength=nr)
    indptr = xp.concatenate([xp.zeros(1, numpy.int32), xp.cumsum(counts).astype(numpy.int32)])
    C = sp.csr_matrix((segment_sum(data, order, starts), (key % nc).astype(numpy.int32), indptr), shape=(nr, nc))
    C.has_canonical_format = True
    return C


def segment_sum(data, order, starts):
    """out[s] = the sum of data[order[j]] for j from starts[s] up to starts[s + 1] (the last run
    to the end), added in that order; ``starts`` increasing from 0. One thread per run on the GPU
    (kernel ``segment_sum``), numpy.add.reduceat on the host: its twin."""
    xp = backend.array_module(data)
    if not backend.is_gpu(xp):
        return numpy.add.reduceat(data[order], starts) if starts.size else data[:0].copy()
    out = xp.empty(starts.size, data.dtype)
    if starts.size:
        blocks = -(-starts.size // 256)
        index = [a.astype(numpy.int64, copy=False) for a in (starts, order)]    # sorts give int64 already
        row_kernel(kernels.CTYPES[data.dtype], "segment_sum")(
            (blocks,), (256,), (numpy.int64(starts.size), numpy.int64(order.size), *index, data, out))
    return out


def member_lists(indices, indptr, n, xp, sign=None):
    """R = P^T of aggregates given by their member lists: row a holds the fine unknowns
    ``indices[indptr[a]:indptr[a + 1]]`` (of ``n``), its values ones or ``sign`` at those unknowns.
    Every restriction of the aggregations is made here (members, signed, and aggregation's
    lists from its sorts and matchings)."""
    values = xp.ones(indices.shape[0]) if sign is None else sign[indices]
    return module(xp).csr_matrix((values, indices, indptr), shape=(indptr.shape[0] - 1, n))


def members(agg, nc, xp, sign=None):
    """R = P^T as a CSR matrix of ones (or of ``sign``; row a lists the fine unknowns of aggregate
    a): restriction is then the same row kernel as a product, summing in a fixed order."""
    order = xp.argsort(agg, kind="stable") if not backend.is_gpu(xp) else xp.argsort(agg)
    counts = xp.bincount(agg, minlength=nc)
    indptr = xp.concatenate([xp.zeros(1, numpy.int32), xp.cumsum(counts).astype(numpy.int32)])
    return member_lists(order.astype(numpy.int32), indptr, agg.shape[0], xp, sign)


def rows_scaled(M, rows, xp):
    """D M (a copy) for a CSR matrix M and D = diag(``rows``)."""
    M = M.copy()
    M.data *= rows[rows_of(M, xp)]
    return M


def kept(A, keep, xp):
    """The CSR matrix A with only its entries where ``keep`` (one boolean per stored entry), made
    anew from A's arrays (cupyx's eliminate_zeros goes through a cuSPARSE routine of its own)."""
    counts = xp.bincount(rows_of(A, xp)[keep], minlength=A.shape[0])
    indptr = xp.concatenate([xp.zeros(1, numpy.int64), xp.cumsum(counts)]).astype(A.indptr.dtype)
    return module(xp).csr_matrix((A.data[keep], A.indices[keep], indptr), shape=A.shape)


def signed(R, sign):
    """The member lists R (sparse.members' form) with ``sign`` (None: R itself) as their values."""
    if sign is None:
        return R
    return member_lists(R.indices, R.indptr, R.shape[1], backend.array_module(R.data), sign)


@functools.lru_cache(maxsize=None)
def elementwise(name, inputs, outputs, body, preamble=""):
    """A named CuPy ElementwiseKernel, compiled once per signature."""
    return backend.cupy.ElementwiseKernel(inputs, outputs, body, "pcplugins_" + name, preamble=preamble)
