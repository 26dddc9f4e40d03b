// Constant memory: serialization and cold versus warm constant cache, timed with clock64.
//
// One warp. Lane i reads word (i mod distinct) x 32 of a 64 KiB __constant__ table (the words
// a warp reads sit in different 128-byte lines), so a warp access names `distinct` addresses.
// Every word is zero, so each load's result only feeds the next load's address: a dependent
// chain. Warm: the same addresses every time, after a warm-up. Cold: each access moves on by
// 4 KiB (the span of a warp's 32 lines) through the whole table, so no access finds a line
// the previous one loaded, and every access misses the SM's constant cache. (A 2 KiB step
// overlapped the previous access for more than 16 distinct words; H100 run of 2026-11-22.)
#define TABLE_WORDS 16384
__constant__ unsigned int table[TABLE_WORDS];

extern "C" __global__ void constant_chase(unsigned long long *cycles, unsigned int *sink, int distinct, int cold,
                                          int iterations) {
    const unsigned int lane_word = (threadIdx.x % distinct) * 32u;
    const unsigned int step = cold ? 1024u : 0u;  // words: 4 KiB
    unsigned int carry = 0, offset = 0;
    unsigned long long start = 0;
    for (int round = 0; round < 2; ++round) {  // the first round warms up, the second is timed
        start = clock64();
#pragma unroll 8
        for (int i = 0; i < iterations; ++i) {
            carry = table[(lane_word + offset + carry) & (TABLE_WORDS - 1)];
            offset += step;
        }
    }
    unsigned long long end = clock64();
    sink[threadIdx.x] = carry;
    if (threadIdx.x == 0) cycles[0] = end - start;
}
