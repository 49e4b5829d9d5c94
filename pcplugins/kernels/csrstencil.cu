// The stencil of a structured matrix read from its CSR arrays, one thread per row.
// Defines: DIM, IDX (int or long long), T. Wrapper and NumPy twin: pcplugins/core/csrstencil.py.

// Row r of the grid (n0, n1, n2) in natural order; its entries' columns decoded the same way.
// A 2D grid is (1, n1, n2). slot = 9 (o0 + 1) + 3 (o1 + 1) + (o2 + 1) in 3D, 3 (o1 + 1) + (o2 + 1) in 2D.
__device__ __forceinline__ int entry_slot(long r0, long r1, long r2, long c, int n1, int n2, bool* wide)
{
    long c2 = c % n2, rest = c / n2, c1 = rest % n1, c0 = rest / n1;
    long o0 = c0 - r0, o1 = c1 - r1, o2 = c2 - r2;
    if (o0 < -1 || o0 > 1 || o1 < -1 || o1 > 1 || o2 < -1 || o2 > 1) { *wide = true; return -1; }
#if DIM == 3
    return (int)(9 * (o0 + 1) + 3 * (o1 + 1) + (o2 + 1));
#else
    return (int)(3 * (o1 + 1) + (o2 + 1));
#endif
}

// flags[0]: bit s set when offset s occurs; flags[1]: 1 on an entry too far; flags[2]: 1 on NaN/Inf.
// One atomic per warp and flag (the warp's bits or-ed first).
extern "C" __global__ void csr_offsets(const IDX* __restrict__ indptr, const IDX* __restrict__ cols,
                                       const double* __restrict__ vals, long nrows, int n1, int n2,
                                       int centre, unsigned* flags)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned bits = 0, far = 0, bad = 0;
    if (r < nrows) {
        long r2 = r % n2, rest = r / n2, r1 = rest % n1, r0 = rest / n1;
        for (IDX j = indptr[r]; j < indptr[r + 1]; ++j) {
            double v = vals[j];
            if (!isfinite(v)) bad = 1;
            bool wide = false;
            int s = entry_slot(r0, r1, r2, (long)cols[j], n1, n2, &wide);
            if (wide) { if (v != 0) far = 1; continue; }
            if (v != 0 || s == centre) bits |= 1u << s;
        }
    }
    bits = __reduce_or_sync(0xffffffffu, bits);
    far = __reduce_or_sync(0xffffffffu, far);
    bad = __reduce_or_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0) {
        if (bits) atomicOr(flags, bits);
        if (far) atomicOr(flags + 1, 1u);
        if (bad) atomicOr(flags + 2, 1u);
    }
}

// coefs[compact[s] * nrows + r] = value of row r's entry at offset s (coefs zeroed before).
extern "C" __global__ void csr_scatter(const IDX* __restrict__ indptr, const IDX* __restrict__ cols,
                                       const double* __restrict__ vals, long nrows, int n1, int n2,
                                       const int* __restrict__ compact, T* __restrict__ coefs)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrows) return;
    long r2 = r % n2, rest = r / n2, r1 = rest % n1, r0 = rest / n1;
    for (IDX j = indptr[r]; j < indptr[r + 1]; ++j) {
        bool wide = false;
        int s = entry_slot(r0, r1, r2, (long)cols[j], n1, n2, &wide);
        if (!wide && compact[s] >= 0) coefs[compact[s] * nrows + r] = (T)vals[j];
    }
}

// The boundary classes of the (row, neighbour) pairs of a rank's box (local shape n, first point s,
// global grid m; a 2D grid is (1, n1, n2) with DIM 2): 0 a row off the global grid's outer layer
// with its neighbour off it too, 1 such a row with its neighbour on the layer, 2 a row on the layer
// with its neighbour inside the grid. Per offset k (blockIdx.y, offs[3k..3k+2]) over the plane
// coefs[k]: partial[((k * gridDim.x + block) * 3 + class) * 3 + {0, 1, 2}] = any nonzero (0/1),
// least and largest value, of the block's lines (a line: fixed i0, i1; the threads walk i2).
// A point is on the outer layer where one of its indices is at an end of its axis (at_end).
__device__ __forceinline__ bool at_end(long g, long m) { return g == 0 || g == m - 1; }

__device__ __forceinline__ void take(double v, double* s)
{
    s[0] = fmax(s[0], v != 0.0 ? 1.0 : 0.0);
    s[1] = fmin(s[1], v);
    s[2] = fmax(s[2], v);
}

extern "C" __global__ void class_stats(const T* __restrict__ coefs, int n0, int n1, int n2,
                                       int s0, int s1, int s2, int m0, int m1, int m2,
                                       const int* __restrict__ offs, double* __restrict__ partial)
{
    const int k = blockIdx.y, o0 = offs[3 * k], o1 = offs[3 * k + 1], o2 = offs[3 * k + 2];
    const long npts = (long)n0 * n1 * n2;
    const T* c = coefs + k * npts;
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    double st[9];
    for (int q = 0; q < 3; ++q) { st[3 * q] = 0.0; st[3 * q + 1] = inf; st[3 * q + 2] = -inf; }
    for (long line = blockIdx.x; line < (long)n0 * n1; line += gridDim.x) {
        long g0 = line / n1 + s0, g1 = line % n1 + s1, q0 = g0 + o0, q1 = g1 + o1;
#if DIM == 3
        bool row_layer = at_end(g0, m0) || at_end(g1, m1);
        bool nb_layer = at_end(q0, m0) || at_end(q1, m1);
        bool nb_in = q0 >= 0 && q0 < m0 && q1 >= 0 && q1 < m1;
#else
        bool row_layer = at_end(g1, m1), nb_layer = at_end(q1, m1), nb_in = q1 >= 0 && q1 < m1;
#endif
        for (int i2 = threadIdx.x; i2 < n2; i2 += blockDim.x) {
            long g2 = i2 + s2, q2 = g2 + o2;
            double v = (double)c[line * n2 + i2];
            if (row_layer || at_end(g2, m2)) {
                if (nb_in && q2 >= 0 && q2 < m2) take(v, st + 6);
            } else if (nb_layer || at_end(q2, m2)) {
                take(v, st + 3);
            } else {
                take(v, st);
            }
        }
    }
    // the block's nine numbers: within each warp, then across the warps
    __shared__ double part[32][9];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    for (int i = 0; i < 9; ++i) {
        double v = st[i];
        for (int d = 16; d > 0; d >>= 1) {
            double u = __shfl_xor_sync(0xffffffffu, v, d);
            v = (i % 3 == 1) ? fmin(v, u) : fmax(v, u);
        }
        if (lane == 0) part[warp][i] = v;
    }
    __syncthreads();
    if (threadIdx.x < 9) {
        int i = threadIdx.x;
        double v = part[0][i];
        for (int w = 1; w < nwarps; ++w) v = (i % 3 == 1) ? fmin(v, part[w][i]) : fmax(v, part[w][i]);
        partial[(long)(k * gridDim.x + blockIdx.x) * 9 + i] = v;
    }
}

#ifdef K
// Order-preserving unsigned keys of floating-point values, so that shared-memory atomicMin/atomicMax
// take least and largest values.
__device__ __forceinline__ unsigned ord_key(float f)
{
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long ord_key(double f)
{
    unsigned long long u = (unsigned long long)__double_as_longlong(f);
    return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}
__device__ __forceinline__ float from_key(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ double from_key(unsigned long long k)
{
    return __longlong_as_double((long long)((k & 0x8000000000000000ull) ? (k & 0x7fffffffffffffffull) : ~k));
}
typedef decltype(ord_key((T)0)) KEY;

// csr_scatter and class_stats in one pass over the CSR arrays, for a whole grid on one rank and K
// offsets (at most 9): those csr_offsets has found, or those of one central row. Row r's entry at
// offset k is the one in column r + diff[k]: with at least 3 points along every axis but the slowest
// the offsets' differences are distinct. Every plane value is written (0 where the row has no entry),
// so the planes need no zeroing first. The statistics of the interior class, almost every row, stay in
// registers; the face rows' go to the block's shared-memory atomics. partial as class_stats's; flags
// as csr_offsets's, with flags[0] = 1 where a nonzero entry lies at none of the K offsets, and
// flags[1] = 1 where a nonzero entry's column wraps around the grid (from a row on a face).
extern "C" __global__ void csr_scatter_stats(const IDX* __restrict__ indptr, const IDX* __restrict__ cols,
                                             const double* __restrict__ vals, int n0, int n1, int n2,
                                             const long long* __restrict__ diff, const int* __restrict__ offs,
                                             T* __restrict__ coefs, double* __restrict__ partial,
                                             unsigned* __restrict__ flags)
{
    __shared__ long long sdiff[K];
    __shared__ int soff[K][3];
    __shared__ KEY slo[K * 3], shi[K * 3];
    __shared__ unsigned snz[3];
    const T inf = (T)__longlong_as_double(0x7ff0000000000000LL);
    if (threadIdx.x < K) {
        sdiff[threadIdx.x] = diff[threadIdx.x];
        for (int a = 0; a < 3; ++a) soff[threadIdx.x][a] = offs[3 * threadIdx.x + a];
    }
    if (threadIdx.x < 3 * K) { slo[threadIdx.x] = ord_key(inf); shi[threadIdx.x] = ord_key(-inf); }
    if (threadIdx.x < 3) snz[threadIdx.x] = 0u;
    __syncthreads();
    const long nrows = (long)n0 * n1 * n2;
    T lo[K], hi[K];
    unsigned nz = 0u, other = 0u, wrapped = 0u, bad = 0u;
#pragma unroll
    for (int k = 0; k < K; ++k) { lo[k] = inf; hi[k] = -inf; }
    for (long r = (long)blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += (long)gridDim.x * blockDim.x) {
        T v[K];
        unsigned given = 0u;                // bit k: the row has a nonzero entry at offset k
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = (T)0;
        for (IDX j = indptr[r]; j < indptr[r + 1]; ++j) {
            long long dd = (long long)cols[j] - r;
            double y = vals[j];
            T x = (T)y;
            bool hit = false;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                if (dd == sdiff[k]) {
                    v[k] = x;
                    hit = true;
                    if (y != 0.0) given |= 1u << k;
                }
            }
            if (!hit && y != 0.0) other = 1u;
            if (!isfinite(y)) bad = 1u;
        }
#pragma unroll
        for (int k = 0; k < K; ++k) coefs[k * nrows + r] = v[k];
        long i2 = r % n2, rest = r / n2, i1 = rest % n1, i0 = rest / n1;
        // a row at least two points from every face: every neighbour interior (class 0)
#if DIM == 3
        bool inner = i0 > 1 && i0 < n0 - 2 && i1 > 1 && i1 < n1 - 2 && i2 > 1 && i2 < n2 - 2;
#else
        bool inner = i1 > 1 && i1 < n1 - 2 && i2 > 1 && i2 < n2 - 2;
#endif
        if (inner) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                lo[k] = v[k] < lo[k] ? v[k] : lo[k];
                hi[k] = v[k] > hi[k] ? v[k] : hi[k];
                if (v[k] != (T)0) nz |= 1u << k;
            }
            continue;
        }
#if DIM == 3
        bool row_layer = at_end(i0, n0) || at_end(i1, n1) || at_end(i2, n2);
#else
        bool row_layer = at_end(i1, n1) || at_end(i2, n2);
#endif
#pragma unroll
        for (int k = 0; k < K; ++k) {
            long q0 = i0 + soff[k][0], q1 = i1 + soff[k][1], q2 = i2 + soff[k][2];
#if DIM == 3
            bool nb_layer = at_end(q0, n0) || at_end(q1, n1) || at_end(q2, n2);
            bool nb_in = q0 >= 0 && q0 < n0 && q1 >= 0 && q1 < n1 && q2 >= 0 && q2 < n2;
#else
            bool nb_layer = at_end(q1, n1) || at_end(q2, n2);
            bool nb_in = q1 >= 0 && q1 < n1 && q2 >= 0 && q2 < n2;
#endif
            int cls = row_layer ? (nb_in ? 2 : -1) : (nb_layer ? 1 : 0);
            if (cls < 0) {
                if (given >> k & 1u) wrapped = 1u;
                continue;
            }
            atomicMin(&slo[3 * k + cls], ord_key(v[k]));
            atomicMax(&shi[3 * k + cls], ord_key(v[k]));
            if (v[k] != (T)0) atomicOr(&snz[cls], 1u << k);
        }
    }
    // the interior class: within each warp, then one atomic per warp
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        T a = lo[k], b = hi[k];
        for (int d = 16; d > 0; d >>= 1) {
            T u = __shfl_xor_sync(0xffffffffu, a, d), w = __shfl_xor_sync(0xffffffffu, b, d);
            a = u < a ? u : a;
            b = w > b ? w : b;
        }
        if (lane == 0) { atomicMin(&slo[3 * k], ord_key(a)); atomicMax(&shi[3 * k], ord_key(b)); }
    }
    nz = __reduce_or_sync(0xffffffffu, nz);
    if (lane == 0 && nz) atomicOr(&snz[0], nz);
    other = __reduce_or_sync(0xffffffffu, other);
    wrapped = __reduce_or_sync(0xffffffffu, wrapped);
    bad = __reduce_or_sync(0xffffffffu, bad);
    if (lane == 0 && (other | wrapped | bad)) {
        if (other) atomicOr(flags, 1u);
        if (wrapped) atomicOr(flags + 1, 1u);
        if (bad) atomicOr(flags + 2, 1u);
    }
    __syncthreads();
    if (threadIdx.x < 3 * K) {
        int k = threadIdx.x / 3, c = threadIdx.x % 3;
        double* out = partial + ((long)k * gridDim.x + blockIdx.x) * 9 + 3 * c;
        out[0] = (snz[c] >> k) & 1u ? 1.0 : 0.0;
        out[1] = (double)from_key(slo[threadIdx.x]);
        out[2] = (double)from_key(shi[threadIdx.x]);
    }
}
#endif
