/* A thread that runs few instructions for a long time, for the exact-burst tests: usage
 * burst_slow MS. Prints "ready", starts a worker that does a little work every millisecond for MS
 * ms and exits (a burst of it never completes its interval), joins it, then computes for about a
 * second on the main thread (where a burst completes) and prints both checksums. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>

static long ms;

__attribute__((noinline)) static uint64_t mix(uint64_t x, long n) {
    for (long i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
    return x;
}

static void *worker(void *arg) {
    uint64_t x = 1;
    for (long i = 0; i < ms; i++) {
        x = mix(x, 100);
        usleep(1000);
    }
    *(uint64_t *) arg = x;
    return NULL;
}

int main(int argc, char **argv) {
    ms = argc > 1 ? atol(argv[1]) : 300;
    uint64_t w = 0;
    pthread_t t;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    pthread_create(&t, NULL, worker, &w);
    pthread_join(t, NULL);
    printf("worker %llu\n", (unsigned long long) w);
    printf("main %llu\n", (unsigned long long) mix(88172645463325252ull, 300000000));
    return 0;
}
