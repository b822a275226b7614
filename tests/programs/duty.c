/* A target that uses a known share of a core: ROUNDS times, BUSY ms of its own CPU time spinning,
 * then SLEEP ms asleep. Usage: duty ROUNDS BUSY_MS SLEEP_MS. Prints its checksum at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    double busy = argc > 2 ? atof(argv[2]) : 40, sleep_ms = argc > 3 ? atof(argv[3]) : 80;
    struct timespec nap = {(time_t)(sleep_ms / 1e3), (long)(sleep_ms * 1e6) % 1000000000L};
    volatile uint64_t x = 88172645463325252ull;
    for (long r = 0; r < rounds; r++) {
        double until = cpu_ms() + busy;
        while (cpu_ms() < until)
            for (int i = 0; i < 10000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
        nanosleep(&nap, NULL);
    }
    printf("checksum %llu\n", (unsigned long long)x);
    return 0;
}
