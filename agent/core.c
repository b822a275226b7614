/*
 * phasescope hot path, compiled inside the target by Frida's CModule (TinyCC).
 *
 * Stalker calls `transform` once per basic block and per thread (each followed thread has its own
 * code cache; `user_data` is that thread's PsThread). For every block we emit, at one point where
 * the status flags are dead:
 *
 *     add  qword [rip + counts[slot]], n        ; instructions of the block (patched once known)
 *     sub  qword [rip + budget[slot % K]], n    ; split instruction budget of the thread
 *     js   trampoline                           ; rare: one of the budgets ran out
 *
 * and, in the thread's cold area (RWX memory the agent allocates next to the counters):
 *
 *   trampoline:  lea rsp, [rsp - 128]           ; keep the red zone
 *                call slow_stub
 *                lea rsp, [rsp + 128]
 *                jmp back
 *
 * Where no such point exists before the block's end, the same code is wrapped in a flags save
 * (push rax; lahf; seto al ... add al, 0x7f; sahf; pop rax). The slow stub saves every register,
 * the flags and the FPU/SSE state, and calls `ps_slow`, which rebalances the K budgets or, once
 * their sum is spent, cuts the interval: it harvests the non-zero slots into the output buffer as
 * one record (see host/phasescope/sources/wire.py) and zeroes them. Blocks ending at the same branch PC
 * count in slots of their own, the later ones aliases of the first (a per-thread PC -> slot chain
 * tells, once the block is complete), which the harvest adds together, so a record holds each
 * branch PC once. Nothing on the hot path
 * enters JavaScript or takes a Stalker callout. Counters or cold code out of rel32 reach (unusual
 * address space layouts) get slower but equivalent forms (absolute addressing, inline stub call).
 *
 * Elsewhere than x86-64 (or on request), `transform_portable` counts with a C callout per block
 * instead: same budgets, slots and records, about 90x slower than native.
 *
 * Output: two buffers, filled by target threads under a spinlock and swapped by `ps_drain`,
 * which the JS agent calls from a timer. A full buffer drops the record and counts the drop.
 */

#include <gum/gumstalker.h>
#include <gum/guminterceptor.h>
#include <gum/gumspinlock.h>
#include <capstone.h>

#define PS_K 8                     /* budgets per thread (power of two) */
#define PS_TAIL (PS_K * 64)        /* below this many instructions left: exact, per-block checks */
#define PS_HASH_SIZE 4096          /* PC -> slot chains per thread: one slot per branch PC */
#define PS_COLD_PER_BLOCK 26       /* cold bytes per block: its trampoline (see ps_emit_counter) */
#define PS_RECORDER_BYTES 96       /* cold bytes per memory slot: its recorder, 16-aligned */

struct ps_timespec { gint64 tv_sec; gint64 tv_nsec; };
struct ps_timeval { gint64 tv_sec; gint64 tv_usec; };
struct ps_rusage
{
  struct ps_timeval ru_utime;
  struct ps_timeval ru_stime;
  gint64 ru_maxrss, ru_ixrss, ru_idrss, ru_isrss, ru_minflt, ru_majflt, ru_nswap, ru_inblock,
      ru_oublock, ru_msgsnd, ru_msgrcv, ru_nsignals, ru_nvcsw, ru_nivcsw;
};

extern int clock_gettime (int clk, struct ps_timespec * ts);
extern int getrusage (int who, struct ps_rusage * usage);
extern int gettid (void);
extern int mprotect (gpointer addr, gsize len, int prot);
extern int munmap (gpointer addr, gsize len);
extern gpointer mmap (gpointer addr, gsize len, int prot, int flags, int fd, gint64 offset);
extern int getpid (void);
extern long syscall (long number, ...);

typedef struct _PsThread PsThread;
typedef struct _PsGlobal PsGlobal;

/* A map of code addresses (agent/jit.c): mask + 1 pairs (address, 0: free; value), hashed by the
 * address's 64-byte line, linear probing. */
typedef struct { guint64 * table; guint64 mask; guint64 n; } PsJitMap;
#define PS_JK_FIELDS 9  /* the HotSpot fields jit_keys.c reads */

struct _PsThread
{
  gint64 budget[PS_K];       /* offset 0: written by the hot path */
  gint64 tail;               /* budget left outside budget[] while in tail mode */
  guint64 * counts;          /* per-slot instruction counters (hot) */
  guint64 * pcs;             /* per-slot branch PC (address of the block's last instruction) */
  guint32 * next;            /* per-slot chain link (slot + 1, 0 ends) of the PC -> slot hash */
  guint32 * heads;           /* PS_HASH_SIZE chain heads */
  guint32 * aliases;         /* slots whose branch PC an earlier slot has (see ps_settle_slot) */
  guint64 n_aliases;
  guint64 n_slots;
  guint64 compiled;          /* blocks Stalker compiled for the thread (any transform; ps_thread_blocks) */
  guint64 capacity;          /* slots; the last one collects blocks beyond capacity (pc 0) */
  guint64 tid;
  guint64 seq;
  guint64 start_ns;
  guint64 os_start[PS_REC_OS_FIELDS];       /* cpu_ns, minflt, majflt, nvcsw, nivcsw at interval start */
  guint8 * stub;             /* this thread's slow stub (cold area, or inside its code cache) */
  guint8 * cold_cur;         /* cold area: the stub, then one trampoline per block */
  guint8 * cold_end;
  guint64 carry;             /* instructions of a block cut before its counter was placed */
  guint64 closed;
  guint64 fresh;             /* no block ran yet: the first slow path starts the first interval */
  guint64 limit;             /* intervals to cut, then count on unshipped (an exact burst); 0: no limit */
  /* register loops (see "self-looping blocks" below) */
  guint64 loop_slot;         /* slot + 1 of the register loop the thread last entered; 0: none */
  guint64 release;           /* set by the agent: leave register loops (the thread is being unfollowed) */
  guint64 released;
  guint8 * loops;            /* chain of the thread's register loops, in its cold area */
  /* --locality: windows of sampled memory addresses (see "memory access windows" below) */
  guint64 * win_ptr;         /* next free entry of the open window (written by the recorders) */
  gint64 win_left;           /* accesses left in the window: a recorder calls the stub at 0 */
  guint64 win_skipped;       /* fs/gs (and unencodable) accesses seen in the window */
  guint64 win_opened;        /* the interval (seq) the window opened in */
  guint64 * win_buf;         /* win_size entries */
  guint64 win_size;          /* N accesses per window; 0: locality off */
  guint64 win_every;         /* one window every M intervals */
  guint64 win_open;          /* the thread's memory slots jump to their recorders */
  guint64 win_ship;          /* 0 once the thread was closed: a full window is recycled, not shipped */
  guint64 new_from;          /* slots from here on were created in the last two intervals (new code) */
  guint64 new_mid;           /* n_slots when the current interval started */
  guint64 new_code;          /* the interval just cut ran mostly new code: open a window (a new phase) */
  guint64 win_want;          /* the host asked for a window (a phase it saw with none yet) */
  guint8 ** mslot;           /* code address of each memory slot (5 bytes before a memory access) */
  guint32 * mrel;            /* rel32 of the jmp from that slot to its recorder */
  guint64 n_mslots;
  guint64 cap_mslots;
  guint8 * rec_cur;          /* recorder area (cold, RWX) */
  guint8 * rec_end;
  /* faults in followed code (see "faults in followed code" below) */
  guint64 * fmap;            /* fmap_n entries (faults.c): code start, code end, real start, loop tag */
  guint64 fmap_n;
  guint64 fmap_cap;
  guint64 ret_site;          /* where Stalker's code for a plain `ret` starts in this thread's code */
  /* OF across Stalker's inline cache (see agent/x86_flags.c) */
  guint64 of_tag;            /* real target of the thread's last ret or indirect jmp/call, until read */
  guint64 of_val;            /* OF before that transfer (low byte) */
};

struct _PsGlobal
{
  GumSpinlock lock;
  guint64 interval;
  guint8 * buf[2];
  guint64 len[2];
  guint64 buf_size;
  guint64 page;
  guint64 cur;
  guint64 dropped_records;
  guint64 dropped_instructions;
  guint64 win_hold;          /* --locality: the host is behind, open no scheduled window */
  guint64 rep_iterations;    /* count rep strings' iterations as valgrind does (ps_rep_count) */
  GumSpinlock near_lock;     /* the reserve Stalker's code is placed in (agent/near.c) */
  guint8 * near_base;
  guint8 * near_cur;
  guint8 * near_end;
  guint64 near_fill;
  GumSpinlock jit_lock;      /* a JIT's code (agent/jit.c, jit_keys.c): both maps */
  gboolean jit_on;           /* ps_jit_init was called: the process runs HotSpot */
  PsJitMap jit_index;        /* block start -> end */
  PsJitMap jit_keys;         /* branch PC -> its key (jit_keys.c; 0: to be read again) */
  guint64 jit_longest;
  guint64 * jit_lo;          /* where the JIT's code range is read */
  guint64 * jit_hi;
  guint64 jit_pid;           /* the traced process (a forked child runs no agent code) */
  guint64 jit_stub;          /* bytes of an inline cache stub */
  guint64 ** jit_structs;    /* HotSpot's VMStructs, read once (ps_jit_size_at) */
  gint64 jit_size_at;        /* offset of CodeBlob::_size (-1: not read yet, -2: not found) */
  gpointer jit_find;         /* CodeCache::find_blob_unsafe (void *): the CodeBlob holding an address */
  gpointer jit_nmethod_vt;   /* an nmethod's vtable pointer (NULL: JIT code keyed by address) */
  gint64 jit_at[PS_JK_FIELDS]; /* the offsets of the fields jit_keys.c reads, from VMStructs */
  guint64 jit_layout;        /* jit_at: 0 not read yet, 1 read, 2 some field not found (keyed by address) */
};

extern PsGlobal ps;

/* Defined in the parts after this one (in the order resources.PARTS gives). */
static void ps_cut (PsThread * t, guint32 flags, gboolean empty_too);
static guint64 ps_jit_key (guint64 pc);
static void ps_jit_forget (guint64 lo, guint64 hi);
static void ps_cold_init (PsThread * t);
static void ps_thread_locality (PsThread * t, guint8 * region, guint64 mslots, guint64 window, guint64 every);
static void ps_win_full (PsThread * t);
static void ps_win_reset (PsThread * t);
static void ps_win_open (PsThread * t);
static void ps_loops_release (PsThread * t);

/* The inline x86-64 fast path (x86_*.c); elsewhere only the portable path (portable.c) counts. */
#if defined (HAVE_I386) && GLIB_SIZEOF_VOID_P == 8
# define PS_X86_64 1
#endif
