#ifdef PS_X86_64

/* ---- self-looping blocks: the register loop's code (planned in x86_loop_plan.c) ---- */

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
 * of two whose first sits in the block before) never enters the register. Each copy of the body
 * is noted in the fault map (faults.c) with the loop's tag: a runtime's planned fault in one (a
 * safepoint poll) is shown the real PC and the program's rsp and register. */
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
  guint64 tag = ps_loop_tag (r, slot);

  ps_patch_rel32 (j->rel, j->done, w->pc);
  ps_emit_loop_entry (w, t, lp, slot);
  top = w->pc;
  gum_x86_writer_put_bytes (w, body, a);
  pair = ps_emit_loop_check (w, r, 2 * lp->n);
  gum_x86_writer_put_bytes (w, body + a, b);
  ps_fault_note (t, top, w->pc, lp->first_pc, tag);  /* each copy of the body, for a fault in it */
  exit1 = ps_emit_branch (w, cc ^ 1, 0, &exit1_end);
  gum_x86_writer_put_bytes (w, body, a + b);
  ps_fault_note (t, exit1_end, w->pc, lp->first_pc, tag);
  ps_emit_branch (w, cc, top, &end);
  ps_loop_link (t, end - 4, top);
  to_exit[0] = ps_emit_branch (w, -1, 0, &exit_end[0]);

  single = w->pc;
  check = ps_emit_loop_check (w, r, lp->n);
  ps_loop_check_here (&check, t, lp, slot);
  gum_x86_writer_put_bytes (w, body + a, b);
  ps_fault_note (t, check.end, w->pc, lp->dead_pc, tag);
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

#endif
