// Shared-memory bank conflicts, timed in cycles with clock64.
//
// One warp. Lane i owns element i x stride (elements of WIDTH bytes); the element's first
// word holds its own index, so each load's address depends on the previous load and the loop
// measures latency. The loads are written in PTX so that 8- and 16-byte cases really issue
// 64- and 128-bit loads and every width runs the same instructions apart from the load itself.
#define CHASE(NAME, LOAD)                                                                    \
extern "C" __global__ void NAME(unsigned long long *cycles, unsigned int *sink, int stride, \
                                int iterations) {                                           \
    extern __shared__ unsigned int words[];                                                  \
    const unsigned int width_words = WIDTH_WORDS;                                             \
    unsigned int element = threadIdx.x * stride;                                              \
    for (unsigned int w = 0; w < width_words; ++w)                                            \
        words[element * width_words + w] = w == 0 ? element : 0u;                             \
    __syncthreads();                                                                          \
    unsigned int base;                                                                        \
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(base) : "l"(words)); \
    unsigned int index = element;                                                             \
    unsigned long long start = 0;                                                             \
    for (int round = 0; round < 2; ++round) {                                                 \
        start = clock64();                                                                    \
        _Pragma("unroll 8")                                                                  \
        for (int i = 0; i < iterations; ++i) {                                                \
            unsigned int address = base + index * (width_words * 4u);                         \
            LOAD                                                                              \
        }                                                                                     \
    }                                                                                         \
    unsigned long long end = clock64();                                                       \
    sink[threadIdx.x] = index;                                                                \
    if (threadIdx.x == 0) cycles[0] = end - start;                                            \
}

#define WIDTH_WORDS 1u
CHASE(chase4, asm volatile("ld.shared.u32 %0, [%1];" : "=r"(index) : "r"(address) : "memory");)
#undef WIDTH_WORDS

#define WIDTH_WORDS 2u
CHASE(chase8, {
    unsigned int second;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(index), "=r"(second) : "r"(address) : "memory");
})
#undef WIDTH_WORDS

#define WIDTH_WORDS 4u
CHASE(chase16, {
    unsigned int b, c, d;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(index), "=r"(b), "=r"(c), "=r"(d) : "r"(address) : "memory");
})
#undef WIDTH_WORDS
