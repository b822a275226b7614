/* Forks in the middle of known work: work_before in the parent, then fork; the child runs
 * work_child and exits; the parent runs work_after and reaps the child. Prints from both.
 * The child's loop runs 4n times: its 5-instruction loop is the shortest of the three, and at n =
 * 300M it must still give a 1000 Hz sampler several 100-sample windows on a loaded machine. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long work_before (long n) { long s = 0; for (long i = 0; i < n; i++) s += i ^ (s >> 2); return s; }
__attribute__((noinline)) long work_after (long n) { long s = 3; for (long i = 0; i < n; i++) s = s * 7 + (i & 5); return s; }
__attribute__((noinline)) long work_child (long n) { long s = 1; for (long i = 0; i < n; i++) s -= i >> 1; return s; }

int main (int argc, char ** argv)
{
  long n = argc > 1 ? atol (argv[1]) : 1000000;
  int status;
  setvbuf (stdout, NULL, _IONBF, 0);
  long a = work_before (n);
  pid_t child = fork ();
  if (child == 0)
  {
    printf ("child %ld\n", work_child (4 * n));
    _exit (0);
  }
  long b = work_after (n);
  waitpid (child, &status, 0);
  printf ("parent %ld %ld child status %d\n", a, b, status);
  return 0;
}
