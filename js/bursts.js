// Watch mode: follows one of the program's threads with the counting transform until it has cut
// one complete interval (the C side then ships nothing more from it; the drain unfollows it).
// False when the thread is not the program's, already bursting, or MAX_BURSTS are followed.
function startBurst(tid) {
  const following = Array.from(bursts.values()).filter(b => !b.leaving).length;
  if (!config.watch || stopping || finished || !threads.has(tid) || bursts.has(tid) || following >= MAX_BURSTS)
    return false;
  const region = newRegion(tid);
  api.thread_limit(region, uint64(1));
  try {
    if (!followOther(tid, { transform: transformFn, data: region }))
      return false; // Stalker could not stop it: no burst
  } catch (e) {
    releaseRegion(region);
    return false; // the thread is gone
  }
  bursts.set(tid, { region, since: Date.now(), leaving: false, quiet: 0 });
  if (drainTimer !== null) { // end it soon after its interval: drain at the burst's pace
    clearTimeout(drainTimer);
    drainTimer = setTimeout(pump, BURST_POLL_MS);
  }
  return true;
}

// User CPU time of one of our threads, in clock ticks (null once it is gone).
function userTicks(tid) {
  try {
    const stat = File.readAllText(`/proc/self/task/${tid}/stat`);
    return parseInt(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[11], 10);
  } catch (e) {
    return null;
  }
}

function unfollowBurst(tid, b) {
  if (b.leaving)
    return;
  b.leaving = true;
  b.quiet = userTicks(tid) || 0;
  api.thread_recent(b.region, globals.recent, uint64(0)); // what ran so far no longer matters
  if (tid === Process.getCurrentThreadId())
    Stalker.unfollow();
  else
    Stalker.unfollow(tid);
}

// Its region stays allocated a while longer (see drain), as after any thread's end.
function retireBurst(tid, b) {
  bursts.delete(tid);
  retired.push([Date.now(), b.region]);
  gcUntil = Date.now() + 2000;
}

// An unfollowed thread leaves Stalker's code at its next pass through the dispatcher, which a loop
// of linked blocks never makes (see releaseHotLoop). Invalidating a block stops the thread (about
// 3 ms here; all 1,458 blocks sqlite3 ran after its interval cost it a third of a second), and
// most threads pass the dispatcher by themselves within a drain period (indirect branches). So
// each drain after the unfollow invalidates only the blocks after the RELEASE_BLOCKS hottest the
// thread ran since the last drain, if any, until it has run LEFT_TICKS of user time without
// counting a block: it runs natively, and its region is retired.
function nudge(tid, b) {
  if (hasLeft(tid, b))
    retireBurst(tid, b);
}

// Whether unfollowed thread `tid` ({region, quiet}) has left Stalker's code: gone, or LEFT_TICKS
// of user time with no block counted; else the blocks after the hottest it ran are invalidated.
function hasLeft(tid, l) {
  const ran = api.thread_recent(l.region, globals.recent, uint64(RELEASE_BLOCKS)).toNumber();
  const ticks = userTicks(tid);
  if (ran > 0) {
    invalidateAfter(tid, globals.recent, RELEASE_BLOCKS);
    l.quiet = ticks || 0;
    return false;
  }
  return ticks === null || ticks - l.quiet >= LEFT_TICKS;
}

// Stalker frees an unfollowed thread's code 20 ms (wall clock) after the thread flags itself as
// leaving, while it still runs a few instructions there: a thread preempted at that point for
// longer died of SIGSEGV once the code was freed. Nothing tells when a thread has passed them,
// but a runnable thread that ran natively for a while has. So no garbage collection while a
// burst is leaving, and stop() answers (the unload collects everything) once every thread has
// left, is blocked in the kernel (not runnable: not in those instructions), or LEAVE_MAX_MS passed.
const LEAVE_MAX_MS = 1000;

function runnable(tid) {
  try {
    const stat = File.readAllText(`/proc/self/task/${tid}/stat`);
    return stat[stat.lastIndexOf(')') + 2] === 'R';
  } catch (e) {
    return false; // gone
  }
}

// Voluntary context switches of one of our threads (null once it is gone).
function switches(tid) {
  try {
    const m = File.readAllText(`/proc/self/task/${tid}/status`).match(/^voluntary_ctxt_switches:\s*(\d+)/m);
    return m === null ? null : parseInt(m[1], 10);
  } catch (e) {
    return null;
  }
}

// Whether thread `tid` sleeps in a system call whose return address is in Stalker's copy of the
// code (no module holds the PC).
function inCopiesSyscall(tid) {
  try {
    const f = File.readAllText(`/proc/self/task/${tid}/syscall`).trim().split(' ');
    return f.length > 2 && parseInt(f[0], 10) >= 0 && Process.findModuleByAddress(ptr(f[f.length - 1])) === null;
  } catch (e) {
    return false; // gone
  }
}

// Calls `done` with the threads of `tids` that sleep in one system call inside Stalker's copies
// all through BLOCKED_WATCH_MS: Stalker frees a thread's copies only once it has come back through
// them, so the agent cannot unload before these threads return (docs/robustness.md). One that
// sleeps in short calls (a poll loop, usleep(1000)) switches meanwhile: it comes back by itself.
const BLOCKED_WATCH_MS = 100;

function blockedInCopies(tids, done) {
  const asleep = new Map(tids.filter(inCopiesSyscall).map(tid => [tid, switches(tid)]));
  if (asleep.size === 0)
    return done([]);
  setTimeout(() => done(Array.from(asleep).filter(([tid, n]) =>
    n !== null && switches(tid) === n && inCopiesSyscall(tid)).map(([tid]) => tid)), BLOCKED_WATCH_MS);
}

function stillLeaving(leaving) {
  for (const [tid, l] of Array.from(leaving)) {
    if (!runnable(tid) || hasLeft(tid, l))
      leaving.delete(tid);
  }
  return leaving.size > 0;
}

function checkBursts() {
  const now = Date.now();
  for (const [tid, b] of Array.from(bursts)) {
    if (b.leaving)
      nudge(tid, b);
    else if (api.thread_done(b.region).toNumber() !== 0 || now - b.since > BURST_MAX_MS)
      unfollowBurst(tid, b);
  }
}
