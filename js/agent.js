/*
 * phasescope agent: follows every thread with Stalker, counts instructions per block with the
 * inline code that agent/counter.c emits, and ships intervals, module maps and thread events.
 *
 * RPC: init(options) -> {arch, platform, pid, fast}; start(mainTid or null) -> [tid];
 *      resumed() after a spawned process was resumed; stop();
 *      burst(tid) -> bool (watch mode: follow the thread for one exact interval, see startBurst).
 * Messages to the host (send(meta[, data])), see host/phasescope/sources/wire.py:
 *   {type: 'modules', modules: [[name, base, size, path]]}  full module map (start)
 *   {type: 'module-added', module: [...]} / {type: 'module-removed', base}
 *   {type: 'data', started: [tid], exited: [tid], forked: [pid], dropped_records, dropped_instructions,
 *    bytes} + binary interval records (none when bytes is 0; their layout: wire.RECORD);
 *    threads in `exited` have their last (partial) interval in this or an earlier message.
 *    In watch mode the only records are bursts' (one complete interval each, never partial).
 *   {type: 'exit', status} (exit/_exit) / {type: 'crash', signal, address} /
 *   {type: 'exec', path} (execve: the program is about to be replaced)
 *   {type: 'unfollowable', reason}: exact mode cannot follow part of this program (a runtime)
 * Host -> agent: {type: 'ack', bytes} after it consumed a 'data' message (flow control);
 *   {type: 'window', tid} (--locality: open a window on that thread at its next interval);
 *   {type: 'final-ack'} once it received 'exit', 'crash' or 'exec' (the agent holds the thread
 *   until then).
 */
'use strict';

const PAGE = Process.pageSize;
const GLOBAL_SIZE = 256; // >= sizeof (PsGlobal)
const EXCLUSIVE = { scheduling: 'exclusive' }; // the JS lock stays held during the native call

let cm = null;
let transformFn = null;
let api = null;
let globals = null;
let config = null;
const threads = new Map(); // tid -> {state, arena}
// Watch mode: tid -> {region, since (Date.now()), leaving, quiet} of threads followed for one
// exact interval (see startBurst), until they have left Stalker's code.
const bursts = new Map();
const MAX_BURSTS = 1; // followed at a time: each costs its thread a Stalker code cache and exact-mode speed
const BURST_POLL_MS = 5; // drain period while a burst runs or leaves
const BURST_MAX_MS = 2000; // a burst whose thread ran too little for a whole interval is given up
const RELEASE_BLOCKS = 4; // hottest blocks after which a leaving thread's code is invalidated, per drain
const LEFT_TICKS = 2; // clock ticks of user time with no block counted: the thread runs natively
const retired = []; // [time, region]: kept until the exited thread can no longer touch them
// Regions of the threads closed because the process ends (exit, exec, crash): never freed. Those
// threads run on in Stalker's code after the host's final-ack, which may come more than the 5 s
// a retired region is kept: a slow host once let the exiting thread count into a freed region
// (SIGSEGV in exit(), its buffered output lost).
const ending = [];
const started = []; // thread ids followed / closed since the last data message
const exited = [];
const forked = []; // pids of children forked since the last data message (not traced)
let reportedDrops = 0;
const knownModules = new Set(); // bases of the modules the host knows about
let gcUntil = 0; // Date.now() until which drain() reclaims the Stalker state of exited threads
let unacked = 0;
let stopping = false;
let finished = false;
let drainTimer = null;
let observers = [];
let deferredMain = null; // main thread of a spawned process, until it runs (see followMainEarly)
const forking = new Map(); // tid -> region of a thread in fork(), followed again once fork returns

function moduleTuple(m) {
  return [m.name, m.base.toString(), m.size, m.path];
}

// The agent's running counters by name: their indices are the host's wire.STATS (init options).
function stat(name) {
  return api.stats(config.stats.indexOf(name)).toNumber();
}

function roundPages(n) {
  return Math.ceil(n / PAGE) * PAGE;
}

function setup(opts) {
  config = opts;
  // How many times a block must be seen unchanged before Stalker trusts (stops re-checking) it.
  if (opts.trustThreshold !== null)
    Stalker.trustThreshold = opts.trustThreshold;
  globals = Memory.alloc(GLOBAL_SIZE);
  const symbols = {
    ps: globals,
    clock_gettime: Module.getGlobalExportByName('clock_gettime'),
    getrusage: Module.getGlobalExportByName('getrusage'),
    mprotect: Module.getGlobalExportByName('mprotect'),
  };
  cm = new CModule(opts.source, symbols);
  // The C functions, by name without `ps_`; their signatures come from counter.c itself (the
  // host reads them into opts.api). Exclusive: thread_recent and drain fill memory shared by every
  // caller (globals.lenOut and the drained buffer, globals.recent). A cooperative call lets another
  // thread's JavaScript run meanwhile (a crashing or exiting thread flushing in finish()), and two
  // interleaved drains swapped the buffers under each other: records shipped out of order, or
  // with a stale length.
  api = {};
  for (const [name, [ret, args]] of Object.entries(opts.api))
    api[name.replace(/^ps_/, '')] = new NativeFunction(cm[name], ret, args,
        name === 'ps_thread_recent' || name === 'ps_drain' ? EXCLUSIVE : {});
  // Inline counters where the fast path exists (x86-64), else a C callout per block.
  transformFn = (opts.portable || cm.transform === undefined) ? cm.transform_portable : cm.transform;
  const bufSize = roundPages(opts.bufferBytes);
  globals.buffers = [Memory.alloc(bufSize), Memory.alloc(bufSize)];
  globals.lenOut = Memory.alloc(8);
  globals.recent = Memory.alloc(RELEASE_BLOCKS * 8);
  const used = api.configure(uint64(opts.interval), globals.buffers[0], globals.buffers[1], uint64(bufSize),
      uint64(PAGE), uint64(GLOBAL_SIZE)).toNumber();
  if (used > GLOBAL_SIZE)
    throw new Error(`agent: PsGlobal needs ${used} bytes, GLOBAL_SIZE is ${GLOBAL_SIZE}`);
  api.rep_count(uint64(opts.repCount === 'iterations' ? 1 : 0));
}

// One thread's counting state, as the transform's `data`: one mapping laid out by the C side
// (ps_region_size, ps_thread_init): its PsThread, counters, cold code and, with --locality
// (inline path only), its memory slots and window.
function newRegion(tid) {
  const loc = config.locality && transformFn === cm.transform ? config.locality : null;
  const slots = uint64(config.slots), mslots = uint64(loc === null ? 0 : loc.slots);
  const window = uint64(loc === null ? 0 : loc.window), every = uint64(loc === null ? 0 : loc.every);
  const region = Memory.alloc(api.region_size(slots, mslots, window).toNumber());
  if (api.thread_init(region, uint64(tid), slots, mslots, window, every) !== 0)
    throw new Error('agent: cannot make the cold code area executable');
  return region;
}

function follow(tid) {
  if (stopping || threads.has(tid) || tid === deferredMain)
    return;
  if (config.watch) { // sampled mode: the kernel samples the thread; the agent only reports it
    threads.set(tid, null);
    started.push(tid);
    return;
  }
  let options = {};
  if (config.bare) { // baseline for the benchmark: Stalker without phasescope's counters
    threads.set(tid, null);
  } else {
    const region = newRegion(tid);
    threads.set(tid, region);
    options = { transform: transformFn, data: region };
  }
  if (tid === Process.getCurrentThreadId())
    Stalker.follow(options);
  else
    Stalker.follow(tid, options);
  started.push(tid);
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
  api.thread_release(region); // its register loops (counter.c) leave through their block's start
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
    Stalker.follow(tid, { transform: transformFn, data: region });
  } catch (e) {
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

function drain(force) {
  const now = Date.now();
  // Stalker frees an unfollowed thread's context only in garbageCollect(), once the thread has
  // left instrumented code; without this, every short-lived thread leaks ~250 KB of RSS.
  if (!force && gcUntil > now && !Array.from(bursts.values()).some(b => b.leaving))
    Stalker.garbageCollect();
  while (retired.length > 0 && now - retired[0][0] > 5000)
    retired.shift();
  if (config.locality)
    api.win_hold(uint64(unacked > config.window / 2 ? 1 : 0));
  if (!force && unacked > config.window)
    return; // host is behind: data stays here, and the C side counts what it cannot keep
  const buf = api.drain(globals.lenOut);
  const len = globals.lenOut.readU64().toNumber();
  const meta = {
    type: 'data',
    started: started.splice(0),
    exited: exited.splice(0),
    forked: forked.splice(0),
    dropped_records: stat('dropped_records'),
    dropped_instructions: stat('dropped_instructions'),
    bytes: len,
  };
  const news = meta.started.length + meta.exited.length + meta.forked.length > 0 ||
      meta.dropped_records !== reportedDrops;
  reportedDrops = meta.dropped_records;
  if (len === 0) {
    if (news)
      send(meta);
    return;
  }
  unacked += len;
  send(meta, ArrayBuffer.wrap(buf, len)); // no JS copy: send() copies the bytes before it returns
}

function pump() {
  checkBursts();
  drain(false);
  drainTimer = setTimeout(pump, bursts.size > 0 ? BURST_POLL_MS : config.drainMs);
}

// --locality: the host saw a phase with no window yet on thread message.tid; one opens at its next interval.
function onWindow(message) {
  const region = threads.get(message.tid);
  if (region && config.locality && transformFn === cm.transform)
    api.thread_want_window(region);
  recv('window', onWindow);
}

function onAck(message) {
  unacked -= message.bytes;
  recv('ack', onAck);
}

function finish(message) {
  if (finished)
    return;
  finished = true;
  for (const tid of Array.from(threads.keys()))
    close(tid, false, true);
  flushToHost(message);
}

// Ships everything, then holds the thread until the host has it: the process is about to go.
function flushToHost(message) {
  drain(true);
  drain(true);
  send(message);
  recv('final-ack', () => {}).wait();
}

// Faults in followed code (issue 32). Runtimes fault on purpose (HotSpot: its CPU probe, safepoint
// polls and implicit null checks in compiled code) and their handler resumes the thread where the
// faulting PC says. Under Stalker that PC is in the thread's code cache: the program's handler is
// hooked to see the real instruction instead, and the thread goes on, still followed, where the
// handler decided (through Stalker's code for a `ret`, ps_ret_site, with that address pushed).
const SIGNALS_OF = { 'access-violation': [11, 7], 'arithmetic': [8], 'illegal-instruction': [4] };
const UC_RSP = 160; // ucontext_t (x86-64 Linux): uc_mcontext.gregs[REG_RSP], gregs[REG_RIP]
const UC_RIP = 168;
const hookedHandlers = new Set();
let sigaction = null;
const unfollowableSaid = new Set();

// Tells the host (once per reason) that exact counts may be wrong from here, before it happens.
function sayUnfollowable(reason) {
  if (!unfollowableSaid.has(reason)) {
    unfollowableSaid.add(reason);
    send({ type: 'unfollowable', reason });
  }
}
const faultScratch = Memory.alloc(8);
const MAX_SCAN = 1 << 12; // instructions of compiled code searched for a fault's real instruction

// The program's own handler of signal `sig` (null: none, or SIG_DFL / SIG_IGN).
function programHandler(sig) {
  if (sigaction === null)
    sigaction = new NativeFunction(Module.getGlobalExportByName('sigaction'), 'int', ['int', 'pointer', 'pointer']);
  const sa = Memory.alloc(152); // struct sigaction
  if (sigaction(sig, NULL, sa) !== 0)
    return null;
  const h = sa.readPointer();
  return h.compare(ptr(1)) > 0 ? h : null;
}

// Whether the program handles this kind of fault itself; hooks its handlers (once each).
function programHandles(type) {
  if (Process.arch !== 'x64' || Process.platform !== 'linux' || config.watch || config.bare ||
      transformFn !== cm.transform)
    return false;
  let handles = false;
  for (const sig of SIGNALS_OF[type] || []) {
    const h = programHandler(sig);
    if (h === null)
      continue;
    handles = true;
    if (!hookedHandlers.has(h.toString())) {
      hookedHandlers.add(h.toString());
      Interceptor.attach(h, { onEnter: onFaultEnter, onLeave: onFaultLeave });
    }
  }
  return handles;
}

function codeBytes(p, size) {
  return Array.from(new Uint8Array(p.readByteArray(size))).join(',');
}

// The real instruction of compiled code at `pc` of the thread with state `region`, or null: the
// same bytes (relocation keeps a memory access as it is), as many times earlier in the block.
function realPc(region, pc) {
  const start = faultScratch;
  const real = ptr(api.fault_block(region, uint64(pc.toString()), start).toString());
  if (real.isNull())
    return null;
  const want = Instruction.parse(pc);
  const bytes = codeBytes(pc, want.size);
  let k = 0;
  for (let p = start.readPointer(); p.compare(pc) < 0;) {
    const insn = Instruction.parse(p);
    if (insn.size === want.size && codeBytes(p, insn.size) === bytes)
      k++;
    p = insn.next;
  }
  for (let p = real, i = 0; i < MAX_SCAN; i++) {
    const insn = Instruction.parse(p);
    if (insn.size === want.size && codeBytes(p, insn.size) === bytes && k-- === 0)
      return p;
    p = insn.next;
  }
  return null;
}

function onFaultEnter(args) {
  this.fault = null;
  const region = threads.get(Process.getCurrentThreadId());
  if (!region)
    return;
  const uc = args[2];
  const pc = uc.add(UC_RIP).readPointer();
  if (Process.findModuleByAddress(pc) !== null)
    return; // the program's own code, run natively: nothing to translate
  let real = null;
  try {
    real = realPc(region, pc);
  } catch (e) {
    real = null;
  }
  if (real === null) {
    sayUnfollowable(`a fault its own signal handler resumes, at ${pc}, outside the code Stalker compiled`);
    return;
  }
  uc.add(UC_RIP).writePointer(real);
  this.fault = { uc, pc, real, region };
}

function onFaultLeave() {
  const f = this.fault;
  if (f === null)
    return;
  const resume = f.uc.add(UC_RIP).readPointer();
  if (resume.equals(f.real)) { // retry the same instruction (a stack page it made accessible)
    f.uc.add(UC_RIP).writePointer(f.pc);
    return;
  }
  const site = ptr(api.ret_site(f.region).toString());
  if (site.isNull())
    return; // no `ret` compiled yet: the thread goes on natively, uncounted
  const sp = f.uc.add(UC_RSP).readPointer().sub(8); // one word of the red zone
  sp.writePointer(resume);
  f.uc.add(UC_RSP).writePointer(sp);
  f.uc.add(UC_RIP).writePointer(site);
}

// A JVM thread followed from its first instruction (while its creator, itself followed, is still
// in the clone path) makes Java code compute wrong values later (java -version: 3 runs of 3 with
// bare Stalker); followed 20 ms after it appears, 3 of 3 ran right. Threads created once libjvm.so
// is loaded are followed that much later: what they run meanwhile is not counted.
const JVM_THREAD_DELAY_MS = 20;
let jvmLoaded = false;
const lateThreads = new Set();

function followLater(tid) {
  lateThreads.add(tid);
  setTimeout(() => {
    if (!lateThreads.delete(tid))
      return; // gone meanwhile
    try {
      follow(tid);
    } catch (e) {
      // the thread ended before it could be followed
    }
  }, JVM_THREAD_DELAY_MS);
}

// A forked child inherits every hook but has no host, and must run no JavaScript: a lock that
// another thread of the parent held at fork() (the JS runtime's, for one) stays held in the child
// forever, and the child hung on it. So each hook is native: it calls `fn` (a NativeCallback,
// JavaScript) only in the traced process, with the hooked call's first argument (on_enter) or its
// return value (on_leave).
const PARENT_ONLY = `
#include <gum/guminterceptor.h>
extern int ps_pid;
extern int getpid (void);
typedef void (* PsHook) (gpointer value);
void on_enter (GumInvocationContext * ic) {
  if (getpid () == ps_pid)
    ((PsHook) gum_invocation_context_get_listener_function_data (ic)) (gum_invocation_context_get_nth_argument (ic, 0));
}
void on_leave (GumInvocationContext * ic) {
  if (getpid () == ps_pid)
    ((PsHook) gum_invocation_context_get_listener_function_data (ic)) (gum_invocation_context_get_return_value (ic));
}
`;
let parentOnly = null;
const hookCallbacks = []; // NativeCallbacks the hooks call: kept alive while the hooks are

function onlyInParent(name, when, fn) {
  if (parentOnly === null) {
    const pid = Memory.alloc(4);
    pid.writeS32(Process.id);
    parentOnly = new CModule(PARENT_ONLY, { ps_pid: pid, getpid: Module.getGlobalExportByName('getpid') });
  }
  const cb = new NativeCallback(fn, 'void', ['pointer']);
  hookCallbacks.push(cb);
  const callbacks = {};
  callbacks[when === 'on_enter' ? 'onEnter' : 'onLeave'] = parentOnly[when];
  observers.push(Interceptor.attach(Module.getGlobalExportByName(name), callbacks, cb));
}

function installHooks() {
  observers.push(Process.attachThreadObserver({
    onAdded(thread) {
      if (jvmLoaded && !config.watch)
        followLater(thread.id);
      else
        follow(thread.id);
    },
    onRemoved(thread) {
      lateThreads.delete(thread.id);
      const b = bursts.get(thread.id);
      if (b !== undefined) {
        unfollowBurst(thread.id, b);
        retireBurst(thread.id, b);
      }
      const self = thread.id === Process.getCurrentThreadId();
      close(thread.id, !self);
      if (self)
        Stalker.unfollow();
    },
  }));
  observers.push(Process.attachModuleObserver({
    onAdded(m) { // also called for the modules already loaded, which init() shipped
      if (m.name === 'libjvm.so' && !config.watch) {
        jvmLoaded = true;
        sayUnfollowable('the JVM (libjvm.so) exactly: what its threads run in their first ' +
            `${JVM_THREAD_DELAY_MS} ms is not counted, and Java code can still go wrong (issue 32)`);
      }
      const base = m.base.toString();
      if (!knownModules.has(base)) {
        knownModules.add(base);
        send({ type: 'module-added', module: moduleTuple(m) });
      }
    },
    onRemoved(m) {
      const base = m.base.toString();
      knownModules.delete(base);
      send({ type: 'module-removed', base });
    },
  }));
  // A thread that forks while followed leaves Stalker's code in the child, which crashes there
  // (Frida 17.26); so fork() runs unfollowed and the parent thread is followed again after it.
  onlyInParent('fork', 'on_enter', () => {
    const tid = Process.getCurrentThreadId();
    if (config.watch) { // watch mode follows only bursting threads: a burst ends here for good
      const b = bursts.get(tid);
      if (b !== undefined)
        unfollowBurst(tid, b);
      return;
    }
    const region = threads.get(tid);
    if (region !== undefined) {
      forking.set(tid, region);
      Stalker.unfollow();
    }
  });
  onlyInParent('fork', 'on_leave', retval => {
    const pid = retval.toInt32();
    if (pid > 0)
      forked.push(pid);
    const tid = Process.getCurrentThreadId();
    const region = forking.get(tid);
    if (region !== undefined) {
      forking.delete(tid);
      Stalker.follow(region === null ? {} : { transform: transformFn, data: region });
    }
  });
  // exec replaces the program: ship every thread's interval so far (partial) first. Should the
  // exec fail, counting simply goes on.
  onlyInParent('execve', 'on_enter', path => {
    if (finished)
      return;
    for (const region of threads.values()) {
      if (region !== null)
        api.thread_flush(region);
    }
    flushToHost({ type: 'exec', path: path.readUtf8String() });
  });
  for (const name of ['exit', '_exit'])
    onlyInParent(name, 'on_enter', status => finish({ type: 'exit', status: status.toInt32() }));
  Process.setExceptionHandler(details => {
    if (programHandles(details.type))
      return false; // its own handler decides (a runtime's planned fault): see hookFaultHandler
    const signals = {
      'access-violation': 'SIGSEGV', 'abort': 'SIGABRT', 'illegal-instruction': 'SIGILL',
      'arithmetic': 'SIGFPE', 'breakpoint': 'SIGTRAP', 'system': 'SIGBUS',
    };
    finish({ type: 'crash', signal: signals[details.type] || details.type, address: details.address.toString() });
    return false;
  });
}

// Code the main thread of a freshly spawned (still suspended) process runs before main: the
// executable's DT_INIT and first DT_INIT_ARRAY entry, from its dynamic section. Works stripped.
function initFunctions() {
  const m = Process.mainModule;
  const base = m.base;
  const phoff = base.add(0x20).readU64().toNumber();
  const phnum = base.add(0x38).readU16();
  let bias = null;
  let dynamic = null;
  for (let i = 0; i < phnum; i++) {
    const ph = base.add(phoff + i * 56);
    const type = ph.readU32();
    const vaddr = ph.add(16).readU64();
    if (type === 1 && bias === null) // PT_LOAD
      bias = base.sub(vaddr.and(uint64(PAGE - 1).not()));
    else if (type === 2) // PT_DYNAMIC
      dynamic = vaddr;
  }
  if (dynamic === null || bias === null)
    return [];
  const inside = p => p.compare(base) >= 0 && p.compare(base.add(m.size)) < 0;
  const at = v => (inside(ptr(v)) ? ptr(v) : bias.add(v));
  const found = [];
  for (let p = at(dynamic); ; p = p.add(16)) {
    const tag = p.readU64().toNumber();
    const val = p.add(8).readU64();
    if (tag === 0)
      break;
    if (tag === 12) // DT_INIT
      found.push(at(val));
    else if (tag === 25) // DT_INIT_ARRAY
      found.push(at(val).readPointer());
  }
  return found.filter(p => !p.isNull() && inside(p));
}

let adoptMain = null; // follows the deferred main thread (see followMainEarly)
let earlyHooks = false; // whether init code of the executable is hooked for that

function followMainEarly(mainTid) {
  const hooks = [];
  deferredMain = mainTid;
  adoptMain = () => {
    if (deferredMain === null)
      return;
    deferredMain = null;
    for (const h of hooks)
      h.detach();
    follow(mainTid);
  };
  const onEnter = () => {
    if (Process.getCurrentThreadId() === mainTid)
      adoptMain();
  };
  for (const fn of initFunctions()) {
    try {
      hooks.push(Interceptor.attach(fn, { onEnter }));
    } catch (e) {
      // not hookable: resumed() follows the thread by id instead
    }
  }
  return hooks.length > 0;
}

rpc.exports = {
  // Host-side names and disassembly of hot code (rare calls, never on the hot path).
  symbolize(addresses) {
    return addresses.map(a => {
      const s = DebugSymbol.fromAddress(ptr(a));
      return s.name === null ? null : [s.moduleName, s.name];
    });
  },
  readCode(address, size) {
    try {
      return ptr(address).readByteArray(size);
    } catch (e) {
      return null;
    }
  },
  init(opts) {
    setup(opts);
    const fast = transformFn === cm.transform;
    recv('ack', onAck);
    recv('window', onWindow);
    const modules = Process.enumerateModules();
    for (const m of modules)
      knownModules.add(m.base.toString());
    send({ type: 'modules', modules: modules.map(moduleTuple) });
    return { arch: Process.arch, platform: Process.platform, pid: Process.id, fast };
  },
  start(mainTid) {
    // A spawned process is still suspended: its main thread is followed from the first code it
    // runs before main (or by id once it runs), not from here.
    if (mainTid !== null)
      earlyHooks = followMainEarly(mainTid);
    // The thread observer reports every existing pthread at once (and follows it). Not
    // Process.enumerateThreads(): it lists the same pthreads but also reads each thread's CPU
    // context through a ptrace helper, which stalls for 15 s on about one attach in eight.
    installHooks();
    pump();
    return Array.from(threads.keys());
  },
  burst(tid) {
    return startBurst(tid);
  },
  resumed() {
    // Without init code to hook, follow the main thread by id now that it runs; with it, only if
    // the hooks have not fired within a second.
    if (deferredMain !== null)
      setTimeout(adoptMain, earlyHooks ? 1000 : 0);
  },
  stop() {
    stopping = true;
    for (const o of observers)
      o.detach();
    observers = [];
    Process.setExceptionHandler(() => false);
    if (!config.watch) {
      for (const tid of Array.from(threads.keys()))
        Stalker.unfollow(tid);
    }
    for (const [tid, region] of threads)
      releaseHotLoop(tid, region);
    const leaving = new Map(); // tid -> {region, quiet} of the threads that leave Stalker's code
    for (const [tid, region] of threads) {
      if (region !== null)
        leaving.set(tid, { region, quiet: userTicks(tid) || 0 });
    }
    for (const [tid, b] of Array.from(bursts)) {
      leaving.set(tid, { region: b.region, quiet: userTicks(tid) || 0 });
      unfollowBurst(tid, b);
      releaseHotLoop(tid, b.region);
      retireBurst(tid, b);
    }
    Stalker.flush();
    const since = Date.now();
    return new Promise(resolve => {
      // Once the last intervals are shipped (hasLeft zeroes the counts), wait for the threads to leave.
      const settle = () => {
        if (stillLeaving(leaving) && Date.now() - since < LEAVE_MAX_MS)
          setTimeout(settle, BURST_POLL_MS);
        else
          resolve(true);
      };
      // Give followed threads a moment to leave the instrumented code before the last harvest.
      setTimeout(() => {
        if (drainTimer !== null)
          clearTimeout(drainTimer);
        for (const tid of Array.from(threads.keys()))
          close(tid, false);
        drain(true);
        drain(true);
        settle();
      }, 50);
    });
  },
};
