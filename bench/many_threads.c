/* Starts many short-lived threads (argument 1, default 400), four at a time, each running a loop
 * of argument 2 iterations (default 200000, about 4M instructions): a hard case for a tracer that
 * follows every thread, since each new thread starts with an empty code cache. Prints a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long iterations = 200000;

static void * work (void * arg)
{
  uint64_t x = (uintptr_t) arg + 1, s = 0;
  for (long i = 0; i < iterations; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; s += x % 1000; }
  return (void *) (uintptr_t) s;
}

int main (int argc, char ** argv)
{
  int total = argc > 1 ? atoi (argv[1]) : 400, batch = 4;
  iterations = argc > 2 ? atol (argv[2]) : iterations;
  uint64_t sum = 0;
  for (int t = 0; t < total; t += batch) {
    pthread_t th[4];
    for (int i = 0; i < batch; i++) pthread_create (&th[i], NULL, work, (void *) (uintptr_t) (t + i));
    for (int i = 0; i < batch; i++) { void * r; pthread_join (th[i], &r); sum += (uintptr_t) r; }
  }
  printf ("%llu\n", (unsigned long long) sum);
  return 0;
}
