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
  gboolean popf = FALSE, of_known = FALSE, reg_loop = FALSE;
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
    if (n == 0)
      first_pc = insn->address;
    if (!of_known && !reg_loop)
    {
      if (ps_reads_of (insn))
        ps_emit_of_restore (w, t, first_pc);
      of_known = ps_reads_of (insn) || ps_writes_of (insn);
    }
    if (insn->id == X86_INS_RET && insn->size == 1)
      t->ret_site = w->pc;  /* a resumed fault goes through the OF save too */
    if (ps_is_cached_transfer (insn))
      ps_emit_of_save (w, t, insn);
    if (t->win_size != 0)
      ps_emit_mem_slot (w, t, insn, block_pc);
    popf = popf || insn->id == X86_INS_POPFQ || insn->id == X86_INS_POPF;
    if (popf && ps_ends_block (insn))
    {
      ps_emit_clear_ac (w);
      popf = FALSE;
    }
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

#endif
