// The latency ladder: one thread follows a random cycle through `nodes` nodes, one per
// 128-byte line (node i's successor is stored at word 32 x i), so every load depends on the
// one before and no two nodes share a line. The first `warm_steps` loads fill the caches; the
// next `steps` are timed with clock64.
extern "C" __global__ void chase(const unsigned int *next, unsigned long long warm_steps, unsigned long long steps,
                                 unsigned long long *cycles, unsigned int *sink) {
    unsigned int node = 0;
    for (unsigned long long i = 0; i < warm_steps; ++i) node = next[node * 32u];
    unsigned long long start = clock64();
    for (unsigned long long i = 0; i < steps; ++i) node = next[node * 32u];
    unsigned long long end = clock64();
    cycles[0] = end - start;
    sink[0] = node;
}
