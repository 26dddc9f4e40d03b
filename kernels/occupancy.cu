// A kernel whose resources are set from outside, for checking the occupancy calculator
// against CUDA's own (cuOccupancyMaxActiveBlocksPerMultiprocessor).
//
// REGISTER_CAP and STATIC_SHARED_BYTES are given with -D at compile time. LIVE values stay
// live across every pass, more than any cap allows, so the compiler uses exactly the cap
// (spilling the rest to local memory); vramlab reads back what it used (CU_FUNC_ATTRIBUTE_NUM_REGS).
#ifndef REGISTER_CAP
#define REGISTER_CAP 255
#endif
#ifndef STATIC_SHARED_BYTES
#define STATIC_SHARED_BYTES 0
#endif
#define LIVE 256

extern "C" __global__ void __maxnreg__(REGISTER_CAP) pressure(float *data, int n) {
#if STATIC_SHARED_BYTES > 0
    __shared__ float tile[STATIC_SHARED_BYTES / 4];
#endif
    float v[LIVE];
#pragma unroll
    for (int i = 0; i < LIVE; ++i) v[i] = data[(threadIdx.x + i * 97) % n];
#pragma unroll
    for (int pass = 0; pass < 4; ++pass) {
#pragma unroll
        for (int i = 0; i < LIVE; ++i) v[i] = fmaf(v[i], v[(i + 1 + pass) % LIVE], 1.0f);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LIVE; ++i) sum += v[i] * (float)(i + 1);
#if STATIC_SHARED_BYTES > 0
    tile[threadIdx.x % (STATIC_SHARED_BYTES / 4)] = sum;
    __syncthreads();
    sum += tile[(threadIdx.x + 1) % (STATIC_SHARED_BYTES / 4)];
#endif
    data[threadIdx.x] = sum;
}
