/* Two phases for the sampler tests: phase_a (integer hashing), then phase_b (floating point).
 * Usage: sampled_two N [wait]; with "wait" it reads a line from stdin before starting. Prints a
 * checksum, so sampled and native runs compare byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
__attribute__((noinline)) uint64_t phase_a(long n, uint64_t x) {
    for (long i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += (uint64_t)i; }
    return x;
}
__attribute__((noinline)) double phase_b(long n, double y) {
    for (long i = 0; i < n; i++) { y = y * 1.0000001 + 0.5 / (double)(i + 1); if (y > 1e6) y -= 1e6; }
    return y;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000000;
    char line[16];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    if (argc > 2 && fgets(line, sizeof line, stdin) == NULL) return 1;
    uint64_t x = phase_a(n, 88172645463325252ull);
    double y = phase_b(n / 2, 1.0);
    printf("checksum %llu %.6f\n", (unsigned long long)x, y);
    return 0;
}
