#ifdef PS_X86_64

/* ---- rep strings counted as valgrind counts them (ps_rep_count) ----
 *
 * Stalker runs a rep-prefixed string instruction as it is, so the block's counter sees one
 * instruction. Callgrind (VEX) runs one iteration per pass and counts every pass: rcx + 1 for
 * rep movs/stos (one pass finds rcx = 0), 1 when rcx = 0, and for repe/repne cmps/scas the
 * iterations run, plus that last pass only when the comparison did not stop the instruction
 * (rep lods it counts once). The instruction runs in chunks of at most PS_REP_CHUNK iterations,
 * so the budget is checked, and an interval cut, at least every PS_REP_CHUNK iterations: an
 * interval runs past its size by less than PS_REP_CHUNK plus one block. No code here writes the
 * flags (a rep movs keeps them; the program may read them after it): it counts with lea, not and
 * bswap, branches with jrcxz, and reads ZF with setcc.
 *
 *           lea rsp, [rsp-168]                 ; frame below the red zone
 *   again:  [rsp+8] = rcx; rcx = min (rcx, PS_REP_CHUNK); [rsp] = rcx
 *           rep op                             ; rsp is not its operand
 *           it = [rsp] - rcx                   ; iterations of the chunk
 *           none: done; stopped (rcx != 0, or the comparison at the chunk's end): count it - 1
 *           more to do ([rsp+8] - [rsp]): count it, rcx = the rest, jmp again
 *           else count it                      ; the last pass that finds rcx = 0
 *   done:   restore rax, rcx, rdx; lea rsp, [rsp+168]
 *
 * where `count x` adds x to the block's counter and takes it from its budget, calling the slow
 * stub when the budget goes negative (absolute addresses: a rep instruction pays for them).
 */

#define PS_REP_FRAME 168           /* red zone (128); chunk, rcx before it, saved rax, rdx, rcx */
#define PS_REP_CHUNK 0xffff        /* iterations between two budget checks (the test takes rcx's low 16 bits) */

/* 0: not a rep string, or one callgrind counts once (rep lods, measured on valgrind 3.19; ins/outs;
 * a 32-bit address size); 1: rep movs/stos; 0xf3 / 0xf2: repe / repne cmps/scas (the prefix,
 * which says when they stop). */
static guint
ps_rep_kind (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint8 op = x->opcode[0];
  if ((x->prefix[0] != X86_PREFIX_REP && x->prefix[0] != X86_PREFIX_REPNE) || x->prefix[3] == X86_PREFIX_ADDRSIZE ||
      op < 0xa4 || op > 0xaf || op == 0xac || op == 0xad || !ps_is_string_op (insn))
    return 0;
  if (op == 0xa6 || op == 0xa7 || op == 0xae || op == 0xaf)
    return x->prefix[0];
  return 1;
}

/* `lea rsp, [rsp + d]` */
static void
ps_put_rsp_add (PsCode * c, gint32 d)
{
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0x8d); ps_put_u8 (c, 0xa4); ps_put_u8 (c, 0x24);
  ps_put_u32 (c, (guint32) d);
}

/* The frame and the chunk before the instruction; returns `again` (where the code runs). */
static GumAddress
ps_emit_rep_before (GumX86Writer * w)
{
  static const guint8 test[] = {
    0x48, 0x89, 0x4c, 0x24, 0x08,                       /* mov [rsp+8], rcx */
    0x48, 0x89, 0x44, 0x24, 0x10,                       /* mov [rsp+16], rax */
    0x0f, 0xb7, 0xc1,                                   /* movzx eax, cx */
    0x48, 0xf7, 0xd0,                                   /* not rax */
    0x48, 0x8d, 0x44, 0x01, 0x01,                       /* lea rax, [rcx+rax+1]: rcx above its low 16 bits */
    0x48, 0x91,                                         /* xchg rcx, rax */
    0xe3, 0x07,                                         /* jrcxz small */
  };
  static const guint8 join[] = {
    0xeb, 0x03,                                         /* jmp join */
    0x48, 0x89, 0xc1,                                   /* small: mov rcx, rax */
    0x48, 0x8b, 0x44, 0x24, 0x10,                       /* join: mov rax, [rsp+16] */
    0x48, 0x89, 0x0c, 0x24,                             /* mov [rsp], rcx */
  };
  GumAddress again;
  PsCode c;
  c.n = 0;
  ps_put_rsp_add (&c, -PS_REP_FRAME);
  gum_x86_writer_put_bytes (w, c.b, c.n);
  again = w->pc;
  c.n = 0;
  ps_put (&c, test, sizeof (test));
  ps_put_u8 (&c, 0xb9); ps_put_u32 (&c, PS_REP_CHUNK);                   /* mov ecx, PS_REP_CHUNK */
  ps_put (&c, join, sizeof (join));
  gum_x86_writer_put_bytes (w, c.b, c.n);
  return again;
}

/* `jrcxz` to a label patched later; returns where its rel8 is. */
static guint
ps_put_jrcxz (PsCode * c)
{
  ps_put_u8 (c, 0xe3); ps_put_u8 (c, 0);
  return c->n - 1;
}

static void
ps_patch_rel8 (PsCode * c, guint at)
{
  c->b[at] = (guint8) (c->n - (at + 1));
}

/* count rax: counts[slot] += rax; budget -= rax; the slow stub when it went negative (rax, rcx,
 * rdx clobbered; flags kept). */
static void
ps_put_rep_add (PsCode * c, PsThread * t, guint64 slot)
{
  static const guint8 add[] = {
    0x48, 0x8b, 0x0a, 0x48, 0x8d, 0x0c, 0x01, 0x48, 0x89, 0x0a,  /* mov rcx, [rdx]; lea rcx, [rcx+rax]; mov [rdx], rcx */
  };
  static const guint8 sub[] = {
    0x48, 0x8b, 0x0a, 0x48, 0xf7, 0xd0, 0x48, 0x8d, 0x4c, 0x01, 0x01, /* mov rcx, [rdx]; not rax; lea rcx, [rcx+rax+1] */
    0x48, 0x89, 0x0a,                                               /* mov [rdx], rcx */
    0x48, 0x0f, 0xc9, 0x0f, 0xb6, 0xc9,                             /* bswap rcx; movzx ecx, cl: its sign byte */
  };
  guint ok;
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (&t->counts[slot])); /* movabs rdx */
  ps_put (c, add, sizeof (add));
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (&t->budget[slot & (PS_K - 1)]));
  ps_put (c, sub, sizeof (sub));
  ok = ps_put_jrcxz (c);
  ps_put_u8 (c, 0x48); ps_put_u8 (c, 0xba); ps_put_u64 (c, GPOINTER_TO_SIZE (t->stub));
  ps_put_u8 (c, 0xff); ps_put_u8 (c, 0xd2);                      /* call rdx */
  ps_patch_rel8 (c, ok);
}

static void
ps_emit_rep_after (GumX86Writer * w, PsThread * t, guint64 slot, guint kind, GumAddress again)
{
  static const guint8 save[] = {
    0x48, 0x89, 0x44, 0x24, 0x10,                       /* mov [rsp+16], rax */
    0x48, 0x89, 0x54, 0x24, 0x18,                       /* mov [rsp+24], rdx */
    0x48, 0x89, 0x4c, 0x24, 0x20,                       /* mov [rsp+32], rcx */
  };
  static const guint8 iterations[] = {
    0x48, 0x8b, 0x04, 0x24,                             /* mov rax, [rsp] */
    0x48, 0xf7, 0xd1, 0x48, 0x8d, 0x44, 0x08, 0x01,     /* not rcx; lea rax, [rax+rcx+1]: [rsp] - rcx */
    0x48, 0x89, 0xc1,                                   /* mov rcx, rax */
  };
  static const guint8 rest[] = {
    0x48, 0x8b, 0x0c, 0x24, 0x48, 0xf7, 0xd1,           /* mov rcx, [rsp]; not rcx */
    0x48, 0x8b, 0x54, 0x24, 0x08,                       /* mov rdx, [rsp+8] */
    0x48, 0x8d, 0x4c, 0x0a, 0x01,                       /* lea rcx, [rdx+rcx+1]: [rsp+8] - [rsp] */
  };
  static const guint8 restore[] = {
    0x48, 0x8b, 0x4c, 0x24, 0x20,                       /* mov rcx, [rsp+32] */
    0x48, 0x8b, 0x54, 0x24, 0x18,                       /* mov rdx, [rsp+24] */
    0x48, 0x8b, 0x44, 0x24, 0x10,                       /* mov rax, [rsp+16] */
  };
  static const guint8 drop[] = { 0x48, 0x8d, 0x40, 0xff }; /* lea rax, [rax-1] */
  PsCode c;
  guint none, full, going, last, to_stop[2], to_done;

  c.n = 0;
  ps_put (&c, save, sizeof (save));
  if (kind == 1)
  {
    ps_put_u8 (&c, 0xba); ps_put_u32 (&c, 0);                            /* mov edx, 0: never stopped */
  }
  else
  {
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, kind == X86_PREFIX_REPE ? 0x95 : 0x94); ps_put_u8 (&c, 0xc2); /* setnz / setz dl */
    ps_put_u8 (&c, 0x0f); ps_put_u8 (&c, 0xb6); ps_put_u8 (&c, 0xd2);    /* movzx edx, dl: stopped by the comparison */
  }
  ps_put (&c, iterations, sizeof (iterations));
  ps_put_u8 (&c, 0xe3); ps_put_u8 (&c, 2);                               /* jrcxz none: no iteration, rcx was 0 */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 5);
  ps_put_u8 (&c, 0xe9);                                                  /* none: jmp done (too far for jrcxz) */
  none = c.n;
  ps_put_u32 (&c, 0);
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x8b); ps_put_u8 (&c, 0x4c); ps_put_u8 (&c, 0x24); ps_put_u8 (&c, 0x20);
  full = ps_put_jrcxz (&c);                                              /* mov rcx, [rsp+32]: the chunk ran out */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp stopped: stopped early */
  to_stop[0] = c.n - 1;
  ps_patch_rel8 (&c, full);
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x89); ps_put_u8 (&c, 0xd1);      /* mov rcx, rdx */
  going = ps_put_jrcxz (&c);                                             /* the comparison went on */
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp stopped */
  to_stop[1] = c.n - 1;
  ps_patch_rel8 (&c, going);
  ps_put (&c, rest, sizeof (rest));
  last = ps_put_jrcxz (&c);                                              /* nothing left: the last pass */
  ps_put_u8 (&c, 0x48); ps_put_u8 (&c, 0x89); ps_put_u8 (&c, 0x4c); ps_put_u8 (&c, 0x24); ps_put_u8 (&c, 0x20); /* mov [rsp+32], rcx */
  ps_put_rep_add (&c, t, slot);
  ps_put (&c, restore, sizeof (restore));
  ps_put_u8 (&c, 0xe9);                                                  /* jmp again: the next chunk */
  ps_put_rel32 (&c, w->pc + c.n + 4, again);
  ps_patch_rel8 (&c, to_stop[0]);
  ps_patch_rel8 (&c, to_stop[1]);
  ps_put (&c, drop, sizeof (drop));                                      /* stopped: no last pass */
  ps_patch_rel8 (&c, last);
  ps_put_rep_add (&c, t, slot);
  ps_put_u8 (&c, 0xeb); ps_put_u8 (&c, 0);                               /* jmp done */
  to_done = c.n - 1;
  ps_patch_rel8 (&c, to_done);
  *(guint32 *) (c.b + none) = c.n - (none + 4);
  ps_put (&c, restore, sizeof (restore));
  ps_put_rsp_add (&c, PS_REP_FRAME);
  gum_x86_writer_put_bytes (w, c.b, c.n);
}

#endif
