// Fused kernels of stored (variable-coefficient) stencils on padded grids: the residual, one colour
// of multicolour Gauss-Seidel (or a small level's whole sweeps in one block), the black box
// transfers and their setup, for any K offsets in {-1, 0, 1}^d (5/7-point stars, 9/27-point
// boxes, the Galerkin coarse operators). Defines: T, DIM, K (TS: the residual's and sweep's
// coefficient type, T unless given); blackbox_rap also OFFS, AX0..AX2.
// Wrapper: pcplugins/core/fused_stored.py; NumPy twins: core/stencil.py (StencilOperator.residual),
// core/smoothers/stencil.py (ColourGS); tests/gpu/test_kernels.py compares them.
//
// The coefficients are K planes over the level (plane k the coefficient of offset k; the residual
// and the sweep take them split by parity, below), the offsets their padded-array distances
// delta[k]; a thread computes one point's whole row, so the generic code's one strided view per
// term and sub-lattice becomes one launch. Launched as fused.cu's kernels: x threads along the
// fastest axis, blockIdx.y along axis 1, blockIdx.z along axis 0; a 2D level is a 3D one with
// n0 = 1 and no halo along axis 0.
#if DIM == 3
#define PAD0 1
#else
#define PAD0 0
#endif
#define STRIDES long P1 = n2 + 2, P0 = (long)(n1 + 2) * P1
#define PADDED(i0, i1, i2) (((i0) + PAD0) * P0 + ((i1) + 1) * P1 + (i2) + 1)
#define FLAT(i0, i1, i2) (((long)(i0) * n1 + (i1)) * n2 + (i2))

// The coefficients of the residual and the colour sweep come split by parity,
// S[k][q][j0][j1][j2] with q = 4 (i0 & 1) + 2 (i1 & 1) + (i2 & 1), j_a = i_a >> 1 and
// h_a = (n_a + 1) / 2 planes of j_a (h0 = 1 and i0 & 1 = 0 in 2D): a colour's points are every
// other point of a row, and in the natural layout it would read whole rows of every plane to use
// half of them. Their type TS (T unless defined) may be narrower than T: the coefficients are
// most of the bytes a sweep moves, and the sums stay in T.
#ifndef TS
#define TS T
#endif

// the index of point (i0, i1, i2) in one plane of the split layout, and that plane's size
__device__ __forceinline__ long split_at(int i0, int i1, int i2, int n0, int n1, int n2, long* H)
{
#if DIM == 3
    const long h0 = (n0 + 1) / 2;
#else
    const long h0 = 1;
#endif
    const long h1 = (n1 + 1) / 2, h2 = (n2 + 1) / 2;
    *H = 8 * h0 * h1 * h2;
    return (((i0 & 1) * 2 + (i1 & 1)) * 2 + (i2 & 1)) * (*H / 8) + ((i0 >> 1) * h1 + (i1 >> 1)) * h2 + (i2 >> 1);
}

// sum_k S[k](i) u[p + delta[k]]: the row of A at point i (padded index p) times u
__device__ __forceinline__ T row(const TS* __restrict__ S, const int* __restrict__ delta, const T* u, long p,
                                 long at, long H)
{
    T s = 0;
#pragma unroll
    for (int k = 0; k < K; ++k)
        s += (T)S[k * H + at] * u[p + delta[k]];
    return s;
}

// out = f - A u; out and f each padded (their interior is used) or not
extern "C" __global__ void stored_residual(T* out, const T* __restrict__ f, const T* __restrict__ u,
                                           const TS* __restrict__ S, const int* __restrict__ delta,
                                           int n0, int n1, int n2, int out_padded, int f_padded)
{
    int i0 = blockIdx.z, i1 = blockIdx.y, i2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i2 >= n2) return;
    STRIDES;
    long p = PADDED(i0, i1, i2), q = FLAT(i0, i1, i2), H;
    const long at = split_at(i0, i1, i2, n0, n1, n2, &H);
    T s = row(S, delta, u, p, at, H);
    out[out_padded ? p : q] = (f_padded ? f[p] : f[q]) - s;
}

// The Gauss-Seidel (SOR for omega != 1) update of point (i0, i1, i2): u += omega (f - A u) / a_diag
__device__ __forceinline__ void relax_point(T* u, const T* __restrict__ f, const TS* __restrict__ S,
                                            const int* __restrict__ delta, int i0, int i1, int i2,
                                            int n0, int n1, int n2, int kdiag, T omega)
{
    STRIDES;
    const long p = PADDED(i0, i1, i2), q = FLAT(i0, i1, i2);
    long H;
    const long at = split_at(i0, i1, i2, n0, n1, n2, &H);
    const T s = row(S, delta, u, p, at, H);
    u[p] += omega * (f[q] - s) / (T)S[kdiag * H + at];
}

// Point x of a colour's thread lattice: redblack 1: the points with i2 = i0 + i1 + s2 (mod 2), x
// running along axis 2 (a star stencil's two colours; s0, s1 unused); redblack 0: the lattice
// i_a = s_a + 2 j_a (2^d colours, valid for box stencils too). (j0, j1, x) are the thread's
// lattice indices; false where the point lies beyond the grid.
__device__ __forceinline__ bool colour_point(int j0, int j1, int x, int s0, int s1, int s2, int redblack,
                                             int n0, int n1, int n2, int* i0, int* i1, int* i2)
{
    if (redblack) {
        *i0 = j0;
        *i1 = j1;
        *i2 = 2 * x + ((s2 + j0 + j1) & 1);
    } else {
#if DIM == 3
        *i0 = s0 + 2 * j0;
#else
        *i0 = 0;
#endif
        *i1 = s1 + 2 * j1;
        *i2 = s2 + 2 * x;
    }
    return *i0 < n0 && *i1 < n1 && *i2 < n2;
}

// One colour of Gauss-Seidel in place, one thread a point of the colour's lattice (colour_point).
// The colour's points never read each other, so the order of the threads does not matter.
extern "C" __global__ void stored_colour(T* u, const T* __restrict__ f, const TS* __restrict__ S,
                                         const int* __restrict__ delta, int n0, int n1, int n2,
                                         int s0, int s1, int s2, int redblack, int kdiag, T omega)
{
    int i0, i1, i2;
    if (colour_point(blockIdx.z, blockIdx.y, blockIdx.x * blockDim.x + threadIdx.x, s0, s1, s2, redblack,
                     n0, n1, n2, &i0, &i1, &i2))
        relax_point(u, f, S, delta, i0, i1, i2, n0, n1, n2, kdiag, omega);
}

// ``sweeps`` sweeps over all C colours in one block, for a level whole on this rank (no ghost
// update between colours) and so small that the launches, not the work, set the pace: the
// threads take a colour's points in turn and meet before the next colour. Colour c is
// stored_colour's (s0, s1, s2, redblack) = lat[4c .. 4c + 3]; reverse: the colours last to first.
// The same updates in the same order as C launches of stored_colour per sweep.
extern "C" __global__ void stored_sweeps(T* u, const T* __restrict__ f, const TS* __restrict__ S,
                                         const int* __restrict__ delta, int n0, int n1, int n2,
                                         const int* __restrict__ lat, int C, int sweeps, int reverse,
                                         int kdiag, T omega)
{
    for (int sweep = 0; sweep < sweeps; ++sweep)
        for (int k = 0; k < C; ++k) {
            const int* l = lat + 4 * (reverse ? C - 1 - k : k);
            const int rb = l[3];
            // the colour's thread lattice, as stored_colour's launch grid
            const int m0 = rb || DIM == 2 ? n0 : (n0 - l[0] + 1) / 2, m1 = rb ? n1 : (n1 - l[1] + 1) / 2;
            const int m2 = rb ? (n2 + 1) / 2 : (n2 - l[2] + 1) / 2;
            const long count = (long)m0 * m1 * m2;
            for (long t = threadIdx.x; t < count; t += blockDim.x) {
                int i0, i1, i2;
                const long r = t / m2;
                if (colour_point((int)(r / m1), (int)(r % m1), (int)(t % m2), l[0], l[1], l[2], rb,
                                 n0, n1, n2, &i0, &i1, &i2))
                    relax_point(u, f, S, delta, i0, i1, i2, n0, n1, n2, kdiag, omega);
            }
            __syncthreads();
        }
}

// The Galerkin product R A P of a stored fine stencil with black box multigrid's prolongation,
// one thread per coarse point I (galerkin.stencil_product is its NumPy twin; the formula is
// there): A holds the K fine coefficient planes (couplings to points outside the grid are
// skipped), W the 2^d weight planes of the padded fine grid by corner (bit a set where the
// corner lies at +1 along axis a, galerkin's corner index). out gets the 3^d coarse planes, box
// offsets in itertools order, times rscale, zero where the coarse neighbour lies outside the grid.
// Compiled apart from the kernels above, with the offsets and the coarsened axes as constants:
// OFFS the K offsets (3 ints each, axis 0 first), AX0..AX2 = 1 on a coarsened axis (coarse point
// I on fine point ph_a + 2 I), 0 on a kept one (fine = coarse).
// The sum is taken as P^T-weighted rows of R A: for each fine point j = F(I) + v of the 5^d
// around I's fine point F(I), first (R A)(I, j) = sum over the terms R(I, F + s) A(F + s, j),
// s + o_k = v, then its products with the weights P(j, I + O) of the one or two coarse offsets O
// that j reaches along each axis. With every index a constant of the unrolled loops, the terms
// that cannot occur are dropped at compile time, each P weight is read once per j (not once per
// term), and the 3^d sums stay in registers (a sum chosen by a computed index would live in local
// memory, whose loads and stores then bound the kernel).
// parts 9 (small levels, where a thread's long chain of loads sets the pace): 9 threads a coarse
// point, each taking the fine points j of one class of (v1, v2) into out[part] (9 x 3^d planes,
// which the caller then sums); blockIdx.z = I0 + c0 part.
#ifdef OFFS
#define NC (DIM == 3 ? 27 : 9)
#define OLO (DIM == 3 ? -1 : 0)
#define OHI (DIM == 3 ? 1 : 0)

// bit v + 2 set where fine index f + v, v in -2..2, lies in 0..n-1
__device__ __forceinline__ unsigned window(int f, int n)
{
    unsigned bits = 0;
#pragma unroll
    for (int v = -2; v <= 2; ++v)
        bits |= (unsigned)(f + v >= 0 && f + v < n) << (v + 2);
    return bits;
}

extern "C" __global__ void blackbox_rap(T* __restrict__ out,
                                        const T* __restrict__ A, const T* __restrict__ W,
                                        int n0, int n1, int n2, int c0, int c1, int c2,
                                        int ph0, int ph1, int ph2, T rscale, int parts)
{
    constexpr int offs[3 * K] = {OFFS};
    constexpr int ax0 = DIM == 3 && AX0, ax1 = AX1, ax2 = AX2;
    const int part = blockIdx.z / c0;
    const int I0 = blockIdx.z % c0, I1 = blockIdx.y, I2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (I2 >= c2) return;
    STRIDES;
    const long NP = (long)(n0 + 2 * PAD0) * P0, N = (long)n0 * n1 * n2, S1 = n2, S0 = (long)n1 * n2;
    const int F0 = ax0 ? ph0 + 2 * I0 : I0, F1 = ax1 ? ph1 + 2 * I1 : I1, F2 = ax2 ? ph2 + 2 * I2 : I2;
    const unsigned in0 = window(F0, n0), in1 = window(F1, n1), in2 = window(F2, n2);
    const long pF = PADDED(F0, F1, F2), qF = FLAT(F0, F1, F2);
    T acc[NC];
#pragma unroll
    for (int k = 0; k < NC; ++k)
        acc[k] = 0;
#pragma unroll
    for (int v0 = -2; v0 <= 2; ++v0)
#pragma unroll
    for (int v1 = -2; v1 <= 2; ++v1)
#pragma unroll
    for (int v2 = -2; v2 <= 2; ++v2) {
        // along a kept axis s = 0, so v = o lies in -1..1; a 2D level has no axis 0
        if ((DIM == 2 && v0) || (!ax0 && (v0 < -1 || v0 > 1)) || (!ax1 && (v1 < -1 || v1 > 1))
            || (!ax2 && (v2 < -1 || v2 > 1)))
            continue;
        if (!(in0 >> (v0 + 2) & 1) || !(in1 >> (v1 + 2) & 1) || !(in2 >> (v2 + 2) & 1))
            continue;                       // j outside the grid: no coupling to it
        if (parts == 9 && ((v1 + 2) * 5 + v2 + 2) % 9 != part)
            continue;
        T ra = 0;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int s0 = v0 - offs[3 * k], s1 = v1 - offs[3 * k + 1], s2 = v2 - offs[3 * k + 2];
            if (s0 < -ax0 || s0 > ax0 || s1 < -ax1 || s1 > ax1 || s2 < -ax2 || s2 > ax2)
                continue;
            if (!(in0 >> (s0 + 2) & 1) || !(in1 >> (s1 + 2) & 1) || !(in2 >> (s2 + 2) & 1))
                continue;                   // the fine point F + s outside the grid
            const int cs = (DIM == 3 ? (s0 == -1) << 2 : 0) | (s1 == -1) << 1 | (s2 == -1);
            const long p = pF + (DIM == 3 ? s0 * P0 : 0) + s1 * P1 + s2, q = qF + s0 * S0 + s1 * S1 + s2;
            ra += W[cs * NP + p] * A[k * N + q];
        }
        const long pj = pF + (DIM == 3 ? v0 * P0 : 0) + v1 * P1 + v2;
        // the coarse offsets O whose weight reaches j: O = v along a kept axis, v / 2 for even v,
        // (v -+ 1) / 2 for odd v along a coarsened one
#pragma unroll
        for (int O0 = OLO; O0 <= OHI; ++O0) {
            if (ax0 ? (v0 - 2 * O0 < -1 || v0 - 2 * O0 > 1) : O0 != v0) continue;
            const int ct0 = DIM == 3 && ax0 && v0 - 2 * O0 == -1;
#pragma unroll
            for (int O1 = -1; O1 <= 1; ++O1) {
                if (ax1 ? (v1 - 2 * O1 < -1 || v1 - 2 * O1 > 1) : O1 != v1) continue;
                const int ct1 = ax1 && v1 - 2 * O1 == -1;
#pragma unroll
                for (int O2 = -1; O2 <= 1; ++O2) {
                    if (ax2 ? (v2 - 2 * O2 < -1 || v2 - 2 * O2 > 1) : O2 != v2) continue;
                    const int ct = ct0 << 2 | ct1 << 1 | (ax2 && v2 - 2 * O2 == -1);
                    acc[(O0 - OLO) * 9 + (O1 + 1) * 3 + O2 + 1] += ra * W[ct * NP + pj];
                }
            }
        }
    }
    const long Nc = (long)c0 * c1 * c2, qc = ((long)I0 * c1 + I1) * c2 + I2;
    const int I[3] = {I0, I1, I2}, c[3] = {c0, c1, c2};
#pragma unroll
    for (int k = 0; k < NC; ++k) {
        const int O[3] = {DIM == 3 ? k / 9 - 1 : 0, (DIM == 3 ? k / 3 % 3 : k / 3) - 1, k % 3 - 1};
        bool inside = true;
        for (int a = 0; a < 3; ++a)
            inside = inside && I[a] + O[a] >= 0 && I[a] + O[a] < c[a];
        out[(part * NC + k) * Nc + qc] = inside ? rscale * acc[k] : (T)0;
    }
}
#endif

// One class of black box multigrid's prolongation weights, one thread per point of the class
// (transfer/blackbox.py: BlackBox._class is its NumPy twin, and says what the weights are): the
// points between coarse points along the axes of bmask (bit 2 - a: axis a) and on coarse points
// along the other coarsened axes, at padded indices st_a + sp_a j_a, j_a < m_a. A holds the K
// coefficient planes as the operator has them, offs their offsets; W the 2^d weight planes of
// the padded fine grid by corner (as blackbox_rap), read at the neighbours of smaller classes
// and written at the class's points.
extern "C" __global__ void blackbox_class(T* W, const T* __restrict__ A, const int* __restrict__ offs,
                                          int n0, int n1, int n2, int st0, int st1, int st2,
                                          int sp0, int sp1, int sp2, int m0, int m1, int m2, int bmask)
{
    const int j2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (j2 >= m2) return;
    const int i0 = DIM == 3 ? st0 + sp0 * (int)blockIdx.z - 1 : 0, i1 = st1 + sp1 * (int)blockIdx.y - 1,
              i2 = st2 + sp2 * j2 - 1;
    STRIDES;
    const long NP = (long)(n0 + 2 * PAD0) * P0, N = (long)n0 * n1 * n2, p = PADDED(i0, i1, i2), q = FLAT(i0, i1, i2);
    const int b0 = DIM == 3 && (bmask >> 2 & 1), b1 = bmask >> 1 & 1, b2 = bmask & 1;
    // the stencil collapsed onto the class's axes: Ac[(v0 + 1) 9 + (v1 + 1) 3 + v2 + 1], in registers
    // (unrolled loops with constant indices; blackbox_rap says why)
    T Ac[27];
#pragma unroll
    for (int k = 0; k < 27; ++k)
        Ac[k] = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int v0 = b0 ? offs[3 * k] : 0, v1 = b1 ? offs[3 * k + 1] : 0, v2 = b2 ? offs[3 * k + 2] : 0;
        const int at = (v0 + 1) * 9 + (v1 + 1) * 3 + v2 + 1;
        const T a = A[k * N + q];
#pragma unroll
        for (int m = 0; m < 27; ++m)
            if (m == at) Ac[m] += a;
    }
    const T centre = Ac[13], fallback = (T)1 / (T)(1 << (b0 + b1 + b2));
    // s_a = +-1 along a class axis, 0 along the others
#pragma unroll
    for (int s0 = -1; s0 <= 1; ++s0)
#pragma unroll
    for (int s1 = -1; s1 <= 1; ++s1)
#pragma unroll
    for (int s2 = -1; s2 <= 1; ++s2) {
        if ((b0 ? !s0 : s0) || (b1 ? !s1 : s1) || (b2 ? !s2 : s2)) continue;
        // corner bits: +1 along a class axis where s_a = +1 (-1 elsewhere)
        const int corner = (DIM == 3 ? (s0 == 1) << 2 : 0) | (s1 == 1) << 1 | (s2 == 1);
        T acc = 0;
#pragma unroll
        for (int v0 = 0; v0 <= 1; ++v0)
#pragma unroll
        for (int v1 = 0; v1 <= 1; ++v1)
#pragma unroll
        for (int v2 = 0; v2 <= 1; ++v2) {
            if (!(v0 | v1 | v2) || v0 > b0 || v1 > b1 || v2 > b2) continue;
            // the neighbour p + v s lies on a coarse point along the axes where v_a = 1
            const int o0 = v0 * s0, o1 = v1 * s1, o2 = v2 * s2;
            const int nb = corner & ~((DIM == 3 ? v0 << 2 : 0) | v1 << 1 | v2);
            acc += Ac[(o0 + 1) * 9 + (o1 + 1) * 3 + o2 + 1]
                   * W[nb * NP + p + (DIM == 3 ? o0 * P0 : 0) + o1 * P1 + o2];
        }
        W[corner * NP + p] = centre == (T)0 ? fallback : -acc / centre;
    }
}

// Black box multigrid's transfers (transfer/blackbox.py: the BlackBox itself, the linear
// transfer's lattice sums over its columns, is their NumPy twin), from P's columns: C[k] over the
// padded coarse grid holds P[F(I) + o, I] for the k-th offset o in {-1, 0, 1}^c of the coarsened
// axes (axis 0 first, -1 before 0 before 1: itertools' order), F(I) = ph + 2 I along a coarsened
// axis (ax_a = 1), F(I) = I along a kept one. n: the fine box, c: the coarse box (local sizes).
#define COARSE_STRIDES const long Q1 = c2 + 2, Q0 = (long)(c1 + 2) * Q1, NQ = (long)(c0 + 2 * PAD0) * Q0

// C itself from the BlackBox's weight planes W (2^d planes over the padded fine box, corner bits in
// itertools order; transfer.BlackBox._columns is the twin): C[k][I] = W[corner][F(I) + o] at every
// padded coarse index I, F(I) = ph - 1 + 2 I along a coarsened axis and I along a kept one (padded
// indices), zero where F(I) + o lies outside the padded fine box; the corner of the fine points at
// o from their coarse point has its bit set where o_a = -1. One thread per padded coarse point.
extern "C" __global__ void blackbox_columns(T* __restrict__ C, const T* __restrict__ W,
                                            int n0, int n1, int n2, int c0, int c1, int c2,
                                            int ax0, int ax1, int ax2, int ph0, int ph1, int ph2)
{
    const int I0 = blockIdx.z, I1 = blockIdx.y, I2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (I2 >= c2 + 2) return;
    STRIDES;
    COARSE_STRIDES;
    const int m0 = n0 + 2 * PAD0, e0 = DIM == 3 && ax0;
    const long NP = (long)m0 * P0, q = (long)I0 * Q0 + (long)I1 * Q1 + I2;
    const int F0 = e0 ? ph0 - 1 + 2 * I0 : I0, F1 = ax1 ? ph1 - 1 + 2 * I1 : I1, F2 = ax2 ? ph2 - 1 + 2 * I2 : I2;
    int k = 0;
    for (int o0 = -e0; o0 <= e0; ++o0)
    for (int o1 = -ax1; o1 <= ax1; ++o1)
    for (int o2 = -ax2; o2 <= ax2; ++o2, ++k) {
        const int g0 = F0 + o0, g1 = F1 + o1, g2 = F2 + o2;
        const int corner = (o0 == -1) * 4 + (o1 == -1) * 2 + (o2 == -1);
        const bool in = g0 >= 0 && g0 < m0 && g1 >= 0 && g1 < n1 + 2 && g2 >= 0 && g2 < n2 + 2;
        C[k * NQ + q] = in ? W[corner * NP + g0 * P0 + g1 * P1 + g2] : (T)0;
    }
}

// fc = rscale P^T r on the owned coarse points, one thread each: its column times the fine
// points it reaches (r padded, with current ghosts; fc unpadded). The columns of the two
// transfers are of type TS, as the coefficients of the sweep.
extern "C" __global__ void blackbox_restrict(T* __restrict__ fc, const TS* __restrict__ C, const T* __restrict__ r,
                                             int n0, int n1, int n2, int c0, int c1, int c2,
                                             int ax0, int ax1, int ax2, int ph0, int ph1, int ph2, T rscale)
{
    const int I0 = blockIdx.z, I1 = blockIdx.y, I2 = blockIdx.x * blockDim.x + threadIdx.x;
    if (I2 >= c2) return;
    STRIDES;
    COARSE_STRIDES;
    const int e0 = DIM == 3 && ax0;
    const TS* col = C + (I0 + PAD0) * Q0 + (I1 + 1) * Q1 + I2 + 1;
    const T* centre = r + PADDED(e0 ? ph0 + 2 * I0 : I0, ax1 ? ph1 + 2 * I1 : I1, ax2 ? ph2 + 2 * I2 : I2);
    T acc = 0;
    int k = 0;
    for (int o0 = -e0; o0 <= e0; ++o0)
    for (int o1 = -ax1; o1 <= ax1; ++o1)
    for (int o2 = -ax2; o2 <= ax2; ++o2, ++k)
        acc += (T)col[k * NQ] * centre[(DIM == 3 ? o0 * P0 : 0) + o1 * P1 + o2];
    fc[((long)I0 * c1 + I1) * c2 + I2] = rscale * acc;
}

// u += P e on the owned fine points, one thread each: a fine point between two coarse points
// along the axes of its class takes the 2^|B| coarse points around it (e padded, with current
// ghosts: the coarse halo's points included), the others the one it sits on
extern "C" __global__ void blackbox_prolong_add(T* __restrict__ u, const TS* __restrict__ C, const T* __restrict__ e,
                                                int n0, int n1, int n2, int c0, int c1, int c2,
                                                int ax0, int ax1, int ax2, int ph0, int ph1, int ph2)
{
    const int i[3] = {(int)blockIdx.z, (int)blockIdx.y, (int)(blockIdx.x * blockDim.x + threadIdx.x)};
    if (i[2] >= n2) return;
    STRIDES;
    COARSE_STRIDES;
    const int ax[3] = {DIM == 3 && ax0, ax1, ax2}, ph[3] = {ph0, ph1, ph2};
    int k[3], between[3];           // the coarse point at or before i (-1: the halo's), and whether between
    for (int a = 0; a < 3; ++a) {
        const int j = i[a] - ph[a];
        between[a] = ax[a] && (j & 1);
        k[a] = ax[a] ? (j + 2) / 2 - 1 : i[a];
    }
    T acc = 0;
    for (int s0 = 0; s0 <= between[0]; ++s0)
    for (int s1 = 0; s1 <= between[1]; ++s1)
    for (int s2 = 0; s2 <= between[2]; ++s2) {
        // from coarse point k + s the fine point lies at o = +1 (s = 0) or -1 (s = 1) along a
        // between axis, at 0 along the others
        const int s[3] = {s0, s1, s2};
        int slot = 0;
        for (int a = 0; a < 3; ++a)
            if (ax[a])
                slot = 3 * slot + (between[a] ? 2 - 2 * s[a] : 1);
        const long q = (k[0] + s0 + PAD0) * Q0 + (k[1] + s1 + 1) * Q1 + k[2] + s2 + 1;
        acc += (T)C[slot * NQ + q] * e[q];
    }
    u[PADDED(i[0], i[1], i[2])] += acc;
}
