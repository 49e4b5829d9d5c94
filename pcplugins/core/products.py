"""The cycle's products on NumPy or CuPy arrays, none of which waits for the host: CSR and ELL row
products (A u, f - A u, R (f - A u), Gauss-Seidel and Jacobi updates, a Jacobi sweep after the
prolongation), the aggregate prolongation, the coarse inverse's GEMV, and the K-cycle's inner
products (two pairs at a time) and updates with device scalars (Wang, Hu, Cohen, Xu, Algorithms
2.1 and 2.2).

cuSPARSE (cupyx's A @ x) cannot be captured in a CUDA graph and costs a descriptor set-up per call,
so on the GPU these run one small kernel each (sparse.cu's row kernels, real or complex, single or
double); on the host they are SciPy/NumPy expressions, the kernels' twins (tests/gpu/test_kernels.py
compares them).
"""
import functools

import numpy

from .. import backend, kernels
from . import sparse


def prolong_add(u, e, agg, sign=None, scale=1.0):
    """u += scale P e (one kernel on the GPU); P[i, agg[i]] = sign[i] with ``sign``, else 1."""
    if backend.array_module(u) is numpy:
        e = e[agg] if scale == 1 else scale * e[agg]
        u += e if sign is None else sign * e
        return u
    if sign is None:
        sparse.elementwise("prolong", "raw T e, I agg, T a", "T u", "u += a * e[agg]")(e, agg, scale, u)
    else:
        sparse.elementwise("prolong_signed", "raw T e, I agg, S s, T a", "T u",
                           "u += a * s * e[agg]")(e, agg, sign, scale, u)
    return u


_ROWS, _RESIDUAL, _SCALE, _UPDATE, _BLOCKS = 1, 2, 4, 8, 16
# rows this long on average (a system's coarse levels: 6 unknowns a node, tens of neighbours) go to a warp a row
WARP_ROWS = 24
BLOCK = 256             # threads a block of the row kernels (lanes_sum's shared memory holds as many)


def _csr_rows(A, u, f=None, rows=None, scale=None, update=None, blocks=False):
    """The row kernel of A's storage (csr_rows or ell_rows) in the mode the arguments ask for;
    ``update``: the array that takes u + the result (u itself where the rows do not couple, or,
    with ``blocks``, couple within a block of BLOCK rows only: ``cell_layout``)."""
    m = A.shape[0]
    out = backend.cupy.empty(m, A.dtype) if update is None else update
    mode = (_ROWS if rows is not None else 0) | (_RESIDUAL if f is not None else 0) | \
        (_SCALE if scale is not None else 0) | (_UPDATE if update is not None else 0) | (_BLOCKS if blocks else 0)
    threads = m
    if isinstance(A, sparse.ELL):
        name, matrix = "ell_rows", (numpy.int32(A.width), A.indices, A.data)
    elif blocks or A.nnz < WARP_ROWS * m:
        name, matrix = "csr_rows", (A.indptr, A.indices, A.data)
    else:
        name, matrix, threads = "csr_rows_warp", (A.indptr, A.indices, A.data), 32 * m
    sparse.row_kernel(kernels.CTYPES[A.dtype], name)(((threads + BLOCK - 1) // BLOCK,), (BLOCK,),
                                        (numpy.int32(m), numpy.int32(mode), rows if rows is not None else A.indices,
                                         *matrix, u, f if f is not None else u,
                                         scale if scale is not None else u, out))
    return out


def spmv(A, u, xp):
    """A u (a new array); A a CSR or ELL matrix, or anything with ``@`` (distributed.Transfer)."""
    if backend.is_gpu(xp) and hasattr(A, "indices") and _kernel_types(A, u):
        return _csr_rows(A, u)
    return A @ u


def residual(A, f, u, xp):
    """f - A u (a new array)."""
    if backend.is_gpu(xp) and _kernel_types(A, u, f):
        return _csr_rows(A, u, f=f)
    r = A @ u
    if r.dtype == numpy.result_type(f, r) and not backend.is_gpu(xp):
        return xp.subtract(f, r, out=r)          # in place: a new array costs its page faults
    return f - r


def restricted_residual(R, A, f, u, xp, out=None):
    """R (f - A u) (a new array, or ``out``): on the GPU one kernel that writes no residual, as many threads a
    row of R as R has entries a row on average (rounded up to a power of 2, at most 32: 4 for a 2D
    aux grid, 8 in 3D), each summing its members' residuals (A's rows short: ELL, or CSR of fewer
    than WARP_ROWS entries on average)."""
    matrix = _short_rows(A) if backend.is_gpu(xp) else None
    if (matrix and not isinstance(R, sparse.ELL) and hasattr(R, "indptr") and _kernel_types(R, u, f)
            and _kernel_types(A, u)):
        nc = R.shape[0]
        out = backend.cupy.empty(nc, R.dtype) if out is None else out
        if nc == 0:
            return out
        lanes = min(32, 1 << max(0, -(-R.nnz // nc) - 1).bit_length())
        i32 = numpy.int32
        sparse.row_kernel(kernels.CTYPES[A.dtype], "restricted_residual")(
            ((nc * lanes + 255) // 256,), (256,),
            (i32(nc), i32(lanes), R.indptr, R.indices, R.data, i32(A.shape[0]), i32(matrix[0]), *matrix[1:], u, f, out))
        return out
    r = spmv(R, residual(A, f, u, xp), xp)
    if out is not None:
        out[...] = r
        return out
    return r


def relax_rows(u, f, Arows, rows, scale, xp, independent=False, blocks=False):
    """u[rows] += scale (f[rows] - Arows u), Arows holding the rows ``rows`` of A (indices, or
    on the host a slice): all the new values computed from the old u, then written (the same
    result whatever the colouring).
    ``independent``: the rows do not couple to each other, so one kernel updates u in place;
    ``blocks`` (GPU): they couple within blocks of BLOCK rows only, ``rows`` holding -1 for a
    slot's padding (smoothers.csr.cell_layout): one kernel in place too."""
    if backend.is_gpu(xp) and _kernel_types(Arows, u, f, scale):
        if independent or blocks:
            return _csr_rows(Arows, u, f=f, rows=rows, scale=scale, update=u, blocks=blocks)
        t = _csr_rows(Arows, u, f=f, rows=rows, scale=scale)
        sparse.elementwise("scatter_add", "raw T t, raw I rows", "raw T u", "u[rows[i]] += t[i]")(
            t, rows, u, size=rows.shape[0])
        return u
    if blocks:          # mode 16's twin, and its way for types the kernel does not take: no padding written
        live = rows >= 0
        u[rows[live]] += (scale * (f[rows] - Arows @ u))[live]
        return u
    u[rows] += scale * (f[rows] - Arows @ u)
    return u


def jacobi(A, f, u, scale, xp):
    """u + scale (f - A u), a new array (one kernel on the GPU): a Jacobi sweep out of place."""
    if backend.is_gpu(xp) and _kernel_types(A, u, f, scale):
        return _csr_rows(A, u, f=f, scale=scale, update=backend.cupy.empty_like(u))
    return u + scale * residual(A, f, u, xp)


def jacobi_prolonged(A, f, u, e, agg, sign, alpha, scale, xp):
    """v + scale (f - A v) with v = u + alpha P e (P[i, agg[i]] = sign[i], or 1 without ``sign``),
    a new array: the prolongation and the Jacobi sweep after it, on the GPU one kernel that never
    writes v (A's rows short: ELL, or CSR of fewer than WARP_ROWS entries on average); ``u`` may
    be overwritten."""
    matrix = _short_rows(A) if backend.is_gpu(xp) else None
    if (matrix and _kernel_types(A, u, f, scale, e) and agg.dtype == numpy.int32
            and (sign is None or sign.dtype == A.dtype) and A.shape[0]):
        m = A.shape[0]
        out = backend.cupy.empty_like(u)
        sparse.row_kernel(kernels.CTYPES[A.dtype], "jacobi_prolonged")(
            ((m + 255) // 256,), (256,),
            (numpy.int32(m), numpy.int32(matrix[0]), *matrix[1:], u, e, agg, numpy.uint64(0) if sign is None else sign,
             A.dtype.type(alpha), f, scale, out))
        return out
    return jacobi(A, f, prolong_add(u, e, agg, sign, alpha), scale, xp)


def _short_rows(A):
    """(width, indptr, indices, data) for the kernels that take a thread a row of A in either
    storage (width 0: CSR, indptr read; else ELL, indptr unused): A in ELL, or CSR of fewer than
    WARP_ROWS entries a row on average; None for longer rows."""
    if isinstance(A, sparse.ELL):
        return A.width, A.indices, A.indices, A.data
    if A.nnz < WARP_ROWS * A.shape[0]:
        return 0, A.indptr, A.indices, A.data
    return None


def _kernel_types(A, *vectors):
    """The row kernel's types: int32 indices, the vectors' values of the matrix's type."""
    return (A.indices.dtype == numpy.int32 and (isinstance(A, sparse.ELL) or A.indptr.dtype == numpy.int32)
            and A.dtype in kernels.CTYPES and all(v.dtype == A.dtype for v in vectors))


def dots(pairs, xp):
    """(a, b) of each pair (no conjugate) as a 1-D array of ``xp``, with no synchronisation. On
    the GPU two kernels for one or two pairs: per-block partial sums of both over the whole device,
    then their sums in one block (CuPy's ReductionKernel gives a full reduction one thread block,
    which leaves the device mostly idle, and costs a Python dispatch a call; the K-cycle takes
    three inner products a step of flexible CG)."""
    if not backend.is_gpu(xp):
        return xp.asarray([numpy.dot(a, b) for a, b in pairs])
    if len(pairs) > 2:
        return xp.concatenate([dots(pairs[i:i + 2], xp) for i in range(0, len(pairs), 2)])
    n, dtype = pairs[0][0].size, pairs[0][0].dtype
    blocks = max(1, min(1024, (n + 255) // 256))
    partial, out = xp.empty(len(pairs) * blocks, dtype), xp.empty(len(pairs), dtype)
    ctype = kernels.CTYPES[numpy.dtype(dtype)]
    sparse.row_kernel(ctype, "dots_partial")((blocks,), (256,), (*pairs[0], *pairs[-1], numpy.int32(len(pairs)),
                                                                 partial, numpy.int64(n)))
    sparse.row_kernel(ctype, "dots_sum")((1,), (256,), (partial, numpy.int32(blocks), numpy.int32(len(pairs)), out))
    return out


# Whether an energy (p, A p) gives a step: positive for a real matrix (an SPD one's is, but for a
# direction of zero energy), nonzero for a complex one (a complex symmetric matrix's is complex);
# energy() is the host's twin
ENERGY = ("template <typename T> __device__ bool energy(const T& e) { return e > T(0); }\n"
          "template <typename T> __device__ bool energy(const complex<T>& e) { return e != complex<T>(0); }\n")


def energy(e):
    """Whether the energy ``e`` (a 0-d array) gives a step (ENERGY's twin)."""
    return bool(e != 0) if numpy.iscomplexobj(e) else bool(e > 0)


def fcg_update(u, p, rp, pap, xp, r=None, ap=None):
    """A step of flexible CG (Algorithm 2.1) with the step length alpha = rp / pap, 0 where pap
    gives none (``energy``: a direction of zero energy, the residual already zero), rp and pap 0-d
    arrays: u + alpha p (in place; ``u`` None: from the zero first guess, a new array), and with
    ``r`` also r - alpha ap (a new array); one kernel on the GPU. Returns u, or (u, r - alpha ap)."""
    if not backend.is_gpu(xp):
        alpha = rp / pap if energy(pap) else 0.0
        if u is None:
            u = alpha * p
        else:
            u += alpha * p
        return u if r is None else (u, r - alpha * ap)
    alpha = "T a = energy(pap[0]) ? rp[0] / pap[0] : T(0); "
    set_u = "u = a * p;" if u is None else "u += a * p;"
    if r is None:
        kernel = sparse.elementwise(f"fcg_u{u is None:d}", "T p, raw T rp, raw T pap", "T u", alpha + set_u,
                                    preamble=ENERGY)
        return kernel(p, rp, pap, xp.empty_like(p) if u is None else u)
    kernel = sparse.elementwise(f"fcg_ur{u is None:d}", "T p, T r, T ap, raw T rp, raw T pap", "T u, T z",
                                alpha + set_u + " z = r - a * ap;", preamble=ENERGY)
    return kernel(p, r, ap, rp, pap, xp.empty_like(p) if u is None else u, xp.empty_like(r))


def axpy_ratio(y, num, den, x, xp):
    """y -= (num / den) x, num and den 0-d arrays, nothing where den, an energy, gives no step
    (``energy``); one kernel on the GPU."""
    if not backend.is_gpu(xp):
        if energy(den):
            y -= (num / den) * x
        return y
    sparse.elementwise("axpy_ratio", "raw T n, raw T d, T x", "T y",
                       "if (energy(d[0])) y -= n[0] / d[0] * x", preamble=ENERGY)(num, den, x, y)
    return y


def gemv(out, A, x):
    """out = A x for a small dense A (the coarsest level's inverse), into a preallocated ``out``:
    one launch with no cuBLAS workspace, so it can be captured in a CUDA graph. On the GPU
    sparse.cu's dense_rows, a warp a row, for contiguous arrays of one value type, else a CuPy
    reduction."""
    if backend.array_module(out) is numpy:
        return numpy.matmul(A, x, out=out)
    if (A.dtype in kernels.CTYPES and A.dtype == x.dtype == out.dtype and A.flags.c_contiguous
            and x.flags.c_contiguous and out.flags.c_contiguous and A.shape[0]):
        m, n = A.shape
        sparse.row_kernel(kernels.CTYPES[A.dtype], "dense_rows")(
            ((32 * m + 255) // 256,), (256,), (numpy.int32(m), numpy.int32(n), A, x, out))
        return out
    return _gemv_kernel()(A, x[None, :], out, axis=1)


@functools.lru_cache(maxsize=None)
def _gemv_kernel():
    return backend.cupy.ReductionKernel("T a, T x", "T y", "a * x", "a + b", "y = a", "0", "pcplugins_gemv")
