/* A native target with three distinct phases (integer hashing, floating point, a pointer chase),
 * run in the pattern A A B C per round. Usage: phased ROUNDS [SCALE]; ROUNDS 0 runs until killed.
 * Prints one line per round and a checksum at the end, so traced and untraced runs compare. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

__attribute__((noinline)) static uint64_t hash_phase(long n, uint64_t x) {
    for (long i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += (uint64_t)i; }
    return x;
}

__attribute__((noinline)) static double float_phase(long n, double y) {
    for (long i = 0; i < n; i++) { y = y * 1.0000001 + 0.5 / (double)(i + 1); if (y > 1e6) y -= 1e6; }
    return y;
}

#define NODES 4096
static long next_node[NODES];

__attribute__((noinline)) static long chase_phase(long n, long p) {
    for (long i = 0; i < n; i++) { p = next_node[p]; if (p & 1) p = next_node[(p + 7) % NODES]; }
    return p;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 4;
    long scale = argc > 2 ? atol(argv[2]) : 1;
    long n = 2000000 * scale;
    for (long i = 0; i < NODES; i++) next_node[i] = (i * 2654435761u + 12345) % NODES;
    uint64_t x = 88172645463325252ull; double y = 1.0; long p = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (long r = 0; rounds == 0 || r < rounds; r++) {
        x = hash_phase(n, x);
        x = hash_phase(n, x);
        y = float_phase(n, y);
        p = chase_phase(n, p);
        printf("round %ld\n", r + 1);
    }
    printf("checksum %llu %.6f %ld\n", (unsigned long long)x, y, p);
    return 0;
}
