/* Call-heavy C for the exact-mode benchmark: a small matrix multiply, qsort with a comparison
 * callback (indirect calls and returns on every comparison), and a hash loop calling a function
 * through a pointer. Usage: calls ROUNDS. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

#define N 96
static double a[N][N], b[N][N], c[N][N];

static int cmp (const void * x, const void * y)
{
  uint32_t u = *(const uint32_t *) x, v = *(const uint32_t *) y;
  return (u > v) - (u < v);
}

static uint64_t mix (uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

int main (int argc, char ** argv)
{
  int rounds = argc > 1 ? atoi (argv[1]) : 10;
  uint64_t (*volatile step) (uint64_t, uint64_t) = mix;
  uint32_t * keys = malloc (200000 * sizeof *keys);
  uint64_t h = 1469598103934665603ull, x = 88172645463325252ull;
  for (int r = 0; r < rounds; r++)
  {
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++)
        a[i][j] = (double) ((i * 7 + j * 3 + r) % 17), b[i][j] = (double) ((i + 2 * j) % 13);
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++)
      {
        double s = 0;
        for (int k = 0; k < N; k++)
          s += a[i][k] * b[k][j];
        c[i][j] = s;
      }
    for (int i = 0; i < 200000; i++)
    {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      keys[i] = (uint32_t) x;
    }
    qsort (keys, 200000, sizeof *keys, cmp);
    for (int i = 0; i < 2000000; i++)
      h = step (h, keys[i % 200000] + (uint64_t) c[i % N][(i / N) % N]);
  }
  printf ("checksum %llu\n", (unsigned long long) h);
  free (keys);
  return 0;
}
