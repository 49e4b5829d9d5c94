"""Batched tridiagonal solves along the last axis: the Thomas algorithm (NumPy or CuPy, vectorised
over the systems) and cyclic reduction on the GPU (Goddeke and Strzodka, "Cyclic reduction
tridiagonal solvers on GPUs applied to mixed precision multigrid", section 3).

The cyclic-reduction kernel solves one system per thread block: the first reduction step runs in
registers as the coefficients arrive from global memory (the even equations it eliminates are read
again at the end, for their unknowns), the reduced system of the n/2 odd unknowns goes to shared memory, where forward
reduction doubles the stride (log2 n steps, each eliminating every other remaining unknown in
parallel) and backward substitution halves it. Any n works (neighbours beyond the ends count as
absent). The reduced system takes 2 n words of dynamic shared memory; above 48 KB (n > 3072 in
double) the kernel asks for the larger opt-in limit. In shared memory the unknowns
are grouped by the step that eliminates them (the paper's even/odd split, applied at every level):
the neighbours a stride-s step reads sit at consecutive addresses, so a warp spreads its accesses
over the banks instead of the 2^k-way conflicts of strided addressing. No pivoting: the systems of
the line smoothers are diagonally dominant (they come from M-matrix stencils).
"""
import functools

import numpy

from . import backend


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


_CR_SOURCE = r"""
typedef VALUE T;
#define PAIRS PAIRS_PER_THREAD

// Shared-memory slot of unknown i of the reduced system: the unknowns sorted by the number of
// trailing ones of i + 1 (the reduction level at which i is eliminated), each level contiguous.
__device__ __forceinline__ int slot(int i, const int* __restrict__ start)
{
    const int j = i + 1;
    const int level = __ffs(j) - 1;                 // j = 2^level * odd
    return start[level] + (j >> (level + 1));
}

extern "C" __global__ void cr_solve(const int n, const T* __restrict__ lower, const T* __restrict__ diag,
        const T* __restrict__ upper, const T* __restrict__ rhs, T* __restrict__ x)
{
    // The first reduction step runs in registers: thread pair t reads the even equation 2t, which
    // it eliminates from the odd equation 2t + 1 together with 2t + 2; only the m = n/2 odd
    // equations go to shared memory, where cyclic reduction solves them. The even unknowns
    // follow at the end from their equations read again (from the L2 cache, mostly): holding
    // them in registers took 84 registers a thread, 5 blocks an SM and 10% more time.
    extern __shared__ unsigned char smem[];
    const int m = n / 2, pairs = (n + 1) / 2;
    T* a = (T*)smem;
    T* b = a + m;
    T* c = b + m;
    T* d = c + m;
    __shared__ int start[32];
    if (threadIdx.x == 0) {             // level l holds the i with i + 1 = 2^l * odd, i < m
        int s = 0;
        for (int l = 0; l < 32; ++l) {
            start[l] = s;
            if (l < 31) s += (m + (1 << l)) >> (l + 1);
        }
    }
    __syncthreads();
    const size_t base = (size_t)blockIdx.x * n;
#pragma unroll
    for (int q = 0; q < PAIRS; ++q) {
        const int t = threadIdx.x + q * blockDim.x;
        const int e = 2 * t, o = e + 1;
        if (o >= n) break;
        const T ae = e > 0 ? lower[base + e] : T(0), be = diag[base + e], ce = upper[base + e];
        const T de = rhs[base + e];
        const T alpha = -lower[base + o] / be;
        const T bo = diag[base + o], d_o = rhs[base + o], co = o < n - 1 ? upper[base + o] : T(0);
        T a2 = T(0), b2 = T(1), c2 = T(0), d2 = T(0), gamma = T(0);
        if (o + 1 < n) {
            a2 = lower[base + o + 1];
            b2 = diag[base + o + 1];
            c2 = o + 1 < n - 1 ? upper[base + o + 1] : T(0);
            d2 = rhs[base + o + 1];
            gamma = -co / b2;
        }
        const int k = slot(t, start);
        a[k] = alpha * ae;
        b[k] = bo + alpha * ce + gamma * a2;
        c[k] = gamma * c2;
        d[k] = d_o + alpha * de + gamma * d2;
    }
    __syncthreads();
    int s = 1;
    for (; 2 * s - 1 < m; s *= 2) {     // forward reduction: keep i = 2s(j + 1) - 1
        for (int j = threadIdx.x; 2 * s * (j + 1) - 1 < m; j += blockDim.x) {
            const int i = 2 * s * (j + 1) - 1;
            const int k = slot(i, start), km = slot(i - s, start);
            const bool up = i + s < m;
            const int kp = up ? slot(i + s, start) : k;
            const T alpha = -a[k] / b[km];
            const T gamma = up ? -c[k] / b[kp] : T(0);
            b[k] += alpha * c[km] + gamma * a[kp];
            d[k] += alpha * d[km] + gamma * d[kp];
            a[k] = alpha * a[km];
            c[k] = gamma * c[kp];
        }
        __syncthreads();
    }
    for (; s >= 1; s /= 2) {            // backward substitution: i = s - 1 + 2 s j, x in d
        for (int j = threadIdx.x; s - 1 + 2 * s * j < m; j += blockDim.x) {
            const int i = s - 1 + 2 * s * j;
            const int k = slot(i, start);
            T v = d[k];
            if (i - s >= 0) v -= a[k] * d[slot(i - s, start)];
            if (i + s < m) v -= c[k] * d[slot(i + s, start)];
            d[k] = v / b[k];
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < PAIRS; ++q) {   // the even unknowns, and every unknown out
        const int t = threadIdx.x + q * blockDim.x;
        if (t >= pairs) break;
        const int e = 2 * t;
        const T xo = e + 1 < n ? d[slot(t, start)] : T(0);
        const T xm = t > 0 ? d[slot(t - 1, start)] : T(0);
        const T ae = e > 0 ? lower[base + e] : T(0), ce = e < n - 1 ? upper[base + e] : T(0);
        x[base + e] = (rhs[base + e] - ae * xm - ce * xo) / diag[base + e];
        if (e + 1 < n) x[base + e + 1] = xo;
    }
}
"""

_CTYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_STATIC_LIMIT = 48 * 1024


@functools.lru_cache(maxsize=None)
def _cr_kernel(ctype, pairs_per_thread):
    source = _CR_SOURCE.replace("VALUE", ctype).replace("PAIRS_PER_THREAD", str(pairs_per_thread))
    return backend.cupy.RawKernel(source, "cr_solve")


def cyclic_reduction(lower, diag, upper, rhs, out=None, threads=None):
    """Solve the tridiagonal systems along the last axis on the GPU (CuPy arrays, float32 or
    float64, all of one shape). One thread block of ``threads`` (default 128, fewer for short
    systems) per system, each thread holding one or more even equations in registers."""
    cp = backend.cupy
    dtype = numpy.dtype(diag.dtype)
    n = diag.shape[-1]
    arrays = [cp.ascontiguousarray(a, dtype=dtype) for a in (lower, diag, upper, rhs)]
    if out is None:
        out = cp.empty(rhs.shape, dtype)
    batch = diag.size // n if n else 0
    if batch == 0:
        return out
    pairs = (n + 1) // 2
    if threads is None:   # 128 beat 256, 512 and 1024 at n = 1025 on an H100 (benchmarks/tridiag.py)
        threads = min(128, 32 * ((pairs + 31) // 32))
    per_thread = (pairs + threads - 1) // threads
    shared = 4 * (n // 2) * dtype.itemsize
    kernel = _cr_kernel(_CTYPES[dtype], per_thread)
    if shared > _STATIC_LIMIT:
        kernel.max_dynamic_shared_size_bytes = shared
    kernel((batch,), (threads,), (numpy.int32(n), *arrays, out), shared_mem=shared)
    return out


def solve(lower, diag, upper, rhs, xp):
    """The batched solve on ``xp``: cyclic reduction on the GPU, Thomas on the host."""
    if backend.is_gpu(xp) and numpy.dtype(diag.dtype) in _CTYPES:
        return cyclic_reduction(lower, diag, upper, rhs)
    return thomas(lower, diag, upper, rhs, xp)
