// Stalker's code near the program's (agent/near.c): address space reserved within 2 GB of the
// libraries, Stalker's contexts and slabs and the threads' regions placed in it (issue 32).

const NEAR_RESERVE = 1 << 30;
const NEAR_CONTEXT = 1 << 20; // room for a thread's Stalker context (about 310 KiB in Frida 17)
const NEAR_FILL = 256 << 10; // gaps above a spawned program's reserve at least this big are filled: a context fits none left
// An attached program's hole must hold this much: Stalker's context (about 310 KiB) and code slabs
// (MiBs) for each of a JVM's few dozen threads. Smaller: exact mode refuses (nearRefusal).
const NEAR_MIN = 128 << 20;
const NEAR_REACH = 2 ** 31 - (64 << 20); // from any byte of the reserve to any of the code: rel32, with room
const NEAR_GUARD = 1 << 20; // kept free beside the hole's neighbours
const NEAR_STACK_ROOM = 256 << 20; // kept free below the main thread's stack (it grows down)

let nearReserved = false; // whether the reserve was made
const nearRegions = new Map(); // region -> size, of the regions in the reserve
const nearPool = []; // [region, size] of exited threads' regions there, mapped afresh for new ones

// A zeroed region of `size` bytes, in the reserve while it has room.
function allocRegion(size) {
  const i = nearPool.findIndex(([, s]) => s === size);
  const region = api.near_map(i < 0 ? NULL : nearPool.splice(i, 1)[0][0], uint64(size));
  if (region.isNull())
    return Memory.alloc(size);
  nearRegions.set(region.toString(), size);
  return region;
}

// Once no thread can touch `region` any more (see `retired`).
function releaseRegion(region) {
  const size = nearRegions.get(region.toString());
  if (size !== undefined) {
    nearRegions.delete(region.toString());
    nearPool.push([region, size]);
  }
}

// The process's mappings from /proc/self/maps, in address order: [{lo, hi, x, path}] (numbers:
// user-space addresses fit a double exactly).
function mappings() {
  return File.readAllText('/proc/self/maps').split('\n').filter(l => l.length > 0).map(l => {
    const f = l.split(/\s+/);
    const [lo, hi] = f[0].split('-').map(h => parseInt(h, 16));
    return { lo, hi, x: f[1][2] === 'x', path: f[5] || '' };
  }).filter(m => m.hi <= 2 ** 47);
}

// Where an attached program's reserve can go: the biggest part, up to NEAR_RESERVE, of a free gap
// whose every byte lies within NEAR_REACH of all the program's code around libc (the libraries
// and, say, a JIT's code cache near them): above the libraries, between them, or in a gap the program left.
// Placed at the gap's end nearest the code. {base, size}, the biggest found (size 0: none).
function nearHole() {
  const maps = mappings();
  const libc = Module.getGlobalExportByName('mmap').toString();
  const anchor = parseInt(libc, 16);
  // Frida's own code (its agent, mapped where the attach found room, 2 GB below libc in a JVM) is
  // not the program's: Stalker never runs copies of it.
  const code = maps.filter(m => m.x && Math.abs(m.lo - anchor) < NEAR_REACH &&
      !Cloak.hasRangeContaining(ptr(m.lo)));
  const lo = Math.min(...code.map(m => m.lo)), hi = Math.max(...code.map(m => m.hi));
  const reach = [hi - NEAR_REACH, lo + NEAR_REACH];
  let best = { base: 0, size: 0 };
  for (let i = 1; i < maps.length; i++) {
    const below = maps[i].path === '[stack]' ? NEAR_STACK_ROOM : NEAR_GUARD;
    const from = Math.max(maps[i - 1].hi + NEAR_GUARD, reach[0]);
    const to = Math.min(maps[i].lo - below, reach[1]);
    const size = Math.min(NEAR_RESERVE, Math.floor((to - from) / PAGE) * PAGE);
    if (size > best.size)
      best = { base: from >= hi ? from : to - size, size };
  }
  return best;
}

// Reserves the space before the threads are followed: for a spawned program (still suspended)
// below the libraries, for an attached one in a hole within reach of them. Returns null, or why
// exact mode cannot follow this program right (an attached program with no such hole).
function reserveNear(spawned) {
  if (Process.platform !== 'linux' || Process.arch !== 'x64' || config.watch)
    return null;
  if (spawned) {
    nearReserved = !api.near_init(uint64(NEAR_RESERVE), uint64(NEAR_FILL)).isNull();
  } else {
    const hole = nearHole();
    if (hole.size < NEAR_MIN)
      return `pid ${Process.id} right: no hole of ${NEAR_MIN >> 20} MiB is left within 2 GB of its libraries ` +
          `(largest ${hole.size >> 20} MiB), so Stalker's code would lie out of their reach (issue 32)`;
    nearReserved = !api.near_init_at(ptr(hole.base), uint64(hole.size)).isNull();
  }
  if (nearReserved) {
    const mmap = Module.getGlobalExportByName('mmap');
    Interceptor.replaceFast(mmap, cm.near_mmap); // a jump: see near_mmap
    observers.push({ detach: () => Interceptor.revert(mmap) });
  }
  return null;
}
