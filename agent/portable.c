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

  t->compiled++;
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

#ifndef PS_X86_64

static void
ps_cold_init (PsThread * t)
{
}

static void
ps_loops_release (PsThread * t)
{
}

#endif
