/* A thread that never leaves one self-looping block (a conditional branch back to its own first
 * instruction, which exact mode counts in a register): prints "ready PID", then spins until killed. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

int main (void)
{
  uint64_t x = 1;
  printf ("ready %d\n", (int) getpid ());
  fflush (stdout);
  while (x != 0)
  {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    __asm__ volatile ("" : "+r" (x));
  }
  return (int) x;
}
