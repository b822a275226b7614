/*
 * Two phases of known locality, for the locality model's end-to-end test (issue 21): `grow` reads
 * one word of a random 64-byte block of an array of SIZE bytes (the program's input: its working
 * set grows with it), `fixed` does the same on an array of 256 KiB whatever SIZE is. Uniform random
 * blocks: a fully associative LRU cache of C bytes misses 1 - C/S of the accesses to S bytes
 * (none once C >= S), so the miss rate of `grow` at any cache size depends on SIZE, `fixed`'s not.
 * The indices come from an LCG in registers: the arrays' loads are the only memory accesses.
 *
 *     locality_growth SIZE [rounds] [steps per phase]     prints a checksum
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXED_BYTES (256 << 10)

__attribute__ ((noinline)) static uint64_t
grow (const uint64_t * a, uint64_t blocks, long steps, uint64_t * seed)
{
  uint64_t s = 0, x = *seed;
  while (steps-- > 0)
  {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s += a[((x >> 24) % blocks) * 8];
  }
  *seed = x;
  return s;
}

/* A copy of grow, so that the two are different code (two phases) */
__attribute__ ((noinline)) static uint64_t
fixed (const uint64_t * a, uint64_t blocks, long steps, uint64_t * seed)
{
  uint64_t s = 0, x = *seed;
  while (steps-- > 0)
  {
    x = x * 2862933555777941757ULL + 3037000493ULL;
    s ^= a[((x >> 24) % blocks) * 8];
  }
  *seed = x;
  return s;
}

int
main (int argc, char ** argv)
{
  uint64_t size = argc > 1 ? strtoull (argv[1], NULL, 0) : 1 << 20;
  long rounds = argc > 2 ? atol (argv[2]) : 3;
  long steps = argc > 3 ? atol (argv[3]) : 4000000;
  uint64_t blocks = size / 64, seed = 1, sum = 0;
  uint64_t * big = malloc (blocks * 64), * small = malloc (FIXED_BYTES);
  long r;
  if (blocks == 0 || big == NULL || small == NULL)
    return 2;
  /* touched, so that the pages are the program's own (untouched, all would map the kernel's zero page) */
  memset (big, 1, blocks * 64);
  memset (small, 2, FIXED_BYTES);
  for (r = 0; r < rounds; r++)
  {
    sum += grow (big, blocks, steps, &seed);
    sum += fixed (small, FIXED_BYTES / 64, steps, &seed);
  }
  printf ("%lx\n", (unsigned long) (sum & 0xffff));
  return 0;
}
