#ifdef PS_X86_64

/* ---- x86-64: memory slots and their recorders (--locality; windows: locality.c) ---- */

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

#endif
