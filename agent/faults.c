/* ---- faults in followed code ----
 * Runtimes fault on purpose and resume where their signal handler says, from the faulting PC:
 * HotSpot's CPU probe, its safepoint polls and implicit null checks in compiled code. Under
 * Stalker that PC is in the thread's code cache, which the handler does not know. The agent
 * hooks the program's handler: it shows it the real PC (ps_fault_block finds the compiled block,
 * the agent the instruction in it) and resumes the thread, still followed, where the handler
 * decided, through Stalker's code for a `ret` (ps_ret_site) with that address pushed. */

#define PS_FMAP 4                  /* words an entry: code start, code end, real start, loop tag */
#define PS_LOOP_FRAME 144          /* a register loop's frame below rsp: red zone (128), saved r, r at entry */

/* A fault map entry's tag for code run inside a register loop (x86_loop_plan.c): rsp is
 * PS_LOOP_FRAME lower, register `reg` (hardware number) holds the count, slot `slot`'s. 0: none. */
static guint64
ps_loop_tag (int reg, guint64 slot)
{
  return (slot << 8) | (guint64) (reg + 1);
}

/* Notes compiled code [code_start, code_end) as a copy of the code from `real` on (newest first). */
static void
ps_fault_note (PsThread * t, guint64 code_start, guint64 code_end, guint64 real, guint64 loop_tag)
{
  guint64 * grown, * old;
  if (t->fmap_n == t->fmap_cap)
  {
    guint64 cap = t->fmap_cap == 0 ? 1024 : t->fmap_cap * 2;
    grown = g_memdup (t->fmap, t->fmap_n * PS_FMAP * sizeof (guint64));
    grown = g_realloc (grown, cap * PS_FMAP * sizeof (guint64));
    old = t->fmap;
    t->fmap = grown;  /* published before the old copy goes: a signal on this thread reads either */
    t->fmap_cap = cap;
    g_free (old);
  }
  t->fmap[t->fmap_n * PS_FMAP] = code_start;
  t->fmap[t->fmap_n * PS_FMAP + 1] = code_end;
  t->fmap[t->fmap_n * PS_FMAP + 2] = real;
  t->fmap[t->fmap_n * PS_FMAP + 3] = loop_tag;
  t->fmap_n++;
}

/* The real address of the code whose compiled copy holds `pc`, newest first (a block recompiled
 * in place); 0 if `pc` is in none of the thread's. out[0]: where that copy starts, out[1]: its
 * loop tag (ps_fault_unloop). */
guint64
ps_fault_block (PsThread * t, guint64 pc, guint64 * out)
{
  guint64 i;
  for (i = t->fmap_n; i-- > 0;)
  {
    guint64 * e = t->fmap + i * PS_FMAP;
    if (pc >= e[0] && pc < e[1])
    {
      out[0] = e[0];
      out[1] = e[3];
      return e[2];
    }
  }
  return 0;
}

/* A fault inside a register loop, before the program's handler sees its context (`gregs`, the
 * ucontext's, in REG_* order): what the loop's register counted goes to its counter and budget (as
 * the loop's exit does), and the register and rsp are the program's again. The thread then resumes
 * through ps_ret_site, outside the loop. */
void
ps_fault_unloop (PsThread * t, guint64 loop_tag, guint64 * gregs)
{
  static const guint8 greg_of[16] = { 13, 14, 12, 11, 15, 10, 9, 8, 0, 1, 2, 3, 4, 5, 6, 7 };
  guint64 slot = loop_tag >> 8;
  guint64 * r = &gregs[greg_of[(loop_tag & 0xff) - 1]];
  guint64 * frame = GSIZE_TO_POINTER (gregs[15]);  /* REG_RSP */
  gint64 used = (gint64) (frame[1] - *r);
  t->counts[slot] += used;
  t->budget[slot & (PS_K - 1)] -= used;
  *r = frame[0];
  gregs[15] += PS_LOOP_FRAME;
}

guint64
ps_ret_site (PsThread * t)
{
  return t->ret_site;
}
