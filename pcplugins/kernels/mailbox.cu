// The waits and signals of a device mailbox (pcplugins/petsc/mailbox.py): ranks whose kernels run
// at the same time on GPUs of one node (NVIDIA MPS, or one GPU per rank) order their exchanges by
// counters in memory they have mapped through CUDA IPC, so no exchange waits for the host and a
// cycle with exchanges is captured as one CUDA graph. One thread each: they only wait and signal;
// the layers themselves are copied by ordinary kernels between them, in stream order.
//
// Each rank's words: [0] posted, the number of its exchanges whose payload is in its buffer;
// [1 + r] the number of exchanges whose payload it has read from rank r. ``seq`` (not shared)
// counts this mailbox's finished exchanges, so exchange k = seq + 1 needs no host argument and a
// replayed graph goes on counting. No twin: these kernels compute nothing; the exchanges they
// order are compared with the host transport by the MPI tests.
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
