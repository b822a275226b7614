/*
 * phasescope agent: follows every thread with Stalker, counts instructions per block with the
 * inline code that the C hot path (agent/*.c) emits, and ships intervals, module maps and thread
 * events. One script in the target: the host joins js/*.js in the order of
 * phasescope.resources.PARTS (this file first: its 'use strict' and state hold for all of them).
 *
 * RPC: init(options) -> {arch, platform, pid, fast};
 *      start(mainTid or null) -> {threads: [tid], refused: null or why exact mode cannot follow it};
 *      resumed() after a spawned process was resumed; stop() -> {blocked: [tid]} (the threads asleep in
 *      a system call inside Stalker's copies: the unload waits for them to return);
 *      burst(tid) -> bool (watch mode: follow the thread for one exact interval, see startBurst).
 * Messages to the host (send(meta[, data])), see host/phasescope/sources/wire.py:
 *   {type: 'modules', modules: [[name, base, size, path]]}  full module map (start)
 *   {type: 'module-added', module: [...]} / {type: 'module-removed', base}
 *   {type: 'data', started: [tid], exited: [tid], forked: [pid], dropped_records, dropped_instructions,
 *    bytes} + binary interval records (none when bytes is 0; their layout: wire.RECORD);
 *    threads in `exited` have their last (partial) interval in this or an earlier message.
 *    In watch mode the only records are bursts' (one complete interval each, never partial).
 *   {type: 'exit', status} (exit/_exit) / {type: 'crash', signal, address, killed} (killed: another
 *   process sent the signal, as kill -SEGV; else a fault, raise or abort) /
 *   {type: 'exec', path} (execve: the program is about to be replaced)
 *   {type: 'unfollowable', reason}: exact mode cannot follow part of this program (a runtime)
 * Host -> agent: {type: 'ack', bytes} after it consumed a 'data' message (flow control);
 *   {type: 'window', tid} (--locality: open a window on that thread at its next interval);
 *   {type: 'final-ack'} once it received 'exit', 'crash' or 'exec' (the agent holds the thread
 *   until then).
 */
'use strict';

const PAGE = Process.pageSize;
const GLOBAL_SIZE = 512; // >= sizeof (PsGlobal)
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
    gettid: Module.getGlobalExportByName('gettid'),
    mprotect: Module.getGlobalExportByName('mprotect'),
    munmap: Module.getGlobalExportByName('munmap'),
    mmap: Module.getGlobalExportByName('mmap'),
    getpid: Module.getGlobalExportByName('getpid'),
    syscall: Module.getGlobalExportByName('syscall'),
  };
  cm = new CModule(opts.source, symbols);
  // The C functions, by name without `ps_`; their signatures come from the C source itself (the
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
  // bare 'handled': Stalker with what the program needs to run right (AC, OF, its faults), no counters
  if (opts.bare === 'handled' && cm.transform_bare !== undefined)
    transformFn = cm.transform_bare;
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
