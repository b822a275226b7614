/* Its hot function in a code segment of its own, after .init/.plt/.text's (split_text.ld, with
 * -no-pie): the executable maps its code in two executable mappings of one file, as non-PIE node's
 * .init/.plt and .text are, so two PERF_RECORD_MMAPs describe one module. */
#include <stdio.h>

__attribute__((noinline, section(".splitcode"))) unsigned long spin(unsigned long n) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s = s * 31 + (i ^ (s >> 7));
    return s;
}

int main(void) {
    printf("%lu\n", spin(500000000UL) & 1);
    return 0;
}
