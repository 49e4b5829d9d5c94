// Pairwise aggregation on the GPU: the symmetrized strength and the scores of the strong couplings
// (one thread a row), and the rounds of the matching (two kernels a round). Wrapper and NumPy
// twins: pcplugins/core/aggregation.py (strength, pair_scores, _match_host).

__device__ __forceinline__ long long mirror(const int i, const int c, const int* __restrict__ indptr,
        const int* __restrict__ indices)
{
    // the place of entry (c, i) in row c: a binary search of the sorted row, a scan where the
    // row is not sorted; -1 where it is absent
    int lo = indptr[c], hi = indptr[c + 1] - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) >> 1, j = indices[mid];
        if (j == i) return mid;
        if (j < i) lo = mid + 1; else hi = mid - 1;
    }
    for (int k = indptr[c]; k < indptr[c + 1]; ++k)
        if (indices[k] == i) return k;
    return -1;
}

__device__ __forceinline__ unsigned int hash_edge(const unsigned int i, const unsigned int j)
{
    // aggregation.hash_edge: 32-bit unsigned products wrapping modulo 2^32, then 20 bits
    unsigned int h = (i < j ? i : j) * 0x9E3779B1u + (i < j ? j : i) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h & 0xFFFFFu;
}

// s[k] = (w_ij + w_ji) / 2 with w_ij = |a_ij| / sqrt(|a_ii a_jj|) for entry k = (i, j), 0 on the
// diagonal, on A's own pattern (structurally symmetric: *missing = 1 where an entry has no
// mirror, and the caller takes the general route); then score[k] = s[k] (1 + 1e-6 hash(i, j) /
// 2^20) where s[k] > 0 and s[k] >= theta max_j s_ij, else 0. Each operation rounds as its NumPy
// twin's does (no fused multiply-add), so both pick the same pairs.
extern "C" __global__ void pair_scores(const int n, const double theta, const int* __restrict__ indptr,
        const int* __restrict__ indices, const double* __restrict__ a, const double* __restrict__ d,
        double* __restrict__ score, int* __restrict__ missing)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    double best = 0.0;
    for (int k = indptr[i]; k < indptr[i + 1]; ++k) {
        const int c = indices[k];
        double s = 0.0;
        if (c != i) {
            const long long m = mirror(i, c, indptr, indices);
            if (m < 0) { *missing = 1; s = 0.0; }
            else {
                const double wij = __ddiv_rn(fabs(a[k]), __dsqrt_rn(fabs(__dmul_rn(d[i], d[c]))));
                const double wji = __ddiv_rn(fabs(a[m]), __dsqrt_rn(fabs(__dmul_rn(d[c], d[i]))));
                s = __dmul_rn(__dadd_rn(wij, wji), 0.5);
            }
        }
        score[k] = s;
        best = s > best ? s : best;
    }
    const double cut = __dmul_rn(theta, best);
    for (int k = indptr[i]; k < indptr[i + 1]; ++k) {
        const double s = score[k];
        const double h = __ddiv_rn((double)hash_edge(i, indices[k]), 1048576.0);
        score[k] = (s > 0.0 && s >= cut) ? __dmul_rn(s, __dadd_rn(1.0, __dmul_rn(1e-6, h))) : 0.0;
    }
}

// A round of the matching, first half: every unmatched unknown picks its unmatched neighbour of
// the largest score (> 0; the last of equal ones, as NumPy's scattered assignment keeps), or -1.
extern "C" __global__ void pair_choose(const int n, const int* __restrict__ indptr, const int* __restrict__ indices,
        const double* __restrict__ score, const long long* __restrict__ partner, int* __restrict__ choice)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    int pick = -1;
    if (partner[i] < 0) {
        double best = 0.0;
        for (int k = indptr[i]; k < indptr[i + 1]; ++k) {
            const double s = score[k];
            if (s > 0.0 && s >= best && partner[indices[k]] < 0) { best = s; pick = indices[k]; }
        }
    }
    choice[i] = pick;
}

// Second half: mutual picks pair.
extern "C" __global__ void pair_mutual(const int n, const int* __restrict__ choice, long long* __restrict__ partner)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    const int c = choice[i];
    if (c >= 0 && choice[c] == i) partner[i] = c;
}
