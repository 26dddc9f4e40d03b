// Register spills: each thread keeps LIVE floats live across a loop and updates every one of
// them each iteration. Compiled with a register cap (REGISTER_CAP, -D at compile time, applied
// with __maxnreg__) below what LIVE values need, the compiler keeps the rest in local memory and
// loads and stores them every iteration. The iteration loop is never unrolled: unrolled 2 or 4
// times (NVVM's choice, by body size) the compiler spills differently per unroll factor, and the
// local traffic per iteration stops being a function of the cap alone. vramlab launches it to
// fill the GPU and times it with events; block 0's clock64 count (what v1 timed on one warp) is
// still written, so the code compiled here stays the code the references measured.
#ifndef REGISTER_CAP
#define REGISTER_CAP 255
#endif
#ifndef LIVE
#define LIVE 64
#endif

extern "C" __global__ void __maxnreg__(REGISTER_CAP)
    spill(const float *in, float *out, int iterations, unsigned long long *cycles) {
    float v[LIVE];
#pragma unroll
    for (int i = 0; i < LIVE; ++i) v[i] = in[(threadIdx.x + 7 * i) & 1023];
    const long long start = clock64();
#pragma unroll 1
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int i = 0; i < LIVE; ++i) v[i] = fmaf(v[i], v[(i + 1) % LIVE], 0.5f);
    }
    const long long end = clock64();
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LIVE; ++i) sum += v[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
    if (blockIdx.x == 0 && threadIdx.x == 0) cycles[0] = (unsigned long long)(end - start);
}
