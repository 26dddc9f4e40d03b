// Shared-memory bank conflicts, timed in cycles with clock64.
//
// One warp. Lane i owns element i x stride (elements of WORDS x 4 bytes); the element's first
// word holds its own index, so each load's address depends on the previous load and the loop
// measures latency. The loads are written in PTX so that 8- and 16-byte cases really issue
// 64- and 128-bit loads, and every width runs the same instructions apart from the load.

template <int WORDS>
__device__ __forceinline__ unsigned int load_first_word(unsigned int address) {
    unsigned int first, rest0, rest1, rest2;
    if constexpr (WORDS == 1) {
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(first) : "r"(address) : "memory");
    } else if constexpr (WORDS == 2) {
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(first), "=r"(rest0) : "r"(address) : "memory");
    } else {
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(first), "=r"(rest0), "=r"(rest1), "=r"(rest2)
                     : "r"(address)
                     : "memory");
    }
    return first;
}

template <int WORDS>
__device__ void chase(unsigned long long *cycles, unsigned int *sink, int stride, int iterations) {
    extern __shared__ unsigned int words[];
    unsigned int element = threadIdx.x * stride;
    for (unsigned int w = 0; w < WORDS; ++w) words[element * WORDS + w] = w == 0 ? element : 0u;
    __syncthreads();
    unsigned int base;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(base) : "l"(words));
    unsigned int index = element;
    unsigned long long start = 0;
    // Two rounds: the first warms up, the second is timed.
    for (int round = 0; round < 2; ++round) {
        start = clock64();
#pragma unroll 8
        for (int i = 0; i < iterations; ++i) {
            index = load_first_word<WORDS>(base + index * (WORDS * 4u));
        }
    }
    unsigned long long end = clock64();
    sink[threadIdx.x] = index;
    if (threadIdx.x == 0) cycles[0] = end - start;
}

extern "C" __global__ void chase4(unsigned long long *cycles, unsigned int *sink, int stride, int iterations) {
    chase<1>(cycles, sink, stride, iterations);
}
extern "C" __global__ void chase8(unsigned long long *cycles, unsigned int *sink, int stride, int iterations) {
    chase<2>(cycles, sink, stride, iterations);
}
extern "C" __global__ void chase16(unsigned long long *cycles, unsigned int *sink, int stride, int iterations) {
    chase<4>(cycles, sink, stride, iterations);
}
