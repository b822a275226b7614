#ifdef PS_X86_64

/* ---- x86-64: the overflow flag across ret and indirect jmp/call (issue 32) ----
 * Stalker's inline cache for these transfers saves the flags with lahf (not OF), compares the
 * target with cmp (which clears OF) and restores them with sahf: the target sees OF = 0. Code
 * that hands OF across such a transfer (hand-written stubs) would read the wrong value.
 * Before each such transfer the transform stores OF and the target's address in the thread's
 * PsThread (of_val, of_tag: ps_emit_of_save); a block that reads OF before it writes it checks,
 * before that read, whether the tag names its own start, and if so puts OF back and clears the
 * tag (ps_emit_of_restore). The check touches no flag (jrcxz), so it costs a few moves where no
 * transfer handed OF over; blocks that never read OF first pay nothing. Not covered: an
 * indirect operand with a segment prefix, and a block that passes OF on untouched to another
 * block through a direct branch (the tag names the first block only). */

/* Whether `insn` reads OF, and whether it certainly writes it (a shift or rotate by a count
 * that may be 0 leaves it as it was). */
static gboolean
ps_reads_of (const cs_insn * insn)
{
  guint64 e = insn->detail->x86.eflags;
  guint8 i;
  if (e != 0)
    return (e & PS_STATUS_READ (OF)) != 0;
  for (i = 0; i != insn->detail->regs_read_count; i++)
  {
    if (insn->detail->regs_read[i] == X86_REG_EFLAGS)
      return TRUE;  /* pushf, and anything capstone gives no flag detail for */
  }
  return FALSE;
}

static gboolean
ps_writes_of (const cs_insn * insn)
{
  int use = ps_flag_use (insn);
  return use == PS_FLAGS_KILL || (use == PS_FLAGS_PARTIAL &&
      (insn->detail->x86.eflags & (PS_STATUS_WRITE (OF) | X86_EFLAGS_SET_OF)) != 0);
}

/* ret, ret imm16, and near jmp/call through a register or memory: Stalker's inline cache. */
static gboolean
ps_is_cached_transfer (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  if (insn->id == X86_INS_RET)
    return TRUE;
  if ((insn->id != X86_INS_JMP && insn->id != X86_INS_CALL) || x->op_count != 1)
    return FALSE;
  return x->operands[0].type == X86_OP_REG || x->operands[0].type == X86_OP_MEM;
}

static void
ps_put_u64_imm (PsCode * c, guint8 rex, guint8 op, guint64 v)
{
  ps_put_u8 (c, rex);
  ps_put_u8 (c, op);
  ps_put_u64 (c, v);
}

/* mov rax, <the transfer's target>, with rax and rcx pushed below the red zone (rsp 144 lower);
 * FALSE when the operand cannot be re-read here. */
static gboolean
ps_put_target (PsCode * c, const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  const cs_x86_op * op;
  int base, index;
  if (insn->id == X86_INS_RET)
  {
    static const guint8 load_ret[] = { 0x48, 0x8b, 0x84, 0x24, 0x90, 0, 0, 0 }; /* mov rax, [rsp+144] */
    ps_put (c, load_ret, sizeof (load_ret));
    return TRUE;
  }
  op = &x->operands[0];
  if (op->type == X86_OP_REG)
  {
    int r = ps_gpr_any (op->reg);
    if (r < 0 || r == 4)
      return FALSE;
    ps_put_u8 (c, 0x48 | (r >= 8 ? 0x04 : 0)); /* mov rax, r64 */
    ps_put_u8 (c, 0x89);
    ps_put_u8 (c, 0xc0 | ((r & 7) << 3));
    return TRUE;
  }
  if (op->mem.segment != X86_REG_INVALID)
    return FALSE;
  if (op->mem.base == X86_REG_RIP)
  {
    static const guint8 load_rax[] = { 0x48, 0x8b, 0x00 }; /* mov rax, [rax] */
    ps_put_u64_imm (c, 0x48, 0xb8, insn->address + insn->size + op->mem.disp); /* movabs rax, address */
    ps_put (c, load_rax, sizeof (load_rax));
    return TRUE;
  }
  base = op->mem.base == X86_REG_INVALID ? -1 : ps_gpr_any (op->mem.base);
  index = op->mem.index == X86_REG_INVALID ? -1 : ps_gpr_any (op->mem.index);
  if ((op->mem.base != X86_REG_INVALID && base < 0) || (op->mem.index != X86_REG_INVALID && index < 0) ||
      index == 4)
    return FALSE;
  {
    gint64 disp = op->mem.disp + (base == 4 ? 144 : 0);
    guint8 scale = op->mem.scale == 8 ? 3 : op->mem.scale == 4 ? 2 : op->mem.scale == 2 ? 1 : 0;
    if (disp != (gint32) disp)
      return FALSE;
    /* mov rax, [base + index*scale + disp32] (SIB form; no base: mod 00 with base 101) */
    ps_put_u8 (c, 0x48 | (index >= 8 ? 0x02 : 0) | (base >= 8 ? 0x01 : 0));
    ps_put_u8 (c, 0x8b);
    ps_put_u8 (c, base < 0 ? 0x04 : 0x84);
    ps_put_u8 (c, (scale << 6) | ((index < 0 ? 4 : index & 7) << 3) | (base < 0 ? 5 : base & 7));
    ps_put_u32 (c, (guint32) (gint32) disp);
  }
  return TRUE;
}

/* Before a cached transfer: of_tag = its target, of_val = OF. No flag changes. */
static void
ps_emit_of_save (GumX86Writer * w, PsThread * t, const cs_insn * insn)
{
  static const guint8 push[] = { 0x50, 0x51 };                 /* push rax; push rcx */
  static const guint8 store[] = { 0x48, 0x89, 0x01,            /* mov [rcx], rax */
                                  0x0f, 0x90, 0xc0,            /* seto al */
                                  0x88, 0x41, 0x08,            /* mov [rcx+8], al */
                                  0x59, 0x58 };                /* pop rcx; pop rax */
  static const guint8 lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0 }; /* lea rsp, [rsp+128] */
  PsCode c;
  c.n = 0;
  ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
  ps_put (&c, push, sizeof (push));
  if (!ps_put_target (&c, insn))
    return;
  ps_put_u64_imm (&c, 0x48, 0xb9, GPOINTER_TO_SIZE (&t->of_tag)); /* movabs rcx, &of_tag */
  ps_put (&c, store, sizeof (store));
  ps_put (&c, lea_up, sizeof (lea_up));
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

/* In a block starting at `start` that reads OF before writing it, before that read: if of_tag
 * is `start`, OF = of_val and of_tag = 0. The test (of_tag - start == 0) is jrcxz's. */
static void
ps_emit_of_restore (GumX86Writer * w, PsThread * t, GumAddress start)
{
  static const guint8 push[] = { 0x50, 0x51 };                               /* push rax; push rcx */
  static const guint8 test[] = { 0x48, 0x8d, 0x0c, 0x08,                     /* lea rcx, [rax+rcx] */
                                 0xe3, 0x02,                                 /* jrcxz put */
                                 0xeb, 0x26 };                               /* jmp done */
  static const guint8 put[] = { 0x9c,                                        /* put: pushf */
                                0x48, 0xc7, 0x01, 0, 0, 0, 0,                /* mov qword [rcx], 0 */
                                0x0f, 0xb6, 0x41, 0x08,                      /* movzx eax, byte [rcx+8] */
                                0xc1, 0xe0, 0x0b,                            /* shl eax, 11 */
                                0x48, 0x81, 0x24, 0x24, 0xff, 0xf7, 0xff, 0xff, /* and qword [rsp], ~OF */
                                0x48, 0x09, 0x04, 0x24,                      /* or [rsp], rax */
                                0x9d,                                        /* popf */
                                0x59, 0x58 };                                /* done: pop rcx; pop rax */
  static const guint8 lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0 };  /* lea rsp, [rsp+128] */
  PsCode c;
  c.n = 0;
  ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
  ps_put (&c, push, sizeof (push));
  ps_put_u64_imm (&c, 0x48, 0xa1, GPOINTER_TO_SIZE (&t->of_tag));    /* movabs rax, [of_tag] */
  ps_put_u64_imm (&c, 0x48, 0xb9, (guint64) -(gint64) start);       /* movabs rcx, -start */
  ps_put (&c, test, sizeof (test));
  ps_put_u64_imm (&c, 0x48, 0xb9, GPOINTER_TO_SIZE (&t->of_tag));    /* put: movabs rcx, &of_tag */
  ps_put (&c, put, sizeof (put));
  ps_put (&c, lea_up, sizeof (lea_up));
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

#endif
