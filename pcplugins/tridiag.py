"""Batched tridiagonal solves along the last axis: the Thomas algorithm (NumPy or CuPy, vectorised
over the systems) and cyclic reduction on the GPU (Goddeke and Strzodka, "Cyclic reduction
tridiagonal solvers on GPUs applied to mixed precision multigrid", section 3).

The cyclic-reduction kernel solves one system per thread block with the whole system in shared
memory: forward reduction doubles the stride (log2 n steps, each eliminating every other remaining
unknown in parallel), backward substitution halves it. Any n works (neighbours beyond the ends
count as absent). The four coefficient arrays take 4 n words of dynamic shared memory; above 48 KB
(n > 1536 in double) the kernel asks for the larger opt-in limit. In shared memory the unknowns
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

// Shared-memory slot of unknown i: the unknowns sorted by the number of trailing ones of i + 1
// (the reduction level at which i is eliminated), each level contiguous: stride-s steps then touch
// consecutive slots instead of every s-th one.
__device__ __forceinline__ int slot(int i, const int* __restrict__ start)
{
    const int j = i + 1;
    const int level = __ffs(j) - 1;                 // j = 2^level * odd
    return start[level] + (j >> (level + 1));
}

extern "C" __global__ void cr_solve(const int n, const int levels, const T* __restrict__ lower,
        const T* __restrict__ diag, const T* __restrict__ upper, const T* __restrict__ rhs,
        T* __restrict__ x)
{
    extern __shared__ unsigned char smem[];
    T* a = (T*)smem;
    T* b = a + n;
    T* c = b + n;
    T* d = c + n;
    __shared__ int start[32];
    if (threadIdx.x == 0) {             // level l holds the i with i + 1 = 2^l * odd, i < n
        int s = 0;
        for (int l = 0; l < 32; ++l) {
            start[l] = s;
            if (l < levels) s += (n + (1 << l)) >> (l + 1);
        }
    }
    __syncthreads();
    const size_t base = (size_t)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int k = slot(i, start);
        a[k] = i > 0 ? lower[base + i] : T(0);
        b[k] = diag[base + i];
        c[k] = i < n - 1 ? upper[base + i] : T(0);
        d[k] = rhs[base + i];
    }
    __syncthreads();
    int s = 1;
    for (; 2 * s - 1 < n; s *= 2) {     // forward reduction: keep i = 2s(j + 1) - 1
        for (int j = threadIdx.x; 2 * s * (j + 1) - 1 < n; j += blockDim.x) {
            const int i = 2 * s * (j + 1) - 1;
            const int k = slot(i, start), km = slot(i - s, start);
            const bool up = i + s < n;
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
        for (int j = threadIdx.x; s - 1 + 2 * s * j < n; j += blockDim.x) {
            const int i = s - 1 + 2 * s * j;
            const int k = slot(i, start);
            T v = d[k];
            if (i - s >= 0) v -= a[k] * d[slot(i - s, start)];
            if (i + s < n) v -= c[k] * d[slot(i + s, start)];
            d[k] = v / b[k];
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[base + i] = d[slot(i, start)];
}
"""

_CTYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_STATIC_LIMIT = 48 * 1024


@functools.lru_cache(maxsize=None)
def _cr_kernel(ctype):
    return backend.cupy.RawKernel(_CR_SOURCE.replace("VALUE", ctype), "cr_solve")


def cyclic_reduction(lower, diag, upper, rhs, out=None, threads=None):
    """Solve the tridiagonal systems along the last axis on the GPU (CuPy arrays, float32 or
    float64, all of one shape). One thread block of ``threads`` (default: n/2 rounded up to a
    power of two, at most 256) per system."""
    cp = backend.cupy
    dtype = numpy.dtype(diag.dtype)
    n = diag.shape[-1]
    arrays = [cp.ascontiguousarray(a, dtype=dtype) for a in (lower, diag, upper, rhs)]
    if out is None:
        out = cp.empty(rhs.shape, dtype)
    batch = diag.size // n if n else 0
    if batch == 0:
        return out
    levels = int(n).bit_length()
    if threads is None:   # 256 beat 512 and 128 at n = 1025 in double on an H100 (benchmarks/tridiag.py)
        threads = min(256, max(32, 1 << max(0, (n // 2 - 1).bit_length())))
    shared = 4 * n * dtype.itemsize
    kernel = _cr_kernel(_CTYPES[dtype])
    if shared > _STATIC_LIMIT:
        kernel.max_dynamic_shared_size_bytes = shared
    kernel((batch,), (threads,), (numpy.int32(n), numpy.int32(levels), *arrays, out), shared_mem=shared)
    return out


def solve(lower, diag, upper, rhs, xp):
    """The batched solve on ``xp``: cyclic reduction on the GPU, Thomas on the host."""
    if backend.is_gpu(xp) and numpy.dtype(diag.dtype) in _CTYPES:
        return cyclic_reduction(lower, diag, upper, rhs)
    return thomas(lower, diag, upper, rhs, xp)
