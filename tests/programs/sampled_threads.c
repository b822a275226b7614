/* Short-lived threads created on demand, for the sampler tests. Usage: sampled_threads K MS:
 * prints "ready", reads a line from stdin, then creates K threads one after another (each joined
 * before the next); each spins MS ms of its own CPU time in spin() and prints its thread id and the
 * CPU time it used (CLOCK_THREAD_CPUTIME_ID, read every ~0.1 ms: it is a system call), so a sampler can be checked against it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long ms;

static long long cpu_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) uint64_t spin (long long until)
{
  uint64_t x = 88172645463325252ull;
  while (cpu_ns () < until)
    for (int i = 0; i < 100000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
  return x;
}

static void * worker (void * arg)
{
  long long t0 = cpu_ns ();
  uint64_t x = spin (t0 + ms * 1000000LL);
  printf ("thread %ld cpu_ns %lld x %d\n", (long) syscall (SYS_gettid), cpu_ns (), (int) (x & 1));
  return arg;
}

int main (int argc, char ** argv)
{
  long k = argc > 1 ? atol (argv[1]) : 3;
  char line[16];
  ms = argc > 2 ? atol (argv[2]) : 20;
  setvbuf (stdout, NULL, _IOLBF, 0);
  printf ("ready\n");
  if (fgets (line, sizeof line, stdin) == NULL)
    return 1;
  for (long i = 0; i < k; i++)
    {
      pthread_t t;
      pthread_create (&t, NULL, worker, NULL);
      pthread_join (t, NULL);
    }
  return 0;
}
