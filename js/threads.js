// Following threads: each one's region, following and closing it, releasing a hot loop.

// One thread's counting state, as the transform's `data`: one mapping laid out by the C side
// (ps_region_size, ps_thread_init): its PsThread, counters, cold code and, with --locality
// (inline path only), its memory slots and window.
function newRegion(tid) {
  const loc = config.locality && transformFn === cm.transform ? config.locality : null;
  const slots = uint64(config.slots), mslots = uint64(loc === null ? 0 : loc.slots);
  const window = uint64(loc === null ? 0 : loc.window), every = uint64(loc === null ? 0 : loc.every);
  const region = allocRegion(api.region_size(slots, mslots, window).toNumber());
  if (api.thread_init(region, uint64(tid), slots, mslots, window, every) !== 0)
    throw new Error('agent: cannot make the cold code area executable');
  return region;
}

// Not once the process ends (finish(): exit, crash): a thread followed by id is stopped by a ptrace
// helper, a child process that waits on a socket for the agent's thread; should the process die
// meanwhile (exit_group after the host's final-ack, a runtime's abort), the helper waits forever,
// holding the stopped thread's exit (so the process is never reaped) and a copy of its pipes. A JVM
// thread's late follow (hooks.js) can come at any time.
function follow(tid) {
  if (stopping || finished || threads.has(tid) || tid === deferredMain)
    return;
  if (config.watch) { // sampled mode: the kernel samples the thread; the agent only reports it
    threads.set(tid, null);
    started.push(tid);
    return;
  }
  let options = {};
  if (config.bare === true) { // baseline for the benchmark: Stalker without phasescope's counters
    threads.set(tid, null);
  } else {
    const region = newRegion(tid);
    threads.set(tid, region);
    options = { transform: transformFn, data: region };
  }
  api.near_carve(uint64(NEAR_CONTEXT));
  if (tid === Process.getCurrentThreadId()) {
    Stalker.follow(options);
  } else {
    if (!followOther(tid, options)) {
      threads.delete(tid);
      throw new FollowFailed(tid);
    }
  }
  started.push(tid);
}

// Follows another thread, `tid`, with Stalker; false when Stalker could not stop it (no block was
// compiled with `options.data`, see ps_thread_blocks), the region then released: nothing of
// Stalker's holds it.
function followOther(tid, options) {
  Stalker.follow(tid, options);
  if (options.data === undefined || api.thread_blocks(options.data).toNumber() !== 0)
    return true;
  releaseRegion(options.data);
  return false;
}

// Stalker could not stop thread `tid` to follow it: its ptrace helper failed to attach, as it does
// while another helper holds the thread (a JIT's code writes invalidate blocks in every thread
// through one). Silently, in Frida 17: phasescope checks the blocks compiled.
class FollowFailed extends Error {
  constructor(tid) {
    super(`Stalker could not stop thread ${tid} to follow it`);
    this.tid = tid;
  }
}

const FOLLOW_RETRY_MS = [2, 10, 50, 200]; // after each failed try but the last
const FOLLOW_TRIES = FOLLOW_RETRY_MS.length + 1;

// Follows `tid`, trying again a little later while Stalker cannot stop it (FollowFailed), and says
// so in one line should it never manage: what the thread runs is then not counted.
function followSurely(tid, tries = 0) {
  try {
    follow(tid);
  } catch (e) {
    if (!(e instanceof FollowFailed))
      throw e;
    if (tries + 1 < FOLLOW_TRIES) {
      setTimeout(() => {
        if (!stopping && !finished && userTicks(tid) !== null) // alive (not enumerateThreads: it stops each thread)
          followSurely(tid, tries + 1);
      }, FOLLOW_RETRY_MS[tries]);
    } else {
      sayUnfollowable(`thread ${tid}: Stalker could not stop it to follow it (${FOLLOW_TRIES} tries: its ptrace ` +
          'helper failed to attach, as it does while another tracer holds the thread), and what it runs is not counted');
    }
  }
}

// An unfollowed thread leaves instrumented code only when it next enters Stalker's dispatcher,
// which a hot loop whose blocks Stalker has linked together never does: the unload would wait for
// it forever. Invalidating the blocks its current code branches to sends it through the
// dispatcher, which sees the pending unfollow. Blocks start at the targets and fall-throughs of
// the branches (block ends) that ran in the thread's current interval.
const HOT_MAX = 1024;

function releaseHotLoop(tid, region) {
  if (region === null)
    return;
  api.thread_release(region); // its register loops (agent/x86_loop_emit.c) leave through their block's start
  const out = Memory.alloc(HOT_MAX * 8);
  invalidateAfter(tid, out, api.thread_hot(region, out, uint64(HOT_MAX)).toNumber());
}

// Invalidates, for thread `tid`, the blocks after the `n` branch PCs at `out` (up to a 0).
function invalidateAfter(tid, out, n) {
  if (Process.arch !== 'x64')
    return;
  const starts = new Set();
  for (let i = 0; i < n; i++) {
    const pc = out.add(i * 8).readPointer();
    if (pc.isNull())
      break;
    try {
      const insn = Instruction.parse(pc);
      starts.add(insn.next.toString());
      const op = insn.operands[0];
      if (op !== undefined && op.type === 'imm' && insn.groups.some(g => g === 'jump' || g === 'call'))
        starts.add(ptr(op.value).toString());
    } catch (e) {
      // unreadable code (unmapped meanwhile): nothing to invalidate there
    }
  }
  for (const start of starts) {
    try {
      Stalker.invalidate(tid, ptr(start));
    } catch (e) {
      // the thread is gone or the block was never compiled
    }
  }
}

function close(tid, unfollow, forever = false) {
  const region = threads.get(tid);
  if (region === undefined)
    return;
  threads.delete(tid);
  if (unfollow && !config.watch)
    Stalker.unfollow(tid);
  if (region !== null) {
    api.thread_close(region);
    if (forever)
      ending.push(region);
    else
      retired.push([Date.now(), region]);
  }
  exited.push(tid);
  gcUntil = Date.now() + 2000;
}
