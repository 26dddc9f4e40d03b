// Global-memory reads with a stride, an offset and a lane mask.
//
// Warp w of the grid-stride loop reads, in lane i < active, element
// w x 32 x stride + offset + i x stride; the grid reads through the array `passes` times.
// Values are folded into a word that is written only if it hits an impossible value, so the
// loads cannot be removed and nothing but the reads moves memory. Loads are cached in the L2
// only (ld.global.cg): each SM re-reads the same addresses every pass, and an L1 hit would
// hide the L2 that the small-array experiments measure.

__device__ __forceinline__ unsigned int fold(unsigned char v) { return v; }
__device__ __forceinline__ unsigned int fold(unsigned short v) { return v; }
__device__ __forceinline__ unsigned int fold(unsigned int v) { return v; }
__device__ __forceinline__ unsigned int fold(uint2 v) { return v.x ^ v.y; }
__device__ __forceinline__ unsigned int fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

template <typename T>
__device__ void read(const T *__restrict__ data, unsigned long long warps, int stride, int offset, int active,
                     int passes, unsigned int *sink) {
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned long long first = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    const unsigned long long step = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    const unsigned long long lane_offset = (unsigned long long)offset + lane * (unsigned long long)stride;
    const unsigned long long warp_span = 32ull * (unsigned long long)stride;
    unsigned int acc = 0;
    if (lane < (unsigned int)active) {
        for (int pass = 0; pass < passes; ++pass) {
#pragma unroll 8
            for (unsigned long long w = first; w < warps; w += step) {
                acc ^= fold(__ldcg(&data[w * warp_span + lane_offset]));
            }
        }
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}

#define ENTRY(NAME, T)                                                                                    \
    extern "C" __global__ void NAME(const T *data, unsigned long long warps, int stride, int offset,      \
                                    int active, int passes, unsigned int *sink) {                         \
        read<T>(data, warps, stride, offset, active, passes, sink);                                       \
    }
ENTRY(read1, unsigned char)
ENTRY(read2, unsigned short)
ENTRY(read4, unsigned int)
ENTRY(read8, uint2)
ENTRY(read16, uint4)
