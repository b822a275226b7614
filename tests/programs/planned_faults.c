/* A runtime's planned faults, made as HotSpot makes them (issue 32): its CPU probe toggles EFLAGS.AC
 * with popf (to tell a 486), and its SIGSEGV handler resumes only a fault at a PC it knows (the
 * probe's null read, a safepoint poll), at the continuation it chose, through the ucontext.
 * Prints what it saw, then counts to argv[1] (default 10^6) so that the tracer has work after it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

extern char fault_at[], resume_at[];
static volatile int handled;

static void on_segv (int sig, siginfo_t * si, void * ctx)
{
  ucontext_t * uc = ctx;
  (void) sig; (void) si;
  if (uc->uc_mcontext.gregs[REG_RIP] != (greg_t) fault_at)
    abort ();  /* not a fault this "runtime" planned */
  uc->uc_mcontext.gregs[REG_RIP] = (greg_t) resume_at;
  handled++;
}

__attribute__ ((noinline)) static long planned_fault (long x)
{
  long r;
  __asm__ volatile (
      "xor %%eax, %%eax\n\t"
      ".globl fault_at\nfault_at:\n\t"
      "movl (%%rax), %%eax\n\t"          /* reads address 0 */
      ".globl resume_at\nresume_at:\n\t"
      "lea 1(%1), %0\n\t"
      : "=r" (r) : "r" (x) : "rax", "memory");
  return r;
}

/* 1 if EFLAGS.AC could be set; AC is set across a conditional branch, then restored. */
__attribute__ ((noinline)) static int ac_probe (void)
{
  unsigned long before, after;
  __asm__ volatile (
      "sub $128, %%rsp\n\t"              /* keep clear of the red zone */
      "pushfq\n\t pop %%rax\n\t mov %%rax, %%rcx\n\t xor $0x40000, %%eax\n\t"
      "push %%rax\n\t popfq\n\t pushfq\n\t pop %%rax\n\t"
      "cmp %%rax, %%rcx\n\t jne 1f\n\t nop\n"
      "1:\n\t push %%rcx\n\t popfq\n\t"
      "add $128, %%rsp\n\t"
      "mov %%rax, %0\n\t mov %%rcx, %1\n\t"
      : "=r" (after), "=r" (before) : : "rax", "rcx", "cc", "memory");
  return ((after ^ before) & 0x40000) != 0;
}

int main (int argc, char ** argv)
{
  struct sigaction sa = { 0 };
  long i, n = argc > 1 ? atol (argv[1]) : 1000000, sum = 0;
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigaction (SIGSEGV, &sa, NULL);
  printf ("ac %d\n", ac_probe ());
  for (i = 0; i < 100; i++)
    sum = planned_fault (sum);
  printf ("handled %d sum %ld\n", handled, sum);
  for (i = 0, sum = 0; i < n; i++)
    sum += i % 7;
  printf ("counted %ld\n", sum);
  return 0;
}
