/*
 * Two phases whose data working sets are known by construction, for the --locality end-to-end
 * test: chase_small follows a random cyclic permutation of 64-byte nodes over 32 KiB, chase_big
 * one over 32 MiB, and stream_big reads one word per 64-byte block of a 64 MiB array (no reuse:
 * miss rate ~1 at every size). Each chase load depends on the previous one (pointer chasing), so every access is a
 * load of the next node's block: a fully associative LRU cache holds the small cycle from 32 KiB
 * up (miss rate ~0 at 256 KiB), and misses the big one at every size below 32 MiB (~1 at 1 MiB).
 *
 *     locality_phases [rounds] [steps per phase]      prints a checksum (address-independent)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct node { struct node * next; char pad[56]; } node;

static node *
make_cycle (size_t bytes, uint64_t seed)
{
  size_t n = bytes / sizeof (node), i;
  node * nodes = aligned_alloc (64, n * sizeof (node));
  size_t * order = malloc (n * sizeof (size_t));
  for (i = 0; i < n; i++)
    order[i] = i;
  for (i = n - 1; i > 0; i--)
  {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t j = (size_t) (seed >> 33) % (i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (i = 0; i < n; i++)
    nodes[order[i]].next = &nodes[order[(i + 1) % n]];
  free (order);
  return nodes;
}

__attribute__ ((noinline)) static node *
chase_small (node * p, long steps)
{
  while (steps-- > 0)
    p = p->next;
  return p;
}

/* Unrolled, so that the compiler does not fold it into chase_small (same code, one phase). */
__attribute__ ((noinline)) static node *
chase_big (node * p, long steps)
{
  for (; steps >= 2; steps -= 2)
    p = p->next->next;
  if (steps > 0)
    p = p->next;
  return p;
}

__attribute__ ((noinline)) static uint64_t
stream_big (const uint64_t * a, size_t words, long steps, size_t * at)
{
  uint64_t s = 0;
  size_t i = *at;
  while (steps-- > 0)
  {
    s += a[i] ^ i;
    i += 8;
    if (i >= words)
      i = 0;
  }
  *at = i;
  return s;
}

int
main (int argc, char ** argv)
{
  long rounds = argc > 1 ? atol (argv[1]) : 4;
  long steps = argc > 2 ? atol (argv[2]) : 4000000;
  node * small0 = make_cycle (32 << 10, 1), * big0 = make_cycle (32 << 20, 2);
  node * small = small0, * big = big0;
  size_t words = (64 << 20) / sizeof (uint64_t), at = 0;
  /* zeroed by the kernel, not by a loop here: an initialising loop (eight stores per block) would
   * be a phase of its own with a low miss rate, and the tracker may put it with stream_big's */
  uint64_t * stream = calloc (words, sizeof (uint64_t));
  uintptr_t sum = 0;
  long r;
  for (r = 0; r < rounds; r++)
  {
    small = chase_small (small, steps);
    big = chase_big (big, steps);
    sum += (uintptr_t) (small - small0) ^ (uintptr_t) (big - big0);
    sum += stream_big (stream, words, steps, &at);
  }
  printf ("%lx\n", (unsigned long) (sum & 0xffff));
  return 0;
}
