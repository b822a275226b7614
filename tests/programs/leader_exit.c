/* A process whose main thread has left (pthread_exit) while a worker computes: its main thread
 * is a zombie (state Z) and the process runs. Prints "ready PID", then spins until killed. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *spin(void *a) { volatile unsigned long x = 0; for (;;) for (int i = 0; i < 1000000; i++) x += i; return a; }
int main(void) { pthread_t t; printf("ready %d\n", getpid()); fflush(stdout); pthread_create(&t, 0, spin, 0); pthread_exit(0); }
