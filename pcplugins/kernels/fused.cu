// Fused kernels of the constant-coefficient 5/7-point Laplacian on padded grids: red-black
// Gauss-Seidel (by colour, and relax_pair's two colours in one sweep), residual, full-weighting
// restriction, linear prolongation, the Dirichlet elimination of PETSc's boundary rows, the HOMG
// iteration and cubic upsampling. Defines: T, DIM, ROWS, PAIR_X, PAIR_ROWS, PAIR_MINB, HOMG_ROWS, TAIL.
// Wrapper: pcplugins/core/fused.py; NumPy twins: core/stencil.py, core/smoothers/,
// core/transfer/linear.py, core/homg.py (tests/gpu/test_kernels.py compares them).

// Launched on a 3D grid: x threads along the fastest axis, blockIdx.y = i1 (or i1 / ROWS where a
// thread takes ROWS rows), blockIdx.z = i0, so no index needs a division. A 2D level is a 3D one
// with n0 = 1 and no halo along axis 0.
#if DIM == 3
#define PAD0 1
#else
#define PAD0 0
#endif
#define STRIDES long P1 = n2 + 2, P0 = (long)(n1 + 2) * P1
#define PADDED(i0, i1, i2) (((i0) + PAD0) * P0 + ((i1) + 1) * P1 + (i2) + 1)
#define FLAT(i0, i1, i2) (((long)(i0) * n1 + (i1)) * n2 + (i2))

// A Laplacian application at padded index p: diag u + sum_a w_a (left + right neighbour).
__device__ __forceinline__ T stencil(const T* u, long p, long P0, long P1, T w0, T w1, T w2, T diag)
{
    T au = diag * u[p] + w2 * (u[p - 1] + u[p + 1]) + w1 * (u[p - P1] + u[p + P1]);
#if DIM == 3
    au += w0 * (u[p - P0] + u[p + P0]);
#endif
    return au;
}

// A level of stencil.AxisLaplacian (TAIL 1: a coarse level of a grid with an even number of
// points along some axis): along axis a the point at local index L_a, the grid's last, has the
// K diagonal k_a and the D m_a, every other point -2 w_a and 1; the operator is
// sum_a (prod_{b != a} D_b) K_a. Its diagonal at a point, and its application:
#if TAIL
#define TAIL_PARAMS , int L0, int L1, int L2, T k0, T k1, T k2, T m0, T m1, T m2
#define TAIL_PASS , L0, L1, L2, k0, k1, k2, m0, m1, m2
#else
#define TAIL_PARAMS
#define TAIL_PASS
#endif
#if TAIL
__device__ __forceinline__ void tail_factors(int i0, int i1, int i2, T w0, T w1, T w2 TAIL_PARAMS,
                                             T* c, T* M)
{
    T d0 = i0 == L0 ? m0 : (T)1, d1 = i1 == L1 ? m1 : (T)1, d2 = i2 == L2 ? m2 : (T)1;
    c[0] = i0 == L0 ? k0 : (T)-2 * w0;
    c[1] = i1 == L1 ? k1 : (T)-2 * w1;
    c[2] = i2 == L2 ? k2 : (T)-2 * w2;
    M[0] = d1 * d2;
    M[1] = d0 * d2;
    M[2] = d0 * d1;
}

__device__ __forceinline__ T tail_diag(int i0, int i1, int i2, T w0, T w1, T w2 TAIL_PARAMS)
{
    T c[3], M[3];
    tail_factors(i0, i1, i2, w0, w1, w2 TAIL_PASS, c, M);
    T d = M[2] * c[2] + M[1] * c[1];
#if DIM == 3
    d += M[0] * c[0];
#endif
    return d;
}

__device__ __forceinline__ T tail_stencil(const T* u, long p, long P0, long P1, int i0, int i1, int i2,
                                          T w0, T w1, T w2 TAIL_PARAMS, T* diag)
{
    T c[3], M[3];
    tail_factors(i0, i1, i2, w0, w1, w2 TAIL_PASS, c, M);
    T v = u[p];
    T au = M[2] * (c[2] * v + w2 * (u[p - 1] + u[p + 1])) + M[1] * (c[1] * v + w1 * (u[p - P1] + u[p + P1]));
    *diag = M[2] * c[2] + M[1] * c[1];
#if DIM == 3
    au += M[0] * (c[0] * v + w0 * (u[p - P0] + u[p + P0]));
    *diag += M[0] * c[0];
#endif
    return au;
}
// A * u at p and, in dg, the diagonal there; a relaxation's step is scale / dg with TAIL (scale
// is then omega), scale (omega / diag) without
#define APPLY(u, p, i0, i1, i2, dg) tail_stencil(u, p, P0, P1, i0, i1, i2, w0, w1, w2 TAIL_PASS, &dg)
#define STEP(dg) (scale / (dg))
#else
#define APPLY(u, p, i0, i1, i2, dg) stencil(u, p, P0, P1, w0, w1, w2, diag)
#define STEP(dg) scale
#endif

// One colour: the points with i2 = i0 + i1 + parity (mod 2), one thread per point of the colour
// in each of ROWS rows (blockIdx.y = i1 / ROWS). Every row's loads are issued before any store:
// a colour's points never read each other, and the loads in flight per thread are what keeps a
// float32 sweep at the memory bandwidth.
extern "C" __global__ void relax_colour(T* u, const T* __restrict__ f, int n0, int n1, int n2,
                                        int parity, T w0, T w1, T w2, T diag, T scale TAIL_PARAMS)
{
    int i0 = blockIdx.z, x = blockIdx.x * blockDim.x + threadIdx.x;
    STRIDES;
    T v[ROWS];
    long at[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        int i1 = blockIdx.y * ROWS + r, i2 = 2 * x + ((parity + i0 + i1) & 1);
        at[r] = -1;
        if (i1 < n1 && i2 < n2) {
            long p = PADDED(i0, i1, i2);
            at[r] = p;
            T dg = diag, au = APPLY(u, p, i0, i1, i2, dg);
            v[r] = u[p] + STEP(dg) * (f[FLAT(i0, i1, i2)] - au);
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
        if (at[r] >= 0) u[at[r]] = v[r];
}

// The same colour from a zero initial guess: u = scale f on the colour, 0 elsewhere (this
// replaces zeroing u and one pass).
extern "C" __global__ void relax_first(T* u, const T* __restrict__ f, int n0, int n1, int n2,
                                       int parity, T scale, T w0, T w1, T w2 TAIL_PARAMS)
{
    int i0 = blockIdx.z, i1 = blockIdx.y, i2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i2 >= n2) return;
    STRIDES;
#if TAIL
    T step = scale / tail_diag(i0, i1, i2, w0, w1, w2 TAIL_PASS);
#else
    T step = scale;
#endif
    u[PADDED(i0, i1, i2)] = ((i2 + i0 + i1 + parity) & 1) ? (T)0 : step * f[FLAT(i0, i1, i2)];
}

// Both colours of a sweep in one pass, out of place (3D): dst = one red-black sweep of src.
// A block owns a PAIR_X x PAIR_ROWS tile of (i2, i1) and marches along i0 through `planes` planes,
// with five planes of src (the tile and a ring of 2) in shared memory. The first colour is
// updated in place there on the tile and a ring of 1 (the ring redundantly, so no block waits
// for another), the second on the tile from those values, and both go to dst: a sweep reads src
// and f once and writes dst once, where two colour passes read u twice and write it twice. dst
// must not be src (a neighbour's ring would read new values), except in relax_pair_zero, which
// takes src's interior as zero and reads only its halo. dst's halo is not written.
// On a box that borders other ranks' parts, bit 2a of `skip` (2a + 1) marks the face i_a = 0
// (n_a - 1) whose first colour relax_face has updated and a ghost update has sent: the first
// colour is not updated there again, and relax_pair_zero reads those faces too.
#if DIM == 3
#define PSX (PAIR_X + 4)
#define PSY (PAIR_ROWS + 4)
#define PLANE (PSX * PSY)
#define PXT (PAIR_X / 2)                         // threads along i2: an x-pair each
#define PNT (PXT * PAIR_ROWS)
#define PLOADS ((PLANE + PNT - 1) / PNT)
#define PHALF (PAIR_X / 2 + 1)                  // first-colour points in a row of the ring-1 region
#define PFIRST (((PAIR_ROWS + 2) * PHALF + PNT - 1) / PNT)
template <bool ZERO>
__device__ __forceinline__ void relax_pair_body(T* __restrict__ dst, const T* __restrict__ src, const T* __restrict__ f,
                                                int n0, int n1, int n2, int parity, int planes, int skip,
                                                T w0, T w1, T w2, T diag, T scale)
{
    __shared__ T s[5 * PLANE];
    const int x0 = blockIdx.x * PAIR_X, y0 = blockIdx.y * PAIR_ROWS, tid = threadIdx.x + PXT * threadIdx.y;
    const int k0 = blockIdx.z * planes, k1 = min(k0 + planes, n0);
    // the first colour's range along each axis: [lo_a, hi_a)
    const int lo0 = skip & 1, hi0 = n0 - (skip >> 1 & 1), lo1 = skip >> 2 & 1, hi1 = n1 - (skip >> 3 & 1),
              lo2 = skip >> 4 & 1, hi2 = n2 - (skip >> 5 & 1);
    STRIDES;
    const long F0 = (long)n1 * n2;
    // A thread's points are the same in every plane (only the colours swap from plane to plane),
    // so their offsets and bounds are worked out once: the kernel is issue-bound.
    // Fetched: padded offset in a plane (-1 off the array); bit l of `inside`: an interior point.
    int at[PLOADS];
    unsigned inside = 0;
#pragma unroll
    for (int l = 0; l < PLOADS; ++l) {
        int i = tid + l * PNT, ly = i / PSX, gy = y0 - 2 + ly, gx = x0 - 2 + i - ly * PSX;
        at[l] = i < PLANE && gy >= -1 && gy <= n1 && gx >= -1 && gx <= n2 ? (gy + 1) * P1 + gx + 1 : -1;
        inside |= (unsigned)(gy >= lo1 && gy < hi1 && gx >= lo2 && gx < hi2) << l;
    }
    // First colour on the ring-1 region, an x-pair each: slot and f offsets of its first point;
    // in plane k the pair's point (k + bit l of fc) & 1 has the colour, bit 2 l + e of fok says
    // whether point e is interior.
    int fq[PFIRST], fo[PFIRST];
    unsigned fc = 0, fok = 0;
#pragma unroll
    for (int l = 0; l < PFIRST; ++l) {
        int i = tid + l * PNT, r = i / PHALF, j = i - r * PHALF, gy = y0 - 1 + r, gx = x0 - 1 + 2 * j;
        fq[l] = (r + 1) * PSX + 2 * j + 1;
        fo[l] = gy * n2 + gx;
        fc |= (unsigned)((gy + x0 - 1 + parity) & 1) << l;
        bool row = i < (PAIR_ROWS + 2) * PHALF && gy >= lo1 && gy < hi1;
        fok |= ((unsigned)(row && gx >= lo2 && gx < hi2) | (unsigned)(row && gx + 1 >= lo2 && gx + 1 < hi2) << 1)
               << (2 * l);
    }
    // Second colour: a thread takes an x-pair of the tile (one point of each colour), stores both.
    const int sy = y0 + threadIdx.y, sx = x0 + 2 * threadIdx.x, sc = (sy + x0 + parity + 1) & 1;
    const int sq = (threadIdx.y + 2) * PSX + 2 * threadIdx.x + 2, so = sy * n2 + sx, sd = (sy + 1) * P1 + sx + 1;
    const bool sok0 = sy < n1 && sx < n2, sok1 = sy < n1 && sx + 1 < n2;

    T held[PLOADS], fr[PFIRST], fs = 0;
    auto fetch = [&](int k) {                   // plane k of src into registers (0 off the array)
        const T* sp = src + (long)(k + 1) * P0;
        bool plane = k >= -1 && k <= n0, interior = ZERO && k >= lo0 && k < hi0;
#pragma unroll
        for (int l = 0; l < PLOADS; ++l)
            held[l] = plane && at[l] >= 0 && !(interior && (inside >> l & 1)) ? sp[at[l]] : (T)0;
    };
    auto keep = [&](T* p) {                     // ... and into its slot
#pragma unroll
        for (int l = 0; l < PLOADS; ++l)
            if (tid + l * PNT < PLANE) p[tid + l * PNT] = held[l];
    };
    auto fetch_first = [&](int k) {             // f at plane k's first-colour points
        const T* fk = f + k * F0;
        bool plane = k >= 0 && k < n0;
#pragma unroll
        for (int l = 0; l < PFIRST; ++l) {
            int e = (k + (fc >> l)) & 1;
            fr[l] = plane && (fok >> (2 * l + e) & 1) ? fk[fo[l] + e] : (T)0;
        }
    };
    auto first = [&](int k, T* c, const T* lo, const T* hi) {   // in place in plane k's slot c
        if (k < lo0 || k >= hi0) return;
#pragma unroll
        for (int l = 0; l < PFIRST; ++l) {
            int e = (k + (fc >> l)) & 1, q = fq[l] + e;
            if (!(fok >> (2 * l + e) & 1)) continue;
            T v = c[q];
            T au = diag * v + w2 * (c[q - 1] + c[q + 1]) + w1 * (c[q - PSX] + c[q + PSX]) + w0 * (lo[q] + hi[q]);
            c[q] = v + scale * (fr[l] - au);
        }
    };
    auto fetch_second = [&](int k) {            // f at plane k's second-colour point
        int e = (k + sc) & 1;
        fs = (e ? sok1 : sok0) ? f[k * F0 + so + e] : (T)0;
    };
    auto second = [&](int k, const T* c, const T* lo, const T* hi) {   // plane k's tile into dst
        if (!sok0) return;
        int e = (k + sc) & 1, b = sq + e;
        T done = c[sq + 1 - e], v = c[b];
        T au = diag * v + w2 * (c[b - 1] + c[b + 1]) + w1 * (c[b - PSX] + c[b + PSX]) + w0 * (lo[b] + hi[b]);
        T out = v + scale * (fs - au);
        T* dp = dst + (long)(k + 1) * P0 + sd;
        dp[0] = e ? done : out;
        if (sok1) dp[1] = e ? out : done;
    };
    // slot of plane k0 - 2 + d: planes rotate through five
    T* sl[5];
    const int m0 = (k0 + 8) % 5;
#pragma unroll
    for (int d = 0; d < 5; ++d) sl[d] = s + ((m0 + d) % 5) * PLANE;

    for (int d = 0; d < 4; ++d) {               // planes k0 - 2 .. k0 + 1
        fetch(k0 - 2 + d);
        keep(sl[d]);
    }
    __syncthreads();
    fetch_first(k0 - 1);                        // first(k0 - 1) writes no point first(k0) reads
    first(k0 - 1, sl[1], sl[0], sl[2]);
    fetch_first(k0);
    first(k0, sl[2], sl[1], sl[3]);
    __syncthreads();
    // While plane k - 1 is finished (from slots k - 2 .. k), plane k + 2 of src and f of the
    // next planes are in flight: f for second(k) is used an iteration later. (Plane k + 3 in a
    // second register set was slower: more registers, fewer blocks an SM.) sl[d] holds plane
    // k - 2 + d, rotated each plane with a fixed index so the pointers stay in registers.
    for (int k = k0; k < k1; ++k) {
        fetch(k + 2);
        fetch_first(k + 1);
        if (k > k0) second(k - 1, sl[1], sl[0], sl[2]);
        fetch_second(k);
        keep(sl[4]);
        __syncthreads();
        first(k + 1, sl[3], sl[2], sl[4]);
        __syncthreads();
        T* t = sl[0];
        sl[0] = sl[1]; sl[1] = sl[2]; sl[2] = sl[3]; sl[3] = sl[4]; sl[4] = t;
    }
    second(k1 - 1, sl[1], sl[0], sl[2]);
}

#define RELAX_PAIR_ARGS T* __restrict__ dst, const T* __restrict__ src, const T* __restrict__ f, \
    int n0, int n1, int n2, int parity, int planes, int skip, T w0, T w1, T w2, T diag, T scale
#define RELAX_PAIR_PASS dst, src, f, n0, n1, n2, parity, planes, skip, w0, w1, w2, diag, scale
extern "C" __global__ void __launch_bounds__(PNT, PAIR_MINB) relax_pair(RELAX_PAIR_ARGS)
{
    relax_pair_body<false>(RELAX_PAIR_PASS);
}

extern "C" __global__ void __launch_bounds__(PNT, PAIR_MINB) relax_pair_zero(RELAX_PAIR_ARGS)
{
    relax_pair_body<true>(RELAX_PAIR_PASS);
}
#endif

// The first colour of a sweep (i0 + i1 + i2 + parity even) on the face i_axis = index of a box
// that borders another rank's part, in place, before relax_pair sweeps the rest (its `skip`, here
// `faces`): a point also on a face of a lower axis that `faces` marks is left to that face's
// launch. With `zero` (a zero initial guess, relax_first) the face's first colour becomes
// scale f and its second colour 0. Launched over the face: x threads along its last free axis,
// blockIdx.y its other one.
extern "C" __global__ void relax_face(T* u, const T* __restrict__ f, int n0, int n1, int n2, int parity,
                                      int axis, int index, int faces, int zero, T w0, T w1, T w2, T diag, T scale)
{
    int a = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
    int i0 = axis == 0 ? index : b, i1 = axis == 1 ? index : (axis == 0 ? b : a), i2 = axis == 2 ? index : a;
    if (i0 >= n0 || i1 >= n1 || i2 >= n2)
        return;
    int i[3] = {i0, i1, i2}, n[3] = {n0, n1, n2};
    for (int c = 0; c < axis; ++c)
        if (((faces >> 2 * c & 1) && i[c] == 0) || ((faces >> (2 * c + 1) & 1) && i[c] == n[c] - 1))
            return;
    STRIDES;
    long p = PADDED(i0, i1, i2);
    bool first = !((i0 + i1 + i2 + parity) & 1);
    if (zero)
        u[p] = first ? scale * f[FLAT(i0, i1, i2)] : (T)0;
    else if (first)
        u[p] += scale * (f[FLAT(i0, i1, i2)] - stencil(u, p, P0, P1, w0, w1, w2, diag));
}

extern "C" __global__ void residual(T* __restrict__ out, const T* __restrict__ f, const T* __restrict__ u,
                                    int n0, int n1, int n2, int out_pad, int f_pad,
                                    T w0, T w1, T w2, T diag TAIL_PARAMS)
{
    int i0 = blockIdx.z, i2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i2 >= n2) return;
    STRIDES;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {            // ROWS rows a thread, as in relax_colour
        int i1 = blockIdx.y * ROWS + r;
        if (i1 >= n1) break;
        long p = PADDED(i0, i1, i2), q = FLAT(i0, i1, i2);
        T dg, au = APPLY(u, p, i0, i1, i2, dg);
        out[out_pad ? p : q] = f[f_pad ? p : q] - au;
    }
}

// PETSc's DMDA convention (identity rows on the grid's outer layer, which is this level's halo):
// y = c x on the layer, and f = x - A_IB (c x_B) inside. One pass over x; y inside is left alone.
// x and y are PETSc's (double), f the cycle's (T): a float32 cycle needs no conversion pass.
// c is the layer's inverse diagonal: cb[p] where cb is given, else the one value c. yb, where
// given, takes the layer's values too, in T (a stored level's face rows then subtract their
// couplings to them: w0 = w1 = w2 = 0 here).
extern "C" __global__ void eliminate(double* __restrict__ y, T* __restrict__ yb, T* __restrict__ f,
                                     const double* __restrict__ x, const T* __restrict__ cb,
                                     int n0, int n1, int n2, double c, double w0, double w1, double w2)
{
    int j0 = blockIdx.z, j2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (j2 >= n2 + 2) return;
    STRIDES;
    bool edge = (DIM == 3 && (j0 == 0 || j0 == n0 + 1)) || j2 == 0 || j2 == n2 + 1;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {            // ROWS rows a thread (PETSc's x, y: y != x)
        int j1 = blockIdx.y * ROWS + r;
        if (j1 >= n1 + 2) break;
        long p = j0 * P0 + j1 * P1 + j2;
        if (edge || j1 == 0 || j1 == n1 + 1) {
            double v = (cb ? (double)cb[p] : c) * x[p];
            y[p] = v;
            if (yb) yb[p] = (T)v;
            continue;
        }
        double s = x[p];
        if (j2 == 1) s -= w2 * c * x[p - 1];
        if (j2 == n2) s -= w2 * c * x[p + 1];
        if (j1 == 1) s -= w1 * c * x[p - P1];
        if (j1 == n1) s -= w1 * c * x[p + P1];
#if DIM == 3
        if (j0 == 1) s -= w0 * c * x[p - P0];
        if (j0 == n0) s -= w0 * c * x[p + P0];
#endif
        f[FLAT(j0 - PAD0, j1 - 1, j2 - 1)] = s;
    }
}

// eliminate's counterpart: y = u inside (u the cycle's padded solution, y PETSc's, both over
// the grid with its outer layer), in one pass where a strided CuPy copy makes two.
extern "C" __global__ void copy_inside(double* __restrict__ y, const T* __restrict__ u, int n0, int n1, int n2)
{
    int i0 = blockIdx.z, i2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i2 >= n2) return;
    STRIDES;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        int i1 = blockIdx.y * ROWS + r;
        if (i1 >= n1) break;
        long p = PADDED(i0, i1, i2);
        y[p] = u[p];
    }
}

// Coarse point k sits on local fine point 2k + phase along a coarsened axis (c = 1), on k
// along a kept one (c = 0); R = P^T / 2^c with linear P: weights 1/2 (o = 0) and 1/4 (o = +-1).
// The loops have fixed bounds (a kept axis gives its neighbours weight 0, in the halo at worst),
// so they unroll and the 27 loads issue together, which trip counts read at run time prevent.
// Weights are typed T: a double literal would turn float32 taps into double arithmetic.
__device__ __forceinline__ T weight(int o, int c) { return c ? (o ? (T)0.25 : (T)0.5) : (o ? (T)0 : (T)1); }

// With TAIL the fine point after the coarse point at local index LC_a, the grid's last, takes
// the weight W_a / 2 of R = P^T S / 2^c (transfer.Transfer's omegas; W_a = 1/2 is uniform).
#if TAIL
#define TRANSFER_PARAMS , int LC0, int LC1, int LC2, T W0, T W1, T W2
__device__ __forceinline__ void rweights(int k, int c, int last, T w, T* out)
{
    out[0] = c ? (T)0.25 : (T)0;
    out[1] = c ? (T)0.5 : (T)1;
    out[2] = c ? (k == last ? w / (T)2 : (T)0.25) : (T)0;
}
#else
#define TRANSFER_PARAMS
#endif

extern "C" __global__ void restrict_fw(T* __restrict__ fc, const T* __restrict__ r,
                                       int m0, int m1, int m2, int n1, int n2,
                                       int c0, int c1, int c2, int ph0, int ph1, int ph2 TRANSFER_PARAMS)
{
    int k0 = blockIdx.z, k1 = blockIdx.y, k2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (k2 >= m2) return;
    STRIDES;
    int a0 = c0 ? 2 * k0 + ph0 : k0, a1 = c1 ? 2 * k1 + ph1 : k1, a2 = c2 ? 2 * k2 + ph2 : k2;
    const T* centre = r + PADDED(a0, a1, a2);
    T acc = 0;
#if TAIL
    T r0[3] = {0, 1, 0}, r1[3], r2[3];
#if DIM == 3
    rweights(k0, c0, LC0, W0, r0);
#endif
    rweights(k1, c1, LC1, W1, r1);
    rweights(k2, c2, LC2, W2, r2);
#pragma unroll
    for (int o0 = -DIM + 2; o0 <= DIM - 2; ++o0)
#pragma unroll
        for (int o1 = -1; o1 <= 1; ++o1) {
            const T* row = centre + o0 * P0 + o1 * P1;
            acc += r0[o0 + 1] * r1[o1 + 1] * (r2[0] * row[-1] + r2[1] * row[0] + r2[2] * row[1]);
        }
#else
#if DIM == 3
#pragma unroll
    for (int o0 = -1; o0 <= 1; ++o0) {
        T v0 = weight(o0, c0);
#else
    {
        int o0 = 0;
        T v0 = 1;
#endif
#pragma unroll
        for (int o1 = -1; o1 <= 1; ++o1) {
            const T* row = centre + o0 * P0 + o1 * P1;
            T line = weight(-1, c2) * row[-1] + weight(0, c2) * row[0] + weight(1, c2) * row[1];
            acc += v0 * weight(o1, c1) * line;
        }
    }
#endif
    fc[((long)k0 * m1 + k1) * m2 + k2] = acc;
}

// Along a coarsened axis (c = 1) fine point i sits on coarse point (i - phase) / 2 when i - phase
// is even, halfway between two when odd; along a kept one (c = 0) fine i is coarse i. A thread
// takes a 2 x 2 block of fine (i1, i2) points of one plane whose first point along each axis is
// coincident (or kept), so the block needs coarse columns k, k + 1 along each: 8 coarse loads
// for 4 points (one point a thread gathered 8 for itself, and was issue-bound). Along i0 the
// plane takes its one or two coarse planes from gather(): the padded index of the first, and in
// *next the step to the second (0 where there is one, which is then counted twice).
__device__ __forceinline__ int gather(int i, int c, int ph, int pad, int* next)
{
    *next = 0;
    if (!c) return i + pad;
    int j = i - ph;
    if (!(j & 1)) return j / 2 + pad;
    *next = 1;
    return (j + 1) / 2 + pad - 1;
}

// The first point of the first block along an axis whose points [lo, hi) are written: a
// coincident one (at or before lo) where the axis is coarsened.
__device__ __forceinline__ int first_block(int lo, int c, int ph)
{
    return c ? lo - ((lo - ph) & 1) : lo;
}

// ``halo``: bit 2a (2a + 1) set: the halo point before (after) axis a's owned points is written
// too (transfer.Transfer's fill_halo: the faces between the ranks); the coarse points it needs lie
// in the coarse halo.
extern "C" __global__ void prolong_add(T* __restrict__ u, const T* __restrict__ e,
                                       int n0, int n1, int n2, int m1, int m2, int halo,
                                       int c0, int c1, int c2, int ph0, int ph1, int ph2 TRANSFER_PARAMS)
{
    int lo1 = -(halo >> 2 & 1), hi1 = n1 + (halo >> 3 & 1), lo2 = -(halo >> 4 & 1), hi2 = n2 + (halo >> 5 & 1);
    int i0 = (int)blockIdx.z - (halo & 1), t1 = blockIdx.y, t2 = blockIdx.x * blockDim.x + threadIdx.x;
    int a1 = first_block(lo1, c1, ph1) + 2 * t1, a2 = first_block(lo2, c2, ph2) + 2 * t2;   // may be off the grid
    if (a2 >= hi2 || a1 >= hi1) return;
    int s0, l0 = gather(i0, c0, ph0, PAD0, &s0);
    int k1 = c1 ? (a1 - ph1) / 2 : a1, k2 = c2 ? (a2 - ph2) / 2 : a2;   // >= -1: the coarse halo
    long Q1 = m2 + 2, Q0 = (long)(m1 + 2) * Q1, d0 = s0 * Q0;
    const T* c = e + l0 * Q0 + (k1 + 1) * Q1 + k2 + 1;
    // the block's second column (row) only where its second point is written: past the last
    // point filled the next coarse column may lie beyond the coarse halo
    bool in0 = a2 >= lo2, in1 = a2 + 1 < hi2, row0 = a1 >= lo1, row1 = a1 + 1 < hi1;
    int D2 = in1;
    long D1 = row1 ? Q1 : 0;
    // the plane's values at coarse (k1, k2), (k1, k2 + 1), (k1 + 1, k2), (k1 + 1, k2 + 1); twice
    // the value where the plane is coincident (d0 = 0), so each is halved below
    T h = (T)0.5, q = (T)0.25;
#if TAIL
    // the point after the last coarse point takes W from it (and 1 - W from the halo's zero)
    bool e0 = s0 && l0 - PAD0 == LC0;
    T A0 = e0 ? 2 * W0 : (T)1, B0 = e0 ? 2 - 2 * W0 : (T)1;
    T z00 = A0 * c[0] + B0 * c[d0], z01 = A0 * c[D2] + B0 * c[d0 + D2];
    T z10 = A0 * c[D1] + B0 * c[D1 + d0], z11 = A0 * c[D1 + D2] + B0 * c[D1 + d0 + D2];
    T al1 = k1 == LC1 ? W1 : h, al2 = k2 == LC2 ? W2 : h;
    T x0 = c2 ? h * (al2 * z00 + (1 - al2) * z01) : h * z01;
    T x1 = c2 ? h * (al2 * z10 + (1 - al2) * z11) : h * z11;
    T y0 = c1 ? h * (al1 * z00 + (1 - al1) * z10) : h * z10;
    T y1 = c1 ? al1 * x0 + (1 - al1) * x1 : x1;
#else
    T z00 = c[0] + c[d0], z01 = c[D2] + c[d0 + D2], z10 = c[D1] + c[D1 + d0], z11 = c[D1 + D2] + c[D1 + d0 + D2];
    T x0 = c2 ? q * (z00 + z01) : h * z01;                 // second point of the first row
    T x1 = c2 ? q * (z10 + z11) : h * z11;                 // ... of the second row's columns
    T y0 = c1 ? q * (z00 + z10) : h * z10;                 // first point of the second row
    T y1 = c1 ? h * (x0 + x1) : x1;
#endif
    STRIDES;
    long p = PADDED(i0, a1, a2);
    T v00 = 0, v01 = 0, v10 = 0, v11 = 0;                  // loads before stores
    if (row0 && in0) v00 = u[p];
    if (row0 && in1) v01 = u[p + 1];
    if (row1 && in0) v10 = u[p + P1];
    if (row1 && in1) v11 = u[p + P1 + 1];
    if (row0 && in0) u[p] = v00 + h * z00;
    if (row0 && in1) u[p + 1] = v01 + x0;
    if (row1 && in0) u[p + P1] = v10 + y0;
    if (row1 && in1) u[p + P1 + 1] = v11 + y1;
}

// HOMG (homg.py), one iteration on the level of stride l, fused as the paper does it: every
// padded fine point j takes the (bi/tri)linear interpolation of the damped-Jacobi update of the
// stride-l corners of its cell, out = I_l (v + scale (f_l - A_l v)), v = u on the stride-l points.
// u and out are whole padded grids (N per axis), f the level's compact right-hand side (K per
// axis, boundary included).
__device__ __forceinline__ T homg_relaxed(const T* u, const T* f, int k0, int k1, int k2, int l,
                                          int K0, int K1, int K2, long S0, long S1,
                                          T w0, T w1, T w2, T diag, T inv_l2, T scale)
{
    long p = (long)k0 * l * S0 + (long)k1 * l * S1 + (long)k2 * l;
    T v = u[p];
    bool edge = k1 == 0 || k1 == K1 - 1 || k2 == 0 || k2 == K2 - 1;
#if DIM == 3
    edge = edge || k0 == 0 || k0 == K0 - 1;
#endif
    if (edge) return v;                         // Dirichlet boundary: kept
    long L1 = l * S1;
    T au = diag * v + w2 * (u[p - l] + u[p + l]) + w1 * (u[p - L1] + u[p + L1]);
#if DIM == 3
    long L0 = l * S0;
    au += w0 * (u[p - L0] + u[p + L0]);
#endif
    return v + scale * (f[((long)k0 * K1 + k1) * K2 + k2] - au * inv_l2);
}

// first corner of j's cell and the two weights (the second 0 when j is on a corner)
__device__ __forceinline__ int homg_cell(int j, int l, T* w)
{
    int c = j / l, t = j - c * l;
    w[1] = (T)t / (T)l;
    w[0] = (T)1 - w[1];
    return c;
}

// A block is HOMG_ROWS rows of x (one j0): the corners of their cells lie on at most 2 planes and
// HOMG_ROWS / l + 2 rows of the level, at most 128 / l + 2 of them per row (l >= 2). They are
// relaxed once each into shared memory, then every thread interpolates its points from there:
// each point relaxing its own corners repeats that work 2^dim times, and blocks of one row are
// too short to hide the latency of their two phases.
#define HOMG_CROWS (HOMG_ROWS / 2 + 2)
#define HOMG_ROW 72
extern "C" __global__ void homg_iterate(T* __restrict__ out, const T* __restrict__ u, const T* __restrict__ f,
                                        int N0, int N1, int N2, int K0, int K1, int K2, int l,
                                        T w0, T w1, T w2, T diag, T inv_l2, T scale)
{
    int j0 = blockIdx.z, jb = blockIdx.x * blockDim.x, j2 = jb + threadIdx.x;
    int r1 = blockIdx.y * HOMG_ROWS, r1e = min(r1 + HOMG_ROWS, N1);     // rows [r1, r1e)
    long S1 = N2, S0 = (long)N1 * N2;
    if (l == 1) {                               // the fine level: damped Jacobi, no interpolation
        if (j2 < N2)
            for (int j1 = r1; j1 < r1e; ++j1)
                out[j0 * S0 + j1 * S1 + j2] = homg_relaxed(u, f, j0, j1, j2, 1, K0, K1, K2, S0, S1,
                                                           w0, w1, w2, diag, inv_l2, scale);
        return;
    }
    __shared__ T corner[2][HOMG_CROWS][HOMG_ROW];
    T a0w[2] = {1, 0}, a1w[2], a2w[2];
    int c0 = 0;
#if DIM == 3
    c0 = homg_cell(j0, l, a0w);
#endif
    int n0 = a0w[1] != (T)0 ? 2 : 1;
    int q1 = r1 / l, m1 = min((r1e - 1) / l + 1, K1 - 1) - q1 + 1;
    int first = jb / l, count = min((min(jb + (int)blockDim.x, N2) - 1) / l + 1, K2 - 1) - first + 1;
    for (int i = threadIdx.x; i < n0 * m1 * count; i += blockDim.x) {
        int k = i % count, rest = i / count;
        corner[rest / m1][rest % m1][k] = homg_relaxed(u, f, c0 + rest / m1, q1 + rest % m1, first + k, l,
                                                       K0, K1, K2, S0, S1, w0, w1, w2, diag, inv_l2, scale);
    }
    __syncthreads();
    if (j2 >= N2) return;
    int k = homg_cell(j2, l, a2w) - first, e2 = a2w[1] != (T)0 ? 1 : 0;
    for (int j1 = r1; j1 < r1e; ++j1) {
        int b = homg_cell(j1, l, a1w) - q1, e1 = a1w[1] != (T)0 ? 1 : 0;
        T acc = 0;
        for (int a = 0; a < n0; ++a) {
            const T *lo = corner[a][b], *hi = corner[a][b + e1];
            acc += a0w[a] * (a1w[0] * (a2w[0] * lo[k] + a2w[1] * lo[k + e2])
                             + a1w[1] * (a2w[0] * hi[k] + a2w[1] * hi[k + e2]));
        }
        out[j0 * S0 + j1 * S1 + j2] = acc;
    }
}

// FMG's cubic interpolation of a solution (twin: transfer.cubic_upsample): along each axis a fine
// padded index j takes coarse j/2 (j even) or 4 coarse points around the midpoint, one-sided
// next to the boundary. One thread per fine padded point, writes the whole padded array.
__device__ __forceinline__ int cubic_taps(int j, int K, int* n, T* w)
{
    if (!(j & 1)) { *n = 1; w[0] = 1; return j / 2; }
    int i = j / 2;
    *n = 4;
    if (i == 0) { w[0] = 5.0 / 16; w[1] = 15.0 / 16; w[2] = -5.0 / 16; w[3] = 1.0 / 16; return 0; }
    if (i == K - 2) { w[0] = 1.0 / 16; w[1] = -5.0 / 16; w[2] = 15.0 / 16; w[3] = 5.0 / 16; return K - 4; }
    w[0] = -1.0 / 16; w[1] = 9.0 / 16; w[2] = 9.0 / 16; w[3] = -1.0 / 16;
    return i - 1;
}

extern "C" __global__ void cubic_upsample(T* __restrict__ u, const T* __restrict__ e,
                                          int N0, int N1, int N2, int K0, int K1, int K2)
{
    int j0 = blockIdx.z, j1 = blockIdx.y, j2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (j2 >= N2) return;
    int n0 = 1, n1, n2;
    T w0[4] = {1, 0, 0, 0}, w1[4], w2[4];
    int l0 = 0;
#if DIM == 3
    l0 = cubic_taps(j0, K0, &n0, w0);
#endif
    int l1 = cubic_taps(j1, K1, &n1, w1), l2 = cubic_taps(j2, K2, &n2, w2);
    T acc = 0;
    for (int a = 0; a < n0; ++a)
        for (int b = 0; b < n1; ++b) {
            const T* row = e + ((long)(l0 + a) * K1 + l1 + b) * K2 + l2;
            T s = 0;
            for (int c = 0; c < n2; ++c) s += w2[c] * row[c];
            acc += w0[a] * w1[b] * s;
        }
    u[((long)j0 * N1 + j1) * N2 + j2] = acc;
}
