/* Exact mode's worst cases (issue 18): short, hot blocks where a per-block counter costs the most
 * next to the loop's own work. One kernel per run, chosen by argument 1; argument 2 scales it
 * (default 1: about a second natively on the dev VM). Prints a checksum, so nothing is optimised out.
 *
 *   int    s += i * i                      one self-looping block of six instructions
 *   fp     x = x * 1.0000001 + 0.5         a floating-point recurrence (latency-bound)
 *   call   s += f (i), f a one-block noinline function   three blocks per iteration, call + ret
 *   short  an inner loop of two iterations     three short blocks per outer iteration
 *   qsort  qsort with a comparison callback    call-heavy library code
 *   mixed  int, then fp, then call, then short, then qsort
 *
 * Build: cc -O2 -o hot_loops bench/hot_loops.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t kernel_int (uint64_t n)
{
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++)
  {
    s += i * i;
    __asm__ volatile ("" : "+r" (s));   /* keep the loop a loop: no vectorising, no closed form */
  }
  return s;
}

static uint64_t kernel_fp (uint64_t n)
{
  double x = 1.0;
  for (uint64_t i = 0; i < n; i++)
    x = x * 1.0000001 + 0.5;
  uint64_t bits;
  memcpy (&bits, &x, sizeof bits);
  return bits;
}

__attribute__ ((noinline)) static uint64_t one_block (uint64_t i)
{
  __asm__ volatile ("");
  return (i ^ (i >> 3)) + 7;
}

static uint64_t kernel_call (uint64_t n)
{
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++)
    s += one_block (i);
  return s;
}

static uint64_t kernel_short (uint64_t n, uint64_t inner)
{
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++)
  {
    uint64_t j = 0;
    do
    {
      s += (i ^ j) * j;
      __asm__ volatile ("" : "+r" (s));
    } while (++j < inner);
  }
  return s;
}

static int cmp_u32 (const void * a, const void * b)
{
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
  return (x > y) - (x < y);
}

static uint64_t kernel_qsort (uint64_t n)
{
  size_t len = 1 << 20;
  uint32_t * v = malloc (len * sizeof v[0]);
  uint64_t r = 88172645463325252ULL, s = 0;
  for (uint64_t round = 0; round < n; round++)
  {
    for (size_t i = 0; i < len; i++)
    {
      r ^= r << 13; r ^= r >> 7; r ^= r << 17;
      v[i] = (uint32_t) r;
    }
    qsort (v, len, sizeof v[0], cmp_u32);
    s += v[len / 2];
  }
  free (v);
  return s;
}

int main (int argc, char ** argv)
{
  const char * which = argc > 1 ? argv[1] : "mixed";
  uint64_t scale = argc > 2 ? strtoull (argv[2], NULL, 10) : 1, s = 0;
  int all = strcmp (which, "mixed") == 0, known = all;
  if (all || strcmp (which, "int") == 0) { s += kernel_int (3000000000ULL * scale); known = 1; }
  if (all || strcmp (which, "fp") == 0) { s += kernel_fp (750000000ULL * scale); known = 1; }
  if (all || strcmp (which, "call") == 0) { s += kernel_call (900000000ULL * scale); known = 1; }
  /* the inner count from argc so that the compiler keeps the inner loop a loop: 2 iterations */
  if (all || strcmp (which, "short") == 0) { s += kernel_short (700000000ULL * scale, 2 + (argc > 3)); known = 1; }
  if (all || strcmp (which, "qsort") == 0) { s += kernel_qsort (10 * scale); known = 1; }
  if (!known)
  {
    fprintf (stderr, "usage: hot_loops int|fp|call|short|qsort|mixed [SCALE]\n");
    return 2;
  }
  printf ("%llu\n", (unsigned long long) s);
  return 0;
}
