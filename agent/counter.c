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
extern int mprotect (gpointer addr, gsize len, int prot);

typedef struct _PsThread PsThread;
typedef struct _PsGlobal PsGlobal;

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
  guint64 * fmap;            /* fmap_n triples: code start, code end, real start of a compiled block */
  guint64 fmap_n;
  guint64 fmap_cap;
  guint64 ret_site;          /* where Stalker's code for a plain `ret` starts in this thread's code */
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
};

extern PsGlobal ps;

static void ps_cut (PsThread * t, guint32 flags, gboolean empty_too);

/* ---- interval bookkeeping (slow path, on the owning thread) ---- */

static guint64
ps_now_ns (void)
{
  struct ps_timespec ts;
  clock_gettime (0 /* CLOCK_REALTIME */, &ts);
  return (guint64) ts.tv_sec * 1000000000ULL + (guint64) ts.tv_nsec;
}

static void
ps_os_sample (guint64 * out)
{
  struct ps_rusage ru;
  if (getrusage (1 /* RUSAGE_THREAD */, &ru) != 0)
  {
    out[0] = out[1] = out[2] = out[3] = out[4] = 0;
    return;
  }
  out[0] = (guint64) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
      (guint64) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
  out[1] = ru.ru_minflt;
  out[2] = ru.ru_majflt;
  out[3] = ru.ru_nvcsw;
  out[4] = ru.ru_nivcsw;
}

static void
ps_fill_budgets (PsThread * t, gint64 left)
{
  guint i;
  if (left < PS_TAIL)
  {
    /* Tail mode: every block's check fails, so the cut lands on the exact block. */
    for (i = 0; i != PS_K; i++)
      t->budget[i] = 0;
    t->tail = left;
    return;
  }
  for (i = 0; i != PS_K; i++)
    t->budget[i] = left / PS_K;
  t->budget[0] += left % PS_K;
  t->tail = 0;
}

static void ps_cold_init (PsThread * t);
static void ps_thread_locality (PsThread * t, guint8 * region, guint64 mslots, guint64 window, guint64 every);

/* Where the parts of one thread's region lie (byte offsets), each part page-aligned: the PsThread;
 * its arena (counters, PCs, chain links and aliases per slot, then the PS_HASH_SIZE chain heads); its cold
 * code (the slow stub, one trampoline per block); with --locality the recorders (cold too), the
 * memory slots' table (code address, rel32) and the window buffer. */
typedef struct { guint64 arena, cold, rec, table, win, end; } PsLayout;

static guint64
ps_pages (guint64 n)
{
  return (n + ps.page - 1) / ps.page * ps.page;
}

static PsLayout
ps_layout (guint64 slots, guint64 mslots, guint64 window)
{
  PsLayout l;
  l.arena = ps_pages (sizeof (PsThread));
  l.cold = l.arena + ps_pages (slots * (8 + 8 + 4 + 4) + PS_HASH_SIZE * 4);
  l.rec = l.cold + ps_pages (slots * PS_COLD_PER_BLOCK + ps.page);
  l.table = l.rec + ps_pages (mslots * PS_RECORDER_BYTES);
  l.win = l.table + ps_pages (mslots * (8 + 4));
  l.end = l.win + ps_pages (window * 8);
  return l;
}

/* Bytes of the region a thread needs (`ps_thread_init`): `slots` block counters; with --locality
 * (`mslots` > 0) that many memory slots and a window of `window` addresses. */
guint64
ps_region_size (guint64 slots, guint64 mslots, guint64 window)
{
  return ps_layout (slots, mslots, window).end;
}

/* Sets up a thread's counting state in `region` (page-aligned, ps_region_size bytes), the
 * transform's user data. Returns 0, or -1 when its cold code cannot be made executable. */
int
ps_thread_init (guint8 * region, guint64 tid, guint64 slots, guint64 mslots, guint64 window, guint64 every)
{
  PsThread * t = (PsThread *) region;
  PsLayout l = ps_layout (slots, mslots, window);
  guint64 * arena = (guint64 *) (region + l.arena);
  if (mprotect (region + l.cold, l.table - l.cold, 7 /* PROT_READ | PROT_WRITE | PROT_EXEC */) != 0)
    return -1;
  t->counts = arena;
  t->pcs = arena + slots;
  t->next = (guint32 *) (t->pcs + slots);
  t->aliases = t->next + slots;
  t->heads = t->aliases + slots;
  t->n_aliases = 0;
  t->capacity = slots;
  t->n_slots = 0;
  t->tid = tid;
  t->seq = 0;
  t->stub = NULL;
  t->cold_cur = region + l.cold;
  t->cold_end = region + l.rec;
  ps_cold_init (t);
  t->carry = 0;
  t->closed = 0;
  t->fresh = 1;
  t->limit = 0;
  t->start_ns = ps_now_ns ();
  t->fmap = NULL;
  t->fmap_n = 0;
  t->fmap_cap = 0;
  t->ret_site = 0;
  if (mslots != 0)
    ps_thread_locality (t, region, mslots, window, every);
  /* The first block takes the slow path, which samples the OS counters on the thread itself. */
  ps_fill_budgets (t, 0);
  return 0;
}

/* Exact bursts: the thread ships `n` complete intervals, then no more records (not even a
 * partial one on close). Call before the thread is followed. */
void
ps_thread_limit (PsThread * t, guint64 n)
{
  t->limit = n;
}

/* Whether the thread has cut all the intervals its limit allows. */
guint64
ps_thread_done (PsThread * t)
{
  return t->limit != 0 && t->seq >= t->limit;
}

static void ps_win_full (PsThread * t);
static void ps_win_reset (PsThread * t);
static void ps_win_open (PsThread * t);
static void ps_loops_release (PsThread * t);

/* Called on the thread itself, with all registers saved by the stub. */
static void
ps_slow (PsThread * t)
{
  gint64 left = t->tail;
  guint i;
  if (t->win_left <= 0 && t->win_size != 0)
  {
    /* A recorder reached the window's end. Closed window: a slot we no longer own jumped (a block
     * Stalker recompiled elsewhere); start over so the buffer is never overrun. */
    if (t->win_open)
      ps_win_full (t);
    else
      ps_win_reset (t);
  }
  if (t->release && !t->released)
    ps_loops_release (t);
  for (i = 0; i != PS_K; i++)
    left += t->budget[i];
  if (t->fresh)
  {
    t->fresh = 0;
    t->start_ns = ps_now_ns ();
    ps_os_sample (t->os_start);
    ps_fill_budgets (t, (gint64) ps.interval + left);
    if (t->win_size != 0)
      ps_win_open (t);
    return;
  }
  if (left > 0 || ps_thread_done (t))
  {
    /* Past its limit the thread counts on (its hot blocks tell the agent where it runs) but
     * never ships again, so no remainder passes for an interval. */
    ps_fill_budgets (t, left > 0 ? left : (gint64) ps.interval);
    return;
  }
  ps_cut (t, 0, FALSE);
  ps_fill_budgets (t, (gint64) ps.interval);
  if (t->win_size != 0 && ((t->seq % t->win_every == 0 && !ps.win_hold) ||
      ((t->new_code || t->win_want) && !t->win_open)))
  {
    t->win_want = 0;
    ps_win_open (t);
  }
}

static void
ps_put64 (guint8 * p, guint64 v)
{
  *(guint64 *) p = v;
}

/* Ships the thread's counters as one record and zeroes them. One pass under the lock writes the
 * pairs straight into the output buffer and counts them (a thread closed from another thread may
 * still be counting: what is written is what is counted); a record that does not fit is dropped.
 * An empty interval is shipped only when `empty_too` (a thread's close: its last record, partial,
 * says the stream of that thread ended even when it ended right after a cut). */
static void
ps_cut (PsThread * t, guint32 flags, gboolean empty_too)
{
  guint64 n = t->n_slots, i, c, pairs = 0, total = 0, os_now[PS_REC_OS_FIELDS], end_ns;
  guint64 * counts = t->counts, fresh = 0;
  guint8 * out, * p, * end;
  gboolean fits;

  end_ns = ps_now_ns ();
  ps_os_sample (os_now);
  for (i = 0; i != t->n_aliases; i++)
  {
    guint32 a = t->aliases[i];
    c = counts[a];
    if (c != 0)
    {
      counts[a] = 0;
      counts[t->next[a] - 1] += c;
    }
  }

  gum_spinlock_acquire (&ps.lock);
  out = ps.buf[ps.cur] + ps.len[ps.cur];
  end = ps.buf[ps.cur] + ps.buf_size;
  fits = out + PS_HEADER_SIZE <= end;
  p = out + PS_HEADER_SIZE;
  for (i = 0; i != n; i++)
  {
    c = counts[i];
    if (c == 0)
      continue;
    counts[i] = 0;
    pairs++;
    total += c;
    if (i >= t->new_from)
      fresh += c;
    if (fits && p + PS_PAIR_SIZE <= end)
    {
      ps_put64 (p, t->pcs[i]);
      ps_put64 (p + 8, c);
      p += PS_PAIR_SIZE;
    }
    else
    {
      fits = FALSE;
    }
  }
  /* --locality: a quarter of the interval in blocks first run in it or the interval before is a
   * phase starting; the next interval gets a window whatever the schedule, so that every phase,
   * however short, gets at least one (new code is new only once: this adds at most a few windows) */
  t->new_code = total != 0 && fresh * 4 >= total;
  t->new_from = t->new_mid;
  t->new_mid = n;
  if (total == 0 && !empty_too)
  {
    gum_spinlock_release (&ps.lock);
    t->start_ns = end_ns;
    return;
  }
  if (fits)
  {
    *(guint32 *) (out + PS_REC_KIND) = PS_REC_INTERVAL;
    *(guint32 *) (out + PS_REC_FLAGS) = flags;
    ps_put64 (out + PS_REC_THREAD, t->tid);
    ps_put64 (out + PS_REC_SEQ, t->seq);
    ps_put64 (out + PS_REC_INSTRUCTIONS, total);
    ps_put64 (out + PS_REC_START_NS, t->start_ns);
    ps_put64 (out + PS_REC_END_NS, end_ns);
    for (i = 0; i != PS_REC_OS_FIELDS; i++)
      ps_put64 (out + PS_REC_CPU_NS + 8 * i, os_now[i] - t->os_start[i]);
    ps_put64 (out + PS_REC_NPAIRS, pairs);
    ps.len[ps.cur] += PS_HEADER_SIZE + pairs * PS_PAIR_SIZE;
  }
  else
  {
    ps.dropped_records++;
    ps.dropped_instructions += total;
  }
  gum_spinlock_release (&ps.lock);

  t->seq++;
  t->start_ns = end_ns;
  for (i = 0; i != PS_REC_OS_FIELDS; i++)
    t->os_start[i] = os_now[i];
}

/* ---- memory access windows (--locality) ----
 *
 * Every instruction with an explicit memory operand gets a 5-byte slot before it: a NOP while the
 * thread has no window open, a `jmp rel32` to the instruction's recorder in the cold area while
 * one is. Opening and closing a window rewrites the thread's slots; only the thread itself does
 * that, in its slow path, so no other CPU executes the bytes being written. The recorder keeps
 * the red zone and the flags, computes the operand's address with lea (rip-relative: a constant),
 * appends it to the window and, on the N-th access, calls the slow stub, which closes the window
 * and ships it (one PS_REC_LOCALITY record, tagged with the interval it ends in: it precedes that
 * interval's record in the stream). A window opens with interval 0 and every win_every-th one,
 * and after an interval that ran mostly new code (see ps_cut), so a short phase gets one too.
 */

static void
ps_win_patch (PsThread * t, gboolean open)
{
  static const guint8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
  guint64 i;
  for (i = 0; i != t->n_mslots; i++)
  {
    guint8 * slot = t->mslot[i];
    if (open)
    {
      slot[0] = 0xe9;
      *(guint32 *) (slot + 1) = t->mrel[i];
    }
    else
    {
      slot[0] = nop5[0]; slot[1] = nop5[1]; slot[2] = nop5[2]; slot[3] = nop5[3]; slot[4] = nop5[4];
    }
  }
  t->win_open = open ? 1 : 0;
}

/* Ships the window's accesses so far as one record (dropped, and counted, when it does not fit). */
static void
ps_win_ship (PsThread * t)
{
  guint64 n = (guint64) (t->win_ptr - t->win_buf), size = PS_LOC_HEADER_SIZE + n * 8, i;
  guint8 * out = NULL;
  if (n == 0 && t->win_skipped == 0)
    return;
  gum_spinlock_acquire (&ps.lock);
  if (ps.len[ps.cur] + size <= ps.buf_size)
  {
    out = ps.buf[ps.cur] + ps.len[ps.cur];
    ps.len[ps.cur] += size;
    *(guint32 *) (out + PS_LOC_KIND) = PS_REC_LOCALITY;
    *(guint32 *) (out + PS_LOC_FLAGS) = 0;
    ps_put64 (out + PS_LOC_THREAD, t->tid);
    ps_put64 (out + PS_LOC_SEQ, t->seq);
    ps_put64 (out + PS_LOC_NACCESSES, n);
    ps_put64 (out + PS_LOC_SKIPPED, t->win_skipped);
    for (i = 0; i != n; i++)
      ps_put64 (out + PS_LOC_HEADER_SIZE + 8 * i, t->win_buf[i]);
  }
  else
  {
    ps.dropped_records++;
  }
  gum_spinlock_release (&ps.lock);
}

static void
ps_win_reset (PsThread * t)
{
  t->win_ptr = t->win_buf;
  t->win_left = (gint64) t->win_size;
  t->win_skipped = 0;
}

static void
ps_win_open (PsThread * t)
{
  if (t->win_open)
  {
    /* Still open M intervals later (a thread that rarely touches memory): ship what it has. */
    if (t->win_ship)
      ps_win_ship (t);
    ps_win_reset (t);
    return;
  }
  ps_win_reset (t);
  ps_win_patch (t, TRUE);
}

/* The window is full (on the thread, from its slow path). */
static void
ps_win_full (PsThread * t)
{
  if (t->win_ship)
    ps_win_ship (t);
  ps_win_reset (t);
  ps_win_patch (t, FALSE);
}

static void
ps_thread_locality (PsThread * t, guint8 * region, guint64 mslots, guint64 window, guint64 every)
{
  PsLayout l = ps_layout (t->capacity, mslots, window);
  t->win_buf = (guint64 *) (region + l.win);
  t->win_size = window;
  t->win_every = every == 0 ? 1 : every;
  t->win_open = 0;
  t->win_ship = 1;
  t->new_from = t->new_mid = t->new_code = t->win_want = 0;
  t->mslot = (guint8 **) (region + l.table);
  t->mrel = (guint32 *) (t->mslot + mslots);
  t->n_mslots = 0;
  t->cap_mslots = mslots;
  t->rec_cur = region + l.rec;
  t->rec_end = region + l.table;
  ps_win_reset (t);
}

/* Ships the thread's partial interval (thread exit, process exit, detach). Any thread may call
 * this: an open window is shipped but its slots stay (the thread may still run a little). */
void
ps_thread_close (PsThread * t)
{
  if (t->closed)
    return;
  t->closed = 1;
  if (t->limit != 0)
    return; /* a burst ships complete intervals only */
  if (t->win_open)
  {
    ps_win_ship (t);
    t->win_ship = 0;
  }
  ps_cut (t, PS_FLAG_PARTIAL, TRUE); /* even empty: a thread's last record is always partial */
}

/* Copies to `out` (at most `max`) the branch PCs of the blocks that ran in the thread's current
 * interval: the code it is executing now. Returns how many. */
guint64
ps_thread_hot (PsThread * t, guint64 * out, guint64 max)
{
  guint64 i, n = 0;
  if (t->loop_slot != 0 && max != 0 && t->pcs[t->loop_slot - 1] != 0)
    out[n++] = t->pcs[t->loop_slot - 1];  /* its count may still be in a register */
  for (i = 0; i < t->n_slots && n < max; i++)
  {
    if (t->counts[i] != 0 && t->pcs[i] != 0)
      out[n++] = t->pcs[i];
  }
  return n;
}

/* ---- faults in followed code ----
 * Runtimes fault on purpose and resume where their signal handler says, from the faulting PC:
 * HotSpot's CPU probe, its safepoint polls and implicit null checks in compiled code. Under
 * Stalker that PC is in the thread's code cache, which the handler does not know. The agent
 * hooks the program's handler: it shows it the real PC (ps_fault_block finds the compiled block,
 * the agent the instruction in it) and resumes the thread, still followed, where the handler
 * decided, through Stalker's code for a `ret` (ps_ret_site) with that address pushed. */

static void
ps_fault_note (PsThread * t, guint64 code_start, guint64 code_end, guint64 real)
{
  guint64 * grown, * old;
  if (t->fmap_n == t->fmap_cap)
  {
    guint64 cap = t->fmap_cap == 0 ? 1024 : t->fmap_cap * 2;
    grown = g_memdup (t->fmap, t->fmap_n * 3 * sizeof (guint64));
    grown = g_realloc (grown, cap * 3 * sizeof (guint64));
    old = t->fmap;
    t->fmap = grown;  /* published before the old copy goes: a signal on this thread reads either */
    t->fmap_cap = cap;
    g_free (old);
  }
  t->fmap[t->fmap_n * 3] = code_start;
  t->fmap[t->fmap_n * 3 + 1] = code_end;
  t->fmap[t->fmap_n * 3 + 2] = real;
  t->fmap_n++;
}

/* The real address of the block whose compiled code holds `pc` (its code start in `*code`),
 * newest first (a block recompiled in place); 0 if `pc` is in none of the thread's blocks. */
guint64
ps_fault_block (PsThread * t, guint64 pc, guint64 * code)
{
  guint64 i;
  for (i = t->fmap_n; i-- > 0;)
  {
    if (pc >= t->fmap[i * 3] && pc < t->fmap[i * 3 + 1])
    {
      *code = t->fmap[i * 3];
      return t->fmap[i * 3 + 2];
    }
  }
  return 0;
}

guint64
ps_ret_site (PsThread * t)
{
  return t->ret_site;
}

/* Makes the thread leave its register loops at their next iteration (before it is unfollowed: a
 * loop that never ends would otherwise never pass through a block start again). */
void
ps_thread_release (PsThread * t)
{
  t->release = 1;
}

/* Copies to `out` the branch PCs of the (at most `max`, up to 32) slots that counted the most
 * instructions since the last call, hottest first, ending with 0 when fewer; zeroes every count.
 * Returns how many slots counted any. For a thread leaving Stalker after an exact burst: what it
 * still runs of the instrumented code. The thread may be adding meanwhile: a lost count is harmless. */
guint64
ps_thread_recent (PsThread * t, guint64 * out, guint64 max)
{
  guint64 top[32], i, j, k = 0, ran = 0, c;
  if (max > 32)
    max = 32;
  for (i = 0; i < t->n_slots; i++)
  {
    c = t->counts[i];
    if (c == 0)
      continue;
    t->counts[i] = 0;
    ran++;
    if (t->pcs[i] == 0 || max == 0 || (k == max && c <= top[k - 1]))
      continue;
    if (k < max)
      k++;
    for (j = k - 1; j > 0 && top[j - 1] < c; j--)
    {
      top[j] = top[j - 1];
      out[j] = out[j - 1];
    }
    top[j] = c;
    out[j] = t->pcs[i];
  }
  if (k < max)
    out[k] = 0;
  return ran;
}

/* Ships the thread's interval so far as a partial one and keeps counting (before an exec). */
void
ps_thread_flush (PsThread * t)
{
  if (!t->closed)
    ps_cut (t, PS_FLAG_PARTIAL, FALSE);
}

/* Returns sizeof (PsGlobal), having configured nothing when `ps` (`ps_bytes` long) cannot hold it. */
guint64
ps_configure (guint64 interval, guint8 * buf0, guint8 * buf1, guint64 buf_size, guint64 page, guint64 ps_bytes)
{
  if (ps_bytes < sizeof (PsGlobal))
    return sizeof (PsGlobal);
  ps.page = page;
  ps.interval = interval;
  ps.buf[0] = buf0;
  ps.buf[1] = buf1;
  ps.buf_size = buf_size;
  return sizeof (PsGlobal);
}

/* --locality: the host saw a phase with no window yet on this thread: open one at its next interval
 * (written by another thread; read in the thread's slow path, a late read only delays the window). */
void
ps_thread_want_window (PsThread * t)
{
  t->win_want = 1;
}

/* --locality: while the host is behind (set by the agent's drain), scheduled windows are skipped
 * rather than shipped into full buffers, where they and the intervals after them would be dropped. */
void
ps_win_hold (guint64 on)
{
  ps.win_hold = on;
}

/* How a rep-prefixed string instruction counts, for blocks compiled from now on: 0, once (the
 * hardware's retired instructions, perf's and exp-bbv's count); 1, as callgrind's Ir (every
 * iteration, plus the pass that finds rcx = 0 unless a repe/repne comparison stopped it). */
void
ps_rep_count (guint64 iterations)
{
  ps.rep_iterations = iterations;
}

/* The agent's running counters, indexed by PS_STAT_* (phasescope.sources.wire.STATS). */
guint64
ps_stats (int which)
{
  return which == PS_STAT_DROPPED_RECORDS ? ps.dropped_records : ps.dropped_instructions;
}

/* Swaps the output buffers; returns the filled one and stores its length in *len. */
guint8 *
ps_drain (guint64 * len)
{
  guint8 * full;
  gum_spinlock_acquire (&ps.lock);
  full = ps.buf[ps.cur];
  *len = ps.len[ps.cur];
  ps.cur ^= 1;
  ps.len[ps.cur] = 0;
  gum_spinlock_release (&ps.lock);
  return full;
}

/* ---- portable path: a callout per block (any architecture; about 100 ns per block) ---- */

/* Per-block record the callout gets: in the cold area, or on the heap once that is full. */
typedef struct { PsThread * t; guint64 slot; gint64 n; } PsBlock;

static void
ps_count_callout (GumCpuContext * cpu_context, gpointer user_data)
{
  PsBlock * b = user_data;
  PsThread * t = b->t;
  gint64 * budget = &t->budget[b->slot & (PS_K - 1)];
  t->counts[b->slot] += (guint64) b->n;
  *budget -= b->n;
  if (*budget < 0)
    ps_slow (t);
}

static guint64
ps_take_slot (PsThread * t)
{
  if (t->n_slots < t->capacity - 1)
    return t->n_slots++;
  return t->capacity - 1;                /* overflow slot, pc 0 */
}

/*
 * Names `slot` (taken for a block) with the block's branch PC. Blocks that end at the same branch (a
 * loop's first iteration in the block before it, a jump into the middle of a block, a recompiled
 * block) keep counters of their own: one shared counter would be updated twice per iteration of
 * such a loop, a store-to-load chain twice as long. The later ones are aliases of the first, which
 * the harvest adds them into, so a record still holds each branch PC once.
 */
static void
ps_settle_slot (PsThread * t, guint64 slot, guint64 pc)
{
  guint32 h = (guint32) ((pc ^ (pc >> 12) ^ (pc >> 24)) & (PS_HASH_SIZE - 1));
  guint32 s;

  if (slot == t->capacity - 1)
    return;
  t->pcs[slot] = pc;
  for (s = t->heads[h]; s != 0; s = t->next[s - 1])
  {
    if (t->pcs[s - 1] == pc)
    {
      t->next[slot] = s;                 /* not in a chain: its primary + 1 */
      t->aliases[t->n_aliases++] = (guint32) slot;
      return;
    }
  }
  t->next[slot] = t->heads[h];
  t->heads[h] = (guint32) slot + 1;
}

void
transform_portable (GumStalkerIterator * iterator, GumStalkerOutput * output, gpointer user_data)
{
  PsThread * t = user_data;
  const cs_insn * insn;
  PsBlock * b = NULL;
  guint64 n = 0, last_pc = 0;

  while (gum_stalker_iterator_next (iterator, &insn))
  {
    if (b == NULL)
    {
      if (t->cold_cur + sizeof (PsBlock) <= t->cold_end)
      {
        b = (PsBlock *) t->cold_cur;
        t->cold_cur += sizeof (PsBlock);
      }
      else
      {
        b = g_malloc (sizeof (PsBlock));
      }
      b->t = t;
      b->slot = ps_take_slot (t);
      b->n = 0;
      gum_stalker_iterator_put_callout (iterator, ps_count_callout, b, NULL);
    }
    n++;
    last_pc = insn->address;
    gum_stalker_iterator_keep (iterator);
  }
  if (b == NULL)
    return;
  b->n = (gint64) n;
  ps_settle_slot (t, b->slot, last_pc);
}

#if defined (HAVE_I386) && GLIB_SIZEOF_VOID_P == 8

/* ---- x86-64 fast path: inline counters ---- */

#define PS_STATUS_WRITE(f) (X86_EFLAGS_MODIFY_##f | X86_EFLAGS_RESET_##f | X86_EFLAGS_UNDEFINED_##f)
#define PS_STATUS_READ(f) (X86_EFLAGS_TEST_##f | X86_EFLAGS_PRIOR_##f)

enum { PS_FLAGS_NONE, PS_FLAGS_KILL, PS_FLAGS_READ, PS_FLAGS_PARTIAL };

/* How an instruction uses the six status flags. */
static int
ps_flag_use (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint64 e = x->eflags;
  guint64 reads = PS_STATUS_READ (OF) | PS_STATUS_READ (SF) | PS_STATUS_READ (ZF) |
      PS_STATUS_READ (AF) | PS_STATUS_READ (PF) | PS_STATUS_READ (CF);
  guint8 i;
  gboolean all;

  for (i = 0; i != insn->detail->regs_read_count; i++)
  {
    if (insn->detail->regs_read[i] == X86_REG_EFLAGS)
      return PS_FLAGS_READ;
  }
  if ((e & reads) != 0)
    return PS_FLAGS_READ;
  switch (insn->id)
  {
    case X86_INS_SHL: case X86_INS_SHR: case X86_INS_SAR: case X86_INS_SAL:
    case X86_INS_ROL: case X86_INS_ROR: case X86_INS_SHLD: case X86_INS_SHRD:
      /* A count of zero leaves every flag as it was. */
      if (x->op_count >= 2 && x->operands[x->op_count - 1].type == X86_OP_IMM &&
          (x->operands[x->op_count - 1].imm & 63) != 0)
        break;
      if (x->op_count == 1)
        break;
      return PS_FLAGS_PARTIAL;
    default:
      break;
  }
  all = (e & (PS_STATUS_WRITE (OF) | X86_EFLAGS_SET_OF)) != 0 &&
      (e & (PS_STATUS_WRITE (SF) | X86_EFLAGS_SET_SF)) != 0 &&
      (e & (PS_STATUS_WRITE (ZF) | X86_EFLAGS_SET_ZF)) != 0 &&
      (e & (PS_STATUS_WRITE (AF) | X86_EFLAGS_SET_AF)) != 0 &&
      (e & (PS_STATUS_WRITE (PF) | X86_EFLAGS_SET_PF)) != 0 &&
      (e & (PS_STATUS_WRITE (CF) | X86_EFLAGS_SET_CF)) != 0;
  if (all)
    return PS_FLAGS_KILL;
  for (i = 0; i != insn->detail->regs_write_count; i++)
  {
    if (insn->detail->regs_write[i] == X86_REG_EFLAGS)
      return PS_FLAGS_PARTIAL;
  }
  return (e != 0) ? PS_FLAGS_PARTIAL : PS_FLAGS_NONE;
}

static gboolean
ps_ends_block (const cs_insn * insn)
{
  guint8 i;
  for (i = 0; i != insn->detail->groups_count; i++)
  {
    guint8 g = insn->detail->groups[i];
    if (g == X86_GRP_JUMP || g == X86_GRP_CALL || g == X86_GRP_RET || g == X86_GRP_INT ||
        g == X86_GRP_IRET)
      return TRUE;
  }
  return insn->id == X86_INS_SYSCALL || insn->id == X86_INS_SYSENTER;
}

static gboolean
ps_is_call (const cs_insn * insn)
{
  guint8 i;
  for (i = 0; i != insn->detail->groups_count; i++)
  {
    if (insn->detail->groups[i] == X86_GRP_CALL)
      return TRUE;
  }
  return FALSE;
}

static gboolean
ps_near (GumAddress from, GumAddress to)
{
  gint64 d = (gint64) (to - from);
  return d > -0x7fff0000LL && d < 0x7fff0000LL;
}

/* Code is assembled into a PsCode buffer, then copied into Stalker's writer or the cold area. */
typedef struct { guint8 b[320]; guint n; } PsCode;  /* 320: a rep string's count (ps_emit_rep_after) */

static void
ps_put (PsCode * c, const guint8 * b, guint n)
{
  guint i;
  for (i = 0; i != n; i++)
    c->b[c->n + i] = b[i];
  c->n += n;
}

static void
ps_put_u8 (PsCode * c, guint8 v)
{
  c->b[c->n++] = v;
}

static void
ps_put_u32 (PsCode * c, guint32 v)
{
  *(guint32 *) (c->b + c->n) = v;
  c->n += 4;
}

static void
ps_put_u64 (PsCode * c, guint64 v)
{
  *(guint64 *) (c->b + c->n) = v;
  c->n += 8;
}

/* rel32 operand at the end of an instruction that will end at `end` (runtime address). */
static void
ps_put_rel32 (PsCode * c, GumAddress end, GumAddress target)
{
  ps_put_u32 (c, (guint32) (gint32) ((gint64) target - (gint64) end));
}

static const guint8 ps_lea_down[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };             /* lea rsp, [rsp-128] */
static const guint8 ps_lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 }; /* lea rsp, [rsp+128] */

/* The slow stub: saves everything the C slow path could touch, calls ps_slow (t), returns. */
static void
ps_put_stub (PsCode * c, PsThread * t)
{
  static const guint8 save[] = {
    0x9c,                                /* pushfq */
    0x50, 0x51, 0x52, 0x56, 0x57,        /* push rax, rcx, rdx, rsi, rdi */
    0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* push r8..r11 */
    0x55,                                /* push rbp */
    0x48, 0x89, 0xe5,                    /* mov rbp, rsp */
    0x48, 0x83, 0xe4, 0xc0,              /* and rsp, -64 */
    0x48, 0x81, 0xec, 0x00, 0x02, 0x00, 0x00, /* sub rsp, 512 */
    0x48, 0x0f, 0xae, 0x04, 0x24,        /* fxsave64 [rsp] */
    0xfc,                                /* cld */
  };
  static const guint8 restore[] = {
    0xff, 0xd0,                          /* call rax */
    0x48, 0x0f, 0xae, 0x0c, 0x24,        /* fxrstor64 [rsp] */
    0x48, 0x89, 0xec,                    /* mov rsp, rbp */
    0x5d,                                /* pop rbp */
    0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* pop r11..r8 */
    0x5f, 0x5e, 0x5a, 0x59, 0x58,        /* pop rdi, rsi, rdx, rcx, rax */
    0x9d,                                /* popfq */
    0xc3,                                /* ret */
  };

  ps_put (c, save, sizeof (save));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xbf); /* movabs rdi, t */
  ps_put_u64 (c, GPOINTER_TO_SIZE (t));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xb8); /* movabs rax, ps_slow */
  ps_put_u64 (c, GPOINTER_TO_SIZE (ps_slow));
  ps_put (c, restore, sizeof (restore));
}

/* Copies code into the thread's cold area; returns its address, or 0 when the area is full. */
static GumAddress
ps_cold_put (PsThread * t, const PsCode * c)
{
  guint8 * dst = t->cold_cur;
  guint i;
  if (dst + c->n > t->cold_end)
    return 0;
  for (i = 0; i != c->n; i++)
    dst[i] = c->b[i];
  t->cold_cur += c->n;
  return GPOINTER_TO_SIZE (dst);
}

/* `op qword [target], imm32` (op: 0 add, 5 sub) rip-relative when reachable from `pc`, else
 * through r11 (saved by the caller's sequence). Returns the offset of the imm32 in the code. */
static guint
ps_put_rmw (PsCode * c, GumAddress pc, guint8 op, gpointer target, gboolean far)
{
  guint imm;
  if (!far)
  {
    ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x81); ps_put_u8 (c, 0x05 | (op << 3));
    ps_put_rel32 (c, pc + c->n + 8, GPOINTER_TO_SIZE (target));
    imm = c->n;
    ps_put_u32 (c, 0);
    return imm;
  }
  ps_put_u8 (c, 0x49); ps_put_u8 (c, 0xbb); /* movabs r11, target */
  ps_put_u64 (c, GPOINTER_TO_SIZE (target));
  ps_put_u8 (c, 0x49); ps_put_u8 (c, 0x81); ps_put_u8 (c, 0x03 | (op << 3)); /* op qword [r11], imm32 */
  imm = c->n;
  ps_put_u32 (c, 0);
  return imm;
}

/* Where to patch the emitted counter code once the block's length is known. */
typedef struct
{
  guint8 * count_imm;
  guint8 * budget_imm;
} PsPatch;

/*
 * The counter sequence of one block. The budget-exhausted branch goes to a per-block trampoline in
 * the thread's cold area (js rel32; not taken on the hot path). Where the cold area is full or out
 * of reach, the call to the stub sits inline behind a jns, with a stub placed in the code itself.
 */
static PsPatch
ps_emit_counter (GumX86Writer * w, PsThread * t, guint64 slot, gboolean save_flags)
{
  static const guint8 flags_save[] = { 0x50, 0x9f, 0x0f, 0x90, 0xc0 };   /* push rax; lahf; seto al */
  static const guint8 flags_restore[] = { 0x04, 0x7f, 0x9e, 0x58 };      /* add al, 0x7f; sahf; pop rax */
  static const guint8 r11_save[] = { 0x41, 0x53 };                       /* push r11 */
  static const guint8 r11_restore[] = { 0x41, 0x5b };                    /* pop r11 */
  PsCode c, cold;
  PsPatch p;
  gpointer counter = &t->counts[slot];
  gpointer budget = &t->budget[slot & (PS_K - 1)];
  GumAddress pc = w->pc, tramp = 0, stub = GPOINTER_TO_SIZE (t->stub);
  guint count_imm, budget_imm, js_at = 0;
  gboolean far, cold_ok;

  far = !ps_near (pc, GPOINTER_TO_SIZE (counter)) || !ps_near (pc, GPOINTER_TO_SIZE (budget));
  if (far)
  {
    save_flags = TRUE;
  }
  cold_ok = stub != 0 && t->cold_cur + 64 <= t->cold_end && ps_near (pc, GPOINTER_TO_SIZE (t->cold_cur)) &&
      ps_near (pc, GPOINTER_TO_SIZE (t->cold_end));

  c.n = 0;
  if (save_flags)
  {
    ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
    ps_put (&c, flags_save, sizeof (flags_save));
    if (far)
      ps_put (&c, r11_save, sizeof (r11_save));
  }
  count_imm = ps_put_rmw (&c, pc, 0, counter, far);
  budget_imm = ps_put_rmw (&c, pc, 5, budget, far);
  if (cold_ok)
  {
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, 0x88); /* js rel32 trampoline (patched below) */
    js_at = c.n;
    ps_put_u32 (&c, 0);
  }
  else
  {
    guint8 * jns;
    if (stub == 0 || !ps_near (pc + 256, stub))
    {
      /* No reachable stub: place one here, jumped over, for this block alone. t->stub stays the
       * cold area's stub: the cold area's trampolines call t->stub by rel32 with no reach check,
       * and Stalker rewrites a block in place when its code changes. Pointed at a stub in a far
       * block, the JVM's trampolines (its code slabs lie >2 GB apart) called an unmapped address
       * (issue 32). */
      guint skip;
      ps_put_u8 (&c, 0xe9);
      skip = c.n;
      ps_put_u32 (&c, 0);
      stub = pc + c.n;
      ps_put_stub (&c, t);
      *(guint32 *) (c.b + skip) = c.n - (skip + 4);
    }
    ps_put_u8 (&c, 0x79); ps_put_u8 (&c, 0); /* jns skip */
    jns = c.b + c.n - 1;
    if (!save_flags)
      ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
    ps_put_u8 (&c, 0xe8);
    ps_put_rel32 (&c, pc + c.n + 4, stub);
    if (!save_flags)
      ps_put (&c, ps_lea_up, sizeof (ps_lea_up));
    *jns = (guint8) (c.b + c.n - (jns + 1));
  }
  if (save_flags)
  {
    if (far)
      ps_put (&c, r11_restore, sizeof (r11_restore));
    ps_put (&c, flags_restore, sizeof (flags_restore));
    ps_put (&c, ps_lea_up, sizeof (ps_lea_up));
  }

  if (cold_ok)
  {
    GumAddress back = pc + js_at + 4;
    GumAddress at = GPOINTER_TO_SIZE (t->cold_cur);
    cold.n = 0;
    ps_put (&cold, ps_lea_down, sizeof (ps_lea_down));
    ps_put_u8 (&cold, 0xe8);
    ps_put_rel32 (&cold, at + cold.n + 4, stub);
    ps_put (&cold, ps_lea_up, sizeof (ps_lea_up));
    ps_put_u8 (&cold, 0xe9);
    ps_put_rel32 (&cold, at + cold.n + 4, back);
    tramp = ps_cold_put (t, &cold);
    if (tramp == 0)
    {
      /* Cold area full: retry with the inline form, which needs no cold code. */
      t->cold_end = t->cold_cur;
      return ps_emit_counter (w, t, slot, save_flags);
    }
    *(guint32 *) (c.b + js_at) = (guint32) (gint32) ((gint64) tramp - (gint64) back);
  }

  p.count_imm = w->code + count_imm;
  p.budget_imm = w->code + budget_imm;
  gum_x86_writer_put_bytes (w, c.b, c.n);
  return p;
}

/* Hardware number (0-15) of a 64-bit general register; -1 none; -2 anything else. */
static int
ps_gpr (x86_reg r)
{
  switch (r)
  {
    case X86_REG_INVALID: return -1;
    case X86_REG_RAX: return 0;
    case X86_REG_RCX: return 1;
    case X86_REG_RDX: return 2;
    case X86_REG_RBX: return 3;
    case X86_REG_RSP: return 4;
    case X86_REG_RBP: return 5;
    case X86_REG_RSI: return 6;
    case X86_REG_RDI: return 7;
    case X86_REG_R8: return 8;
    case X86_REG_R9: return 9;
    case X86_REG_R10: return 10;
    case X86_REG_R11: return 11;
    case X86_REG_R12: return 12;
    case X86_REG_R13: return 13;
    case X86_REG_R14: return 14;
    case X86_REG_R15: return 15;
    default: return -2;
  }
}

/* `mov r64, [rip + field]` (op 0x8b) or `mov [rip + field], r64` (0x89), reg < 8, code at `at`. */
static void
ps_put_field (PsCode * c, GumAddress at, guint8 op, int reg, gpointer field)
{
  ps_put_u8 (c, 0x48); ps_put_u8 (c, op); ps_put_u8 (c, (guint8) (0x05 | (reg << 3)));
  ps_put_rel32 (c, at + c->n + 4, GPOINTER_TO_SIZE (field));
}

/*
 * The recorder of one memory instruction, at `at` in the cold area, returning to `back`:
 *
 *   lea rsp, [rsp-128]; push rax; push rcx
 *   lea rax, [operand] (rsp-based: displacement + 144) / movabs rax, address (rip-relative)
 *   mov rcx, [win_ptr]; mov [rcx], rax; lea rcx, [rcx+8]; mov [win_ptr], rcx
 *   mov rcx, [win_left]; lea rcx, [rcx-1]; mov [win_left], rcx; jrcxz full
 * done:
 *   pop rcx; pop rax; lea rsp, [rsp+128]; jmp back
 * full:
 *   call stub; jmp done
 *
 * No instruction of it writes the flags. `skip`: only count the access in win_skipped.
 */
static void
ps_put_recorder (PsCode * c, PsThread * t, GumAddress at, GumAddress back, const cs_insn * insn,
    const cs_x86_op * op, gboolean skip)
{
  guint8 * jr;
  guint done;
  ps_put (c, ps_lea_down, sizeof (ps_lea_down));
  if (skip)
  {
    ps_put_u8 (c, 0x51);                                      /* push rcx */
    ps_put_field (c, at, 0x8b, 1, &t->win_skipped);
    ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x8d); ps_put_u8 (c, 0x49); ps_put_u8 (c, 0x01); /* lea rcx, [rcx+1] */
    ps_put_field (c, at, 0x89, 1, &t->win_skipped);
    ps_put_u8 (c, 0x59);                                      /* pop rcx */
    ps_put (c, ps_lea_up, sizeof (ps_lea_up));
    ps_put_u8 (c, 0xe9);
    ps_put_rel32 (c, at + c->n + 4, back);
    return;
  }
  ps_put_u8 (c, 0x50); ps_put_u8 (c, 0x51);                   /* push rax; push rcx */
  if (op->mem.base == X86_REG_RIP)
  {
    ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xb8);                 /* movabs rax, address */
    ps_put_u64 (c, insn->address + insn->size + (gint64) op->mem.disp);
  }
  else
  {
    int base = ps_gpr (op->mem.base), index = ps_gpr (op->mem.index);
    gint64 disp = op->mem.disp + (base == 4 ? 144 : 0);
    guint8 ss = op->mem.scale == 8 ? 3 : op->mem.scale == 4 ? 2 : op->mem.scale == 2 ? 1 : 0;
    guint8 rex = 0x48 | (index >= 8 ? 0x02 : 0) | (base >= 8 ? 0x01 : 0);
    ps_put_u8 (c, rex); ps_put_u8 (c, 0x8d);
    ps_put_u8 (c, base < 0 ? 0x04 : 0x84);                    /* mod 00 (no base) / 10, rm = SIB */
    ps_put_u8 (c, (guint8) ((ss << 6) | ((index < 0 ? 4 : (index & 7)) << 3) | (base < 0 ? 5 : (base & 7))));
    ps_put_u32 (c, (guint32) (gint32) disp);
  }
  ps_put_field (c, at, 0x8b, 1, &t->win_ptr);
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x89); ps_put_u8 (c, 0x01);   /* mov [rcx], rax */
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x8d); ps_put_u8 (c, 0x49); ps_put_u8 (c, 0x08); /* lea rcx, [rcx+8] */
  ps_put_field (c, at, 0x89, 1, &t->win_ptr);
  ps_put_field (c, at, 0x8b, 1, &t->win_left);
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x8d); ps_put_u8 (c, 0x49); ps_put_u8 (c, 0xff); /* lea rcx, [rcx-1] */
  ps_put_field (c, at, 0x89, 1, &t->win_left);
  ps_put_u8 (c, 0xe3); ps_put_u8 (c, 0);                      /* jrcxz full */
  jr = c->b + c->n - 1;
  done = c->n;
  ps_put_u8 (c, 0x59); ps_put_u8 (c, 0x58);                   /* pop rcx; pop rax */
  ps_put (c, ps_lea_up, sizeof (ps_lea_up));
  ps_put_u8 (c, 0xe9);
  ps_put_rel32 (c, at + c->n + 4, back);
  *jr = (guint8) (c->b + c->n - (jr + 1));
  ps_put_u8 (c, 0xe8);                                        /* full: call stub */
  ps_put_rel32 (c, at + c->n + 4, GPOINTER_TO_SIZE (t->stub));
  ps_put_u8 (c, 0xeb);                                        /* jmp done */
  ps_put_u8 (c, (guint8) (gint8) ((gint64) done - (gint64) (c->n + 1)));
}

#define PS_GUARD 32                /* bytes at a block's start nothing may return into (agent/README.md) */

/* `n` bytes of NOPs. */
static void
ps_put_nops (PsCode * c, guint n)
{
  static const guint8 nop8[] = { 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 };
  static const guint8 nop1[] = { 0x90 };
  for (; n >= 8; n -= 8)
    ps_put (c, nop8, sizeof (nop8));
  for (; n != 0; n--)
    ps_put (c, nop1, sizeof (nop1));
}

/* A memory slot and its recorder before `insn`, if it has an explicit memory operand. Its recorder
 * returns right after the slot, so a slot in the block's first PS_GUARD bytes is padded past them:
 * Stalker.invalidate (a release at detach) overwrites them while the thread is elsewhere, for
 * instance in the recorder. */
static void
ps_emit_mem_slot (GumX86Writer * w, PsThread * t, const cs_insn * insn, GumAddress block_pc)
{
  const cs_x86 * x = &insn->detail->x86;
  const cs_x86_op * op = NULL;
  PsCode c;
  GumAddress pc = w->pc, rec;
  guint8 i;
  gboolean skip;
  int base, index;

  if (insn->id == X86_INS_LEA || insn->id == X86_INS_NOP)
    return;
  for (i = 0; i != x->op_count; i++)
  {
    if (x->operands[i].type == X86_OP_MEM)
    {
      op = &x->operands[i];
      break;
    }
  }
  if (op == NULL || t->n_mslots == t->cap_mslots || t->stub == NULL)
    return;
  base = ps_gpr (op->mem.base);
  index = ps_gpr (op->mem.index);
  skip = op->mem.segment == X86_REG_FS || op->mem.segment == X86_REG_GS ||
      (op->mem.base != X86_REG_RIP && (base == -2 || index == -2 || index == 4));
  rec = GPOINTER_TO_SIZE (t->rec_cur);
  if (t->rec_cur + sizeof (c.b) > t->rec_end || !ps_near (pc, rec) || !ps_near (pc, rec + sizeof (c.b)) ||
      !ps_near (rec, GPOINTER_TO_SIZE (t->stub)) || !ps_near (rec, GPOINTER_TO_SIZE (t)))
    return;
  if (pc + 5 < block_pc + PS_GUARD)
  {
    c.n = 0;
    ps_put_nops (&c, (guint) (block_pc + PS_GUARD - (pc + 5)));
    gum_x86_writer_put_bytes (w, c.b, c.n);
    pc = w->pc;
  }
  c.n = 0;
  ps_put_recorder (&c, t, rec, pc + 5, insn, op, skip);
  for (i = 0; i != c.n; i++)
    t->rec_cur[i] = c.b[i];
  t->rec_cur += (c.n + 15) & ~15u;
  t->mslot[t->n_mslots] = GSIZE_TO_POINTER (pc);  /* where it runs (w->code: a recompile's scratch) */
  t->mrel[t->n_mslots] = (guint32) (gint32) ((gint64) rec - (gint64) (pc + 5));
  if (t->win_open)
  {
    c.n = 0;
    ps_put_u8 (&c, 0xe9);
    ps_put_u32 (&c, t->mrel[t->n_mslots]);
  }
  else
  {
    static const guint8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
    c.n = 0;
    ps_put (&c, nop5, sizeof (nop5));
  }
  t->n_mslots++;
  gum_x86_writer_put_bytes (w, c.b, c.n);
}


/* ---- self-looping blocks: the count in a register ----
 *
 * A block whose last instruction is a conditional branch back to its own first instruction (a tight
 * loop) updating the same counter and budget in memory every iteration makes a store-to-load chain
 * (on Intel about 5 cycles an iteration, longer than such a loop's body). When the block uses
 * neither rsp nor some general register r, and its flags are dead before some instruction, it is
 * compiled as
 *
 *   entry:  lea rsp, [rsp-144]; mov [rsp], r            ; r saved below the red zone
 *           mov dword [loop_slot], slot+1               ; what ps_thread_hot reports meanwhile
 *           mov r, [budget]; r = min (r, PS_LOOP_CAP); mov [rsp+8], r
 *   top:    ...body...; sub r, n; js trampoline; ...body...   (at the flags-dead point)
 *           jcc top                                     ; ours: the loop no longer leaves the block
 *   exit:   push rax; lahf; seto al                     ; the flags are the branch's: keep them
 *           counts[slot] += [rsp+16] - r; budget -= the same
 *           add al, 0x7f; sahf; pop rax; mov r, [rsp]; lea rsp, [rsp+144]
 *           jcc (Stalker's, condition false: the fall-through)
 *
 * and the trampoline (cold) moves what r consumed into the counter and the budget, calls the slow
 * stub when the budget ran out (the interval is cut at this very block, as by the memory form) or
 * the agent asked for a release, and reloads r. So r is flushed at least every PS_LOOP_CAP
 * instructions. A release (ps_thread_release, then the slow path) rewrites every loop's `jcc top`
 * to fall into its exit, so the next iteration leaves through Stalker's own branch: through the
 * block's start, where Stalker's invalidation and unfollow take effect.
 *
 * Where the body can be copied as is (nothing rip-relative), the loop is instead entered from its
 * second iteration and unrolled by two (ps_emit_loop_tail): the first runs as any block, so
 * a loop of one iteration pays no entry and exit, and the loop pays one `sub r, 2n; js` per two
 * iterations. On a Zen 4 host the check's two macro-ops pushed a five-macro-op loop past the six
 * it dispatches a cycle, so `s += i * i` took two cycles an iteration instead of one (2.0x bare
 * Stalker); a pair of iterations plus the check fits in two (1.10x).
 */

#define PS_LOOP_MAX 24             /* instructions of a block that may become a register loop */
#define PS_LOOP_CAP 65536          /* instructions counted in r between two flushes */
#define PS_LOOP_FRAME 144          /* red zone (128), saved r, r at entry */
#define PS_UNROLL_BYTES 192        /* largest body unrolled by two */

/* A register loop's `jcc top`, in the thread's chain (t->loops) in its cold area. */
typedef struct
{
  guint8 * next;
  guint8 * site;                   /* the rel32 of its `jcc top` */
  gint32 rel;                      /* that rel32 as emitted */
  guint32 pad;
} PsLoopLink;

typedef struct
{
  int reg;                         /* the counting register (hardware number), -1: no loop */
  guint n;                         /* instructions in the block */
  guint dead;                      /* index of the first instruction that kills every flag */
  guint64 branch_pc;
  guint64 first_pc;                /* the block's first instruction */
  guint64 dead_pc;                 /* the instruction `dead` */
  gboolean unroll;                 /* the body may be copied as is (nothing rip-relative): the register
                                      loop starts at the second iteration, unrolled (ps_emit_loop_tail) */
} PsLoop;

/* Hardware number of any general register, whatever its width; -1 for anything else. */
static int
ps_gpr_any (x86_reg r)
{
  switch (r)
  {
    case X86_REG_AL: case X86_REG_AH: case X86_REG_AX: case X86_REG_EAX: case X86_REG_RAX: return 0;
    case X86_REG_CL: case X86_REG_CH: case X86_REG_CX: case X86_REG_ECX: case X86_REG_RCX: return 1;
    case X86_REG_DL: case X86_REG_DH: case X86_REG_DX: case X86_REG_EDX: case X86_REG_RDX: return 2;
    case X86_REG_BL: case X86_REG_BH: case X86_REG_BX: case X86_REG_EBX: case X86_REG_RBX: return 3;
    case X86_REG_SPL: case X86_REG_SP: case X86_REG_ESP: case X86_REG_RSP: return 4;
    case X86_REG_BPL: case X86_REG_BP: case X86_REG_EBP: case X86_REG_RBP: return 5;
    case X86_REG_SIL: case X86_REG_SI: case X86_REG_ESI: case X86_REG_RSI: return 6;
    case X86_REG_DIL: case X86_REG_DI: case X86_REG_EDI: case X86_REG_RDI: return 7;
    case X86_REG_R8B: case X86_REG_R8W: case X86_REG_R8D: case X86_REG_R8: return 8;
    case X86_REG_R9B: case X86_REG_R9W: case X86_REG_R9D: case X86_REG_R9: return 9;
    case X86_REG_R10B: case X86_REG_R10W: case X86_REG_R10D: case X86_REG_R10: return 10;
    case X86_REG_R11B: case X86_REG_R11W: case X86_REG_R11D: case X86_REG_R11: return 11;
    case X86_REG_R12B: case X86_REG_R12W: case X86_REG_R12D: case X86_REG_R12: return 12;
    case X86_REG_R13B: case X86_REG_R13W: case X86_REG_R13D: case X86_REG_R13: return 13;
    case X86_REG_R14B: case X86_REG_R14W: case X86_REG_R14D: case X86_REG_R14: return 14;
    case X86_REG_R15B: case X86_REG_R15W: case X86_REG_R15D: case X86_REG_R15: return 15;
    default: return -1;
  }
}

/* Adds the general registers `insn` reads or writes (explicitly or not) to *used. */
static void
ps_regs_used (const cs_insn * insn, guint32 * used)
{
  const cs_x86 * x = &insn->detail->x86;
  int r;
  guint8 i;
  for (i = 0; i != insn->detail->regs_read_count; i++)
    if ((r = ps_gpr_any (insn->detail->regs_read[i])) >= 0)
      *used |= 1u << r;
  for (i = 0; i != insn->detail->regs_write_count; i++)
    if ((r = ps_gpr_any (insn->detail->regs_write[i])) >= 0)
      *used |= 1u << r;
  for (i = 0; i != x->op_count; i++)
  {
    const cs_x86_op * op = &x->operands[i];
    if (op->type == X86_OP_REG && (r = ps_gpr_any (op->reg)) >= 0)
      *used |= 1u << r;
    if (op->type == X86_OP_MEM)
    {
      if ((r = ps_gpr_any (op->mem.base)) >= 0)
        *used |= 1u << r;
      if ((r = ps_gpr_any (op->mem.index)) >= 0)
        *used |= 1u << r;
    }
  }
}

/* String instructions: their registers are implied (and, with rep, rcx too). */
static gboolean
ps_is_string_op (const cs_insn * insn)
{
  switch (insn->id)
  {
    case X86_INS_MOVSB: case X86_INS_MOVSW: case X86_INS_MOVSD: case X86_INS_MOVSQ:
    case X86_INS_STOSB: case X86_INS_STOSW: case X86_INS_STOSD: case X86_INS_STOSQ:
    case X86_INS_LODSB: case X86_INS_LODSW: case X86_INS_LODSD: case X86_INS_LODSQ:
    case X86_INS_SCASB: case X86_INS_SCASW: case X86_INS_SCASD: case X86_INS_SCASQ:
    case X86_INS_CMPSB: case X86_INS_CMPSW: case X86_INS_CMPSD: case X86_INS_CMPSQ:
      return TRUE;
    default:
      return FALSE;
  }
}

/* Whether an operand of `insn` is rip-relative (the instruction cannot be copied elsewhere as is). */
static gboolean
ps_rip_relative (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint8 i;
  for (i = 0; i != x->op_count; i++)
  {
    if (x->operands[i].type == X86_OP_MEM && x->operands[i].mem.base == X86_REG_RIP)
      return TRUE;
  }
  return FALSE;
}

/* Whether the block starting at `first` is a register loop, by decoding it ahead of Stalker. */
static gboolean
ps_loop_plan (GumStalkerIterator * iterator, PsThread * t, GumAddress pc, const cs_insn * first, PsLoop * lp)
{
  static const int order[] = { 11, 10, 9, 8, 2, 1, 6, 7, 3, 5, 12, 13, 14, 15 };
  csh cs = gum_stalker_iterator_get_capstone (iterator);
  const guint8 * code = GSIZE_TO_POINTER (first->address);
  size_t size = PS_LOOP_MAX * 15;
  guint64 address = first->address;
  guint32 used = 0;
  cs_insn * ci;
  guint i = 0, k;
  int dead = -1;
  gboolean loop = FALSE, copyable = TRUE;

  if (t->win_size != 0 || t->limit != 0 || t->carry != 0 || t->stub == NULL ||
      t->cold_cur + 384 > t->cold_end || !ps_near (pc, GPOINTER_TO_SIZE (t->cold_cur)) ||
      !ps_near (pc, GPOINTER_TO_SIZE (t->cold_end)) || !ps_near (pc, GPOINTER_TO_SIZE (t)) ||
      !ps_near (pc, GPOINTER_TO_SIZE (t->counts + t->capacity)) || !ps_near (pc, GPOINTER_TO_SIZE (t->counts)))
    return FALSE;
  ci = cs_malloc (cs);
  while (i < PS_LOOP_MAX && cs_disasm_iter (cs, &code, &size, &address, ci))
  {
    int use = ps_flag_use (ci);
    gboolean ends = ps_ends_block (ci);
    if (ps_is_string_op (ci))
      break;
    if (dead < 0 && use == PS_FLAGS_READ && !ends)
      break;
    if (dead < 0 && use == PS_FLAGS_KILL)
    {
      dead = (int) i;
      lp->dead_pc = ci->address;
    }
    if (!ends && (ps_rip_relative (ci) || ci->id == X86_INS_XBEGIN))
      copyable = FALSE;
    ps_regs_used (ci, &used);
    i++;
    if (ends)
    {
      const cs_x86 * x = &ci->detail->x86;
      loop = dead >= 0 && x->op_count == 1 && x->operands[0].type == X86_OP_IMM &&
          (guint64) x->operands[0].imm == first->address && ci->id != X86_INS_JMP &&
          ((ci->bytes[0] & 0xf0) == 0x70 || (ci->bytes[0] == 0x0f && (ci->bytes[1] & 0xf0) == 0x80));
      lp->branch_pc = ci->address;
      break;
    }
  }
  cs_free (ci, 1);
  if (!loop || (used & (1u << 4)) != 0)
    return FALSE;
  for (k = 0; k != G_N_ELEMENTS (order); k++)
  {
    if ((used & (1u << order[k])) == 0)
    {
      lp->reg = order[k];
      lp->n = i;
      lp->dead = (guint) dead;
      lp->first_pc = first->address;
      lp->unroll = copyable && lp->branch_pc - first->address <= PS_UNROLL_BYTES;
      return TRUE;
    }
  }
  return FALSE;
}

/* REX.W with r in the ModRM reg field (`rm` FALSE) or in rm (TRUE). */
static void
ps_put_rex (PsCode * c, int r, gboolean rm)
{
  ps_put_u8 (c, (guint8) (0x48 | (r >= 8 ? (rm ? 0x01 : 0x04) : 0)));
}

/* `op r, [rip + field]` / `op [rip + field], r` (op: 8b mov load, 89 store, 03 add, 01 add to
 * memory, 29 sub from memory), code at `at`. */
static void
ps_put_rip_reg (PsCode * c, GumAddress at, guint8 op, int r, gpointer field)
{
  ps_put_rex (c, r, FALSE);
  ps_put_u8 (c, op);
  ps_put_u8 (c, (guint8) (0x05 | ((r & 7) << 3)));
  ps_put_rel32 (c, at + c->n + 4, GPOINTER_TO_SIZE (field));
}

/* `op r, [rsp + disp8]` / `op [rsp + disp8], r` (op as above). */
static void
ps_put_rsp_reg (PsCode * c, guint8 op, int r, guint8 disp)
{
  ps_put_rex (c, r, FALSE);
  ps_put_u8 (c, op);
  ps_put_u8 (c, (guint8) (0x44 | ((r & 7) << 3)));
  ps_put_u8 (c, 0x24);
  ps_put_u8 (c, disp);
}

/* r = min ([budget], PS_LOOP_CAP); [rsp + 8] = r (the flags are dead). */
static void
ps_put_loop_load (PsCode * c, GumAddress at, int r, gpointer budget)
{
  ps_put_rip_reg (c, at, 0x8b, r, budget);
  ps_put_rex (c, r, TRUE); ps_put_u8 (c, 0x81); ps_put_u8 (c, (guint8) (0xf8 | (r & 7))); /* cmp r, cap */
  ps_put_u32 (c, PS_LOOP_CAP);
  ps_put_u8 (c, 0x7e); ps_put_u8 (c, 7);                                                  /* jle +7 */
  ps_put_rex (c, r, TRUE); ps_put_u8 (c, 0xc7); ps_put_u8 (c, (guint8) (0xc0 | (r & 7))); /* mov r, cap */
  ps_put_u32 (c, PS_LOOP_CAP);
  ps_put_rsp_reg (c, 0x89, r, 8);
}

/* counts += [rsp + disp] - r; budget -= the same (r is clobbered; so are the flags). */
static void
ps_put_loop_flush (PsCode * c, GumAddress at, int r, guint8 disp, gpointer counter, gpointer budget)
{
  ps_put_rex (c, r, TRUE); ps_put_u8 (c, 0xf7); ps_put_u8 (c, (guint8) (0xd8 | (r & 7))); /* neg r */
  ps_put_rsp_reg (c, 0x03, r, disp);
  ps_put_rip_reg (c, at, 0x01, r, counter);
  ps_put_rip_reg (c, at, 0x29, r, budget);
}

/* The loop's entry, at the block's start. */
static void
ps_emit_loop_entry (GumX86Writer * w, PsThread * t, const PsLoop * lp, guint64 slot)
{
  static const guint8 lea_down[] = { 0x48, 0x8d, 0xa4, 0x24, 0x70, 0xff, 0xff, 0xff }; /* lea rsp, [rsp-144] */
  PsCode c;
  c.n = 0;
  ps_put (&c, lea_down, sizeof (lea_down));
  ps_put_rsp_reg (&c, 0x89, lp->reg, 0);                                          /* mov [rsp], r */
  ps_put_u8 (&c, 0xc7); ps_put_u8 (&c, 0x05);                                      /* mov dword [loop_slot], slot+1 */
  ps_put_rel32 (&c, w->pc + c.n + 8, GPOINTER_TO_SIZE (&t->loop_slot));
  ps_put_u32 (&c, (guint32) slot + 1);
  ps_put_loop_load (&c, w->pc, lp->reg, &t->budget[slot & (PS_K - 1)]);
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

/* `sub r, imm; js <target patched later>` at the flags-dead point. */
typedef struct
{
  guint8 * imm;                    /* the imm32, in the writer's buffer */
  guint8 * rel;                    /* the js's rel32, in the writer's buffer */
  GumAddress end;                  /* where the js ends, where the code runs */
} PsLoopCheck;

static PsLoopCheck
ps_emit_loop_check (GumX86Writer * w, int r, guint32 imm)
{
  PsLoopCheck k;
  PsCode c;
  c.n = 0;
  ps_put_rex (&c, r, TRUE); ps_put_u8 (&c, 0x81); ps_put_u8 (&c, (guint8) (0xe8 | (r & 7))); /* sub r, imm */
  ps_put_u32 (&c, imm);
  ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, 0x88); ps_put_u32 (&c, 0);                    /* js ... */
  k.end = w->pc + c.n;
  gum_x86_writer_put_bytes (w, c.b, c.n);
  k.imm = w->code - 10;
  k.rel = w->code - 4;
  return k;
}

/* Points a rel32 (`field`, in the writer's buffer, of an instruction ending at `end`) at `target`. */
static void
ps_patch_rel32 (guint8 * field, GumAddress end, GumAddress target)
{
  *(gint32 *) field = (gint32) ((gint64) target - (gint64) end);
}

/* Adds a loop's `jcc top` (its rel32 at `site`, where the code runs) to the thread's chain, for a
 * release. The plan reserved the cold space. */
static void
ps_loop_link (PsThread * t, GumAddress site, GumAddress top)
{
  PsLoopLink * link = (PsLoopLink *) t->cold_cur;
  link->next = t->loops;
  link->site = GSIZE_TO_POINTER (site);
  link->rel = (gint32) ((gint64) top - (gint64) (site + 4));
  t->loops = t->cold_cur;
  t->cold_cur += sizeof (PsLoopLink);
}

/* The check's trampoline (cold): moves what r consumed into the counter and the budget, calls the
 * slow stub when the budget ran out or a release was asked, reloads r and returns to `back`. */
static GumAddress
ps_loop_trampoline (PsThread * t, const PsLoop * lp, guint64 slot, GumAddress back)
{
  PsCode cold;
  GumAddress at = GPOINTER_TO_SIZE (t->cold_cur), slow_at;
  gpointer counter = &t->counts[slot], budget = &t->budget[slot & (PS_K - 1)];
  guint js_slow, jne_slow, back_in;
  int r = lp->reg;

  cold.n = 0;
  ps_put_loop_flush (&cold, at, r, 8, counter, budget);
  ps_put_u8 (&cold, 0x78); ps_put_u8 (&cold, 0);                                       /* js slow */
  js_slow = cold.n - 1;
  ps_put_u8 (&cold, 0x48); ps_put_u8 (&cold, 0x83); ps_put_u8 (&cold, 0x3d);           /* cmp qword [release], 0 */
  ps_put_rel32 (&cold, at + cold.n + 5, GPOINTER_TO_SIZE (&t->release));
  ps_put_u8 (&cold, 0);
  ps_put_u8 (&cold, 0x75); ps_put_u8 (&cold, 0);                                       /* jne slow */
  jne_slow = cold.n - 1;
  back_in = cold.n;
  ps_put_loop_load (&cold, at, r, budget);
  ps_put_u8 (&cold, 0xe9);
  ps_put_rel32 (&cold, at + cold.n + 4, back);
  slow_at = cold.n;
  cold.b[js_slow] = (guint8) (slow_at - (js_slow + 1));
  cold.b[jne_slow] = (guint8) (slow_at - (jne_slow + 1));
  ps_put (&cold, ps_lea_down, sizeof (ps_lea_down));
  ps_put_u8 (&cold, 0xe8);
  ps_put_rel32 (&cold, at + cold.n + 4, GPOINTER_TO_SIZE (t->stub));
  ps_put (&cold, ps_lea_up, sizeof (ps_lea_up));
  ps_put_u8 (&cold, 0xeb);
  ps_put_u8 (&cold, (guint8) (gint8) ((gint) back_in - (gint) (cold.n + 1)));
  return ps_cold_put (t, &cold);
}

/* A check whose trampoline returns right after it. */
static void
ps_loop_check_here (PsLoopCheck * k, PsThread * t, const PsLoop * lp, guint64 slot)
{
  ps_patch_rel32 (k->rel, k->end, ps_loop_trampoline (t, lp, slot, k->end));
}

/* The condition code of a jcc (short or near form). */
static gint
ps_branch_cc (const cs_insn * branch)
{
  return branch->bytes[0] == 0x0f ? branch->bytes[1] & 0x0f : branch->bytes[0] & 0x0f;
}

/* `jcc`/`jmp` rel32 to a target patched later; returns the rel32 in the writer's buffer. */
static guint8 *
ps_emit_branch (GumX86Writer * w, gint cc, GumAddress target, GumAddress * end)
{
  PsCode c;
  c.n = 0;
  if (cc < 0)
    ps_put_u8 (&c, 0xe9);
  else
  {
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, (guint8) (0x80 | cc));
  }
  *end = w->pc + c.n + 4;
  ps_put_rel32 (&c, *end, target);
  gum_x86_writer_put_bytes (w, c.b, c.n);
  return w->code - 4;
}

/* The loop's exit: flushes r into the counter and the budget and restores it, keeping the flags
 * for Stalker's branch (next, or jumped to). */
static void
ps_emit_loop_exit (GumX86Writer * w, PsThread * t, const PsLoop * lp, guint64 slot)
{
  static const guint8 flags_save[] = { 0x50, 0x9f, 0x0f, 0x90, 0xc0 };   /* push rax; lahf; seto al */
  static const guint8 flags_restore[] = { 0x04, 0x7f, 0x9e, 0x58 };      /* add al, 0x7f; sahf; pop rax */
  static const guint8 lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x90, 0x00, 0x00, 0x00 }; /* lea rsp, [rsp+144] */
  PsCode c;
  c.n = 0;
  ps_put (&c, flags_save, sizeof (flags_save));
  ps_put_loop_flush (&c, w->pc, lp->reg, 16, &t->counts[slot], &t->budget[slot & (PS_K - 1)]);
  ps_put (&c, flags_restore, sizeof (flags_restore));
  ps_put_rsp_reg (&c, 0x8b, lp->reg, 0);                                          /* mov r, [rsp] */
  ps_put (&c, lea_up, sizeof (lea_up));
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

/* At the loop's branch (`branch`, kept by Stalker after this): our `jcc top`, then the exit. */
static void
ps_emit_loop_branch (GumX86Writer * w, PsThread * t, const PsLoop * lp, const cs_insn * branch, GumAddress top,
    guint64 slot)
{
  GumAddress end;
  ps_emit_branch (w, ps_branch_cc (branch), top, &end);
  ps_loop_link (t, end - 4, top);
  ps_emit_loop_exit (w, t, lp, slot);
}

/* A self-looping block whose first iteration ran as any block (memory counter, Stalker's copy of
 * the body) goes on in a register, unrolled by two, the body's bytes copied as they are (nothing
 * rip-relative). Its branch gets our `jcc loop` before Stalker's; the loop follows the block's
 * code, after Stalker's branch (which never falls through), so an iteration that ends the loop
 * falls straight into Stalker's branch:
 *
 *           jcc loop                     ; at the branch (`jump`): the loop goes on
 *   done:   Stalker's branch
 *   loop:   entry (ps_emit_loop_entry)
 *   top:    body to the flags-dead point; sub r, 2n; js fallback; rest of the body
 *           jNcc exit1                   ; the loop ends after one iteration of the pair
 *           body; jcc top                ; the second copy, no check
 *           jmp exit
 *   single: sub r, n; js trampoline      ; the fallback (cold: add r, 2n; jmp single)
 *           rest of the body; jcc top; jmp exit
 *   exit1:  lea r, [r + n]               ; give back the second iteration (flags kept)
 *   exit:   flush r, restore it (ps_emit_loop_exit); jmp done
 *
 * A pair runs only when r covers both iterations; otherwise one goes through `single`, so the
 * interval is still cut at the iteration that overdrew. A loop of one iteration (an inner loop
 * of two whose first sits in the block before) never enters the register. */
typedef struct
{
  guint8 * rel;                    /* the rel32 of `jcc loop`, in the writer's buffer */
  GumAddress done;                 /* where it ends: Stalker's branch */
  gint cc;                         /* the loop's condition */
} PsLoopJump;

static PsLoopJump
ps_emit_loop_jump (GumX86Writer * w, const cs_insn * branch)
{
  PsLoopJump j;
  j.cc = ps_branch_cc (branch);
  j.rel = ps_emit_branch (w, j.cc, 0, &j.done);
  return j;
}

static void
ps_emit_loop_tail (GumX86Writer * w, PsThread * t, const PsLoop * lp, const PsLoopJump * j, guint64 slot)
{
  const guint8 * body = GSIZE_TO_POINTER (lp->first_pc);
  guint a = (guint) (lp->dead_pc - lp->first_pc), b = (guint) (lp->branch_pc - lp->dead_pc);
  gint cc = j->cc;
  GumAddress exit1_end, exit_end[2], end, top, single, fallback;
  guint8 * exit1, * to_exit[2];
  PsLoopCheck pair, check;
  PsCode c;
  int r = lp->reg;

  ps_patch_rel32 (j->rel, j->done, w->pc);
  ps_emit_loop_entry (w, t, lp, slot);
  top = w->pc;
  gum_x86_writer_put_bytes (w, body, a);
  pair = ps_emit_loop_check (w, r, 2 * lp->n);
  gum_x86_writer_put_bytes (w, body + a, b);
  exit1 = ps_emit_branch (w, cc ^ 1, 0, &exit1_end);
  gum_x86_writer_put_bytes (w, body, a + b);
  ps_emit_branch (w, cc, top, &end);
  ps_loop_link (t, end - 4, top);
  to_exit[0] = ps_emit_branch (w, -1, 0, &exit_end[0]);

  single = w->pc;
  check = ps_emit_loop_check (w, r, lp->n);
  ps_loop_check_here (&check, t, lp, slot);
  gum_x86_writer_put_bytes (w, body + a, b);
  ps_emit_branch (w, cc, top, &end);
  ps_loop_link (t, end - 4, top);
  to_exit[1] = ps_emit_branch (w, -1, 0, &exit_end[1]);

  ps_patch_rel32 (exit1, exit1_end, w->pc);
  c.n = 0;
  ps_put_u8 (&c, (guint8) (0x48 | (r >= 8 ? 0x05 : 0))); ps_put_u8 (&c, 0x8d);       /* lea r, [r + n] */
  ps_put_u8 (&c, (guint8) (0x80 | ((r & 7) << 3) | (r & 7)));
  if ((r & 7) == 4)
    ps_put_u8 (&c, 0x24);
  ps_put_u32 (&c, lp->n);
  gum_x86_writer_put_bytes (w, c.b, c.n);
  ps_patch_rel32 (to_exit[0], exit_end[0], w->pc);
  ps_patch_rel32 (to_exit[1], exit_end[1], w->pc);
  ps_emit_loop_exit (w, t, lp, slot);
  ps_emit_branch (w, -1, j->done, &end);

  /* the pair check's fallback: undo its sub, run the iteration through `single` */
  c.n = 0;
  ps_put_rex (&c, r, TRUE); ps_put_u8 (&c, 0x81); ps_put_u8 (&c, (guint8) (0xc0 | (r & 7))); /* add r, 2n */
  ps_put_u32 (&c, 2 * lp->n);
  fallback = GPOINTER_TO_SIZE (t->cold_cur);
  ps_put_u8 (&c, 0xe9);
  ps_put_rel32 (&c, fallback + c.n + 4, single);
  ps_patch_rel32 (pair.rel, pair.end, ps_cold_put (t, &c));
}

static void
ps_loops_release (PsThread * t)
{
  PsLoopLink * l;
  for (l = (PsLoopLink *) t->loops; l != NULL; l = (PsLoopLink *) l->next)
  {
    /* Only where the branch is still ours: Stalker may have recompiled the block in place. */
    if (l->site != NULL && *(gint32 *) l->site == l->rel && (l->site[-1] & 0xf0) == 0x80 && l->site[-2] == 0x0f)
      *(gint32 *) l->site = 0;  /* jcc top -> jcc exit: the next iteration leaves */
  }
  t->released = 1;
}

/* ---- rep strings counted as valgrind counts them (ps_rep_count) ----
 *
 * Stalker runs a rep-prefixed string instruction as it is, so the block's counter sees one
 * instruction. Callgrind (VEX) runs one iteration per pass and counts every pass: rcx + 1 for
 * rep movs/stos (one pass finds rcx = 0), 1 when rcx = 0, and for repe/repne cmps/scas the
 * iterations run, plus that last pass only when the comparison did not stop the instruction
 * (rep lods it counts once). The instruction runs in chunks of at most PS_REP_CHUNK iterations,
 * so the budget is checked, and an interval cut, at least every PS_REP_CHUNK iterations: an
 * interval runs past its size by less than PS_REP_CHUNK plus one block. No code here writes the
 * flags (a rep movs keeps them; the program may read them after it): it counts with lea, not and
 * bswap, branches with jrcxz, and reads ZF with setcc.
 *
 *           lea rsp, [rsp-168]                 ; frame below the red zone
 *   again:  [rsp+8] = rcx; rcx = min (rcx, PS_REP_CHUNK); [rsp] = rcx
 *           rep op                             ; rsp is not its operand
 *           it = [rsp] - rcx                   ; iterations of the chunk
 *           none: done; stopped (rcx != 0, or the comparison at the chunk's end): count it - 1
 *           more to do ([rsp+8] - [rsp]): count it, rcx = the rest, jmp again
 *           else count it                      ; the last pass that finds rcx = 0
 *   done:   restore rax, rcx, rdx; lea rsp, [rsp+168]
 *
 * where `count x` adds x to the block's counter and takes it from its budget, calling the slow
 * stub when the budget goes negative (absolute addresses: a rep instruction pays for them).
 */

#define PS_REP_FRAME 168           /* red zone (128); chunk, rcx before it, saved rax, rdx, rcx */
#define PS_REP_CHUNK 0xffff        /* iterations between two budget checks (the test takes rcx's low 16 bits) */

/* 0: not a rep string, or one callgrind counts once (rep lods, measured on valgrind 3.19; ins/outs;
 * a 32-bit address size); 1: rep movs/stos; 0xf3 / 0xf2: repe / repne cmps/scas (the prefix,
 * which says when they stop). */
static guint
ps_rep_kind (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint8 op = x->opcode[0];
  if ((x->prefix[0] != X86_PREFIX_REP && x->prefix[0] != X86_PREFIX_REPNE) || x->prefix[3] == X86_PREFIX_ADDRSIZE ||
      op < 0xa4 || op > 0xaf || op == 0xac || op == 0xad || !ps_is_string_op (insn))
    return 0;
  if (op == 0xa6 || op == 0xa7 || op == 0xae || op == 0xaf)
    return x->prefix[0];
  return 1;
}

/* `lea rsp, [rsp + d]` */
static void
ps_put_rsp_add (PsCode * c, gint32 d)
{
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x8d); ps_put_u8 (c, 0xa4); ps_put_u8 (c, 0x24);
  ps_put_u32 (c, (guint32) d);
}

/* The frame and the chunk before the instruction; returns `again` (where the code runs). */
static GumAddress
ps_emit_rep_before (GumX86Writer * w)
{
  static const guint8 test[] = {
    0x48, 0x89, 0x4c, 0x24, 0x08,                       /* mov [rsp+8], rcx */
    0x48, 0x89, 0x44, 0x24, 0x10,                       /* mov [rsp+16], rax */
    0x0f, 0xb7, 0xc1,                                   /* movzx eax, cx */
    0x48, 0xf7, 0xd0,                                   /* not rax */
    0x48, 0x8d, 0x44, 0x01, 0x01,                       /* lea rax, [rcx+rax+1]: rcx above its low 16 bits */
    0x48, 0x91,                                         /* xchg rcx, rax */
    0xe3, 0x07,                                         /* jrcxz small */
  };
  static const guint8 join[] = {
    0xeb, 0x03,                                         /* jmp join */
    0x48, 0x89, 0xc1,                                   /* small: mov rcx, rax */
    0x48, 0x8b, 0x44, 0x24, 0x10,                       /* join: mov rax, [rsp+16] */
    0x48, 0x89, 0x0c, 0x24,                             /* mov [rsp], rcx */
  };
  GumAddress again;
  PsCode c;
  c.n = 0;
  ps_put_rsp_add (&c, -PS_REP_FRAME);
  gum_x86_writer_put_bytes (w, c.b, c.n);
  again = w->pc;
  c.n = 0;
  ps_put (&c, test, sizeof (test));
  ps_put_u8 (&c, 0xb9); ps_put_u32 (&c, PS_REP_CHUNK);                   /* mov ecx, PS_REP_CHUNK */
  ps_put (&c, join, sizeof (join));
  gum_x86_writer_put_bytes (w, c.b, c.n);
  return again;
}

/* `jrcxz` to a label patched later; returns where its rel8 is. */
static guint
ps_put_jrcxz (PsCode * c)
{
  ps_put_u8 (c, 0xe3); ps_put_u8 (c, 0);
  return c->n - 1;
}

static void
ps_patch_rel8 (PsCode * c, guint at)
{
  c->b[at] = (guint8) (c->n - (at + 1));
}

/* count rax: counts[slot] += rax; budget -= rax; the slow stub when it went negative (rax, rcx,
 * rdx clobbered; flags kept). */
static void
ps_put_rep_add (PsCode * c, PsThread * t, guint64 slot)
{
  static const guint8 add[] = {
    0x48, 0x8b, 0x0a, 0x48, 0x8d, 0x0c, 0x01, 0x48, 0x89, 0x0a,  /* mov rcx, [rdx]; lea rcx, [rcx+rax]; mov [rdx], rcx */
  };
  static const guint8 sub[] = {
    0x48, 0x8b, 0x0a, 0x48, 0xf7, 0xd0, 0x48, 0x8d, 0x4c, 0x01, 0x01, /* mov rcx, [rdx]; not rax; lea rcx, [rcx+rax+1] */
    0x48, 0x89, 0x0a,                                               /* mov [rdx], rcx */
    0x48, 0x0f, 0xc9, 0x0f, 0xb6, 0xc9,                             /* bswap rcx; movzx ecx, cl: its sign byte */
  };
  guint ok;
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (&t->counts[slot])); /* movabs rdx */
  ps_put (c, add, sizeof (add));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (&t->budget[slot & (PS_K - 1)]));
  ps_put (c, sub, sizeof (sub));
  ok = ps_put_jrcxz (c);
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (t->stub));
  ps_put_u8 (c, 0xff); ps_put_u8 (c, 0xd2);                      /* call rdx */
  ps_patch_rel8 (c, ok);
}

static void
ps_emit_rep_after (GumX86Writer * w, PsThread * t, guint64 slot, guint kind, GumAddress again)
{
  static const guint8 save[] = {
    0x48, 0x89, 0x44, 0x24, 0x10,                       /* mov [rsp+16], rax */
    0x48, 0x89, 0x54, 0x24, 0x18,                       /* mov [rsp+24], rdx */
    0x48, 0x89, 0x4c, 0x24, 0x20,                       /* mov [rsp+32], rcx */
  };
  static const guint8 iterations[] = {
    0x48, 0x8b, 0x04, 0x24,                             /* mov rax, [rsp] */
    0x48, 0xf7, 0xd1, 0x48, 0x8d, 0x44, 0x08, 0x01,     /* not rcx; lea rax, [rax+rcx+1]: [rsp] - rcx */
    0x48, 0x89, 0xc1,                                   /* mov rcx, rax */
  };
  static const guint8 rest[] = {
    0x48, 0x8b, 0x0c, 0x24, 0x48, 0xf7, 0xd1,           /* mov rcx, [rsp]; not rcx */
    0x48, 0x8b, 0x54, 0x24, 0x08,                       /* mov rdx, [rsp+8] */
    0x48, 0x8d, 0x4c, 0x0a, 0x01,                       /* lea rcx, [rdx+rcx+1]: [rsp+8] - [rsp] */
  };
  static const guint8 restore[] = {
    0x48, 0x8b, 0x4c, 0x24, 0x20,                       /* mov rcx, [rsp+32] */
    0x48, 0x8b, 0x54, 0x24, 0x18,                       /* mov rdx, [rsp+24] */
    0x48, 0x8b, 0x44, 0x24, 0x10,                       /* mov rax, [rsp+16] */
  };
  static const guint8 drop[] = { 0x48, 0x8d, 0x40, 0xff }; /* lea rax, [rax-1] */
  PsCode c;
  guint none, full, going, last, to_stop[2], to_done;

  c.n = 0;
  ps_put (&c, save, sizeof (save));
  if (kind == 1)
  {
    ps_put_u8 (&c, 0xba); ps_put_u32 (&c, 0);                            /* mov edx, 0: never stopped */
  }
  else
  {
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, kind == X86_PREFIX_REPE ? 0x95 : 0x94); ps_put_u8 (&c, 0xc2); /* setnz / setz dl */
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, 0xb6); ps_put_u8 (&c, 0xd2);    /* movzx edx, dl: stopped by the comparison */
  }
  ps_put (&c, iterations, sizeof (iterations));
  ps_put_u8 (&c, 0xe3); ps_put_u8 (&c, 2);                               /* jrcxz none: no iteration, rcx was 0 */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 5);
  ps_put_u8 (&c, 0xe9);                                                  /* none: jmp done (too far for jrcxz) */
  none = c.n;
  ps_put_u32 (&c, 0);
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x8b); ps_put_u8 (&c, 0x4c); ps_put_u8 (&c, 0x24); ps_put_u8 (&c, 0x20);
  full = ps_put_jrcxz (&c);                                              /* mov rcx, [rsp+32]: the chunk ran out */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp stopped: stopped early */
  to_stop[0] = c.n - 1;
  ps_patch_rel8 (&c, full);
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x89); ps_put_u8 (&c, 0xd1);      /* mov rcx, rdx */
  going = ps_put_jrcxz (&c);                                             /* the comparison went on */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp stopped */
  to_stop[1] = c.n - 1;
  ps_patch_rel8 (&c, going);
  ps_put (&c, rest, sizeof (rest));
  last = ps_put_jrcxz (&c);                                              /* nothing left: the last pass */
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x89); ps_put_u8 (&c, 0x4c); ps_put_u8 (&c, 0x24); ps_put_u8 (&c, 0x20); /* mov [rsp+32], rcx */
  ps_put_rep_add (&c, t, slot);
  ps_put (&c, restore, sizeof (restore));
  ps_put_u8 (&c, 0xe9);                                                  /* jmp again: the next chunk */
  ps_put_rel32 (&c, w->pc + c.n + 4, again);
  ps_patch_rel8 (&c, to_stop[0]);
  ps_patch_rel8 (&c, to_stop[1]);
  ps_put (&c, drop, sizeof (drop));                                      /* stopped: no last pass */
  ps_patch_rel8 (&c, last);
  ps_put_rep_add (&c, t, slot);
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp done */
  to_done = c.n - 1;
  ps_patch_rel8 (&c, to_done);
  *(guint32 *) (c.b + none) = c.n - (none + 4);
  ps_put (&c, restore, sizeof (restore));
  ps_put_rsp_add (&c, PS_REP_FRAME);
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

/* A popf may set EFLAGS.AC (alignment checks), as HotSpot's CPU probe does to tell a 486: Stalker's
 * own code, run before the program's next popf restores the flags, then faults on its unaligned
 * accesses (SIGBUS, then a kill). A block that ran a popf clears AC before its end; the status
 * flags stay (pushf; and [rsp], ~AC; popf, below the red zone). */
static void
ps_emit_clear_ac (GumX86Writer * w)
{
  static const guint8 and_ac[] = { 0x48, 0x81, 0x24, 0x24, 0xff, 0xff, 0xfb, 0xff }; /* and qword [rsp], ~0x40000 */
  gum_x86_writer_put_lea_reg_reg_offset (w, GUM_X86_RSP, GUM_X86_RSP, -128);
  gum_x86_writer_put_pushfx (w);
  gum_x86_writer_put_bytes (w, and_ac, sizeof (and_ac));
  gum_x86_writer_put_popfx (w);
  gum_x86_writer_put_lea_reg_reg_offset (w, GUM_X86_RSP, GUM_X86_RSP, 128);
}

void
transform (GumStalkerIterator * iterator, GumStalkerOutput * output, gpointer user_data)
{
  PsThread * t = user_data;
  GumX86Writer * w = output->writer.x86;
  const cs_insn * insn;
  guint64 n = 0, slot, last_pc = 0;
  gboolean placed = FALSE, loop = FALSE, tail = FALSE, reps = FALSE;
  guint rep;
  GumAddress top = 0, block_pc = w->pc, again = 0, first_pc = 0;
  gboolean popf = FALSE;
  PsLoopCheck check;
  PsLoopJump jump;
  PsPatch patch;
  PsLoop lp;

  slot = ps_take_slot (t);

  while (gum_stalker_iterator_next (iterator, &insn))
  {
    if (n == 0 && ps_loop_plan (iterator, t, w->pc, insn, &lp))
    {
      loop = TRUE;
      if (!lp.unroll)  /* a register loop from the first iteration, one check an iteration */
      {
        ps_settle_slot (t, slot, lp.branch_pc);
        ps_emit_loop_entry (w, t, &lp, slot);
        top = w->pc;
      }
    }
    if (loop && !lp.unroll)
    {
      if (n == lp.dead)
      {
        check = ps_emit_loop_check (w, lp.reg, lp.n);
        ps_loop_check_here (&check, t, &lp, slot);
        placed = TRUE;
      }
      if (insn->address == lp.branch_pc && n + 1 == lp.n)
      {
        ps_emit_loop_branch (w, t, &lp, insn, top, slot);
        loop = FALSE;
      }
    }
    else
    {
      if (!placed)
      {
        int use = ps_flag_use (insn);
        gboolean dead = use == PS_FLAGS_KILL || (use == PS_FLAGS_NONE && ps_is_call (insn));
        if (dead || use == PS_FLAGS_READ || ps_ends_block (insn))
        {
          patch = ps_emit_counter (w, t, slot, !dead);
          placed = TRUE;
        }
      }
      if (loop && insn->address == lp.branch_pc && n + 1 == lp.n)
      {
        jump = ps_emit_loop_jump (w, insn);
        tail = TRUE;
        loop = FALSE;
      }
    }
    if (t->win_size != 0)
      ps_emit_mem_slot (w, t, insn, block_pc);
    if (n == 0)
      first_pc = insn->address;
    popf = popf || insn->id == X86_INS_POPFQ || insn->id == X86_INS_POPF;
    if (popf && ps_ends_block (insn))
    {
      ps_emit_clear_ac (w);
      popf = FALSE;
    }
    if (insn->id == X86_INS_RET && insn->size == 1)
      t->ret_site = w->pc;
    rep = ps.rep_iterations && t->stub != NULL ? ps_rep_kind (insn) : 0;
    if (rep != 0)
      again = ps_emit_rep_before (w);
    n++;
    last_pc = insn->address;
    gum_stalker_iterator_keep (iterator);
    if (rep != 0)
    {
      ps_emit_rep_after (w, t, slot, rep, again);
      reps = TRUE;
    }
  }
  if (popf)
    ps_emit_clear_ac (w);
  if (n != 0)
    ps_fault_note (t, block_pc, w->pc, first_pc);

  if (tail)
    ps_emit_loop_tail (w, t, &lp, &jump, slot);
  if (top != 0)
  {
    if (loop)
    {
      /* Stalker ended the block before its branch (code slab full): no loop, leave the register. */
      ps_emit_loop_exit (w, t, &lp, slot);
      if (placed)
        *(guint32 *) check.imm = (guint32) n;
      else
        t->carry += n;
    }
    return;
  }
  if (!placed)
  {
    /* Stalker cut the block early (code slab full): count it with the next block. */
    t->carry += n;
    if (reps)
      ps_settle_slot (t, slot, last_pc);  /* its rep iterations counted in its own slot */
    return;
  }
  n += t->carry;
  t->carry = 0;
  *(guint32 *) patch.count_imm = (guint32) n;
  *(guint32 *) patch.budget_imm = (guint32) n;
  ps_settle_slot (t, slot, last_pc);
}

static void
ps_cold_init (PsThread * t)
{
  PsCode c;
  c.n = 0;
  ps_put_stub (&c, t);
  t->stub = GSIZE_TO_POINTER (ps_cold_put (t, &c));
}

#else

static void
ps_cold_init (PsThread * t)
{
}

static void
ps_loops_release (PsThread * t)
{
}

#endif
