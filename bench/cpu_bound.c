/* CPU-bound benchmark with distinct phases: sorting (qsort, a callback per comparison), hashing,
 * a floating-point matrix kernel, table-driven CRC32 over a buffer and a pointer chase through a
 * random cycle, repeated ROUNDS times (argument 1, default 4). Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ULL;
static uint64_t next (void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static int cmp_u32 (const void * a, const void * b)
{
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
  return (x > y) - (x < y);
}

static uint64_t phase_sort (uint32_t * v, size_t n)
{
  for (size_t i = 0; i < n; i++) v[i] = (uint32_t) next ();
  qsort (v, n, sizeof v[0], cmp_u32);
  return v[n / 2];
}

static uint64_t phase_hash (const uint32_t * v, size_t n, int reps)
{
  uint64_t h = 1469598103934665603ULL;
  for (int r = 0; r < reps; r++)
    for (size_t i = 0; i < n; i++) { h ^= v[i] + r; h *= 1099511628211ULL; }
  return h;
}

#define N 128
static double a[N][N], b[N][N], c[N][N];
static uint64_t phase_matrix (int reps)
{
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) { a[i][j] = (i + j) % 7; b[i][j] = (i * j) % 5; }
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) { double s = 0; for (int k = 0; k < N; k++) s += a[i][k] * b[k][j]; c[i][j] = s + r; }
  return (uint64_t) c[N / 2][N / 3];
}

static uint32_t crc_table[256];
static uint64_t phase_crc (const uint8_t * buf, size_t n, int reps)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
  uint32_t crc = 0;
  for (int r = 0; r < reps; r++) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
    crc = ~crc;
  }
  return crc;
}

static uint64_t phase_chase (uint32_t * next_idx, size_t n, int steps)
{
  for (size_t i = 0; i < n; i++) next_idx[i] = (uint32_t) i;
  for (size_t i = n - 1; i > 0; i--) {          /* Sattolo: one cycle through every element */
    size_t j = next () % i;
    uint32_t t = next_idx[i]; next_idx[i] = next_idx[j]; next_idx[j] = t;
  }
  uint32_t p = 0;
  uint64_t sum = 0;
  for (int s = 0; s < steps; s++) { p = next_idx[p]; sum += p & 3; }
  return sum;
}

int main (int argc, char ** argv)
{
  int rounds = argc > 1 ? atoi (argv[1]) : 4;
  size_t n = 1 << 18;
  uint32_t * v = malloc (n * sizeof v[0]);
  uint64_t sum = 0;
  for (int r = 0; r < rounds; r++) {
    sum += phase_sort (v, n);
    sum += phase_hash (v, n, 24);
    sum += phase_matrix (24);
    sum += phase_crc ((const uint8_t *) v, n * sizeof v[0], 8);
    sum += phase_chase (v, n, 3000000);
  }
  printf ("%llu\n", (unsigned long long) sum);
  free (v);
  return 0;
}
