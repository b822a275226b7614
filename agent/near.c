/* ---- Stalker's code near the program's code (issue 32) ----
 * Stalker maps each thread's context and code slabs wherever mmap finds room: top-down, below
 * whatever the program reserved by then. A JVM reserves gigabytes there (code cache, class space,
 * malloc arenas) before its later threads start, so their code landed more than 2 GB below libc and
 * libjvm, where each rip-relative access and branch to them takes Stalker's far forms; such threads
 * computed wrong values (docs/exact-mode.md). The agent reserves address space (PROT_NONE, no
 * memory) within 2 GB of the libraries and places Stalker's mappings in it, top-down. A spawned
 * program's reserve lies just below the libraries, made before the program maps more
 * (ps_near_init); an attached program's in a hole within reach that the agent found, often above
 * the libraries, where mmap never looks unless told (ps_near_init_at, js/near.js).
 * - A thread's context is mapped by the thread that calls Stalker.follow, with no hint. A
 *   replacement of mmap (near_mmap) maps an anonymous executable mapping with no hint MAP_FIXED
 *   over the reserve's next unused part. It does not see calls made inside another hook's callback
 *   (a thread followed as it is created): for those, in a spawned program, ps_near_carve unmaps
 *   the reserve's next unused part just before the follow, the highest gap mmap then finds; an
 *   attached program's reserve lies where mmap does not look, so such a thread's context lands
 *   where mmap puts it (out of reach in a program that filled the space near its code).
 * - Its later slabs are mapped by the thread itself, hinted at the context or a slab: near_mmap
 *   maps an anonymous mapping hinted inside the reserve MAP_FIXED over its next unused part.
 * No part is handed out twice (a freed one stays free); once the reserve is used up, mmap places
 * them as before. */

#define PS_PROT_EXEC 0x4
#define PS_MAP_FIXED 0x10
#define PS_MAP_ANONYMOUS 0x20
#define PS_MAP_RESERVE 0x4022  /* MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE (with PROT_NONE) */
#define PS_MAP_FIXED_NOREPLACE 0x100000
#define PS_MAP_FAILED ((guint8 *) -1)

/* Fills every gap above the reserve of `fill` bytes or more with PROT_NONE (mmap places top-down:
 * the highest gap that holds a mapping), so that the part of the reserve ps_near_carve unmaps next
 * is the highest gap a Stalker context fits in. The fillers are never freed. */
static void
ps_near_fill (guint8 * reserve, guint64 fill)
{
  const guint64 pieces[] = { 64 << 20, 4 << 20, fill };
  guint8 * p;
  guint i;
  for (i = 0; i != G_N_ELEMENTS (pieces); i++)
  {
    while ((p = mmap (NULL, pieces[i], 0, PS_MAP_RESERVE, -1, 0)) != PS_MAP_FAILED && p > reserve)
      ;
    if (p != PS_MAP_FAILED)
      munmap (p, pieces[i]);
  }
}

/* Makes [base, base + size) the reserve; `fill`: see ps_near_fill (0: no carving). */
static guint8 *
ps_near_adopt (guint8 * base, guint64 size, guint64 fill)
{
  gum_spinlock_init (&ps.near_lock);
  ps.near_fill = fill;
  ps.near_cur = base + size;
  ps.near_end = base + size;
  ps.near_base = base;
  if (fill != 0)
    ps_near_fill (base, fill);
  return base;
}

/* Reserves `size` bytes of address space in the highest gap that holds them, before the program
 * runs (spawn): just below the libraries. Returns the reserve, or NULL. */
guint8 *
ps_near_init (guint64 size, guint64 fill)
{
  guint8 * base = mmap (NULL, size, 0, PS_MAP_RESERVE, -1, 0);
  return base == PS_MAP_FAILED ? NULL : ps_near_adopt (base, size, fill);
}

/* Reserves `size` bytes at `at` exactly, a hole the agent found free (attach). Returns the reserve,
 * or NULL when it is taken meanwhile. */
guint8 *
ps_near_init_at (guint8 * at, guint64 size)
{
  guint8 * base = mmap (at, size, 0, PS_MAP_RESERVE | PS_MAP_FIXED_NOREPLACE, -1, 0);
  if (base == PS_MAP_FAILED)
    return NULL;
  if (base != at)
  {
    munmap (base, size); /* a kernel before 4.17 took the address as a hint */
    return NULL;
  }
  return ps_near_adopt (base, size, 0);
}

/* The next unused `len` bytes (rounded up to pages) of the reserve, top-down; NULL when used up. */
static guint8 *
ps_near_take (gsize len)
{
  guint8 * at = NULL;
  len = (len + ps.page - 1) & ~(ps.page - 1);
  gum_spinlock_acquire (&ps.near_lock);
  if (ps.near_base != NULL && (gsize) (ps.near_cur - ps.near_base) >= len)
  {
    ps.near_cur -= len;
    at = ps.near_cur;
  }
  gum_spinlock_release (&ps.near_lock);
  return at;
}

/* Unmaps the next unused `len` bytes of the reserve, having filled the gaps above it that opened
 * since (before a Stalker.follow: see above). */
void
ps_near_carve (guint64 len)
{
  guint8 * at;
  if (ps.near_base == NULL || ps.near_fill == 0)
    return;
  ps_near_fill (ps.near_base, ps.near_fill);
  at = ps_near_take (len);
  if (at != NULL)
    munmap (at, len);
}

/* A fresh (zeroed) read-write mapping of `len` bytes at `at`, a part of the reserve handed out
 * before (an exited thread's region), or at the reserve's next unused part when `at` is NULL;
 * NULL when the reserve is used up. A thread's region (PsThread, counters, cold code) lives there
 * too: in reach of its code, rel32 and rip-relative. */
guint8 *
ps_near_map (guint8 * at, guint64 len)
{
  if (at == NULL)
    at = ps_near_take (len);
  if (at == NULL)
    return NULL;
  return mmap (at, len, 3 /* PROT_READ | PROT_WRITE */, 0x12 | PS_MAP_ANONYMOUS /* MAP_PRIVATE | MAP_FIXED */,
      -1, 0) == (gpointer) at ? at : NULL;
}

/* mmap(2) itself: near_mmap replaces libc's mmap with a plain jump (Interceptor.replaceFast), so
 * calling mmap from it would come back here. The system call, as libc's mmap makes it. */
static gpointer
ps_sys_mmap (gpointer addr, gsize len, int prot, int flags, int fd, gint64 offset)
{
  return (gpointer) syscall (9 /* SYS_mmap, x86-64 */, addr, len, prot, flags, fd, offset);
}

/* The replacement of mmap: see above. A plain jump, not the Interceptor's invocation machinery:
 * that allocates a thread's context on its first call, from Frida's heap, whose allocator calls
 * mmap holding its (non-recursive) lock when it grows. A program thread whose first intercepted
 * call was that one (JavaScript of the exception handler running on it: a signal sent to a traced
 * program) waited for its own lock forever, and every Frida thread with it (stop 47). */
gpointer
near_mmap (gpointer addr, gsize len, int prot, int flags, int fd, gint64 offset)
{
  gsize a = GPOINTER_TO_SIZE (addr);
  guint8 * at;

  if ((flags & (PS_MAP_FIXED | PS_MAP_ANONYMOUS)) != PS_MAP_ANONYMOUS || ps.near_base == NULL || len == 0)
    return ps_sys_mmap (addr, len, prot, flags, fd, offset);
  if (a == 0 ? (prot & PS_PROT_EXEC) == 0 :
      a < GPOINTER_TO_SIZE (ps.near_base) || a >= GPOINTER_TO_SIZE (ps.near_end))
    return ps_sys_mmap (addr, len, prot, flags, fd, offset);
  at = ps_near_take (len);
  return ps_sys_mmap (at != NULL ? at : addr, len, prot, at != NULL ? flags | PS_MAP_FIXED : flags, fd, offset);
}
