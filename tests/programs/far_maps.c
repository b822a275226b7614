/* Address space reserved as a JVM reserves it (issue 32): every gap from libc down to 2.25 GiB
 * below it filled with PROT_NONE (the JVM: its code cache, class space, malloc arenas) before a
 * thread starts, so that whatever is mapped for that thread later lands more than 2 GB from libc.
 * The thread sorts and formats a little (libc code); then the program prints its checksum and
 * "far N": how many anonymous executable mappings made since the thread started (a tracer's code
 * for it: natively there are none) lie more than 2 GB from both libc's code and the program's, and
 * on stderr "near N": how many of them lie within reach of either.
 *   far_maps [all] [wait]
 * all: the space above the libraries up to 2.25 GiB above libc is filled too (none is left within
 * reach of them); wait: once filled, it prints "ready" and waits for a line on stdin before the
 * thread starts (a tracer attaches meanwhile). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FAR (2UL << 30)
#define FILL (FAR + (FAR >> 3))

/* Whether [lo, hi) lies more than 2 GB from `code`. */
static int beyond (unsigned long lo, unsigned long hi, unsigned long code)
{
  return (lo < code && code - lo > FAR) || (hi > code && hi - code > FAR);
}

static int cmp (const void * a, const void * b)
{
  unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
  return (x > y) - (x < y);
}

static void * work (void * arg)
{
  static unsigned v[20000];
  char buf[64];
  unsigned long sum = 0;
  for (unsigned r = 0; r < 20; r++)
  {
    for (unsigned i = 0; i < 20000; i++)
      v[i] = (i * 2654435761u) ^ r;
    qsort (v, 20000, sizeof v[0], cmp);
    sum += v[r] + (unsigned long) snprintf (buf, sizeof buf, "%u %x %.3f", v[100], v[200], v[300] / 7.0);
  }
  *(unsigned long *) arg = sum;
  return NULL;
}

/* How many anonymous executable mappings lie more than 2 GB from both libc's code and the
 * program's; in `*near` how many lie within reach of either. With `only_new`, of those not seen
 * by the call before (the ones mapped for the thread). */
static unsigned long count_maps (unsigned long libc, int only_new, unsigned long * near)
{
  static unsigned long seen[4096];
  static unsigned n_seen;
  unsigned long far = 0;
  char line[512];
  FILE * maps = fopen ("/proc/self/maps", "r");
  *near = 0;
  while (fgets (line, sizeof line, maps) != NULL)
  {
    char perms[8];
    unsigned long lo, hi, off, inode;
    char dev[16], path[256] = "";
    unsigned i;
    if (sscanf (line, "%lx-%lx %7s %lx %15s %lu %255s", &lo, &hi, perms, &off, dev, &inode, path) < 6)
      continue;
    if (perms[2] != 'x' || inode != 0 || path[0] != '\0')
      continue;
    for (i = 0; only_new && i < n_seen && seen[i] != lo; i++)
      ;
    if (only_new && i < n_seen)
      continue;
    if (!only_new && n_seen < 4096)
      seen[n_seen++] = lo;
    if (beyond (lo, hi, libc) && beyond (lo, hi, (unsigned long) count_maps))
      far++;
    else
      ++*near;
  }
  fclose (maps);
  return far;
}

/* Fills what is free from just above the highest mapping below `from` up to `to` (exclusive) with
 * PROT_NONE, in 4 MiB pieces, each placed exactly or not at all. */
static void fill_above (unsigned long from, unsigned long to)
{
  for (unsigned long p = (from + (4UL << 20)) & ~((4UL << 20) - 1); p + (4UL << 20) <= to; p += 4UL << 20)
    mmap ((void *) p, 4UL << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
}

int main (int argc, char ** argv)
{
  static const unsigned long pieces[] = { 64UL << 20, 1UL << 20, 64UL << 10, 4UL << 10 };
  unsigned long sum = 0, libc = 0, far, near, stack = 0;
  int all = 0, wait = 0;
  char line[512];
  pthread_t t;
  FILE * maps = fopen ("/proc/self/maps", "r");
  for (int i = 1; i < argc; i++)
  {
    all |= strcmp (argv[i], "all") == 0;
    wait |= strcmp (argv[i], "wait") == 0;
  }
  while (fgets (line, sizeof line, maps) != NULL)
  {
    if (strstr (line, "/libc.so") != NULL && strstr (line, " r-xp ") != NULL)
      libc = strtoul (line, NULL, 16);
    if (strstr (line, "[stack]") != NULL)
      stack = strtoul (line, NULL, 16);
  }
  fclose (maps);
  /* mmap places top-down: the highest gap that fits, until the gaps near libc are full */
  for (int i = 0; i < 4; i++)
    for (;;)
    {
      char * p = mmap (NULL, pieces[i], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED)
        return 1;
      if ((unsigned long) p < libc - FILL)
      {
        munmap (p, pieces[i]);
        break;
      }
    }
  if (all) /* up to 2.25 GiB above libc, or 256 MiB below the stack (room for it to grow) */
    fill_above (libc, libc + FILL < stack - (256UL << 20) ? libc + FILL : stack - (256UL << 20));
  if (wait)
  {
    printf ("ready\n");
    fflush (stdout);
    if (fgets (line, sizeof line, stdin) == NULL)
      return 1;
  }
  count_maps (libc, 0, &near); /* the tracer's code so far (attached: made before anything ran) */
  pthread_create (&t, NULL, work, &sum);
  pthread_join (t, NULL);
  far = count_maps (libc, 1, &near);
  printf ("sum %lu\nfar %lu\n", sum, far);
  fprintf (stderr, "near %lu\n", near);
  return 0;
}
