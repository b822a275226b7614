/* The status flags carried across control transfers, as hand-written code (runtimes' stubs) may
 * carry them: set by one side, read by the other, across a `ret`, an indirect `jmp` and `call`
 * through a register and through memory (rip- and rsp-based), a direct `call` and a direct `jmp`
 * (issue 32). Each of OF, SF, ZF, CF and PF is set and cleared in turn
 * (pushf/popf) and read back with pushf. Prints "<transfer> wrong N" per transfer: 0 natively.
 * argv[1]: rounds (default 200000); argv[2]: seconds to sleep first (for a tracer to attach). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* set_flags: popf from rdi, then ret (flags live across the ret). */
__asm__ (".text\nset_flags:\n\tpush %rdi\n\tpopf\n\tret\n"
         /* read_flags: pushf into rax at entry (flags live into the callee), then ret. */
         "read_flags:\n\tpushf\n\tpop %rax\n\tret\n");
void * jmp_target;  /* across_jmp_mem's target */

#define MASK 0x8c5UL  /* OF SF ZF PF CF */

/* unsigned long NAME (unsigned long f): runs CODE with f in %1, the flags read back in %0. */
#define TRANSFER(name, code, ...)                                                                  \
  static unsigned long name (unsigned long f)                                                      \
  {                                                                                                \
    unsigned long got;                                                                             \
    __asm__ volatile (code : "=r" (got) : "r" (f) : "cc", "memory", __VA_ARGS__);                  \
    return got & MASK;                                                                             \
  }

TRANSFER (across_ret, "mov %1, %%rdi\n\tcall set_flags\n\tpushf\n\tpop %0", "rdi")
TRANSFER (across_jmp, "lea 1f(%%rip), %%rdx\n\tpush %1\n\tpopf\n\tjmp *%%rdx\n1:\n\tpushf\n\tpop %0", "rdx")
TRANSFER (into_indirect_call, "lea read_flags(%%rip), %%rdx\n\tpush %1\n\tpopf\n\tcall *%%rdx\n\tmov %%rax, %0",
          "rax", "rdx")
TRANSFER (into_call, "push %1\n\tpopf\n\tcall read_flags\n\tmov %%rax, %0", "rax")
TRANSFER (across_jmp_mem, "lea 1f(%%rip), %%rdx\n\tmov %%rdx, jmp_target(%%rip)\n\tpush %1\n\tpopf\n\t"
          "jmp *jmp_target(%%rip)\n1:\n\tpushf\n\tpop %0", "rdx")
TRANSFER (into_call_mem, "lea read_flags(%%rip), %%rdx\n\tpush %%rdx\n\tpush %1\n\tpopf\n\tcall *(%%rsp)\n\t"
          "mov %%rax, %0\n\tpop %%rdx", "rax", "rdx")
TRANSFER (across_direct_jmp, "push %1\n\tpopf\n\tjmp 1f\n1:\n\tpushf\n\tpop %0", "rdx")

int main (int argc, char ** argv)
{
  static const unsigned long bits[] = { 0x800, 0x80, 0x40, 0x4, 0x1 };
  long n = argc > 1 ? atol (argv[1]) : 200000, wrong[7] = { 0 };
  if (argc > 2)
    sleep ((unsigned) atoi (argv[2]));
  for (long i = 0; i < n; i++)
  {
    unsigned long f = 0x202 | (i & 1 ? bits[i / 2 % 5] : 0);  /* IF and the reserved bit */
    unsigned long want = f & MASK;
    wrong[0] += across_ret (f) != want;
    wrong[1] += across_jmp (f) != want;
    wrong[2] += into_indirect_call (f) != want;
    wrong[3] += into_call (f) != want;
    wrong[4] += across_direct_jmp (f) != want;
    wrong[5] += across_jmp_mem (f) != want;
    wrong[6] += into_call_mem (f) != want;
  }
  printf ("ret wrong %ld\nindirect jmp wrong %ld\nindirect call wrong %ld\ncall wrong %ld\n"
          "jmp wrong %ld\nmemory jmp wrong %ld\nmemory call wrong %ld\n",
          wrong[0], wrong[1], wrong[2], wrong[3], wrong[4], wrong[5], wrong[6]);
  return 0;
}
