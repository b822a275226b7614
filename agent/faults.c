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
