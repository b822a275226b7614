/* Planned faults inside self-looping blocks, as HotSpot's safepoint polls in compiled loops make them
 * (issue 32): each iteration reads a poll address from a table and touches it; an armed entry points
 * at a PROT_NONE page. The SIGSEGV handler resumes only a fault at a poll it knows, with the loop's
 * own rsp and r11 (which the loops never touch; exact mode counts such loops in a free register
 * below a lowered rsp), disarms the entry (and the poll's address register), then retries the poll
 * or skips it, in turn.
 * Two loops: loop_u's body has nothing rip-relative (exact mode unrolls it by two from its second
 * iteration), loop_r's has (a register loop from its first). Prints what it saw.
 * argv[1]: iterations of each loop (default 10^6); one in 997 armed (with argv[2], `unarmed`: none,
 * the same code run). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#define R11_MAGIC 0x5eed1005L

extern char poll_u[], after_u[], poll_r[], after_r[];
long loop_u (void ** table, long n);
long loop_r (long n);

void ** poll_table;
long loop_rsp;
static void * guard;
static int good;
static long n_polls, handled;

__asm__ (
    ".text\n"
    ".globl loop_u\nloop_u:\n\t"
    "push %r11\n\t mov $0x5eed1005, %r11\n\t mov %rsp, loop_rsp(%rip)\n\t"
    "xor %eax, %eax\n\t xor %ecx, %ecx\n\t mov %rsi, %rdx\n"
    "1:\n\t mov (%rdi,%rcx,8), %r8\n"
    ".globl poll_u\npoll_u:\n\t test %eax, (%r8)\n"
    ".globl after_u\nafter_u:\n\t add %rcx, %rax\n\t inc %rcx\n\t cmp %rdx, %rcx\n\t jne 1b\n\t"
    "pop %r11\n\t ret\n"
    ".globl loop_r\nloop_r:\n\t"
    "push %r11\n\t mov $0x5eed1005, %r11\n\t mov %rsp, loop_rsp(%rip)\n\t"
    "xor %eax, %eax\n\t xor %ecx, %ecx\n"
    "1:\n\t mov poll_table(%rip), %r9\n\t mov (%r9,%rcx,8), %r8\n"
    ".globl poll_r\npoll_r:\n\t test %eax, (%r8)\n"
    ".globl after_r\nafter_r:\n\t add %rcx, %rax\n\t inc %rcx\n\t cmp %rdi, %rcx\n\t jne 1b\n\t"
    "pop %r11\n\t ret\n");

static void on_segv (int sig, siginfo_t * si, void * ctx)
{
  greg_t * g = ((ucontext_t *) ctx)->uc_mcontext.gregs;
  greg_t pc = g[REG_RIP], i = g[REG_RCX];
  (void) sig; (void) si;
  if ((pc != (greg_t) poll_u && pc != (greg_t) poll_r) || g[REG_RSP] != loop_rsp || g[REG_R11] != R11_MAGIC ||
      i < 0 || i >= n_polls || poll_table[i] != guard)
    abort ();  /* not a fault this "runtime" planned, or not in the state it left */
  poll_table[i] = &good;
  g[REG_R8] = (greg_t) &good;  /* the poll's address, read before the entry was disarmed */
  if (handled++ & 1)
    g[REG_RIP] = (greg_t) (pc == (greg_t) poll_u ? after_u : after_r);
}

static void arm (void)
{
  long i;
  for (i = 0; i < n_polls; i++)
    poll_table[i] = i % 997 == 5 || i == 1 || i == 2 ? guard : &good;
}

int main (int argc, char ** argv)
{
  struct sigaction sa = { 0 };
  long su, sr;
  n_polls = argc > 1 ? atol (argv[1]) : 1000000;
  poll_table = malloc (n_polls * sizeof (void *));
  guard = mmap (NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (poll_table == NULL || guard == MAP_FAILED)
    return 1;
  if (argc > 2)
    guard = &good;
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigaction (SIGSEGV, &sa, NULL);
  arm ();
  su = loop_u (poll_table, n_polls);
  arm ();
  sr = loop_r (n_polls);
  printf ("handled %ld sum_u %ld sum_r %ld\n", handled, su, sr);
  return 0;
}
