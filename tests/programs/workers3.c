/* A 3-thread target for the lifecycle tests and benches (bench/stopped_targets.py, bench/forks.py,
 * bench/attach_cycles.py). Two workers run xorshift loops forever; the main thread:
 *
 *   workers3 tick        "ready PID", then "tick N" every 20 ms, forever
 *   workers3 fork N      "ready PID", then N times: fork a child that works a little and _exits,
 *                        reap it; then "forks N" and exit 0 (a child that hangs hangs the parent)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static uint64_t unit(uint64_t x, long k) {
    for (long i = 0; i < k; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += (uint64_t)i; }
    return x;
}

static volatile uint64_t sink;

static void *worker(void *arg) {
    uint64_t x = (uintptr_t)arg;
    for (;;) { x = unit(x, 50000); sink = x; usleep(1000); }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    printf("ready %d\n", getpid());
    if (!strcmp(mode, "tick")) {
        uint64_t x = 1;
        for (long i = 0;; i++) {
            struct timespec start, now;
            clock_gettime(CLOCK_MONOTONIC, &start);
            do { x = unit(x, 20000); clock_gettime(CLOCK_MONOTONIC, &now); }
            while ((now.tv_sec - start.tv_sec) * 1000000000L + now.tv_nsec - start.tv_nsec < 20000000L);
            printf("tick %ld\n", i);
        }
    }
    if (!strcmp(mode, "fork") && argc > 2) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++) {
            pid_t child = fork();
            if (child == 0) { sink = unit(i, 10000); _exit(0); }
            int status;
            if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
                printf("fork %ld failed\n", i);
                return 1;
            }
            sink = unit(sink, 10000);
        }
        printf("forks %ld\n", n);
        return 0;
    }
    fprintf(stderr, "usage: workers3 tick | fork N\n");
    return 2;
}
