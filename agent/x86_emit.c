#ifdef PS_X86_64

/* ---- x86-64 fast path: inline counters ---- */

#define PS_STATUS_WRITE(f) (X86_EFLAGS_MODIFY_##f | X86_EFLAGS_RESET_##f | X86_EFLAGS_UNDEFINED_##f)
#define PS_STATUS_READ(f) (X86_EFLAGS_TEST_##f | X86_EFLAGS_PRIOR_##f)

enum { PS_FLAGS_NONE, PS_FLAGS_KILL, PS_FLAGS_READ, PS_FLAGS_PARTIAL };

/* How an instruction uses the six status flags. */
static int
ps_flag_use (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint64 e = x->eflags;
  guint64 reads = PS_STATUS_READ (OF) | PS_STATUS_READ (SF) | PS_STATUS_READ (ZF) |
      PS_STATUS_READ (AF) | PS_STATUS_READ (PF) | PS_STATUS_READ (CF);
  guint8 i;
  gboolean all;

  for (i = 0; i != insn->detail->regs_read_count; i++)
  {
    if (insn->detail->regs_read[i] == X86_REG_EFLAGS)
      return PS_FLAGS_READ;
  }
  if ((e & reads) != 0)
    return PS_FLAGS_READ;
  switch (insn->id)
  {
    case X86_INS_SHL: case X86_INS_SHR: case X86_INS_SAR: case X86_INS_SAL:
    case X86_INS_ROL: case X86_INS_ROR: case X86_INS_SHLD: case X86_INS_SHRD:
      /* A count of zero leaves every flag as it was. */
      if (x->op_count >= 2 && x->operands[x->op_count - 1].type == X86_OP_IMM &&
          (x->operands[x->op_count - 1].imm & 63) != 0)
        break;
      if (x->op_count == 1)
        break;
      return PS_FLAGS_PARTIAL;
    default:
      break;
  }
  all = (e & (PS_STATUS_WRITE (OF) | X86_EFLAGS_SET_OF)) != 0 &&
      (e & (PS_STATUS_WRITE (SF) | X86_EFLAGS_SET_SF)) != 0 &&
      (e & (PS_STATUS_WRITE (ZF) | X86_EFLAGS_SET_ZF)) != 0 &&
      (e & (PS_STATUS_WRITE (AF) | X86_EFLAGS_SET_AF)) != 0 &&
      (e & (PS_STATUS_WRITE (PF) | X86_EFLAGS_SET_PF)) != 0 &&
      (e & (PS_STATUS_WRITE (CF) | X86_EFLAGS_SET_CF)) != 0;
  if (all)
    return PS_FLAGS_KILL;
  for (i = 0; i != insn->detail->regs_write_count; i++)
  {
    if (insn->detail->regs_write[i] == X86_REG_EFLAGS)
      return PS_FLAGS_PARTIAL;
  }
  return (e != 0) ? PS_FLAGS_PARTIAL : PS_FLAGS_NONE;
}

static gboolean
ps_ends_block (const cs_insn * insn)
{
  guint8 i;
  for (i = 0; i != insn->detail->groups_count; i++)
  {
    guint8 g = insn->detail->groups[i];
    if (g == X86_GRP_JUMP || g == X86_GRP_CALL || g == X86_GRP_RET || g == X86_GRP_INT ||
        g == X86_GRP_IRET)
      return TRUE;
  }
  return insn->id == X86_INS_SYSCALL || insn->id == X86_INS_SYSENTER;
}

static gboolean
ps_is_call (const cs_insn * insn)
{
  guint8 i;
  for (i = 0; i != insn->detail->groups_count; i++)
  {
    if (insn->detail->groups[i] == X86_GRP_CALL)
      return TRUE;
  }
  return FALSE;
}

static gboolean
ps_near (GumAddress from, GumAddress to)
{
  gint64 d = (gint64) (to - from);
  return d > -0x7fff0000LL && d < 0x7fff0000LL;
}

/* Code is assembled into a PsCode buffer, then copied into Stalker's writer or the cold area. */
typedef struct { guint8 b[320]; guint n; } PsCode;  /* 320: a rep string's count (ps_emit_rep_after) */

static void
ps_put (PsCode * c, const guint8 * b, guint n)
{
  guint i;
  for (i = 0; i != n; i++)
    c->b[c->n + i] = b[i];
  c->n += n;
}

static void
ps_put_u8 (PsCode * c, guint8 v)
{
  c->b[c->n++] = v;
}

static void
ps_put_u32 (PsCode * c, guint32 v)
{
  *(guint32 *) (c->b + c->n) = v;
  c->n += 4;
}

static void
ps_put_u64 (PsCode * c, guint64 v)
{
  *(guint64 *) (c->b + c->n) = v;
  c->n += 8;
}

/* rel32 operand at the end of an instruction that will end at `end` (runtime address). */
static void
ps_put_rel32 (PsCode * c, GumAddress end, GumAddress target)
{
  ps_put_u32 (c, (guint32) (gint32) ((gint64) target - (gint64) end));
}

static const guint8 ps_lea_down[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };             /* lea rsp, [rsp-128] */
static const guint8 ps_lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 }; /* lea rsp, [rsp+128] */

/* The slow stub: saves everything the C slow path could touch, calls ps_slow (t), returns. */
static void
ps_put_stub (PsCode * c, PsThread * t)
{
  static const guint8 save[] = {
    0x9c,                                /* pushfq */
    0x50, 0x51, 0x52, 0x56, 0x57,        /* push rax, rcx, rdx, rsi, rdi */
    0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* push r8..r11 */
    0x55,                                /* push rbp */
    0x48, 0x89, 0xe5,                    /* mov rbp, rsp */
    0x48, 0x83, 0xe4, 0xc0,              /* and rsp, -64 */
    0x48, 0x81, 0xec, 0x00, 0x02, 0x00, 0x00, /* sub rsp, 512 */
    0x48, 0x0f, 0xae, 0x04, 0x24,        /* fxsave64 [rsp] */
    0xfc,                                /* cld */
  };
  static const guint8 restore[] = {
    0xff, 0xd0,                          /* call rax */
    0x48, 0x0f, 0xae, 0x0c, 0x24,        /* fxrstor64 [rsp] */
    0x48, 0x89, 0xec,                    /* mov rsp, rbp */
    0x5d,                                /* pop rbp */
    0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* pop r11..r8 */
    0x5f, 0x5e, 0x5a, 0x59, 0x58,        /* pop rdi, rsi, rdx, rcx, rax */
    0x9d,                                /* popfq */
    0xc3,                                /* ret */
  };

  ps_put (c, save, sizeof (save));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xbf); /* movabs rdi, t */
  ps_put_u64 (c, GPOINTER_TO_SIZE (t));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xb8); /* movabs rax, ps_slow */
  ps_put_u64 (c, GPOINTER_TO_SIZE (ps_slow));
  ps_put (c, restore, sizeof (restore));
}

/* Copies code into the thread's cold area; returns its address, or 0 when the area is full. */
static GumAddress
ps_cold_put (PsThread * t, const PsCode * c)
{
  guint8 * dst = t->cold_cur;
  guint i;
  if (dst + c->n > t->cold_end)
    return 0;
  for (i = 0; i != c->n; i++)
    dst[i] = c->b[i];
  t->cold_cur += c->n;
  return GPOINTER_TO_SIZE (dst);
}

/* `op qword [target], imm32` (op: 0 add, 5 sub) rip-relative when reachable from `pc`, else
 * through r11 (saved by the caller's sequence). Returns the offset of the imm32 in the code. */
static guint
ps_put_rmw (PsCode * c, GumAddress pc, guint8 op, gpointer target, gboolean far)
{
  guint imm;
  if (!far)
  {
    ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x81); ps_put_u8 (c, 0x05 | (op << 3));
    ps_put_rel32 (c, pc + c->n + 8, GPOINTER_TO_SIZE (target));
    imm = c->n;
    ps_put_u32 (c, 0);
    return imm;
  }
  ps_put_u8 (c, 0x49); ps_put_u8 (c, 0xbb); /* movabs r11, target */
  ps_put_u64 (c, GPOINTER_TO_SIZE (target));
  ps_put_u8 (c, 0x49); ps_put_u8 (c, 0x81); ps_put_u8 (c, 0x03 | (op << 3)); /* op qword [r11], imm32 */
  imm = c->n;
  ps_put_u32 (c, 0);
  return imm;
}

/* Where to patch the emitted counter code once the block's length is known. */
typedef struct
{
  guint8 * count_imm;
  guint8 * budget_imm;
} PsPatch;

/*
 * The counter sequence of one block. The budget-exhausted branch goes to a per-block trampoline in
 * the thread's cold area (js rel32; not taken on the hot path). Where the cold area is full or out
 * of reach, the call to the stub sits inline behind a jns, with a stub placed in the code itself.
 */
static PsPatch
ps_emit_counter (GumX86Writer * w, PsThread * t, guint64 slot, gboolean save_flags)
{
  static const guint8 flags_save[] = { 0x50, 0x9f, 0x0f, 0x90, 0xc0 };   /* push rax; lahf; seto al */
  static const guint8 flags_restore[] = { 0x04, 0x7f, 0x9e, 0x58 };      /* add al, 0x7f; sahf; pop rax */
  static const guint8 r11_save[] = { 0x41, 0x53 };                       /* push r11 */
  static const guint8 r11_restore[] = { 0x41, 0x5b };                    /* pop r11 */
  PsCode c, cold;
  PsPatch p;
  gpointer counter = &t->counts[slot];
  gpointer budget = &t->budget[slot & (PS_K - 1)];
  GumAddress pc = w->pc, tramp = 0, stub = GPOINTER_TO_SIZE (t->stub);
  guint count_imm, budget_imm, js_at = 0;
  gboolean far, cold_ok;

  far = !ps_near (pc, GPOINTER_TO_SIZE (counter)) || !ps_near (pc, GPOINTER_TO_SIZE (budget));
  if (far)
  {
    save_flags = TRUE;
  }
  cold_ok = stub != 0 && t->cold_cur + 64 <= t->cold_end && ps_near (pc, GPOINTER_TO_SIZE (t->cold_cur)) &&
      ps_near (pc, GPOINTER_TO_SIZE (t->cold_end));

  c.n = 0;
  if (save_flags)
  {
    ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
    ps_put (&c, flags_save, sizeof (flags_save));
    if (far)
      ps_put (&c, r11_save, sizeof (r11_save));
  }
  count_imm = ps_put_rmw (&c, pc, 0, counter, far);
  budget_imm = ps_put_rmw (&c, pc, 5, budget, far);
  if (cold_ok)
  {
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, 0x88); /* js rel32 trampoline (patched below) */
    js_at = c.n;
    ps_put_u32 (&c, 0);
  }
  else
  {
    guint8 * jns;
    if (stub == 0 || !ps_near (pc + 256, stub))
    {
      /* No reachable stub: place one here, jumped over, for this block alone. t->stub stays the
       * cold area's stub: the cold area's trampolines call t->stub by rel32 with no reach check,
       * and Stalker rewrites a block in place when its code changes. Pointed at a stub in a far
       * block, the JVM's trampolines (its code slabs lie >2 GB apart) called an unmapped address
       * (issue 32). */
      guint skip;
      ps_put_u8 (&c, 0xe9);
      skip = c.n;
      ps_put_u32 (&c, 0);
      stub = pc + c.n;
      ps_put_stub (&c, t);
      *(guint32 *) (c.b + skip) = c.n - (skip + 4);
    }
    ps_put_u8 (&c, 0x79); ps_put_u8 (&c, 0); /* jns skip */
    jns = c.b + c.n - 1;
    if (!save_flags)
      ps_put (&c, ps_lea_down, sizeof (ps_lea_down));
    ps_put_u8 (&c, 0xe8);
    ps_put_rel32 (&c, pc + c.n + 4, stub);
    if (!save_flags)
      ps_put (&c, ps_lea_up, sizeof (ps_lea_up));
    *jns = (guint8) (c.b + c.n - (jns + 1));
  }
  if (save_flags)
  {
    if (far)
      ps_put (&c, r11_restore, sizeof (r11_restore));
    ps_put (&c, flags_restore, sizeof (flags_restore));
    ps_put (&c, ps_lea_up, sizeof (ps_lea_up));
  }

  if (cold_ok)
  {
    GumAddress back = pc + js_at + 4;
    GumAddress at = GPOINTER_TO_SIZE (t->cold_cur);
    cold.n = 0;
    ps_put (&cold, ps_lea_down, sizeof (ps_lea_down));
    ps_put_u8 (&cold, 0xe8);
    ps_put_rel32 (&cold, at + cold.n + 4, stub);
    ps_put (&cold, ps_lea_up, sizeof (ps_lea_up));
    ps_put_u8 (&cold, 0xe9);
    ps_put_rel32 (&cold, at + cold.n + 4, back);
    tramp = ps_cold_put (t, &cold);
    if (tramp == 0)
    {
      /* Cold area full: retry with the inline form, which needs no cold code. */
      t->cold_end = t->cold_cur;
      return ps_emit_counter (w, t, slot, save_flags);
    }
    *(guint32 *) (c.b + js_at) = (guint32) (gint32) ((gint64) tramp - (gint64) back);
  }

  p.count_imm = w->code + count_imm;
  p.budget_imm = w->code + budget_imm;
  gum_x86_writer_put_bytes (w, c.b, c.n);
  return p;
}

#endif
