/* Known work for the exactness test: three functions whose instruction counts follow from argv[1],
 * in different shares (1 : 2 : 4 iterations). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long mix_small (long n)
{
  long s = 0;
  for (long i = 0; i < n; i++)
    s += (i * i) ^ (s >> 3);
  return s;
}

__attribute__((noinline)) long mix_branchy (long n)
{
  long s = 1;
  for (long i = 0; i < n; i++)
  {
    s = s * 31 + (i & 7);
    if (s & 1)
      s ^= i;
    else
      s += i >> 2;
  }
  return s;
}

__attribute__((noinline)) long mix_calls_leaf (long x)
{
  return (x << 3) - x + 11;
}

__attribute__((noinline)) long mix_calls (long n)
{
  long s = 0;
  for (long i = 0; i < n; i++)
    s = mix_calls_leaf (s ^ i);
  return s;
}

int main (int argc, char ** argv)
{
  long n = argc > 1 ? atol (argv[1]) : 1000000;
  printf ("%ld\n", mix_small (n) + mix_branchy (2 * n) + mix_calls (4 * n));
  return 0;
}
