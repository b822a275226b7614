/* Address space reserved as a JVM reserves it (issue 32): every gap from libc down to 2.25 GiB
 * below it filled with PROT_NONE (the JVM: its code cache, class space, malloc arenas) before a
 * thread starts, so that whatever is mapped for that thread later lands more than 2 GB from libc. The thread sorts and formats a
 * little (libc code); then the program prints its checksum and "far N": how many anonymous
 * executable mappings (a tracer's code: natively there are none) lie more than 2 GB from both
 * libc's code and the program's, and on stderr "near N": how many lie within reach of either. */
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

int main (void)
{
  static const unsigned long pieces[] = { 64UL << 20, 1UL << 20, 64UL << 10, 4UL << 10 };
  unsigned long sum = 0, libc = 0, far = 0, near = 0;
  char line[512];
  pthread_t t;
  FILE * maps = fopen ("/proc/self/maps", "r");
  while (fgets (line, sizeof line, maps) != NULL)
    if (strstr (line, "/libc.so") != NULL && strstr (line, " r-xp ") != NULL)
      libc = strtoul (line, NULL, 16);
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
  pthread_create (&t, NULL, work, &sum);
  pthread_join (t, NULL);
  rewind (maps);
  while (fgets (line, sizeof line, maps) != NULL)
  {
    char perms[8];
    unsigned long lo, hi, off, inode;
    char dev[16], path[256] = "";
    if (sscanf (line, "%lx-%lx %7s %lx %15s %lu %255s", &lo, &hi, perms, &off, dev, &inode, path) < 6)
      continue;
    if (perms[2] != 'x' || inode != 0 || path[0] != '\0')
      continue;
    if (beyond (lo, hi, libc) && beyond (lo, hi, (unsigned long) main))
      far++;
    else
      near++;
  }
  fclose (maps);
  printf ("sum %lu\nfar %lu\n", sum, far);
  fprintf (stderr, "near %lu\n", near);
  return 0;
}
