/* ---- JIT code keyed by its Java method (issue 32) ----
 * Under Stalker HotSpot's compilers run far slower than the code they compile, so a method is
 * compiled again and again through the run (C1, C2, OSR, deoptimized and recompiled), each time
 * at other addresses: the same Java activity ran other block PCs each time it came back, and the
 * tracker saw a new phase. So a record names a branch in an nmethod not by its PC but by the Java
 * method it runs: the method of the innermost scope of the first debug point (PcDesc: calls,
 * safepoint polls) after the branch, in the nmethod's scope data (ScopeDesc::decode_body's
 * stream), so code inlined into a caller counts as its own method's, whichever tier inlined it;
 * where that point has no scope, or there is none, the last point at or before the branch; where
 * neither has one, the nmethod's own method. The key (PS_PC_METHOD_KEY, the layout in
 * phasescope.sources.wire) is bit 63 and the Method* >> 3, and in the method's own code (the scope
 * is the nmethod's root) the point's bytecode index + 1 in bits 44-59: two loops of one method
 * (JavaWork's ints and floats) apart, as sampled mode keys them (sources/hotspot.py). Stop 43 found
 * the index worse while the compiler threads ran under Stalker (each activity's code moved through
 * the tiers for seconds); with them unfollowed (js/hooks.js) it gained (docs/exact-mode.md, stop 48).
 * Other code in the code cache (the interpreter, stubs, adapters) and all code of other programs
 * keep their PC.
 * Keys are looked up once per branch PC at the record's cut (jit_keys map, under jit_lock) and
 * forgotten where HotSpot writes its code (ps_jit_forget, from the hooks of jit.c): new code in
 * freed space is read again. Every read stays inside the blob CodeCache::find_blob_unsafe finds
 * (offsets checked against CodeBlob::_size), so a blob being written cannot send it astray. */

enum { PS_JK_SIZE, PS_JK_CODE, PS_JK_METHOD, PS_JK_META, PS_JK_SCOPES, PS_JK_PCS, PS_JK_DEPS, PS_JK_PC_OFFSET,
  PS_JK_DECODE };
static const char * const ps_jk_field[PS_JK_FIELDS][2] = {
  { "CodeBlob", "_size" }, { "CodeBlob", "_code_begin" }, { "CompiledMethod", "_method" },
  { "nmethod", "_metadata_offset" }, { "CompiledMethod", "_scopes_data_begin" },
  { "nmethod", "_scopes_pcs_offset" }, { "nmethod", "_dependencies_offset" }, { "PcDesc", "_pc_offset" },
  { "PcDesc", "_scope_decode_offset" } };
#define PS_JK_PCDESC 16  /* sizeof (PcDesc): four ints */

typedef gpointer (* PsFindBlob) (gpointer pc);

/* The key of Method* `method`. */
static guint64
ps_jit_method_key (guint64 method)
{
  return PS_PC_METHOD_KEY | method >> 3;
}

/* HotSpot's compressed int at `*p` (CompressedReadStream::read_int, UNSIGNED5: a byte below 192
 * ends it, each next byte counts 64 times more), `*p` advanced; -1 past `end`. */
static gint64
ps_jit_read_int (const guint8 ** p, const guint8 * end)
{
  gint64 sum = 0;
  int i, shift = 0;
  for (i = 0; i < 5; i++, shift += 6)
  {
    guint64 b;
    if (*p >= end)
      return -1;
    b = *(*p)++;
    sum += b << shift;
    if (b < 192)
      break;
  }
  return sum;
}

/* The key of the nmethod code at `pc` (0: not in an nmethod, or HotSpot's layout not known). */
static guint64
ps_jit_read_key (guint64 pc)
{
  gint64 * at = ps.jit_at;
  guint8 * nm, * meta, * scopes, * pcs, * pcs_end, * limit;
  const guint8 * s;
  guint64 method, lo, hi, code;
  gint64 size, sender, index;
  int i;
  if (ps.jit_layout == 0)
  {
    gint64 got[PS_JK_FIELDS];
    gboolean all = TRUE;
    for (i = 0; i < PS_JK_FIELDS; i++)
      all = all && (got[i] = ps_jit_offset (ps_jk_field[i][0], ps_jk_field[i][1])) >= 0;
    for (i = 0; i < PS_JK_FIELDS; i++)
      at[i] = got[i];
    ps.jit_layout = all ? 1 : 2;  /* set last: another thread reads `at` only once it is 1 */
  }
  if (ps.jit_layout != 1)
    return 0;
  nm = ((PsFindBlob) ps.jit_find) (GSIZE_TO_POINTER (pc));
  if (nm == NULL || *(gpointer *) nm != ps.jit_nmethod_vt)
    return 0;
  size = *(gint32 *) (nm + at[PS_JK_SIZE]);
  limit = nm + size;
  method = *(guint64 *) (nm + at[PS_JK_METHOD]);
  code = *(guint64 *) (nm + at[PS_JK_CODE]);
  meta = nm + *(gint32 *) (nm + at[PS_JK_META]);
  scopes = *(guint8 **) (nm + at[PS_JK_SCOPES]);
  pcs = nm + *(gint32 *) (nm + at[PS_JK_PCS]);
  pcs_end = nm + *(gint32 *) (nm + at[PS_JK_DEPS]);
  if (size <= 0 || pc < code || nm >= meta || meta > scopes || scopes > pcs || pcs > pcs_end || pcs_end > limit)
    return ps_jit_method_key (method);
  /* the first debug point past the branch (PcDesc is sorted by its pc offset, from the code's start) */
  lo = 0;
  hi = (pcs_end - pcs) / PS_JK_PCDESC;
  while (lo < hi)
  {
    guint64 mid = (lo + hi) / 2;
    if (*(gint32 *) (pcs + mid * PS_JK_PCDESC + at[PS_JK_PC_OFFSET]) <= (gint64) (pc - code))
      lo = mid + 1;
    else
      hi = mid;
  }
  {
    guint64 n = (pcs_end - pcs) / PS_JK_PCDESC, tries[2];
    int t;
    tries[0] = lo; tries[1] = lo - 1;  /* the next point, else the last at or before (as sampled mode) */
    for (t = 0; t < 2; t++)
    {
      gint64 raw;
      if (tries[t] >= n)
        continue;
      s = scopes + *(gint32 *) (pcs + tries[t] * PS_JK_PCDESC + at[PS_JK_DECODE]);
      if (s <= scopes || s >= pcs)
        continue;
      sender = ps_jit_read_int (&s, pcs);
      index = ps_jit_read_int (&s, pcs);
      raw = ps_jit_read_int (&s, pcs);  /* bci + 1 */
      if (sender < 0 || index < 1 || index > (scopes - meta) / 8 || raw < 0)
        continue;
      if (sender != 0 || raw > 0xffff)
        raw = 0;  /* inlined code: its method alone */
      return ps_jit_method_key (((guint64 *) meta)[index - 1]) | (guint64) raw << 44;
    }
    return ps_jit_method_key (method);
  }
}

/* What a record names the branch at `pc` by: its key in an nmethod, else `pc` itself. */
static guint64
ps_jit_key (guint64 pc)
{
  guint64 * slot, key;
  if (!ps.jit_on || ps.jit_nmethod_vt == NULL || pc < *ps.jit_lo || pc >= *ps.jit_hi)
    return pc;
  gum_spinlock_acquire (&ps.jit_lock);
  slot = ps_jit_slot (&ps.jit_keys, pc);
  key = slot[0] == pc ? slot[1] : 0;
  gum_spinlock_release (&ps.jit_lock);
  if (key != 0)
    return key;
  key = ps_jit_read_key (pc);
  if (key == 0)
    key = pc;
  gum_spinlock_acquire (&ps.jit_lock);
  ps_jit_add (&ps.jit_keys, pc)[1] = key;
  gum_spinlock_release (&ps.jit_lock);
  return key;
}

/* HotSpot wrote [lo, hi) of its code: the keys of the branches there are read again. */
static void
ps_jit_forget (guint64 lo, guint64 hi)
{
  guint64 line, i, pc;
  gum_spinlock_acquire (&ps.jit_lock);
  for (line = lo >> PS_JIT_LINE; line <= (hi - 1) >> PS_JIT_LINE; line++)
  {
    i = ps_jit_home (line << PS_JIT_LINE, ps.jit_keys.mask);
    for (; (pc = ps.jit_keys.table[i * 2]) != 0; i = (i + 1) & ps.jit_keys.mask)
    {
      if (pc >= lo && pc < hi)
        ps.jit_keys.table[i * 2 + 1] = 0;
    }
  }
  gum_spinlock_release (&ps.jit_lock);
}
