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
