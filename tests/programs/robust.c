/* Targets for the robustness tests, one mode per argument. Every mode prints deterministic output
 * so a traced run can be compared with an untraced one.
 *
 *   robust exit N CODE      N units of work, then exit(CODE)
 *   robust segv N           N units of work, then a NULL store mid-interval (SIGSEGV)
 *   robust spin             "ready PID", then work until killed
 *   robust churn ROUNDS N K [wait]  ROUNDS rounds of N threads each doing K iterations, created and
 *                           joined; with wait, around the churn: "ready PID"/"done" and a line on stdin
 *   robust fork N           fork a child that works N units and execs /bin/echo; the parent works
 *                           N units, waits for it, then execs nothing and reports both
 *   robust exec N            N units of work, then exec /bin/echo
 *   robust signals          sleep, read() blocked on a pipe, SIGALRM/SIGUSR1 handlers,
 *                           setjmp/longjmp out of a handler, EINTR on read, sigsuspend
 *   robust ticker           "ready PID", then one numbered line every 20 ms of work, forever
 *   robust sent HOW         SIGSEGV that is sent, not a fault: HOW = ignore ("ready PID", SIGSEGV
 *                           ignored, work until SIGUSR1, "survived"), handle ("ready PID", work until
 *                           SIGSEGV, whose handler says "caught" and _exit(7)s), siginfo (as handle,
 *                           with an SA_SIGINFO handler: "caught" only for a kill(2) from its parent),
 *                           raise (work, then raise(SIGSEGV) at SIG_DFL: it dies; "survived" if not),
 *                           ignore-fault (as ignore, then a real SIGSEGV fault: the kernel kills it),
 *                           wait (every thread blocks SIGSEGV, one takes it with sigwaitinfo: "waited")
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static uint64_t unit(uint64_t x, long k) {
    for (long i = 0; i < k; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += (uint64_t)i; }
    return x;
}

static int *volatile nowhere;

static uint64_t work(long units) {
    uint64_t x = 88172645463325252ull;
    for (long u = 0; u < units; u++) x = unit(x, 100000);
    return x;
}

/* ---- churn ---- */
static long churn_k;
static void *churn_worker(void *arg) {
    uint64_t *out = arg;
    *out = unit(*out, churn_k);
    return NULL;
}

static int churn(long rounds, long n, long k) {
    churn_k = k;
    uint64_t total = 0;
    pthread_t *t = calloc(n, sizeof *t);
    uint64_t *v = calloc(n, sizeof *v);
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            v[i] = (uint64_t)(r * n + i + 1);
            if (pthread_create(&t[i], NULL, churn_worker, &v[i]) != 0) { perror("pthread_create"); return 1; }
        }
        for (long i = 0; i < n; i++) { pthread_join(t[i], NULL); total += v[i]; }
        printf("round %ld\n", r + 1);
    }
    printf("churn %ld threads total %llu\n", rounds * n, (unsigned long long)total);
    return 0;
}

/* ---- signals ---- */
static volatile sig_atomic_t alarms, usr1s;
static sigjmp_buf jump;
static void on_alarm(int s) { (void)s; alarms++; }
static void on_usr1(int s) { (void)s; usr1s++; }
static void on_usr2(int s) { (void)s; siglongjmp(jump, 7); }

static void *late_writer(void *arg) {
    int fd = *(int *)arg;
    struct timespec ts = { 0, 150 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    write(fd, "hello", 5);
    return NULL;
}

static int signals_mode(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;            /* no SA_RESTART: read() must fail with EINTR */
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);

    /* 1. sleep */
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    int rc = nanosleep(&ts, NULL);
    printf("sleep rc %d\n", rc);

    /* 2. read() blocked on a pipe until another thread writes */
    int p[2];
    pipe(p);
    pthread_t t;
    pthread_create(&t, NULL, late_writer, &p[1]);
    char buf[16] = { 0 };
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    pthread_join(t, NULL);
    printf("read %zd %s\n", n, buf);

    /* 3. read() interrupted by SIGALRM: EINTR, handler ran once */
    alarm(1);
    n = read(p[0], buf, sizeof buf - 1);
    printf("interrupted read %zd errno %s alarms %d\n", n, n < 0 && errno == EINTR ? "EINTR" : "other", (int)alarms);

    /* 4. signals to self, handled between work */
    uint64_t x = 1;
    for (int i = 0; i < 50; i++) { x = unit(x, 20000); raise(SIGUSR1); }
    printf("usr1 %d work %llu\n", (int)usr1s, (unsigned long long)x);

    /* 5. setjmp/longjmp, plain and out of a signal handler */
    volatile int hops = 0;
    jmp_buf plain;
    volatile int depth = 0;
    if (setjmp(plain) < 3) { depth++; hops++; if (depth < 3) longjmp(plain, depth); }
    int v = sigsetjmp(jump, 1);
    if (v == 0) { x = unit(x, 50000); raise(SIGUSR2); printf("not reached\n"); }
    printf("longjmp hops %d sigsetjmp %d work %llu\n", hops, v, (unsigned long long)x);

    /* 6. sigsuspend until a blocked signal is delivered. Sent to this thread (raise), not to the
     * process: a process-directed signal that this thread blocks may go to one of the agent's
     * threads, which block nothing (README, Limits). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    raise(SIGUSR1);
    sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    printf("sigsuspend usr1 %d\n", (int)usr1s);
    return 0;
}

/* ---- sent SIGSEGV ---- */
static volatile sig_atomic_t sent_usr1;
static void on_sent_usr1(int sig) { (void)sig; sent_usr1 = 1; }
static void on_segv(int sig) { (void)sig; write(1, "caught\n", 7); _exit(7); }
static void on_segv_info(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    if (si->si_code == SI_USER && si->si_pid == getppid()) write(1, "caught\n", 7); /* sent by the test */
    _exit(7);
}

static void *sent_waiter(void *set) {
    siginfo_t si;
    while (sigwaitinfo(set, &si) < 0) ;
    printf("waited %d\n", si.si_signo);
    exit(0);
}

static int sent_mode(const char *how) {
    if (!strcmp(how, "wait") || !strcmp(how, "wait-join")) {  /* wait-join: main sleeps in pthread_join */
        static sigset_t set;
        pthread_t t;
        sigemptyset(&set);
        sigaddset(&set, SIGSEGV);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        pthread_create(&t, NULL, sent_waiter, &set);
        printf("ready %d\n", getpid());
        fflush(stdout);
        if (how[4]) pthread_join(t, NULL);
        for (;;) work(1);
    }
    if (!strcmp(how, "raise")) {
        printf("work %llu\n", (unsigned long long)work(5));
        raise(SIGSEGV);
    } else {
        if (!strcmp(how, "siginfo")) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_segv_info;
            sa.sa_flags = SA_SIGINFO;
            sigaction(SIGSEGV, &sa, NULL);
        } else {
            signal(SIGSEGV, !strncmp(how, "ignore", 6) ? SIG_IGN : on_segv);
        }
        signal(SIGUSR1, on_sent_usr1);
        printf("ready %d\n", getpid());
        fflush(stdout);
        while (!sent_usr1) work(1);
        if (!strcmp(how, "ignore-fault")) *(volatile int *)8 = 1;
    }
    printf("survived\n");
    return 0;
}

/* ---- fork ---- */
static int fork_mode(long units) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child work %llu\n", (unsigned long long)work(units));
        fflush(stdout);
        execl("/bin/echo", "echo", "child exec ok", (char *)NULL);
        _exit(127);
    }
    uint64_t x = work(units);
    int status = 0;
    waitpid(child, &status, 0);
    printf("parent work %llu child status %d\n", (unsigned long long)x, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "exit") && argc > 3) {
        printf("work %llu\n", (unsigned long long)work(atol(argv[2])));
        exit(atoi(argv[3]));
    }
    if (!strcmp(mode, "segv") && argc > 2) {
        printf("work %llu\n", (unsigned long long)work(atol(argv[2])));
        volatile uint64_t x = unit(1, 12345); /* some instructions into the next interval */
        int *p = nowhere; /* NULL, but the compiler cannot know */
        *p = (int)x;
        return 0;
    }
    if (!strcmp(mode, "sent") && argc > 2)
        return sent_mode(argv[2]);
    if (!strcmp(mode, "spin")) {
        printf("ready %d\n", getpid());
        for (;;) work(10);
    }
    if (!strcmp(mode, "churn") && argc > 4) {
        /* with a 5th argument "wait": "ready PID", wait for a line on stdin before the churn, print
         * "done" after it and wait for another line before exiting (a tracer attaches meanwhile) */
        int wait = argc > 5 && !strcmp(argv[5], "wait");
        char line[16];
        if (wait) { printf("ready %d\n", getpid()); if (!fgets(line, sizeof line, stdin)) return 1; }
        int rc = churn(atol(argv[2]), atol(argv[3]), atol(argv[4]));
        if (wait) { printf("done\n"); if (!fgets(line, sizeof line, stdin)) return 1; }
        return rc;
    }
    if (!strcmp(mode, "fork") && argc > 2)
        return fork_mode(atol(argv[2]));
    if (!strcmp(mode, "exec") && argc > 2) {
        printf("work %llu\n", (unsigned long long)work(atol(argv[2])));
        execl("/bin/echo", "echo", "exec ok", (char *)NULL);
        return 127;
    }
    if (!strcmp(mode, "signals"))
        return signals_mode();
    if (!strcmp(mode, "ticker")) {
        printf("ready %d\n", getpid());
        uint64_t x = 1;
        for (long i = 0;; i++) {
            struct timespec start, now;
            clock_gettime(CLOCK_MONOTONIC, &start);
            do { x = unit(x, 20000); clock_gettime(CLOCK_MONOTONIC, &now); }
            while ((now.tv_sec - start.tv_sec) * 1000000000L + now.tv_nsec - start.tv_nsec < 20000000L);
            printf("tick %ld\n", i);
        }
    }
    fprintf(stderr, "usage: robust exit N CODE | segv N | spin | churn ROUNDS N K | fork N | signals | ticker | sent HOW\n");
    return 2;
}
