/* Holds values in ymm0's upper half, ymm16 and k1 across a loop of 20,000 blocks, 2,000 times, and
 * prints how many rounds lost one: whether the agent's slow path (run every --interval instructions)
 * keeps the vector and opmask state a program keeps live across blocks (issue 32). AVX-512 hosts:
 *   cc -O1 -mavx512f -mavx512vl -mavx512dq -o vectors bench/jvm/vectors.c
 *   phasescope --no-dashboard --interval 100000 -o /dev/null -f ./vectors */
#include <stdio.h>
#include <string.h>
static char src[1 << 16], dst[1 << 16];
int main(void)
{
  unsigned long bad = 0, i;
  for (int round = 0; round < 2000; round++) {
    unsigned long up0 = 0, v16 = 0, k = 0;
    __asm__ volatile(
        "mov $0x1234567887654321, %%rax\n"
        "vpbroadcastq %%rax, %%ymm0\n"
        "vpbroadcastq %%rax, %%ymm16\n"
        "mov $0xa5, %%eax\n kmovq %%rax, %%k1\n"
        "mov $20000, %%ecx\n"
        "1: dec %%rcx\n jz 2f\n test $1, %%cl\n jnz 1b\n jmp 1b\n"
        "2: vextracti128 $1, %%ymm0, %%xmm1\n vmovq %%xmm1, %0\n"
        "vextracti32x4 $1, %%ymm16, %%xmm1\n vmovq %%xmm1, %1\n"
        "kmovq %%k1, %2\n"
        : "=r"(up0), "=r"(v16), "=r"(k) : : "rax", "rcx", "xmm0", "xmm1", "xmm16", "k1", "cc");
    if (up0 != 0x1234567887654321UL || v16 != 0x1234567887654321UL || k != 0xa5) bad++;
    memcpy(dst, src, sizeof dst);
  }
  printf("clobbered %lu of 2000\n", bad);
  return 0;
}
