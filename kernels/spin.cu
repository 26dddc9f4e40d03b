// A kernel of known duration for copy/compute overlap experiments.
//
// Each block spins on the global nanosecond timer until `ns` have passed since it started.
// The launch asks for more than half of an SM's shared memory, so exactly one block fits on
// an SM: a grid of one block per SM fills the GPU, and kernels from different streams run
// one after another rather than side by side, which is what the overlap model assumes.
extern "C" __global__ void spin(unsigned long long ns) {
    extern __shared__ unsigned char reserved[];
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned long long now = start;
    while (now - start < ns) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    // Never true (the timer is not 0); keeps the shared allocation referenced.
    if (now == 0) reserved[threadIdx.x] = 1;
}
