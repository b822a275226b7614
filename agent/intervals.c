/* ---- interval bookkeeping (slow path, on the owning thread) ---- */

static guint64
ps_now_ns (void)
{
  struct ps_timespec ts;
  clock_gettime (0 /* CLOCK_REALTIME */, &ts);
  return (guint64) ts.tv_sec * 1000000000ULL + (guint64) ts.tv_nsec;
}

/* Thread `t`'s CPU time and, on `t` itself, its faults and context switches. Another thread may
 * close `t`'s last interval (the process's exit, an exec): its CPU comes from `t`'s own CPU clock
 * (the kernel's clock id of a thread, readable from any thread of the process), and the four counts
 * stay where the interval started (a delta of 0), never the closer's: its getrusage gave another
 * thread's counts and, less `t`'s start, a negative CPU time (wrapped to ~1.8e19 ns). */
static void
ps_os_sample (PsThread * t, guint64 * out)
{
  struct ps_rusage ru;
  struct ps_timespec ts;
  int clock = (~(int) t->tid << 3) | 6; /* MAKE_THREAD_CPUCLOCK (tid, CPUCLOCK_SCHED) */
  guint i;
  out[0] = clock_gettime (clock, &ts) == 0 ? (guint64) ts.tv_sec * 1000000000ULL + (guint64) ts.tv_nsec
      : t->os_start[0]; /* a thread already gone: its CPU delta is 0 */
  if ((guint64) gettid () != t->tid || getrusage (1 /* RUSAGE_THREAD */, &ru) != 0)
  {
    for (i = 1; i != PS_REC_OS_FIELDS; i++)
      out[i] = t->os_start[i];
    return;
  }
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
  t->compiled = 0;
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
  t->of_tag = 0;
  t->of_val = 0;
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
    ps_os_sample (t, t->os_start);
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
  ps_os_sample (t, os_now);
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
      ps_put64 (p, ps_jit_key (t->pcs[i]));
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
