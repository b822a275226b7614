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
    ps_put64 (out + PS_LOC_OPENED, t->win_opened);
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
  t->win_opened = t->seq;
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
