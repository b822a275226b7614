/* Four worker threads doing different, known work. Workers 0 and 1 start at once but wait for
 * "go" on stdin; after "go", workers 2 and 3 are created. So a tracer that attaches before "go"
 * sees two threads that existed at attach time and two created later. Each worker prints its
 * thread id and result. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int go;
static long n;

__attribute__((noinline)) long work0 (long k) { long s = 0; for (long i = 0; i < k; i++) s += i ^ (s >> 1); return s; }
__attribute__((noinline)) long work1 (long k) { long s = 7; for (long i = 0; i < k; i++) s = s * 33 + i; return s; }
__attribute__((noinline)) long work2 (long k) { long s = 1; for (long i = 0; i < k; i++) { if (s & 2) s += i; else s ^= i << 1; } return s; }
__attribute__((noinline)) long work3 (long k) { long s = 0; for (long i = 0; i < k; i++) s -= (i & 15) * 3; return s; }

static long (*const works[4]) (long) = { work0, work1, work2, work3 };

static void * worker (void * arg)
{
  long id = (long) arg;
  pthread_mutex_lock (&lock);
  while (!go)
    pthread_cond_wait (&cond, &lock);
  pthread_mutex_unlock (&lock);
  long r = works[id] (n * (id + 1));
  printf ("worker %ld tid %ld result %ld\n", id, (long) syscall (SYS_gettid), r);
  return NULL;
}

int main (int argc, char ** argv)
{
  pthread_t t[4];
  char line[16];
  n = argc > 1 ? atol (argv[1]) : 1000000;
  setvbuf (stdout, NULL, _IOLBF, 0);
  pthread_create (&t[0], NULL, worker, (void *) 0);
  pthread_create (&t[1], NULL, worker, (void *) 1);
  printf ("ready %d\n", getpid ());
  if (fgets (line, sizeof line, stdin) == NULL)
    return 1;
  pthread_mutex_lock (&lock);
  go = 1;
  pthread_cond_broadcast (&cond);
  pthread_mutex_unlock (&lock);
  pthread_create (&t[2], NULL, worker, (void *) 2);
  pthread_create (&t[3], NULL, worker, (void *) 3);
  for (int i = 0; i < 4; i++)
    pthread_join (t[i], NULL);
  return 0;
}
