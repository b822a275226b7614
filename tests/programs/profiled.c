/* Two phases whose functions and call stacks are known by construction (phasescope profile tests).
 * main -> phase_a -> {work_x, work_y}, then main -> phase_b -> work_z; every function is a loop of
 * its own, so each sample's leaf and stack name one of them. argv[1]: iterations of each leaf call
 * (default 400000), argv[2]: rounds per phase (default 200), argv[3]: cycles of both phases (default 1). Built with -fno-omit-frame-pointer; each
 * work function calls note() after its loop, so it is no leaf and keeps its frame (GCC 12 omits a
 * leaf's frame pointer even with -mno-omit-leaf-frame-pointer, and its caller would be missing). */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void note(unsigned long s) { sink ^= s; }

__attribute__((noinline)) static unsigned long work_x(long n) {
    unsigned long s = 1;
    for (long i = 0; i < n; i++) s = s * 2862933555777941757UL + (unsigned long)i;
    note(s);
    return s;
}

__attribute__((noinline)) static unsigned long work_y(long n) {
    unsigned long s = 7;
    for (long i = 0; i < n; i++) s ^= (s << 7) + (s >> 3) + (unsigned long)i;
    note(s);
    return s;
}

__attribute__((noinline)) static unsigned long work_z(long n) {
    unsigned long s = 3;
    for (long i = 0; i < n; i++) s += (s * (unsigned long)i) >> 5;
    note(s);
    return s;
}

__attribute__((noinline)) static void phase_a(long n) { sink += work_x(n); sink += work_y(n); }

__attribute__((noinline)) static void phase_b(long n) { sink += work_z(2 * n); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 400000;
    long rounds = argc > 2 ? atol(argv[2]) : 200;
    long cycles = argc > 3 ? atol(argv[3]) : 1;
    for (long c = 0; c < cycles; c++) {
        for (long r = 0; r < rounds; r++) phase_a(n);
        for (long r = 0; r < rounds; r++) phase_b(n);
    }
    printf("%lu\n", sink);
    return 0;
}
