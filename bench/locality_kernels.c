/*
 * Kernels whose data grows with their input, for bench/locality_model.py (issue 21): each builds
 * its data (a phase of its own), then runs its kernel for about WORK inner steps, whatever the size
 * (at least a few full passes over the data, so that every reuse the kernel has occurs).
 *
 *     locality_kernels KERNEL SIZE [WORK] (default 24M steps; fewer for a full trace under valgrind)
 *
 *     locality_kernels matrix N        C = A x B, n x n doubles, i-j-k order (rows of C, again from the first)
 *     locality_kernels hash SLOTS      lookups of random keys in an open-addressing table (16-byte slots)
 *     locality_kernels tree NODES      lookups of random keys in a binary search tree (32-byte nodes)
 *     locality_kernels stencil N       Jacobi 5-point sweeps over two n x n grids of doubles
 *
 * Prints a checksum. The data sizes (bytes): matrix 24 n^2, hash 16 SLOTS, tree 32 NODES, stencil 16 n^2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long WORK = 24000000L; /* inner steps of a kernel; the optional third argument */

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t
next_random (void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* ---- matrix ---- */

__attribute__ ((noinline)) static void
matrix_init (double * a, double * b, double * c, long n)
{
  long i;
  for (i = 0; i < n * n; i++)
  {
    a[i] = (double) (i % 7);
    b[i] = (double) (i % 5);
    c[i] = 0.0;
  }
}

__attribute__ ((noinline)) static void
matrix_multiply (const double * a, const double * b, double * c, long n, long rows)
{
  long r, i, j, k;
  for (r = 0; r < rows; r++)
  {
    i = r % n; /* a small matrix is multiplied more than once */
    for (j = 0; j < n; j++)
    {
      double s = 0.0;
      for (k = 0; k < n; k++)
        s += a[i * n + k] * b[k * n + j];
      c[i * n + j] = s;
    }
  }
}

static uint64_t
run_matrix (long n)
{
  double * a = malloc (n * n * sizeof (double)), * b = malloc (n * n * sizeof (double));
  double * c = malloc (n * n * sizeof (double));
  long rows = WORK / (n * n);
  uint64_t sum = 0;
  long i;
  if (rows < 3)
    rows = 3;
  matrix_init (a, b, c, n);
  matrix_multiply (a, b, c, n, rows);
  for (i = 0; i < n * n; i++)
    sum += (uint64_t) c[i];
  return sum;
}

/* ---- hash table ---- */

typedef struct { uint64_t key, value; } slot;

__attribute__ ((noinline)) static void
hash_build (slot * t, uint64_t slots, uint64_t seed)
{
  uint64_t i, n = slots / 2; /* half full */
  memset (t, 0, slots * sizeof (slot));
  rng_state = seed;
  for (i = 0; i < n; i++)
  {
    uint64_t k = next_random () | 1, h = (k * 0x9E3779B97F4A7C15ULL >> 20) % slots;
    while (t[h].key != 0)
      h = h + 1 == slots ? 0 : h + 1;
    t[h].key = k;
    t[h].value = i;
  }
}

__attribute__ ((noinline)) static uint64_t
hash_lookup (const slot * t, uint64_t slots, long steps)
{
  uint64_t found = 0;
  while (steps-- > 0)
  {
    uint64_t k = next_random () | 1, h = (k * 0x9E3779B97F4A7C15ULL >> 20) % slots;
    while (t[h].key != 0 && t[h].key != k)
      h = h + 1 == slots ? 0 : h + 1;
    found += t[h].value;
  }
  return found;
}

static uint64_t
run_hash (uint64_t slots)
{
  slot * t = malloc (slots * sizeof (slot));
  long steps = WORK / 4;
  hash_build (t, slots, 88172645463325252ULL);
  if ((uint64_t) steps < 2 * slots)
    steps = 2 * slots;
  return hash_lookup (t, slots, steps);
}

/* ---- binary search tree ---- */

typedef struct node { uint64_t key; struct node * left, * right; uint64_t value; } node;

__attribute__ ((noinline)) static node *
tree_build (node * pool, long n)
{
  node * root = NULL;
  long i;
  rng_state = 2463534242ULL;
  for (i = 0; i < n; i++)
  {
    node * x = &pool[i], ** at = &root;
    x->key = next_random ();
    x->left = x->right = NULL;
    x->value = (uint64_t) i;
    while (*at != NULL)
      at = x->key < (*at)->key ? &(*at)->left : &(*at)->right;
    *at = x;
  }
  return root;
}

__attribute__ ((noinline)) static uint64_t
tree_lookup (const node * root, const node * pool, long n, long steps)
{
  uint64_t found = 0;
  while (steps-- > 0)
  {
    uint64_t k = pool[next_random () % (uint64_t) n].key; /* a key that is in the tree */
    const node * x = root;
    while (x != NULL && x->key != k)
      x = k < x->key ? x->left : x->right;
    found += x->value;
  }
  return found;
}

static uint64_t
run_tree (long n)
{
  node * pool = malloc (n * sizeof (node));
  node * root = tree_build (pool, n);
  long steps = WORK / 30;
  if (steps < 2 * n)
    steps = 2 * n;
  return tree_lookup (root, pool, n, steps);
}

/* ---- stencil ---- */

__attribute__ ((noinline)) static void
stencil_init (double * a, double * b, long n)
{
  long i;
  for (i = 0; i < n * n; i++)
    a[i] = b[i] = (double) (i % 11);
}

__attribute__ ((noinline)) static void
stencil_sweeps (double * a, double * b, long n, long sweeps)
{
  long s, i, j;
  for (s = 0; s < sweeps; s++)
  {
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        b[i * n + j] = 0.2 * (a[i * n + j] + a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1]
                              + a[i * n + j + 1]);
    double * t = a;
    a = b;
    b = t;
  }
}

static uint64_t
run_stencil (long n)
{
  double * a = malloc (n * n * sizeof (double)), * b = malloc (n * n * sizeof (double));
  long sweeps = WORK / (n * n);
  if (sweeps < 4)
    sweeps = 4;
  stencil_init (a, b, n);
  stencil_sweeps (a, b, n, sweeps);
  return (uint64_t) a[n + 1] + (uint64_t) b[n + 1];
}

int
main (int argc, char ** argv)
{
  long x = argc > 2 ? atol (argv[2]) : 0;
  uint64_t sum;
  if (argc > 3)
    WORK = atol (argv[3]);
  if (argc < 3 || x < 8 || WORK < 1)
  {
    fprintf (stderr, "usage: locality_kernels matrix|hash|tree|stencil SIZE [WORK]\n");
    return 2;
  }
  if (strcmp (argv[1], "matrix") == 0)
    sum = run_matrix (x);
  else if (strcmp (argv[1], "hash") == 0)
    sum = run_hash ((uint64_t) x);
  else if (strcmp (argv[1], "tree") == 0)
    sum = run_tree (x);
  else if (strcmp (argv[1], "stencil") == 0)
    sum = run_stencil (x);
  else
  {
    fprintf (stderr, "locality_kernels: unknown kernel %s\n", argv[1]);
    return 2;
  }
  printf ("%llx\n", (unsigned long long) (sum & 0xffff));
  return 0;
}
