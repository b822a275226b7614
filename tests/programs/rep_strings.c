/* Every kind of rep string instruction (movs, stos, lods, repe/repne cmps and scas; b/w/d/q), with
 * rcx = 0, with comparisons that stop early, at the last element and never, then glibc's memcpy and
 * memset on large buffers (rep movsb / rep stosb past glibc's thresholds). Each kind runs in a
 * function of its own, so a per-function count says which one is off. Prints a checksum.
 * valgrind 3.19 cannot run repne cmps (SIGILL): those run only when a third argument is given.
 *
 *     rep_strings [rounds] [memory_bytes] [repne-cmps]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096
static uint64_t src[N], dst[N];
static uint64_t sink;

/* rep movs/stos/lods of `n` elements */
#define UNCOND(name, insn)                                                                        \
  __attribute__ ((noinline)) static void name (long n)                                             \
  {                                                                                               \
    void * d = dst, * s = src;                                                                    \
    uint64_t a = 0x5a;                                                                            \
    __asm__ volatile (insn : "+D" (d), "+S" (s), "+c" (n), "+a" (a) : : "memory");                \
    sink += a;                                                                                    \
  }

UNCOND (movsb, "rep movsb") UNCOND (movsw, "rep movsw") UNCOND (movsl, "rep movsl") UNCOND (movsq, "rep movsq")
UNCOND (stosb, "rep stosb") UNCOND (stosw, "rep stosw") UNCOND (stosl, "rep stosl") UNCOND (stosq, "rep stosq")
UNCOND (lodsb, "rep lodsb") UNCOND (lodsw, "rep lodsw") UNCOND (lodsl, "rep lodsl") UNCOND (lodsq, "rep lodsq")

/* repe/repne cmps/scas of at most `n` elements; the flags they leave are used (setz) */
#define COND(name, insn)                                                                          \
  __attribute__ ((noinline)) static void name (long n, uint64_t a)                                 \
  {                                                                                               \
    void * d = dst, * s = src;                                                                    \
    uint8_t z;                                                                                    \
    __asm__ volatile (insn "\n\tsetz %4" : "+D" (d), "+S" (s), "+c" (n), "+a" (a), "=q" (z) : : "memory", "cc"); \
    sink += z + (uint64_t) n;                                                                     \
  }

COND (repe_cmpsb, "repe cmpsb") COND (repe_cmpsw, "repe cmpsw") COND (repe_cmpsl, "repe cmpsl") COND (repe_cmpsq, "repe cmpsq")
COND (repne_cmpsb, "repne cmpsb") COND (repne_cmpsw, "repne cmpsw") COND (repne_cmpsl, "repne cmpsl") COND (repne_cmpsq, "repne cmpsq")
COND (repe_scasb, "repe scasb") COND (repe_scasw, "repe scasw") COND (repe_scasl, "repe scasl") COND (repe_scasq, "repe scasq")
COND (repne_scasb, "repne scasb") COND (repne_scasw, "repne scasw") COND (repne_scasl, "repne scasl") COND (repne_scasq, "repne scasq")

__attribute__ ((noinline)) static void
libc_memcpy_memset (char * a, char * b, size_t bytes)
{
  memset (a, (int) (sink & 0xff), bytes);
  memcpy (b, a, bytes);
  sink += (unsigned char) b[bytes / 2];
}

static void (* const uncond[]) (long) = {
  movsb, movsw, movsl, movsq, stosb, stosw, stosl, stosq, lodsb, lodsw, lodsl, lodsq };
static void (* const cond[]) (long, uint64_t) = {
  repe_cmpsb, repe_cmpsw, repe_cmpsl, repe_cmpsq, repe_scasb, repe_scasw, repe_scasl, repe_scasq,
  repne_scasb, repne_scasw, repne_scasl, repne_scasq, repne_cmpsb, repne_cmpsw, repne_cmpsl, repne_cmpsq };

int
main (int argc, char ** argv)
{
  static const long lengths[] = { 0, 1, 2, 7, 100, 4095 };
  int rounds = argc > 1 ? atoi (argv[1]) : 3;
  size_t bytes = argc > 2 ? strtoul (argv[2], NULL, 0) : 1 << 20;
  unsigned n_cond = argc > 3 ? 16 : 12;
  char * a = malloc (bytes + 1), * b = malloc (bytes + 1);
  unsigned r, k, i, j;

  if (a == NULL || b == NULL)
    return 1;
  for (r = 0; r != (unsigned) rounds; r++)
  {
    for (k = 0; k != sizeof (uncond) / sizeof (uncond[0]); k++)
      for (i = 0; i != sizeof (lengths) / sizeof (lengths[0]); i++)
        uncond[k] (lengths[i] / (1 + (k & 3)));
    /* equal arrays (repe runs to the end, repne stops at once); then one difference in the middle
     * and one at the last element, for every length; scas compares against 0 and against 0x5a */
    for (j = 0; j != 3; j++)
    {
      for (i = 0; i != N; i++)
        src[i] = dst[i] = 0;
      if (j != 0)
        for (i = 0; i != sizeof (lengths) / sizeof (lengths[0]); i++)
          ((unsigned char *) dst)[j == 1 ? lengths[i] / 2 : lengths[i] - 1 + (lengths[i] == 0)] = 0x5a;
      for (k = 0; k != n_cond; k++)
        for (i = 0; i != sizeof (lengths) / sizeof (lengths[0]); i++)
        {
          cond[k] (lengths[i] / (1 + (k & 3)), 0);
          cond[k] (lengths[i] / (1 + (k & 3)), 0x5a);
        }
    }
    libc_memcpy_memset (a, b, bytes);
  }
  printf ("%llu\n", (unsigned long long) sink);
  return 0;
}
