// The waits and signals of a device mailbox (pcplugins/petsc/mailbox.py), and the ghost-layer copies
// with the waits folded in (halo_pack, halo_unpack; define WORD, an unsigned type of the values'
// size: they only copy). Ranks whose kernels run
// at the same time on GPUs of one node (NVIDIA MPS, or one GPU per rank) order their exchanges by
// counters in memory they have mapped through CUDA IPC, so no exchange waits for the host and a
// cycle with exchanges is captured as one CUDA graph. One thread each: they only wait and signal;
// the layers themselves are copied by ordinary kernels between them, in stream order.
//
// Each rank's words: [0] posted, the number of its exchanges whose payload is in its buffer;
// [1 + r] the number of exchanges whose payload it has read from rank r. ``seq`` (not shared)
// counts this mailbox's finished exchanges (seq[0]; seq[1] counts the finished blocks of a layer
// kernel), so exchange k = seq + 1 needs no host argument and a replayed graph goes on counting.
// No twin: these kernels compute nothing; the layers they move are halo.py's _pack and _unpack,
// and the MPI tests compare the transports.
//
// A wait that lasts TIMEOUT_NS (a rank that stopped, or ranks that disagree on their exchanges)
// sets *status and gives up, as does every later wait: petsc/mailbox.py turns it into an error.
#define TIMEOUT_NS 60000000000ULL

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// wait until *word >= value, or the timeout
__device__ void wait_for(const volatile unsigned int* word, unsigned int value, volatile int* status)
{
    if (*word >= value || *status)
        return;
    unsigned long long start = now_ns();
    while (*word < value) {
        if (*status)
            return;
        if (now_ns() - start > TIMEOUT_NS) {
            *status = 1;
            return;
        }
#if __CUDA_ARCH__ >= 700
        __nanosleep(200);
#endif
    }
}

#define PEER_WORDS(p) ((const volatile unsigned int*)peers[p])

// before exchange k fills this rank's buffer: every peer has read exchange k - 1's payload
extern "C" __global__ void mailbox_ready(const unsigned int* seq, const unsigned long long* peers, int npeers,
                                         int me, int* status)
{
    unsigned int k = *seq + 1;
    for (int p = 0; p < npeers; ++p)
        wait_for(PEER_WORDS(p) + 1 + me, k - 1, status);
}

// the buffer is filled (the kernels before this one in the stream have finished): post exchange
// k, then wait until every peer has posted it
extern "C" __global__ void mailbox_post(const unsigned int* seq, unsigned int* mine, const unsigned long long* peers,
                                        int npeers, int* status)
{
    unsigned int k = *seq + 1;
    __threadfence_system();
    *(volatile unsigned int*)mine = k;
    __threadfence_system();
    for (int p = 0; p < npeers; ++p)
        wait_for(PEER_WORDS(p), k, status);
}

// the peers' payloads are read: tell them, and count exchange k done
extern "C" __global__ void mailbox_done(unsigned int* seq, unsigned int* mine, const int* ranks, int npeers)
{
    unsigned int k = *seq + 1;
    for (int p = 0; p < npeers; ++p)
        ((volatile unsigned int*)mine)[1 + ranks[p]] = k;
    __threadfence_system();
    *seq = k;
}

#ifndef WORD
#define WORD unsigned int
#endif

// whether this block is the last of the grid to get here (its threads' writes done and visible);
// the last one resets the count for the next layer kernel
__device__ bool last_block(unsigned int* count)
{
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(count, 1) == gridDim.x - 1;
        if (last)
            *count = 0;
    }
    __syncthreads();
    return last;
}

// element e of the layer at index i along the axis: u[i sa + (e / nc) sb + (e % nc) sc]
#define LAYER_OFFSET(e) (((e) / nc) * sb + ((e) % nc) * sc)

// exchange k, first half: wait until the peers have read exchange k - 1 (mailbox_ready), copy the
// layers i_lo and i_hi (-1: no neighbour on that side) into this rank's payload, rows 0 and 1 of
// L values, and the last block posts and waits for the peers' posts (mailbox_post). The grid is
// small (petsc/mailbox.py) so that its spinning blocks leave room for the peers' kernels.
extern "C" __global__ void halo_pack(const WORD* u, WORD* buf, long L, long nc, long sa, long sb, long sc,
                                     long i_lo, long i_hi, unsigned int* seq, unsigned int* mine,
                                     const unsigned long long* peers, int npeers, int me, int* status)
{
    unsigned int k = seq[0] + 1;
    if (threadIdx.x == 0)
        for (int p = 0; p < npeers; ++p)
            wait_for(PEER_WORDS(p) + 1 + me, k - 1, status);
    __syncthreads();
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < L; e += (long)gridDim.x * blockDim.x) {
        long off = LAYER_OFFSET(e);
        if (i_lo >= 0)
            buf[e] = u[i_lo * sa + off];
        if (i_hi >= 0)
            buf[L + e] = u[i_hi * sa + off];
    }
    if (last_block(seq + 1) && threadIdx.x == 0) {
        __threadfence_system();
        *(volatile unsigned int*)mine = k;
        __threadfence_system();
        for (int p = 0; p < npeers; ++p)
            wait_for(PEER_WORDS(p), k, status);
    }
}

// exchange k, second half: the lower neighbour's row 1 into the halo layer h_lo, the upper one's
// row 0 into h_hi (a null payload: no neighbour), read past L1 (the peers wrote them); the last
// block tells the peers they are read and counts exchange k done (mailbox_done)
extern "C" __global__ void halo_unpack(WORD* u, unsigned long long from_lo, unsigned long long from_hi, long L,
                                       long nc, long sa, long sb, long sc, long h_lo, long h_hi, unsigned int* seq,
                                       unsigned int* mine, const int* ranks, int npeers)
{
    const WORD* lo = (const WORD*)from_lo;
    const WORD* hi = (const WORD*)from_hi;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < L; e += (long)gridDim.x * blockDim.x) {
        long off = LAYER_OFFSET(e);
        if (lo)
            u[h_lo * sa + off] = __ldcg(lo + L + e);
        if (hi)
            u[h_hi * sa + off] = __ldcg(hi + e);
    }
    if (last_block(seq + 1) && threadIdx.x == 0) {
        unsigned int k = seq[0] + 1;
        for (int p = 0; p < npeers; ++p)
            ((volatile unsigned int*)mine)[1 + ranks[p]] = k;
        __threadfence_system();
        seq[0] = k;
    }
}

#ifndef VAL
#define VAL double
#endif

// a global sum of n numbers of type VAL (a complex value is two) in one kernel: wait until the
// peers have read exchange k - 1, post this rank's numbers in its payload, wait for the peers'
// posts, add the numbers of ranks 0, 1, ..., size - 1 (``payloads``, this rank's own among them)
// so that every rank adds the same numbers in the same order and gets the same bits, and tell the
// peers they are read. One thread: it moves a few bytes, the waits are the cost.
extern "C" __global__ void mailbox_allsum(const VAL* value, VAL* out, int n, VAL* buf,
                                          const unsigned long long* payloads, int size, unsigned int* seq,
                                          unsigned int* mine, const unsigned long long* peers, const int* ranks,
                                          int npeers, int me, int* status)
{
    unsigned int k = seq[0] + 1;
    for (int p = 0; p < npeers; ++p)
        wait_for(PEER_WORDS(p) + 1 + me, k - 1, status);
    for (int c = 0; c < n; ++c)
        buf[c] = value[c];
    __threadfence_system();
    *(volatile unsigned int*)mine = k;
    __threadfence_system();
    for (int p = 0; p < npeers; ++p)
        wait_for(PEER_WORDS(p), k, status);
    for (int c = 0; c < n; ++c) {
        VAL s = ((const volatile VAL*)payloads[0])[c];
        for (int r = 1; r < size; ++r)
            s += ((const volatile VAL*)payloads[r])[c];
        out[c] = s;
    }
    for (int p = 0; p < npeers; ++p)
        ((volatile unsigned int*)mine)[1 + ranks[p]] = k;
    __threadfence_system();
    seq[0] = k;
}
