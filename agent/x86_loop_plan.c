#ifdef PS_X86_64

/* ---- self-looping blocks: the count in a register ----
 *
 * A block whose last instruction is a conditional branch back to its own first instruction (a tight
 * loop) updating the same counter and budget in memory every iteration makes a store-to-load chain
 * (on Intel about 5 cycles an iteration, longer than such a loop's body). When the block uses
 * neither rsp nor some general register r, and its flags are dead before some instruction, it is
 * compiled as
 *
 *   entry:  lea rsp, [rsp-144]; mov [rsp], r            ; r saved below the red zone
 *           mov dword [loop_slot], slot+1               ; what ps_thread_hot reports meanwhile
 *           mov r, [budget]; r = min (r, PS_LOOP_CAP); mov [rsp+8], r
 *   top:    ...body...; sub r, n; js trampoline; ...body...   (at the flags-dead point)
 *           jcc top                                     ; ours: the loop no longer leaves the block
 *   exit:   push rax; lahf; seto al                     ; the flags are the branch's: keep them
 *           counts[slot] += [rsp+16] - r; budget -= the same
 *           add al, 0x7f; sahf; pop rax; mov r, [rsp]; lea rsp, [rsp+144]
 *           jcc (Stalker's, condition false: the fall-through)
 *
 * and the trampoline (cold) moves what r consumed into the counter and the budget, calls the slow
 * stub when the budget ran out (the interval is cut at this very block, as by the memory form) or
 * the agent asked for a release, and reloads r. So r is flushed at least every PS_LOOP_CAP
 * instructions. A release (ps_thread_release, then the slow path) rewrites every loop's `jcc top`
 * to fall into its exit, so the next iteration leaves through Stalker's own branch: through the
 * block's start, where Stalker's invalidation and unfollow take effect. A fault inside the loop
 * (code from `top` to the exit, noted in the fault map with the loop's register and slot) is undone
 * to the program's state before its handler sees it (ps_fault_unloop).
 *
 * Where the body can be copied as is (nothing rip-relative), the loop is instead entered from its
 * second iteration and unrolled by two (ps_emit_loop_tail): the first runs as any block, so
 * a loop of one iteration pays no entry and exit, and the loop pays one `sub r, 2n; js` per two
 * iterations. On a Zen 4 host the check's two macro-ops pushed a five-macro-op loop past the six
 * it dispatches a cycle, so `s += i * i` took two cycles an iteration instead of one (2.0x bare
 * Stalker); a pair of iterations plus the check fits in two (1.10x).
 */

#define PS_LOOP_MAX 24             /* instructions of a block that may become a register loop */
#define PS_LOOP_CAP 65536          /* instructions counted in r between two flushes */
#define PS_UNROLL_BYTES 192        /* largest body unrolled by two */

/* A register loop's `jcc top`, in the thread's chain (t->loops) in its cold area. */
typedef struct
{
  guint8 * next;
  guint8 * site;                   /* the rel32 of its `jcc top` */
  gint32 rel;                      /* that rel32 as emitted */
  guint32 pad;
} PsLoopLink;

typedef struct
{
  int reg;                         /* the counting register (hardware number), -1: no loop */
  guint n;                         /* instructions in the block */
  guint dead;                      /* index of the first instruction that kills every flag */
  guint64 branch_pc;
  guint64 first_pc;                /* the block's first instruction */
  guint64 dead_pc;                 /* the instruction `dead` */
  gboolean unroll;                 /* the body may be copied as is (nothing rip-relative): the register
                                      loop starts at the second iteration, unrolled (ps_emit_loop_tail) */
} PsLoop;

/* Hardware number of any general register, whatever its width; -1 for anything else. */
static int
ps_gpr_any (x86_reg r)
{
  switch (r)
  {
    case X86_REG_AL: case X86_REG_AH: case X86_REG_AX: case X86_REG_EAX: case X86_REG_RAX: return 0;
    case X86_REG_CL: case X86_REG_CH: case X86_REG_CX: case X86_REG_ECX: case X86_REG_RCX: return 1;
    case X86_REG_DL: case X86_REG_DH: case X86_REG_DX: case X86_REG_EDX: case X86_REG_RDX: return 2;
    case X86_REG_BL: case X86_REG_BH: case X86_REG_BX: case X86_REG_EBX: case X86_REG_RBX: return 3;
    case X86_REG_SPL: case X86_REG_SP: case X86_REG_ESP: case X86_REG_RSP: return 4;
    case X86_REG_BPL: case X86_REG_BP: case X86_REG_EBP: case X86_REG_RBP: return 5;
    case X86_REG_SIL: case X86_REG_SI: case X86_REG_ESI: case X86_REG_RSI: return 6;
    case X86_REG_DIL: case X86_REG_DI: case X86_REG_EDI: case X86_REG_RDI: return 7;
    case X86_REG_R8B: case X86_REG_R8W: case X86_REG_R8D: case X86_REG_R8: return 8;
    case X86_REG_R9B: case X86_REG_R9W: case X86_REG_R9D: case X86_REG_R9: return 9;
    case X86_REG_R10B: case X86_REG_R10W: case X86_REG_R10D: case X86_REG_R10: return 10;
    case X86_REG_R11B: case X86_REG_R11W: case X86_REG_R11D: case X86_REG_R11: return 11;
    case X86_REG_R12B: case X86_REG_R12W: case X86_REG_R12D: case X86_REG_R12: return 12;
    case X86_REG_R13B: case X86_REG_R13W: case X86_REG_R13D: case X86_REG_R13: return 13;
    case X86_REG_R14B: case X86_REG_R14W: case X86_REG_R14D: case X86_REG_R14: return 14;
    case X86_REG_R15B: case X86_REG_R15W: case X86_REG_R15D: case X86_REG_R15: return 15;
    default: return -1;
  }
}

/* Adds the general registers `insn` reads or writes (explicitly or not) to *used. */
static void
ps_regs_used (const cs_insn * insn, guint32 * used)
{
  const cs_x86 * x = &insn->detail->x86;
  int r;
  guint8 i;
  for (i = 0; i != insn->detail->regs_read_count; i++)
    if ((r = ps_gpr_any (insn->detail->regs_read[i])) >= 0)
      *used |= 1u << r;
  for (i = 0; i != insn->detail->regs_write_count; i++)
    if ((r = ps_gpr_any (insn->detail->regs_write[i])) >= 0)
      *used |= 1u << r;
  for (i = 0; i != x->op_count; i++)
  {
    const cs_x86_op * op = &x->operands[i];
    if (op->type == X86_OP_REG && (r = ps_gpr_any (op->reg)) >= 0)
      *used |= 1u << r;
    if (op->type == X86_OP_MEM)
    {
      if ((r = ps_gpr_any (op->mem.base)) >= 0)
        *used |= 1u << r;
      if ((r = ps_gpr_any (op->mem.index)) >= 0)
        *used |= 1u << r;
    }
  }
}

/* String instructions: their registers are implied (and, with rep, rcx too). */
static gboolean
ps_is_string_op (const cs_insn * insn)
{
  switch (insn->id)
  {
    case X86_INS_MOVSB: case X86_INS_MOVSW: case X86_INS_MOVSD: case X86_INS_MOVSQ:
    case X86_INS_STOSB: case X86_INS_STOSW: case X86_INS_STOSD: case X86_INS_STOSQ:
    case X86_INS_LODSB: case X86_INS_LODSW: case X86_INS_LODSD: case X86_INS_LODSQ:
    case X86_INS_SCASB: case X86_INS_SCASW: case X86_INS_SCASD: case X86_INS_SCASQ:
    case X86_INS_CMPSB: case X86_INS_CMPSW: case X86_INS_CMPSD: case X86_INS_CMPSQ:
      return TRUE;
    default:
      return FALSE;
  }
}

/* Whether an operand of `insn` is rip-relative (the instruction cannot be copied elsewhere as is). */
static gboolean
ps_rip_relative (const cs_insn * insn)
{
  const cs_x86 * x = &insn->detail->x86;
  guint8 i;
  for (i = 0; i != x->op_count; i++)
  {
    if (x->operands[i].type == X86_OP_MEM && x->operands[i].mem.base == X86_REG_RIP)
      return TRUE;
  }
  return FALSE;
}

/* Whether the block starting at `first` is a register loop, by decoding it ahead of Stalker. */
static gboolean
ps_loop_plan (GumStalkerIterator * iterator, PsThread * t, GumAddress pc, const cs_insn * first, PsLoop * lp)
{
  static const int order[] = { 11, 10, 9, 8, 2, 1, 6, 7, 3, 5, 12, 13, 14, 15 };
  csh cs = gum_stalker_iterator_get_capstone (iterator);
  const guint8 * code = GSIZE_TO_POINTER (first->address);
  size_t size = PS_LOOP_MAX * 15;
  guint64 address = first->address;
  guint32 used = 0;
  cs_insn * ci;
  guint i = 0, k;
  int dead = -1;
  gboolean loop = FALSE, copyable = TRUE;

  if (t->win_size != 0 || t->limit != 0 || t->carry != 0 || t->stub == NULL ||
      t->cold_cur + 384 > t->cold_end || !ps_near (pc, GPOINTER_TO_SIZE (t->cold_cur)) ||
      !ps_near (pc, GPOINTER_TO_SIZE (t->cold_end)) || !ps_near (pc, GPOINTER_TO_SIZE (t)) ||
      !ps_near (pc, GPOINTER_TO_SIZE (t->counts + t->capacity)) || !ps_near (pc, GPOINTER_TO_SIZE (t->counts)))
    return FALSE;
  ci = cs_malloc (cs);
  while (i < PS_LOOP_MAX && cs_disasm_iter (cs, &code, &size, &address, ci))
  {
    int use = ps_flag_use (ci);
    gboolean ends = ps_ends_block (ci);
    if (ps_is_string_op (ci))
      break;
    if (dead < 0 && use == PS_FLAGS_READ && !ends)
      break;
    if (dead < 0 && use == PS_FLAGS_KILL)
    {
      dead = (int) i;
      lp->dead_pc = ci->address;
    }
    if (!ends && (ps_rip_relative (ci) || ci->id == X86_INS_XBEGIN))
      copyable = FALSE;
    ps_regs_used (ci, &used);
    i++;
    if (ends)
    {
      const cs_x86 * x = &ci->detail->x86;
      loop = dead >= 0 && x->op_count == 1 && x->operands[0].type == X86_OP_IMM &&
          (guint64) x->operands[0].imm == first->address && ci->id != X86_INS_JMP &&
          ((ci->bytes[0] & 0xf0) == 0x70 || (ci->bytes[0] == 0x0f && (ci->bytes[1] & 0xf0) == 0x80));
      lp->branch_pc = ci->address;
      break;
    }
  }
  cs_free (ci, 1);
  if (!loop || (used & (1u << 4)) != 0)
    return FALSE;
  for (k = 0; k != G_N_ELEMENTS (order); k++)
  {
    if ((used & (1u << order[k])) == 0)
    {
      lp->reg = order[k];
      lp->n = i;
      lp->dead = (guint) dead;
      lp->first_pc = first->address;
      lp->unroll = copyable && lp->branch_pc - first->address <= PS_UNROLL_BYTES;
      return TRUE;
    }
  }
  return FALSE;
}

#endif
