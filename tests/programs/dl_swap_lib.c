/* The library dl_swap.c loads: built twice, with -DWHICH=1 and -DWHICH=2, two different loops at
 * the same offset of two files. */
unsigned long work(unsigned long n) {
    volatile unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) {
#if WHICH == 1
        x = x * 3 + i;
#else
        x ^= (x << 7) + (i >> 3) + 11;
        x += i * i;
#endif
    }
    return x;
}
