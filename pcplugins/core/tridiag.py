"""Batched tridiagonal solves along the last axis: the Thomas algorithm (NumPy or CuPy, vectorised
over the systems) and, on the GPU, a partition method whose reduced system is solved by cyclic
reduction (Goddeke and Strzodka, "Cyclic reduction tridiagonal solvers on GPUs applied to mixed
precision multigrid", section 3).

The GPU kernel solves one system per thread block and reads every coefficient once, so that it runs
near the memory bandwidth on batches too large for the L2 cache:

1. The block copies the system's four arrays into shared memory (coalesced, asynchronous copies:
   all of a block's loads are in flight at once).
2. The system is cut into chunks of S - 1 unknowns, each followed by one separator unknown, one
   chunk a thread (S odd, about (n + 1) / threads). Each thread eliminates inside its chunk in
   registers, down and then up (the Thomas algorithm carried along with the two separators around
   the chunk), so that every unknown of the chunk is x_k = g_k - u_k x_left - v_k x_right.
3. Substituting these into the separators' own equations leaves a tridiagonal system of the
   separators, which one warp solves: each lane eliminates inside a few consecutive separators the
   same way, and parallel cyclic reduction solves the one equation a lane that remains (log2 32
   steps, each eliminating the couplings at the current stride in every equation at once, the
   neighbours exchanged by warp shuffles).
4. Each thread substitutes the separators into its chunk, and the block writes the solution out
   coalesced.

This is the paper's cyclic reduction turned around for a bandwidth-bound GPU: its first
reduction levels, the ones that touch every unknown, are replaced by the chunk eliminations
(sequential in each thread, so no synchronisation and no shared-memory traffic per level), and
only the system of the separators, 1/S of the unknowns, is left to the parallel reduction. The
odd stride keeps the threads' side-by-side walks over their chunks on distinct shared-memory
banks (the role of the paper's even/odd layout). On an H200, with 8192 systems of 1025
unknowns, it reads at 74% (double) and 65% (float) of the copy bandwidth, where the paper's scheme
(one reduction level in registers, the rest in shared memory) read at 35% and 29%
(benchmarks/tridiag.py).

The system takes 4 n words of dynamic shared memory, above 48 KB (n > 1536 in double) through the
opt-in limit; systems longer than that limit allows fall back to the Thomas algorithm. No
pivoting: the systems of the line smoothers are diagonally dominant (they come from M-matrix
stencils).
"""
import functools

import numpy

from .. import backend


def thomas(lower, diag, upper, rhs, xp):
    """Solve the tridiagonal systems along the last axis (batched over the others); lower[..., 0]
    and upper[..., -1] are ignored."""
    n = diag.shape[-1]
    c = xp.empty_like(diag)
    d = xp.empty_like(rhs)
    c[..., 0] = upper[..., 0] / diag[..., 0]
    d[..., 0] = rhs[..., 0] / diag[..., 0]
    for i in range(1, n):
        m = diag[..., i] - lower[..., i] * c[..., i - 1]
        c[..., i] = upper[..., i] / m
        d[..., i] = (rhs[..., i] - lower[..., i] * d[..., i - 1]) / m
    for i in range(n - 2, -1, -1):
        d[..., i] -= c[..., i] * d[..., i + 1]
    return d


_PARTITION_SOURCE = r"""
typedef VALUE T;
#define THREADS THREADS_PER_SYSTEM
#define S CHUNK_STRIDE                  // a chunk: S - 1 unknowns, then one separator (S odd)
#define R (THREADS / 32)                // separators a lane of warp 0 takes
#define L1 (S - 1)
#define L2 (R > 1 ? R - 1 : 1)

__device__ __forceinline__ void copy_async(T* dst, const T* src)
{
#if __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(s), "l"(src), "n"((int)sizeof(T)));
#else
    *dst = *src;
#endif
}

// Eliminate inside a chunk of N equations a x_(k-1) + b x_k + c x_(k+1) = d, whose outer
// neighbours are the separators x_left and x_right: down, then up, leaving
// x_k = d_k - a_k x_left - c_k x_right (d, a, c overwritten; b holds reciprocals).
template <int N>
__device__ __forceinline__ void eliminate(T (&a)[N], T (&b)[N], T (&c)[N], T (&d)[N])
{
#pragma unroll
    for (int k = 0; k < N; ++k) {
        if (k > 0) {
            const T f = a[k] * b[k - 1];
            a[k] = -f * a[k - 1];
            b[k] -= f * c[k - 1];
            d[k] -= f * d[k - 1];
        }
        b[k] = T(1) / b[k];
    }
    d[N - 1] *= b[N - 1];
    a[N - 1] *= b[N - 1];
    c[N - 1] *= b[N - 1];
#pragma unroll
    for (int k = N - 2; k >= 0; --k) {
        d[k] = (d[k] - c[k] * d[k + 1]) * b[k];
        a[k] = (a[k] - c[k] * a[k + 1]) * b[k];
        c[k] = -c[k] * c[k + 1] * b[k];
    }
}

// rhs and x may be strided views (element i of system s at s * sys + i * elem): a line
// smoother reads its right-hand sides and writes its unknowns in place, x <- x + omega (y - x).
// With COUPLINGS >= 0, rhs is the grid's f and the right-hand side is made here, for the lines
// solved only: f - sum_k coefs[k] u(+ shifts[k]), x being the lines' view of the padded u and
// coefs[k] pointers to arrays of f's shape (the lines' element i of system s at
// c0 + s * c_sys + i * c_elem).
extern "C" __global__ void __launch_bounds__(THREADS) partition_solve(const int n,
        const T* __restrict__ lower, const T* __restrict__ diag, const T* __restrict__ upper,
        const T* __restrict__ rhs, const long long rhs_sys, const long long rhs_elem,
        T* __restrict__ x, const long long x_sys, const long long x_elem, const T omega,
        const unsigned long long* __restrict__ coefs, const long long c0, const long long c_sys,
        const long long c_elem, const long long* __restrict__ shifts)
{
    extern __shared__ unsigned char smem[];
    const int len = max(n, 7 * THREADS);
    T* sa = (T*)smem;                   // the system, copied in
    T* sc = sa + len;
    T* sd = sc + len;
    T* sb = sd + len;                   // the diagonal, then (its reciprocals in registers):
    T (*first)[THREADS] = (T (*)[THREADS])sb;   // each chunk's first unknown from its separators
    T (*sep)[THREADS] = first + 3;      // the separators' equations, then their solution in sep[3]
    const int m = n / S;                // separators t S + S - 1, t < m
    const size_t base = (size_t)blockIdx.x * n;
    const T* r = rhs + blockIdx.x * rhs_sys;
#if COUPLINGS < 0
    for (int i = threadIdx.x; i < n; i += THREADS) {
        copy_async(sa + i, lower + base + i);
        copy_async(sb + i, diag + base + i);
        copy_async(sc + i, upper + base + i);
        copy_async(sd + i, r + i * rhs_elem);
    }
#else
    // the right-hand sides of this block's line, made while the coefficients' copies fly: the
    // loop unrolled (n <= S THREADS), so that all its loads are independent and in flight at once
    const T* cf[COUPLINGS > 0 ? COUPLINGS : 1];
    long long sh[COUPLINGS > 0 ? COUPLINGS : 1];
#pragma unroll
    for (int q = 0; q < COUPLINGS; ++q) {
        cf[q] = (const T*)coefs[q] + c0 + blockIdx.x * c_sys;
        sh[q] = shifts[q];
    }
    const T* u = x + blockIdx.x * x_sys;
#pragma unroll
    for (int it = 0; it < S; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < n) {
            copy_async(sa + i, lower + base + i);
            copy_async(sb + i, diag + base + i);
            copy_async(sc + i, upper + base + i);
            T v = r[i * rhs_elem];
#pragma unroll
            for (int q = 0; q < COUPLINGS; ++q)
                v -= cf[q][i * c_elem] * u[i * x_elem + sh[q]];
            sd[i] = v;
        }
    }
#endif

    // Thread t's chunk lo..lo + S - 2 and separator p = lo + S - 1; past the end, x = 0 equations
    const int t = threadIdx.x, lo = t * S, p = lo + S - 1;
    const bool own = t < m;
    T a[L1], b[L1], c[L1], d[L1];
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::);
#endif
    __syncthreads();
#pragma unroll
    for (int j = 0; j < L1; ++j) {
        const int k = lo + j;
        const bool in = k < n;
        a[j] = in && k > 0 ? sa[k] : T(0);
        b[j] = in ? sb[k] : T(1);
        c[j] = in && k < n - 1 ? sc[k] : T(0);
        d[j] = in ? sd[k] : T(0);
    }
    const T ap = own ? sa[p] : T(0), bp = own ? sb[p] : T(1);
    const T cp = own && p < n - 1 ? sc[p] : T(0), dp = own ? sd[p] : T(0);
    __syncthreads();                    // sb is free
    eliminate<L1>(a, b, c, d);
    first[0][t] = d[0];
    first[1][t] = a[0];
    first[2][t] = c[0];
#pragma unroll
    for (int j = 0; j < L1; ++j) {      // the chunk waits in shared memory (fewer registers)
        if (lo + j < n) {
            sa[lo + j] = a[j];
            sc[lo + j] = c[j];
            sd[lo + j] = d[j];
        }
    }
    __syncthreads();
    {   // separator t's equation with its two neighbours substituted
        const T g1 = t + 1 < THREADS ? first[0][t + 1] : T(0);
        const T u1 = t + 1 < THREADS ? first[1][t + 1] : T(0);
        const T v1 = t + 1 < THREADS ? first[2][t + 1] : T(0);
        sep[0][t] = -ap * a[L1 - 1];
        sep[1][t] = bp - ap * c[L1 - 1] - cp * u1;
        sep[2][t] = -cp * v1;
        sep[3][t] = dp - ap * d[L1 - 1] - cp * g1;
    }
    __syncthreads();
    if (t < 32) {
        // Warp 0 solves the separators: lane t eliminates inside its R of them as above, which
        // leaves one tridiagonal equation a lane, solved by parallel cyclic reduction over the
        // lanes (log2 32 steps, the neighbours through warp shuffles).
        T ea[L2], eb[L2], ec[L2], ed[L2];
#pragma unroll
        for (int j = 0; j < R - 1; ++j) {
            ea[j] = sep[0][t * R + j];
            eb[j] = sep[1][t * R + j];
            ec[j] = sep[2][t * R + j];
            ed[j] = sep[3][t * R + j];
        }
        const int last = t * R + R - 1;
        T A = sep[0][last], B = sep[1][last], C = sep[2][last], D = sep[3][last];
        if (R > 1) {
            eliminate<L2>(ea, eb, ec, ed);
            const T g1 = __shfl_down_sync(0xffffffff, ed[0], 1), u1 = __shfl_down_sync(0xffffffff, ea[0], 1);
            const T v1 = __shfl_down_sync(0xffffffff, ec[0], 1);
            const T a0 = A, c0 = t < 31 ? C : T(0);
            A = -a0 * ea[L2 - 1];
            B = B - a0 * ec[L2 - 1] - c0 * u1;
            C = -c0 * v1;
            D = D - a0 * ed[L2 - 1] - c0 * g1;
        }
#pragma unroll
        for (int s = 1; s < 32; s *= 2) {
            const T r = T(1) / B;
            const T Am = __shfl_up_sync(0xffffffff, A, s), rm = __shfl_up_sync(0xffffffff, r, s);
            const T Cm = __shfl_up_sync(0xffffffff, C, s), Dm = __shfl_up_sync(0xffffffff, D, s);
            const T Ap = __shfl_down_sync(0xffffffff, A, s), rp = __shfl_down_sync(0xffffffff, r, s);
            const T Cp = __shfl_down_sync(0xffffffff, C, s), Dp = __shfl_down_sync(0xffffffff, D, s);
            const T alpha = t >= s ? -A * rm : T(0), gamma = t + s < 32 ? -C * rp : T(0);
            B += alpha * Cm + gamma * Ap;
            D += alpha * Dm + gamma * Dp;
            A = alpha * Am;
            C = gamma * Cp;
        }
        const T X = D / B;
        T Xm = __shfl_up_sync(0xffffffff, X, 1);
        if (t == 0) Xm = T(0);
#pragma unroll
        for (int j = 0; j < R - 1; ++j)
            sep[3][t * R + j] = ed[j] - ea[j] * Xm - ec[j] * X;
        sep[3][last] = X;
    }
    __syncthreads();
    const T xl = t > 0 ? sep[3][t - 1] : T(0), xr = sep[3][t];
#pragma unroll
    for (int j = 0; j < L1; ++j)        // the chunk's unknowns from its separators
        if (lo + j < n) sd[lo + j] -= sa[lo + j] * xl + sc[lo + j] * xr;
    if (own) sd[p] = xr;
    __syncthreads();
    T* y = x + blockIdx.x * x_sys;
    for (int i = threadIdx.x; i < n; i += THREADS)
        y[i * x_elem] = omega == T(1) ? sd[i] : y[i * x_elem] + omega * (sd[i] - y[i * x_elem]);
}
"""

_CTYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_STATIC_LIMIT = 48 * 1024
_OPT_IN_LIMIT = 227 * 1024       # Hopper's largest dynamic shared memory a block can ask for


@functools.lru_cache(maxsize=None)
def _partition_kernel(ctype, threads, stride, couplings=-1):
    source = (_PARTITION_SOURCE.replace("VALUE", ctype).replace("THREADS_PER_SYSTEM", str(threads))
              .replace("CHUNK_STRIDE", str(stride)).replace("COUPLINGS", str(couplings)))
    return backend.cupy.RawKernel(source, "partition_solve")


def _layout(n, threads, itemsize):
    """The chunk stride S (odd, so that threads walking their chunks side by side in shared memory
    hit distinct banks) and the dynamic shared memory for systems of n unknowns."""
    stride = max(2, -(-(n + 1) // threads))
    stride += 1 - stride % 2
    return stride, 4 * max(n, 7 * threads) * itemsize


def _lines(a, n):
    """(array, system stride, element stride) of a CuPy array of systems along its last axis,
    strides in elements, or None where its systems are not evenly spaced."""
    if a.ndim == 1:
        return a, 0, a.strides[0] // a.itemsize
    if a.ndim > 2:
        if not a.flags.c_contiguous:
            return None
        a = a.reshape(-1, n)
    if any(st % a.itemsize for st in a.strides):
        return None
    return a, a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def _threads(n, threads):
    if threads is None:   # 96 threads at n = 1023 and 1025 beat 64, 128, 160 and 256 on an H200
        threads = min(256, 32 * -(-(n + 1) // (11 * 32)))
    if threads % 32 or not 32 <= threads <= 256:
        raise ValueError(f"cyclic_reduction: threads={threads} is not a multiple of 32 from 32 to 256")
    return threads


def _relax(out, y, omega):
    """out <- out + omega (y - out), y itself where omega is 1."""
    out[...] = y if omega == 1.0 else out + omega * (y - out)
    return out


def fits(n, dtype, threads=None):
    """Whether the GPU kernel takes systems of n unknowns in shared memory (at ``threads``, by
    default its default); longer ones go through the Thomas algorithm."""
    return _layout(n, _threads(n, threads), numpy.dtype(dtype).itemsize)[1] <= _OPT_IN_LIMIT


def _launch(coefs, n, batch, threads, rhs, x, omega, stencil=None):
    """The partition kernel on systems with contiguous coefficients ``coefs``; rhs and x are
    (array, system stride, element stride); ``stencil``: (coefficient pointers, c0, c_sys, c_elem,
    shifts in u, their count) for right-hand sides made from the grid (see the kernel)."""
    dtype = numpy.dtype(coefs[0].dtype)
    stride, shared = _layout(n, threads, dtype.itemsize)
    kernel = _partition_kernel(_CTYPES[dtype], threads, stride, -1 if stencil is None else int(stencil[-1]))
    if shared > _STATIC_LIMIT:
        kernel.max_dynamic_shared_size_bytes = shared
    ptrs, c0, c_sys, c_elem, shifts, count = stencil or (numpy.uint64(0), 0, 0, 0, numpy.uint64(0), 0)
    i64 = numpy.int64
    kernel((batch,), (threads,), (numpy.int32(n), *coefs, rhs[0], i64(rhs[1]), i64(rhs[2]), x[0], i64(x[1]),
                                  i64(x[2]), dtype.type(omega), ptrs, i64(c0), i64(c_sys), i64(c_elem), shifts),
           shared_mem=shared)


def cyclic_reduction(lower, diag, upper, rhs, out=None, threads=None, omega=1.0):
    """Solve the tridiagonal systems along the last axis on the GPU (CuPy arrays, float32 or
    float64). One thread block of ``threads`` per system (a multiple of 32 up to 256; by default
    the fewest that keep the chunks at 10 unknowns or fewer). ``rhs`` and ``out`` may be strided
    views (a line smoother's lines of a grid, no copies); with ``omega`` != 1 the solution y
    relaxes ``out`` in place: out + omega (y - out)."""
    cp = backend.cupy
    dtype = numpy.dtype(diag.dtype)
    n = diag.shape[-1]
    coefs = [cp.ascontiguousarray(a, dtype=dtype) for a in (lower, diag, upper)]
    if out is None:
        out = cp.empty(rhs.shape, dtype)
    batch = diag.size // n if n else 0
    if batch == 0:
        return out
    threads = _threads(n, threads)
    r = _lines(rhs, n) if rhs.dtype == dtype else None
    if r is None:
        r = _lines(cp.ascontiguousarray(rhs, dtype=dtype), n)
    x = _lines(out, n) if out.dtype == dtype else None
    if not fits(n, dtype, threads):
        return _relax(out, thomas(*coefs, r[0].reshape(rhs.shape), cp), omega)
    if x is None:               # out not evenly strided: solve into a new array, then copy
        return _relax(out, cyclic_reduction(*coefs, r[0].reshape(rhs.shape), threads=threads), omega)
    _launch(coefs, n, batch, threads, r, x, omega)
    return out


def relax_lines(lower, diag, upper, f, coefs, shifts, u, omega=1.0):
    """One colour of a line smoother on the GPU in one kernel: the right-hand sides
    f - sum_k coefs[k] u(+ shifts[k]) made for the lines solved, the solutions relaxing ``u``
    in place. ``f``, ``u`` and the coefficient arrays are seen as (lines, n) views of one
    selection, each with its own strides (u: of the padded grid, whose neighbours ``shifts``
    (device int64, in elements) reach); lower, diag, upper are contiguous. ``coefs`` is (device
    uint64 array of the coefficient arrays' addresses, one of those arrays, and its (lines, n)
    view: where the selection starts in it, and its strides)."""
    ptrs, array, view = coefs
    n = diag.shape[-1]
    batch = diag.size // n
    if batch == 0:
        return u
    c0 = (view.data.ptr - array.data.ptr) // view.itemsize
    _launch([lower, diag, upper], n, batch, _threads(n, None), _lines(f, n), _lines(u, n), omega,
            (ptrs, c0, *_lines(view, n)[1:], shifts, shifts.size))
    return u


def solve(lower, diag, upper, rhs, xp, out=None, omega=1.0):
    """The batched solve on ``xp``: the partition kernel on the GPU, Thomas on the host. With
    ``out``, the solution y relaxes it in place (out + omega (y - out), y itself where omega is 1)
    and ``out`` is returned."""
    if backend.is_gpu(xp) and numpy.dtype(diag.dtype) in _CTYPES:
        return cyclic_reduction(lower, diag, upper, rhs, out=out, omega=omega)
    y = thomas(lower, diag, upper, rhs, xp)
    return y if out is None else _relax(out, y, omega)
