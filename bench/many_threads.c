/* Starts many short-lived threads (argument 1, default 400), a few at a time, each doing a small
 * amount of work: the worst case for a tracer that follows every thread. Prints a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void * work (void * arg)
{
  uint64_t x = (uintptr_t) arg + 1, s = 0;
  for (int i = 0; i < 200000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; s += x % 1000; }
  return (void *) (uintptr_t) s;
}

int main (int argc, char ** argv)
{
  int total = argc > 1 ? atoi (argv[1]) : 400, batch = 4;
  uint64_t sum = 0;
  for (int t = 0; t < total; t += batch) {
    pthread_t th[4];
    for (int i = 0; i < batch; i++) pthread_create (&th[i], NULL, work, (void *) (uintptr_t) (t + i));
    for (int i = 0; i < batch; i++) { void * r; pthread_join (th[i], &r); sum += (uintptr_t) r; }
  }
  printf ("%llu\n", (unsigned long long) sum);
  return 0;
}
