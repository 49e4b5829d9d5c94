// Batched tridiagonal solves along the last axis by partitioning (one block a system).
// Defines: VALUE, THREADS_PER_SYSTEM, CHUNK_STRIDE, COUPLINGS (-1: the right-hand side is given).
// Wrapper: pcplugins/core/tridiag.py; NumPy twin: tridiag.thomas (tests/gpu/test_kernels.py compares them).

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
