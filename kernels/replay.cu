// Every block an allocator policy hands out is stamped with a pattern unique to its
// allocation, and checked when it is freed: if two live blocks overlap, the later stamp
// overwrites the earlier one and the check counts the damaged words.

__device__ __forceinline__ unsigned int pattern(unsigned int tag, unsigned long long i) {
    return tag ^ (unsigned int)(i * 2654435761ull);
}

extern "C" __global__ void stamp(unsigned int* block, unsigned long long words, unsigned int tag) {
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += step) {
        block[i] = pattern(tag, i);
    }
}

extern "C" __global__ void verify(const unsigned int* block, unsigned long long words, unsigned int tag,
                                  unsigned long long* mismatches) {
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long bad = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += step) {
        bad += block[i] != pattern(tag, i);
    }
    if (bad) {
        atomicAdd(mismatches, bad);
    }
}
