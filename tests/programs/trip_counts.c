/* Self-looping blocks run for every trip count from 1 to 300, then for long odd and even ones:
 * exact mode unrolls such a loop by two (agent/counter.c), so a loop may leave after either copy,
 * and an interval may end at either iteration of a pair. Prints a checksum.
 *
 *     trip_counts [rounds]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__ ((noinline)) static uint64_t
spin (uint64_t x, long n)
{
  do
  {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    __asm__ volatile ("" : "+r" (x));
  }
  while (--n > 0);
  return x;
}

/* The body starts with instructions that leave the flags alone (the count goes after them). */
__attribute__ ((noinline)) static uint64_t
spin_lea (uint64_t x, long n)
{
  do
  {
    x = x * 5 + 7;
    __asm__ volatile ("" : "+r" (x));
  }
  while (--n > 0);
  return x;
}

/* Two flag-setting instructions in the body: the count goes after the first one that kills all. */
__attribute__ ((noinline)) static uint64_t
spin_cmp (uint64_t x, long n, uint64_t limit)
{
  long i = 0;
  do
  {
    x += (x < limit) ? 3 : 5;
    __asm__ volatile ("" : "+r" (x));
  }
  while (++i < n);
  return x;
}

int
main (int argc, char ** argv)
{
  long rounds = argc > 1 ? atol (argv[1]) : 3, r, n;
  uint64_t x = 1;
  for (r = 0; r < rounds; r++)
  {
    for (n = 1; n <= 300; n++)
      x = spin (x, n) ^ spin_cmp (x, n, x >> 1) ^ spin_lea (x, n);
    x = spin (x, 1000001 + r);
    x = spin_cmp (x, 2000000 + r, x >> 2);
    x = spin_lea (x, 3000000 + r);
  }
  printf ("%lx\n", (unsigned long) (x & 0xffffffff));
  return 0;
}
