/* Threads whose state a tracer may disturb when it starts following them at an arbitrary point
 * (issue 32): each kind checks a result known by construction, over and over, and counts what is
 * wrong. Threads come in generations (all kinds at once, for argv[2] ms, default 150), argv[1]
 * generations (default 20), so a tracer that follows new threads late, or attaches while they run,
 * meets each kind at many points. Prints one line per kind, "kind wrong N": N is 0 natively, and
 * stays 0 when a debugger stops threads (then epoll_wait may fail with EINTR, as signal(7) says:
 * counted apart, on stderr).
 *
 * Kinds: blocked syscalls that must restart, not fail (pipe read, futex wait with and without a
 * timeout, nanosleep, poll, epoll_wait, accept); a leaf function's red zone; xmm0-15, ymm uppers,
 * zmm16-31, k1-k7, MXCSR and the direction flag held across a spin; the signal mask and the
 * alternate signal stack; a checksum made of calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { K_PIPE_READ, K_FUTEX_WAIT, K_FUTEX_TIMED, K_NANOSLEEP, K_POLL, K_EPOLL, K_ACCEPT, K_RED_ZONE, K_VECTORS,
       K_FLAGS_MXCSR, K_SIGMASK, K_CHECKSUM, KINDS };
static const char * names[KINDS] = { "pipe_read", "futex_wait", "futex_timed", "nanosleep", "poll",
    "epoll_wait", "accept", "red_zone", "vectors", "flags_mxcsr", "sigmask", "checksum" };
static atomic_long wrong[KINDS];
static atomic_int stop;
static atomic_long epoll_eintr;

static double now_ms (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void bad (int kind) { atomic_fetch_add (&wrong[kind], 1); }

static long futex (atomic_int * w, int op, int val, const struct timespec * t)
{
  return syscall (SYS_futex, w, op, val, t, NULL, 0);
}

/* --- blocked syscalls ------------------------------------------------------------------------ */

static int pipe_fds[2];

static void * pipe_writer (void * arg)
{
  (void) arg;
  for (uint64_t seq = 0; !atomic_load (&stop); seq++) {
    uint64_t msg[2] = { seq, ~seq };
    if (write (pipe_fds[1], msg, sizeof msg) != sizeof msg)
      bad (K_PIPE_READ);
    usleep (1000 + seq % 3 * 1000);
  }
  close (pipe_fds[1]);
  return NULL;
}

static void * pipe_reader (void * arg)
{
  (void) arg;
  for (uint64_t want = 0;; want++) {
    uint64_t msg[2];
    ssize_t n = read (pipe_fds[0], msg, sizeof msg);
    if (n == 0)
      break;  /* the writer closed: the generation is over */
    if (n != sizeof msg || msg[0] != want || msg[1] != ~want)
      bad (K_PIPE_READ);  /* EINTR, a short read or a lost message */
    if (n < 0)
      want--;
  }
  close (pipe_fds[0]);
  return NULL;
}

static atomic_int ping, pong;

/* Two threads hand a token back and forth through futex waits with no timeout. */
static void * futex_side (void * arg)
{
  int first = arg != NULL;
  atomic_int * mine = first ? &ping : &pong, * theirs = first ? &pong : &ping;
  for (int round = 0; !atomic_load (&stop); round++) {
    if (first || round > 0) {
      atomic_store (theirs, 1);
      futex (theirs, FUTEX_WAKE_PRIVATE, 1, NULL);
    }
    while (atomic_load (mine) == 0 && !atomic_load (&stop)) {
      long r = futex (mine, FUTEX_WAIT_PRIVATE, 0, NULL);
      if (r != 0 && errno != EAGAIN)
        bad (K_FUTEX_WAIT);
    }
    atomic_store (mine, 0);
  }
  atomic_store (theirs, 1);
  futex (theirs, FUTEX_WAKE_PRIVATE, 1, NULL);
  return NULL;
}

/* A futex nobody wakes, waited on with a 7 ms timeout (restart_syscall after a stop). */
static void * futex_timed (void * arg)
{
  static atomic_int never;
  (void) arg;
  while (!atomic_load (&stop)) {
    double t0 = now_ms ();
    long r = futex (&never, FUTEX_WAIT_PRIVATE, 0, &(struct timespec) { 0, 7000000 });
    if (r != -1 || errno != ETIMEDOUT || now_ms () - t0 < 6.9)
      bad (K_FUTEX_TIMED);
  }
  return NULL;
}

static void * sleeper (void * arg)
{
  (void) arg;
  while (!atomic_load (&stop)) {
    double t0 = now_ms ();
    if (nanosleep (&(struct timespec) { 0, 3000000 }, NULL) != 0 || now_ms () - t0 < 2.9)
      bad (K_NANOSLEEP);
  }
  return NULL;
}

static void * poller (void * arg)
{
  int p[2];
  (void) arg;
  if (pipe (p) != 0)
    abort ();
  while (!atomic_load (&stop)) {
    struct pollfd f = { p[0], POLLIN, 0 };
    if (poll (&f, 1, 5) != 0)
      bad (K_POLL);
  }
  close (p[0]);
  close (p[1]);
  return NULL;
}

static void * epoller (void * arg)
{
  int p[2], ep = epoll_create1 (0);
  (void) arg;
  if (pipe (p) != 0 || ep < 0)
    abort ();
  struct epoll_event ev = { .events = EPOLLIN };
  epoll_ctl (ep, EPOLL_CTL_ADD, p[0], &ev);
  while (!atomic_load (&stop)) {
    struct epoll_event got;
    int n = epoll_wait (ep, &got, 1, 5);
    if (n == -1 && errno == EINTR)
      atomic_fetch_add (&epoll_eintr, 1);  /* after any stop, even natively (signal(7)): not wrong */
    else if (n != 0)
      bad (K_EPOLL);
  }
  close (ep);
  close (p[0]);
  close (p[1]);
  return NULL;
}

static int listener;

static void * acceptor (void * arg)
{
  (void) arg;
  for (;;) {
    int c = accept (listener, NULL, NULL);
    if (c < 0) {
      bad (K_ACCEPT);
      continue;
    }
    char b = 0;
    ssize_t n = read (c, &b, 1);
    close (c);
    if (n == 1 && b == 'q')
      break;  /* the generation is over */
    if (n != 1 || b != 'x')
      bad (K_ACCEPT);
  }
  return NULL;
}

static void connect_once (const struct sockaddr_un * a, char what)
{
  int s = socket (AF_UNIX, SOCK_STREAM, 0);
  if (connect (s, (const struct sockaddr *) a, sizeof *a) != 0 || write (s, &what, 1) != 1)
    bad (K_ACCEPT);
  close (s);
}

static void * connector (void * arg)
{
  const struct sockaddr_un * a = arg;
  while (!atomic_load (&stop)) {
    connect_once (a, 'x');
    usleep (3000);
  }
  connect_once (a, 'q');
  return NULL;
}

/* --- register state -------------------------------------------------------------------------- */

/* long red_zone_leaf (long seed, long spins): writes 16 words below rsp, spins, counts changed words. */
__asm__ (
    ".text\n"
    "red_zone_leaf:\n\t"
    "mov $1, %ecx\n"
    "1:\n\t"
    "lea (%rdi,%rcx), %rax\n\t"
    "mov %rcx, %rdx\n\t"
    "neg %rdx\n\t"
    "mov %rax, (%rsp,%rdx,8)\n\t"
    "inc %rcx\n\t"
    "cmp $16, %rcx\n\t"
    "jbe 1b\n"
    "2:\n\t"
    "dec %rsi\n\t"
    "jnz 2b\n\t"
    "xor %eax, %eax\n\t"
    "mov $1, %ecx\n"
    "3:\n\t"
    "lea (%rdi,%rcx), %r8\n\t"
    "mov %rcx, %rdx\n\t"
    "neg %rdx\n\t"
    "cmp %r8, (%rsp,%rdx,8)\n\t"
    "setne %dl\n\t"
    "movzbl %dl, %edx\n\t"
    "add %rdx, %rax\n\t"
    "inc %rcx\n\t"
    "cmp $16, %rcx\n\t"
    "jbe 3b\n\t"
    "ret\n");
long red_zone_leaf (long seed, long spins);

static void * red_zone (void * arg)
{
  (void) arg;
  for (long seed = 1; !atomic_load (&stop); seed += 17)
    if (red_zone_leaf (seed << 20, 200000) != 0)
      bad (K_RED_ZONE);
  return NULL;
}

/* Loads vector registers from `in`, spins through a few blocks, stores them to `out`. */
#define SPIN "mov %[n], %%rcx\n1:\n\tdec %%rcx\n\tjz 2f\n\ttest $1, %%cl\n\tjz 1b\n\tjmp 1b\n2:\n\t"

/* void NAME (in, out, n): xmm0-15 (or ymm0-15) loaded from in, held across SPIN, stored to out. */
#define ALL16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define HOLD16(name, reg, tail)                                                                    \
  static void name (const uint8_t * in, uint8_t * out, long n)                                     \
  {                                                                                                \
    __asm__ volatile (                                                                             \
        ALL16 (L_##reg) SPIN ALL16 (S_##reg) tail                                                  \
        :: [in] "r" (in), [out] "r" (out), [n] "r" (n)                                             \
        : "rcx", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",  \
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");                           \
  }
#define L_xmm(i) "movdqu " #i "*16(%[in]), %%xmm" #i "\n\t"
#define S_xmm(i) "movdqu %%xmm" #i ", " #i "*16(%[out])\n\t"
#define L_ymm(i) "vmovdqu " #i "*32(%[in]), %%ymm" #i "\n\t"
#define S_ymm(i) "vmovdqu %%ymm" #i ", " #i "*32(%[out])\n\t"

HOLD16 (hold_xmm, xmm, "")
__attribute__ ((target ("avx2"))) HOLD16 (hold_ymm, ymm, "vzeroupper\n\t")

/* zmm16-31 whole, and k1-k7 (their 64 bits taken from the first 7 words of `in`). */
__attribute__ ((target ("avx512f,avx512bw"))) static void hold_zmm (const uint8_t * in, uint8_t * out,
                                                                    long n)
{
  __asm__ volatile (
#define L(i) "vmovdqu64 " #i "*64-1024(%[in]), %%zmm" #i "\n\t"
#define S(i) "vmovdqu64 %%zmm" #i ", " #i "*64-1024(%[out])\n\t"
#define LK(i) "kmovq " #i "*8+1024(%[in]), %%k" #i "\n\t"
#define SK(i) "kmovq %%k" #i ", " #i "*8+1024(%[out])\n\t"
      L(16) L(17) L(18) L(19) L(20) L(21) L(22) L(23) L(24) L(25) L(26) L(27) L(28) L(29) L(30) L(31)
      LK(1) LK(2) LK(3) LK(4) LK(5) LK(6) LK(7)
      SPIN
      S(16) S(17) S(18) S(19) S(20) S(21) S(22) S(23) S(24) S(25) S(26) S(27) S(28) S(29) S(30) S(31)
      SK(1) SK(2) SK(3) SK(4) SK(5) SK(6) SK(7)
      "vzeroupper\n\t"
#undef L
#undef S
#undef LK
#undef SK
      :: [in] "r" (in), [out] "r" (out), [n] "r" (n)
      : "rcx", "memory", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
        "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3",
        "k4", "k5", "k6", "k7");
}

static void * vectors (void * arg)
{
  static _Thread_local uint8_t in[4096], out[4096];
  int avx2 = __builtin_cpu_supports ("avx2"), avx512 = __builtin_cpu_supports ("avx512bw");
  (void) arg;
  for (unsigned seed = 1; !atomic_load (&stop); seed++) {
    for (int i = 0; i < 4096; i++)
      in[i] = (uint8_t) (seed * 131 + i * 7), out[i] = 0;
    hold_xmm (in, out, 100000);
    if (memcmp (in, out, 256) != 0)
      bad (K_VECTORS);
    if (avx2) {
      hold_ymm (in, out, 100000);
      if (memcmp (in, out, 512) != 0)
        bad (K_VECTORS);
    }
    if (avx512) {
      hold_zmm (in + 1024, out + 1024, 100000);
      if (memcmp (in + 1024, out + 1024, 1024) != 0 || memcmp (in + 2056, out + 2056, 56) != 0)
        bad (K_VECTORS);
    }
  }
  return NULL;
}

/* DF set and MXCSR rounding toward zero held across a spin; the spin must see them unchanged. */
static void * flags_mxcsr (void * arg)
{
  (void) arg;
  while (!atomic_load (&stop)) {
    unsigned long flags;
    unsigned mx_in = 0x7f80, mx_out = 0, mx_default = 0x1f80;
    __asm__ volatile (
        "ldmxcsr %[in]\n\t"
        "std\n\t"
        SPIN
        "pushf\n\t"
        "pop %[flags]\n\t"
        "cld\n\t"
        "stmxcsr %[out]\n\t"
        "ldmxcsr %[def]\n\t"
        : [flags] "=&r" (flags), [out] "=m" (mx_out)
        : [in] "m" (mx_in), [def] "m" (mx_default), [n] "r" (200000L)
        : "rcx", "cc", "memory");
    if (!(flags & 0x400) || mx_out != mx_in)
      bad (K_FLAGS_MXCSR);
  }
  return NULL;
}

static void * sigmask_keeper (void * arg)
{
  static _Thread_local char alt[65536];
  sigset_t want, got;
  stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt }, now;
  (void) arg;
  sigemptyset (&want);
  sigaddset (&want, SIGUSR2);
  sigaddset (&want, SIGWINCH);
  sigaddset (&want, SIGRTMIN + 3);
  pthread_sigmask (SIG_SETMASK, &want, NULL);
  sigaltstack (&ss, NULL);
  while (!atomic_load (&stop)) {
    for (volatile int i = 0; i < 100000; i++)
      ;
    pthread_sigmask (SIG_SETMASK, NULL, &got);
    sigaltstack (NULL, &now);
    for (int s = 1; s < SIGRTMAX; s++)
      if (sigismember (&got, s) != sigismember (&want, s)) {
        bad (K_SIGMASK);
        break;
      }
    if (now.ss_sp != alt || now.ss_size != sizeof alt || now.ss_flags != 0)
      bad (K_SIGMASK);
  }
  return NULL;
}

/* --- work made of calls ---------------------------------------------------------------------- */

__attribute__ ((noinline)) static uint64_t mix (uint64_t h, uint64_t x)
{
  return (h ^ x) * 0x100000001b3ULL;
}

static uint64_t checksum_of (int n)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  double f = 0;
  for (int i = 0; i < n; i++) {
    h = mix (h, (uint64_t) i * 2654435761u);
    f += 1.0 / (i + 1);
  }
  return h ^ (uint64_t) (f * 1e9);
}

static uint64_t checksum_want;

static void * checksummer (void * arg)
{
  (void) arg;
  while (!atomic_load (&stop))
    if (checksum_of (50000) != checksum_want)
      bad (K_CHECKSUM);
  return NULL;
}

/* --- generations ----------------------------------------------------------------------------- */

int main (int argc, char ** argv)
{
  int generations = argc > 1 ? atoi (argv[1]) : 20, ms = argc > 2 ? atoi (argv[2]) : 150;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  checksum_want = checksum_of (50000);
  for (int g = 0; g < generations; g++) {
    void * (*fns[]) (void *) = { pipe_writer, pipe_reader, futex_side, futex_side, futex_timed, sleeper,
        poller, epoller, acceptor, connector, red_zone, vectors, flags_mxcsr, sigmask_keeper,
        checksummer };
    void * args[] = { NULL, NULL, &ping, NULL, NULL, NULL, NULL, NULL, NULL, &addr, NULL, NULL, NULL,
        NULL, NULL };
    enum { N = sizeof fns / sizeof fns[0] };
    pthread_t t[N];
    /* a name per generation: Frida's helper process, cloned without CLONE_FILES to stop a thread,
     * holds a copy of the last generation's listener for as long as it lives */
    snprintf (addr.sun_path + 1, sizeof addr.sun_path - 1, "follow_points.%d.%d", (int) getpid (), g);
    atomic_store (&stop, 0);
    atomic_store (&ping, 0);
    atomic_store (&pong, 0);
    listener = socket (AF_UNIX, SOCK_STREAM, 0);
    if (pipe (pipe_fds) != 0 || listener < 0
        || bind (listener, (struct sockaddr *) &addr, sizeof addr) != 0 || listen (listener, 8) != 0) {
      perror ("follow_points");
      return 1;
    }
    for (int i = 0; i < N; i++)
      pthread_create (&t[i], NULL, fns[i], args[i]);
    usleep (ms * 1000);
    atomic_store (&stop, 1);
    for (int i = 0; i < N; i++)
      pthread_join (t[i], NULL);
    close (listener);
  }
  for (int k = 0; k < KINDS; k++)
    printf ("%s wrong %ld\n", names[k], atomic_load (&wrong[k]));
  fprintf (stderr, "epoll_wait EINTR after a stop: %ld\n", atomic_load (&epoll_eintr));
  return 0;
}
