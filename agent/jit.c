/* ---- code a JIT rewrites in place (issue 32) ----
 * HotSpot patches compiled code where it lies (an inline cache's holder and target, an nmethod's
 * entry) and copies new code into space freed code held; it tells the CPU after each change through
 * AbstractICache::invalidate_range / invalidate_word. Stalker trusts a block once it ran unchanged
 * and links to it: its copy would keep the old code (JavaWork read a CompiledICHolder HotSpot had
 * freed). Two kinds of write flush nothing (x86 needs no flush) and are hooked too: an inline cache
 * stub assembled in place (InlineCacheBuffer::assemble_ic_buffer_code) and the objects a GC moved,
 * rewritten in an nmethod's code (nmethod::oops_do, nmethod::fix_oop_relocations). So the blocks
 * whose real code lies in the JIT's range (HotSpot's code cache bounds, read at each block) are
 * indexed here by start, and the hooks hand the blocks overlapping the written bytes to the agent
 * (js/jit.js), which invalidates them in every followed thread. The index is a hash on the block's
 * 64-byte line, linear probing: the blocks starting in one line are found from its home slot on.
 * It doubles when 3/4 full and never shrinks (a stale entry costs one more lookup). */

#define PS_JIT_LINE 6
#define PS_JIT_BATCH 256  /* blocks handed to the agent per call */

/* Where the probe for the blocks starting in `start`'s line begins. */
static guint64
ps_jit_home (guint64 start, guint64 mask)
{
  return ((start >> PS_JIT_LINE) * 0x9e3779b97f4a7c15ULL) >> 20 & mask;
}

/* The slot of `start` in `m`, or the free one where it goes. */
static guint64 *
ps_jit_slot (PsJitMap * m, guint64 start)
{
  guint64 i = ps_jit_home (start, m->mask);
  for (; m->table[i * 2] != 0 && m->table[i * 2] != start; i = (i + 1) & m->mask)
    ;
  return m->table + i * 2;
}

static void
ps_jit_map_init (PsJitMap * m, guint64 slots)
{
  m->table = g_malloc0 (slots * 2 * sizeof (guint64));
  m->mask = slots - 1;
  m->n = 0;
}

/* The slot of `start` in `m`, added (its value 0) if new; `m` doubled first when 3/4 full. Under
 * the lock. */
static guint64 *
ps_jit_add (PsJitMap * m, guint64 start)
{
  guint64 * slot;
  if (m->n * 4 >= m->mask * 3)
  {
    PsJitMap old = *m;
    guint64 i;
    ps_jit_map_init (m, (old.mask + 1) * 2);
    for (i = 0; i <= old.mask; i++)
    {
      if (old.table[i * 2] == 0)
        continue;
      slot = ps_jit_slot (m, old.table[i * 2]);
      slot[0] = old.table[i * 2];
      slot[1] = old.table[i * 2 + 1];
    }
    m->n = old.n;
    g_free (old.table);
  }
  slot = ps_jit_slot (m, start);
  if (slot[0] == 0)
  {
    slot[0] = start;
    m->n++;
  }
  return slot;
}

/* Indexes the JIT's code from now on: its bounds are read from `lo_at`, `hi_at` (0 until the JIT
 * reserved its space), `slots` a power of two to start with. `stub`: the size of an inline cache
 * stub; `structs`: where HotSpot's VMStructs table is described (gHotSpotVMStructs and its layout
 * words, PS_VMS_*), read once a whole nmethod's oops move. `find` (CodeCache::find_blob_unsafe)
 * and `nmethod_vt` (an nmethod's vtable pointer): what keys compiled code by its Java method
 * (jit_keys.c); NULL: keyed by address. */
void
ps_jit_init (guint64 * lo_at, guint64 * hi_at, guint64 slots, guint64 stub, guint64 ** structs, void * find,
    void * nmethod_vt)
{
  gum_spinlock_init (&ps.jit_lock);
  ps_jit_map_init (&ps.jit_index, slots);
  ps_jit_map_init (&ps.jit_keys, slots);
  ps.jit_lo = lo_at;
  ps.jit_hi = hi_at;
  ps.jit_pid = getpid ();
  ps.jit_stub = stub;
  ps.jit_structs = structs;
  ps.jit_size_at = -1;
  ps.jit_find = find;
  ps.jit_nmethod_vt = nmethod_vt;
  ps.jit_on = TRUE;
}

/* The block [start, end) was compiled: indexed if it lies in the JIT's range. */
static void
ps_jit_note (guint64 start, guint64 end)
{
  guint64 * slot;
  if (!ps.jit_on || start < *ps.jit_lo || start >= *ps.jit_hi)
    return;
  gum_spinlock_acquire (&ps.jit_lock);
  slot = ps_jit_add (&ps.jit_index, start);
  if (end > slot[1])
    slot[1] = end;
  if (end - start > ps.jit_longest)
    ps.jit_longest = end - start;
  gum_spinlock_release (&ps.jit_lock);
}

/* The starts of the indexed blocks that overlap [lo, hi), from the line of `*from` on (advanced
 * past what was returned), at most PS_JIT_BATCH into `out`. Returns how many. */
static guint64
ps_jit_blocks (guint64 lo, guint64 hi, guint64 * from, guint64 * out)
{
  guint64 n = 0, line, i, start;
  gum_spinlock_acquire (&ps.jit_lock);
  /* a line holds at most 64 block starts: it is read whole or not at all */
  for (line = *from >> PS_JIT_LINE; line <= (hi - 1) >> PS_JIT_LINE && n + 64 <= PS_JIT_BATCH; line++)
  {
    i = ps_jit_home (line << PS_JIT_LINE, ps.jit_index.mask);
    for (; (start = ps.jit_index.table[i * 2]) != 0; i = (i + 1) & ps.jit_index.mask)
    {
      if (start >> PS_JIT_LINE == line && start < hi && ps.jit_index.table[i * 2 + 1] > lo)
        out[n++] = start;
    }
  }
  gum_spinlock_release (&ps.jit_lock);
  *from = line << PS_JIT_LINE;
  return n;
}

typedef void (* PsJitInvalidate) (guint64 * starts, guint64 n);

/* Hands the blocks overlapping [lo, hi) to `fn` (the agent), in batches; nothing when none. */
static void
ps_jit_flushed (GumInvocationContext * ic, guint64 lo, guint64 hi)
{
  guint64 out[PS_JIT_BATCH], from, n;
  if (!ps.jit_on || getpid () != ps.jit_pid || hi <= lo)
    return;
  ps_jit_forget (lo, hi);
  from = lo > ps.jit_longest ? lo - ps.jit_longest : 0;
  while (from < hi)
  {
    n = ps_jit_blocks (lo, hi, &from, out);
    if (n != 0)
      ((PsJitInvalidate) gum_invocation_context_get_listener_function_data (ic)) (out, n);
  }
}

/* The hooks (on_enter) of AbstractICache::invalidate_range (address, int nbytes) and
 * invalidate_word (address: 4 bytes), called after the write. */
void
jit_range_enter (GumInvocationContext * ic)
{
  guint64 lo = GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 0));
  gint nbytes = (gint) GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 1));
  if (nbytes > 0)
    ps_jit_flushed (ic, lo, lo + nbytes);
}

void
jit_word_enter (GumInvocationContext * ic)
{
  guint64 lo = GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 0));
  ps_jit_flushed (ic, lo, lo + 4);
}

/* The layout words of VMStructs (gHotSpotVMStructEntry*), in ps.jit_structs after the table. */
enum { PS_VMS_TABLE, PS_VMS_STRIDE, PS_VMS_TYPE, PS_VMS_FIELD, PS_VMS_OFFSET };

static gboolean
ps_jit_same (const char * a, const char * b)
{
  while (*a != 0 && *a == *b)
    a++, b++;
  return *a == *b;
}

/* The offset of field `field` of HotSpot's type `type`, from its VMStructs table; -2 if the table
 * has none. */
static gint64
ps_jit_offset (const char * type, const char * field)
{
  guint8 * e = (guint8 *) *ps.jit_structs[PS_VMS_TABLE];
  const char * t;
  for (; e != NULL && (t = *(const char **) (e + *ps.jit_structs[PS_VMS_TYPE])) != NULL;
      e += *ps.jit_structs[PS_VMS_STRIDE])
  {
    const char * f = *(const char **) (e + *ps.jit_structs[PS_VMS_FIELD]);
    if (f != NULL && ps_jit_same (t, type) && ps_jit_same (f, field))
      return *(gint64 *) (e + *ps.jit_structs[PS_VMS_OFFSET]);
  }
  return -2;
}

/* Bytes written with no flush, noted on entry and handed over on leave (after the write). An
 * nmethod's oops are compared with a copy taken on entry: only the bytes that changed count (a GC
 * moves few of the objects compiled code names; invalidating whole nmethods stopped the Java
 * thread through ptrace for each of its blocks, 22,134 times in one JavaWork run). */
typedef struct { guint64 lo, hi; guint8 * before; } PsJitSpan;

#define PS_JIT_COPY_MAX (1 << 20)  /* an nmethod larger is invalidated whole */
#define PS_JIT_GAP 64              /* changed bytes closer than this are handed over as one span */

/* InlineCacheBuffer::assemble_ic_buffer_code (code, holder, entry): one inline cache stub. */
void
jit_stub_enter (GumInvocationContext * ic)
{
  PsJitSpan * s = gum_invocation_context_get_listener_invocation_data (ic, sizeof (PsJitSpan));
  s->lo = GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 0));
  s->hi = s->lo + ps.jit_stub;
  s->before = NULL;
}

/* Bytes [lo, hi) of nmethod `nm` (or all of it, CodeBlob::_size long from `nm`, when lo is 0)
 * kept on entry for the compare on leave. */
static void
ps_jit_keep (GumInvocationContext * ic, guint64 nm, guint64 lo, guint64 hi)
{
  PsJitSpan * s = gum_invocation_context_get_listener_invocation_data (ic, sizeof (PsJitSpan));
  s->lo = lo;
  s->hi = hi;
  s->before = NULL;
  if (!ps.jit_on)
    return;
  if (lo == 0)
  {
    if (ps.jit_size_at == -1)
      ps.jit_size_at = ps_jit_offset ("CodeBlob", "_size");
    s->lo = nm;
    s->hi = ps.jit_size_at < 0 ? nm : nm + *(gint32 *) (nm + ps.jit_size_at);
  }
  if (s->hi > s->lo && s->hi - s->lo <= PS_JIT_COPY_MAX)
    s->before = g_memdup (GSIZE_TO_POINTER (s->lo), s->hi - s->lo);
}

/* nmethod::oops_do (this, closure, allow_dead): a GC updates the objects the code names in place. */
void
jit_oops_enter (GumInvocationContext * ic)
{
  ps_jit_keep (ic, GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 0)), 0, 0);
}

/* nmethod::fix_oop_relocations (this, begin, end, initialize): [begin, end), or the whole nmethod. */
void
jit_fix_enter (GumInvocationContext * ic)
{
  ps_jit_keep (ic, GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 0)),
      GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 1)),
      GPOINTER_TO_SIZE (gum_invocation_context_get_nth_argument (ic, 2)));
}

void
jit_span_leave (GumInvocationContext * ic)
{
  PsJitSpan * s = gum_invocation_context_get_listener_invocation_data (ic, sizeof (PsJitSpan));
  const guint8 * now = GSIZE_TO_POINTER (s->lo);
  guint64 i, n = s->hi - s->lo, from = 0, to = 0;
  if (s->before == NULL)
  {
    ps_jit_flushed (ic, s->lo, s->hi);
    return;
  }
  for (i = 0; i < n; i++)
  {
    if (now[i] == s->before[i])
      continue;
    if (to != 0 && i >= to + PS_JIT_GAP)
    {
      ps_jit_flushed (ic, s->lo + from, s->lo + to);
      to = 0;
    }
    if (to == 0)
      from = i;
    to = i + 1;
  }
  if (to != 0)
    ps_jit_flushed (ic, s->lo + from, s->lo + to);
  g_free (s->before);
}
