/* ---- a thread's end, its release, and the agent's calls that configure and drain ---- */

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

/* How many blocks Stalker has compiled for the thread (every transform counts them). Following
 * another thread compiles the block it stands at before Stalker.follow returns, so 0 then means the
 * follow failed (Stalker stops the thread through a ptrace helper, and says nothing when that helper
 * cannot attach). */
guint64
ps_thread_blocks (PsThread * t)
{
  return t->compiled;
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
