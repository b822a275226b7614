/* Self-looping blocks interrupted by signals whose handler runs the same kind of loop (exact mode
 * counts such loops in a register it saves on the stack): prints checksums that any change to a
 * register, the stack or the flags across the signals would alter. Usage: loop_signals [ROUNDS] */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile uint64_t in_handler;
static volatile unsigned long handled;

__attribute__ ((noinline)) static uint64_t spin (uint64_t x, uint64_t n)
{
  /* held in r13 across the loop, which does not use it: the register the loop is counted in */
  register uint64_t kept __asm__ ("r13") = x ^ 0x5a5a5a5a5a5a5a5aULL;
  __asm__ volatile ("" : "+r" (kept));
  for (uint64_t i = 0; i < n; i++)
  {
    x = x * 6364136223846793005ULL + i;
    /* every other scratch register is used, so r13 is the first one free */
    __asm__ volatile ("mov %%rax, %%r8; mov %%rax, %%r9; mov %%rax, %%r10; mov %%rax, %%r11;"
                      "mov %%rax, %%rcx; mov %%rax, %%rdx; mov %%rax, %%rsi; mov %%rax, %%rdi"
                      : "+a" (x) : : "r8", "r9", "r10", "r11", "rcx", "rdx", "rsi", "rdi");
  }
  __asm__ volatile ("" : "+r" (kept));
  return x ^ kept;
}

static void on_alarm (int sig)
{
  (void) sig;
  in_handler += spin (handled + 1, 1000);
  handled++;
}

int main (int argc, char ** argv)
{
  long rounds = argc > 1 ? atol (argv[1]) : 300;
  struct sigaction sa;
  struct itimerval every = { { 0, 500 }, { 0, 500 } };
  uint64_t x = 1, lanes[8] = { 0 };
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction (SIGPROF, &sa, NULL);
  setitimer (ITIMER_PROF, &every, NULL);
  for (long r = 0; r < rounds; r++)
  {
    x = spin (x, 200000);
    lanes[r & 7] ^= x;
  }
  every.it_value.tv_usec = every.it_interval.tv_usec = 0;
  setitimer (ITIMER_PROF, &every, NULL);
  for (int i = 0; i < 8; i++)
    printf ("%016llx\n", (unsigned long long) lanes[i]);
  printf ("handled %s\n", handled > 10 ? "many" : "few");
  return 0;
}
