#ifdef PS_X86_64

/* ---- x86-64: the transform, one block at a time (counters, memory slots, loops, rep strings) ---- */

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

/* What a block does for the program's sake, counted or not (issue 32): HotSpot runs right only with
 * it. Per block: its first real instruction, whether OF is known yet, whether a popf ran. */
typedef struct
{
  GumAddress code;  /* where the block's compiled code starts */
  guint64 first;
  guint64 end;      /* past its last real instruction so far */
  gboolean of_known;
  gboolean popf;
} PsKeep;

/* Before `insn`'s own code (and before its memory slot): OF handed across Stalker's inline cache
 * (x86_flags.c; `of_check` FALSE in a register loop), the `ret` site a resumed fault goes through. */
static void
ps_keep_before (GumX86Writer * w, PsThread * t, PsKeep * k, const cs_insn * insn, gboolean of_check)
{
  if (k->first == 0)
    k->first = insn->address;
  k->end = insn->address + insn->size;
  if (!k->of_known && of_check)
  {
    if (ps_reads_of (insn))
      ps_emit_of_restore (w, t, k->first);
    k->of_known = ps_reads_of (insn) || ps_writes_of (insn);
  }
  if (insn->id == X86_INS_RET && insn->size == 1)
    t->ret_site = w->pc;  /* a resumed fault goes through the OF save too */
  if (ps_is_cached_transfer (insn))
    ps_emit_of_save (w, t, insn);
}

/* Just before `insn` itself: AC cleared before a block end that follows a popf. */
static void
ps_keep_ac (GumX86Writer * w, PsKeep * k, const cs_insn * insn)
{
  k->popf = k->popf || insn->id == X86_INS_POPFQ || insn->id == X86_INS_POPF;
  if (k->popf && ps_ends_block (insn))
  {
    ps_emit_clear_ac (w);
    k->popf = FALSE;
  }
}

/* After the block's last instruction: AC cleared if Stalker cut the block after a popf; the block
 * noted for a fault in it (faults.c) and, in a JIT's code, for its rewrites (jit.c). */
static void
ps_keep_end (GumX86Writer * w, PsThread * t, PsKeep * k)
{
  if (k->popf)
    ps_emit_clear_ac (w);
  if (k->first != 0)
  {
    ps_fault_note (t, k->code, w->pc, k->first, 0);
    ps_jit_note (k->first, k->end);
  }
}

/* Bare Stalker with the same handling and no counters: the cost baseline for runtimes that need
 * it (bench/jvm/; TraceSession(bare="handled")). */
void
transform_bare (GumStalkerIterator * iterator, GumStalkerOutput * output, gpointer user_data)
{
  PsThread * t = user_data;
  GumX86Writer * w = output->writer.x86;
  const cs_insn * insn;
  PsKeep k = { w->pc, 0, 0, FALSE, FALSE };

  t->compiled++;
  while (gum_stalker_iterator_next (iterator, &insn))
  {
    ps_keep_before (w, t, &k, insn, TRUE);
    ps_keep_ac (w, &k, insn);
    gum_stalker_iterator_keep (iterator);
  }
  ps_keep_end (w, t, &k);
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
  GumAddress top = 0, block_pc = w->pc, again = 0, loop_end = 0;
  gboolean reg_loop = FALSE;
  PsKeep k = { w->pc, 0, 0, FALSE, FALSE };
  PsLoopCheck check;
  PsLoopJump jump;
  PsPatch patch;
  PsLoop lp;

  t->compiled++;
  slot = ps_take_slot (t);

  while (gum_stalker_iterator_next (iterator, &insn))
  {
    if (n == 0 && ps_loop_plan (iterator, t, w->pc, insn, &lp))
    {
      loop = TRUE;
      if (!lp.unroll)  /* a register loop from the first iteration, one check an iteration */
      {
        reg_loop = TRUE;
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
        loop_end = w->pc;
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
    ps_keep_before (w, t, &k, insn, !reg_loop);
    if (t->win_size != 0)
      ps_emit_mem_slot (w, t, insn, block_pc);
    ps_keep_ac (w, &k, insn);
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
  if (loop && top != 0)
    loop_end = w->pc;  /* Stalker ended the block before its branch: the exit follows */
  ps_keep_end (w, t, &k);
  if (top != 0)
    ps_fault_note (t, top, loop_end, lp.first_pc, ps_loop_tag (lp.reg, slot));

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

#endif
