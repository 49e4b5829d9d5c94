// Row products of CSR and ELL matrices (A u, f - A u, scaled and Jacobi updates, R (f - A u), a
// Jacobi sweep after the prolongation), a dense matrix's product (dense_rows), dot products
// that never wait for the host, and the sums of sorted duplicates of a Galerkin product. Defines: VALUE (double, float, complex<double>,
// complex<float>). Wrappers and SciPy/NumPy twins: pcplugins/core/products.py (the row products, dots),
// pcplugins/core/sparse.py (the Galerkin sums).

#include <cupy/complex.cuh>
typedef VALUE T;

__device__ __forceinline__ void finish_row(const int t, const int mode, T s, const int* __restrict__ rows,
        const T* u, const T* __restrict__ f, const T* __restrict__ scale, T* out)
{
    // s = (A u)[t]: out[t] = scale[t] (f[i] - s) with i = rows[t], or plain s, per mode;
    // mode 8: out[i] = u[i] + that instead (a Jacobi sweep out of place; or in place, out = u, on
    // rows with no couplings among them, or with couplings within a block only: mode 16)
    const int i = (mode & 1) ? rows[t] : t;
    if (mode & 2) s = f[i] - s;
    if (mode & 4) s *= scale[t];
    if (mode & 8) out[i] = u[i] + s;
    else out[t] = s;
}

__device__ __forceinline__ void block_update(const int t, const bool live, const int mode, T s,
        const int* __restrict__ rows, const T* u, const T* __restrict__ f, const T* __restrict__ scale, T* out)
{
    // mode 16 (with 8, out = u): a row couples to no row of the launch outside its own block (a
    // cell's rows sit in one aligned slot of a colour's rows: CSRColourGS's cell layout), so once
    // the whole block has read u (s = (A u)[t]) its rows may be written in place: the result of
    // computing every new value first and writing them after. rows[t] < 0: a slot's padding,
    // not live. Every thread of the block calls.
    __syncthreads();
    if (live) finish_row(t, mode, s, rows, u, f, scale, out);
}

__device__ __forceinline__ T lanes_sum(T s, const int lane, const int lanes)
{
    // the sum of s over a group of ``lanes`` consecutive threads (a power of 2 up to 32, within
    // one warp), met in a fixed order in shared memory (raw storage: a complex type cannot be a
    // __shared__ array); the group's first lane holds it. Blocks of 256 threads, every thread of
    // a block calling.
    __shared__ __align__(16) unsigned char raw[256 * sizeof(T)];
    T* buf = reinterpret_cast<T*>(raw);
    buf[threadIdx.x] = s;
    __syncwarp();
    for (int w = lanes / 2; w > 0; w /= 2) {
        if (lane < w) buf[threadIdx.x] += buf[threadIdx.x + w];
        __syncwarp();
    }
    return buf[threadIdx.x];
}

extern "C" __global__ void csr_rows(const int m, const int mode, const int* __restrict__ rows,
        const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const T* u,
        const T* __restrict__ f, const T* __restrict__ scale, T* out)
{
    const int t = blockDim.x * blockIdx.x + threadIdx.x;
    if (mode & 16) {                  // in place, rows coupled within a block only (block_update)
        const bool live = t < m && rows[t] >= 0;
        T s = T(0);
        if (live) for (int k = indptr[t]; k < indptr[t + 1]; ++k) s += data[k] * u[indices[k]];
        block_update(t, live, mode, s, rows, u, f, scale, out);
        return;
    }
    if (t >= m) return;
    T s = T(0);
    for (int k = indptr[t]; k < indptr[t + 1]; ++k) s += data[k] * u[indices[k]];
    finish_row(t, mode, s, rows, u, f, scale, out);
}

extern "C" __global__ void csr_rows_warp(const int m, const int mode, const int* __restrict__ rows,
        const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const T* u,
        const T* __restrict__ f, const T* __restrict__ scale, T* out)
{
    // csr_rows with a warp a row, its 32 lanes reading consecutive entries, for rows of tens to
    // hundreds of entries (coarse levels of systems and of pairwise aggregation), where a thread
    // a row reads each row alone. Blocks of 256 threads; the lanes' sums meet by lanes_sum
    const int lane = threadIdx.x & 31;
    const int t = (blockDim.x * blockIdx.x + threadIdx.x) >> 5;
    T s = T(0);
    if (t < m)
        for (int k = indptr[t] + lane; k < indptr[t + 1]; k += 32) s += data[k] * u[indices[k]];
    s = lanes_sum(s, lane, 32);
    if (t < m && lane == 0) finish_row(t, mode, s, rows, u, f, scale, out);
}

extern "C" __global__ void ell_rows(const int m, const int mode, const int* __restrict__ rows,
        const int width, const int* __restrict__ indices,
        const T* __restrict__ data, const T* u,
        const T* __restrict__ f, const T* __restrict__ scale, T* out)
{
    // csr_rows on ELL storage: entry k of row t at k * m + t
    const int t = blockDim.x * blockIdx.x + threadIdx.x;
    if (mode & 16) {
        const bool live = t < m && rows[t] >= 0;
        T s = T(0);
        if (live) for (int k = 0; k < width; ++k) s += data[k * m + t] * u[indices[k * m + t]];
        block_update(t, live, mode, s, rows, u, f, scale, out);
        return;
    }
    if (t >= m) return;
    T s = T(0);
    for (int k = 0; k < width; ++k) s += data[k * m + t] * u[indices[k * m + t]];
    finish_row(t, mode, s, rows, u, f, scale, out);
}

extern "C" __global__ void restricted_residual(const int nc, const int lanes, const int* __restrict__ rptr,
        const int* __restrict__ rind, const T* __restrict__ rval, const int m, const int width,
        const int* __restrict__ indptr, const int* __restrict__ indices, const T* __restrict__ data,
        const T* __restrict__ u, const T* __restrict__ f, T* __restrict__ out)
{
    // out = R (f - A u), ``lanes`` threads (a power of 2 up to 32) a row of R (an aggregate): lane
    // l takes the row's members l, l + lanes, ..., each residual summed as it is made (none
    // written), then the lanes' sums meet by lanes_sum. A in ELL storage (width > 0: entry k of
    // row i at k * m + i) or CSR (indptr). Blocks of 256 threads.
    const int t = blockDim.x * blockIdx.x + threadIdx.x;
    const int a = t / lanes, lane = t % lanes;
    T sum = T(0);
    if (a < nc)
        for (int k = rptr[a] + lane; k < rptr[a + 1]; k += lanes) {
            const int i = rind[k];
            T s = T(0);
            if (width > 0)
                for (int e = 0; e < width; ++e) s += data[e * m + i] * u[indices[e * m + i]];
            else
                for (int e = indptr[i]; e < indptr[i + 1]; ++e) s += data[e] * u[indices[e]];
            sum += rval[k] * (f[i] - s);
        }
    sum = lanes_sum(sum, lane, lanes);
    if (a < nc && lane == 0) out[a] = sum;
}

__device__ __forceinline__ T prolonged(const int j, const T* u, const T* __restrict__ e,
        const int* __restrict__ agg, const T* __restrict__ sign, const T alpha)
{
    // v_j = u_j + alpha (P e)_j, P[j, agg[j]] = sign[j] (1 without signs)
    return u[j] + (sign ? alpha * sign[j] : alpha) * e[agg[j]];
}

extern "C" __global__ void jacobi_prolonged(const int m, const int width, const int* __restrict__ indptr,
        const int* __restrict__ indices, const T* __restrict__ data, const T* __restrict__ u,
        const T* __restrict__ e, const int* __restrict__ agg, const T* __restrict__ sign, const T alpha,
        const T* __restrict__ f, const T* __restrict__ scale, T* __restrict__ out)
{
    // out = v + scale (f - A v), v = u + alpha P e made as it is read, never written: the
    // prolongation and the first Jacobi sweep after it in one pass. A in ELL storage (width > 0,
    // entry k of row t at k * m + t) or CSR (indptr).
    const int t = blockDim.x * blockIdx.x + threadIdx.x;
    if (t >= m) return;
    T s = T(0);
    if (width > 0)
        for (int k = 0; k < width; ++k) s += data[k * m + t] * prolonged(indices[k * m + t], u, e, agg, sign, alpha);
    else
        for (int k = indptr[t]; k < indptr[t + 1]; ++k) s += data[k] * prolonged(indices[k], u, e, agg, sign, alpha);
    const T v = prolonged(t, u, e, agg, sign, alpha);
    out[t] = v + scale[t] * (f[t] - s);
}

extern "C" __global__ void dense_rows(const int m, const int n, const T* __restrict__ a,
        const T* __restrict__ x, T* __restrict__ out)
{
    // out = a x for a dense, row-major m x n matrix a (the coarsest level's inverse): a warp a row,
    // its lanes reading consecutive entries; the lanes' sums meet by lanes_sum. Blocks of 256
    // threads.
    const int lane = threadIdx.x & 31;
    const int r = (blockDim.x * blockIdx.x + threadIdx.x) >> 5;
    T s = T(0);
    if (r < m)
        for (int j = lane; j < n; j += 32) s += a[(long long) r * n + j] * x[j];
    s = lanes_sum(s, lane, 32);
    if (r < m && lane == 0) out[r] = s;
}

// Partial sums of x0 . y0 and, with npairs 2, x1 . y1 (no conjugate), one of each per block of
// 256 threads over a grid-stride loop: partial[p * gridDim.x + block]. dots_sum adds them. Twin:
// numpy.dot of each pair (products.dots).
extern "C" __global__ void dots_partial(const T* x0, const T* y0, const T* x1, const T* y1, const int npairs,
        T* partial, const long long n)
{
    __shared__ T s[2][256];
    T a0 = 0, a1 = 0;
    for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) {
        a0 += x0[i] * y0[i];
        if (npairs > 1) a1 += x1[i] * y1[i];
    }
    s[0][threadIdx.x] = a0;
    s[1][threadIdx.x] = a1;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            s[0][threadIdx.x] += s[0][threadIdx.x + w];
            s[1][threadIdx.x] += s[1][threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0][0];
        if (npairs > 1) partial[gridDim.x + blockIdx.x] = s[1][0];
    }
}

// out[p] = the sum of dots_partial's ``blocks`` partials of pair p, for p < npairs: one block of
// 256 threads, the partials of each pair added in the same order on every run.
extern "C" __global__ void dots_sum(const T* partial, const int blocks, const int npairs, T* out)
{
    __shared__ T s[256];
    for (int p = 0; p < npairs; ++p) {
        T a = 0;
        for (int i = threadIdx.x; i < blocks; i += 256) a += partial[p * blocks + i];
        s[threadIdx.x] = a;
        __syncthreads();
        for (int w = 128; w > 0; w >>= 1) {
            if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) out[p] = s[0];
        __syncthreads();
    }
}

// out[s] = sum of data[order[j]] for starts[s] <= j < starts[s + 1] (the last run to n), added in
// order, one thread per run: the duplicates of a sorted COO key summed the same way on every run.
// Twin: numpy.add.reduceat (sparse.segment_sum).
extern "C" __global__ void segment_sum(const long long nseg, const long long n, const long long* __restrict__ starts,
        const long long* __restrict__ order, const T* __restrict__ data, T* __restrict__ out)
{
    const long long s = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (s >= nseg) return;
    const long long end = s + 1 < nseg ? starts[s + 1] : n;
    T acc = T(0);
    for (long long j = starts[s]; j < end; ++j) acc += data[order[j]];
    out[s] = acc;
}

// P^T A P for aggregates (P[i, agg[i]] = sign[i], or 1 without signs) with no sort of the
// entries, one thread a coarse row a: the rows of a's members (member[bounds[a]] to
// member[bounds[a + 1] - 1], in that order), their columns mapped to aggregates and their values
// signed, are added into a list of distinct coarse columns held by the thread (each value added
// to its column's sum in the members' and entries' order: the same bits on every run), which is
// then sorted by column. Mode 0 writes the list's length to count[a] (or -1 where it would pass
// GALERKIN_ROW entries: the caller takes another route); mode 1 writes the row at indptr[a].
// Twin: SciPy's COO to CSR conversion (sparse.galerkin on the host).
#ifndef GALERKIN_ROW
#define GALERKIN_ROW 64
#endif
extern "C" __global__ void galerkin_rows(const int nc, const int mode, const int* __restrict__ bounds,
        const int* __restrict__ member, const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const int* __restrict__ agg, const double* __restrict__ sign,
        int* __restrict__ count, const int* __restrict__ cptr, int* __restrict__ cind, T* __restrict__ cdata)
{
    const int a = blockDim.x * blockIdx.x + threadIdx.x;
    if (a >= nc) return;
    int col[GALERKIN_ROW];
    T val[GALERKIN_ROW];
    int u = 0;
    for (int m = bounds[a]; m < bounds[a + 1]; ++m) {
        const int i = member[m];
        for (int k = indptr[i]; k < indptr[i + 1]; ++k) {
            const int c = agg[indices[k]];
            const T v = sign ? data[k] * T(sign[i] * sign[indices[k]]) : data[k];
            int j = 0;
            while (j < u && col[j] != c) ++j;
            if (j < u) { val[j] += v; continue; }
            if (u == GALERKIN_ROW) { if (mode == 0) count[a] = -1; return; }
            col[u] = c;
            val[u++] = v;
        }
    }
    if (mode == 0) { count[a] = u; return; }
    for (int k = 1; k < u; ++k) {                   // insertion sort by column
        const int c = col[k];
        const T v = val[k];
        int j = k - 1;
        while (j >= 0 && col[j] > c) { col[j + 1] = col[j]; val[j + 1] = val[j]; --j; }
        col[j + 1] = c;
        val[j + 1] = v;
    }
    for (int k = 0; k < u; ++k) { cind[cptr[a] + k] = col[k]; cdata[cptr[a] + k] = val[k]; }
}
