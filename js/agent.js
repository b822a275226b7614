/*
 * phasescope agent: follows every thread with Stalker, counts instructions per block with the
 * inline code that agent/counter.c emits, and ships intervals, module maps and thread events.
 *
 * Messages to the host (send(meta[, data])), see host/phasescope/wire.py:
 *   {type: 'hello', arch, platform, pid, fast}             agent loaded
 *   {type: 'modules', modules: [[name, base, size, path]]}  full module map (start)
 *   {type: 'module-added', module: [...]} / {type: 'module-removed', base}
 *   {type: 'thread-started', tid} / {type: 'thread-exited', tid}
 *   {type: 'data', dropped_records, dropped_instructions, bytes} + binary interval records
 *   {type: 'exit', status} (exit/_exit) / {type: 'crash', signal, address}
 * Host -> agent: {type: 'ack', bytes} after it consumed a 'data' message (flow control);
 *   {type: 'final-ack'} once it received 'exit' or 'crash' (the agent holds the process until then).
 */
'use strict';

const PAGE = Process.pageSize;
const STATE_SIZE = 256; // >= sizeof (PsThread)
const GLOBAL_SIZE = 256; // >= sizeof (PsGlobal)

let cm = null;
let api = null;
let globals = null;
let config = null;
const threads = new Map(); // tid -> {state, arena}
const retired = []; // [time, record]: kept until the exited thread can no longer touch them
let unacked = 0;
let stopping = false;
let finished = false;
let drainTimer = null;
let observers = [];
let deferredMain = null; // main thread of a spawned process, until it runs (see followMainEarly)

function moduleTuple(m) {
  return [m.name, m.base.toString(), m.size, m.path];
}

function roundPages(n) {
  return Math.ceil(n / PAGE) * PAGE;
}

function setup(opts) {
  config = opts;
  globals = Memory.alloc(GLOBAL_SIZE);
  const symbols = {
    ps: globals,
    clock_gettime: Module.getGlobalExportByName('clock_gettime'),
    getrusage: Module.getGlobalExportByName('getrusage'),
  };
  cm = new CModule(opts.source, symbols);
  api = {
    configure: new NativeFunction(cm.ps_configure, 'void', ['uint64', 'pointer', 'pointer', 'uint64']),
    threadInit: new NativeFunction(cm.ps_thread_init, 'void', ['pointer', 'uint64', 'pointer', 'uint64', 'pointer', 'uint64']),
    threadClose: new NativeFunction(cm.ps_thread_close, 'void', ['pointer']),
    drain: new NativeFunction(cm.ps_drain, 'pointer', ['pointer']),
    stats: new NativeFunction(cm.ps_stats, 'uint64', ['int']),
  };
  const bufSize = roundPages(opts.bufferBytes);
  globals.buffers = [Memory.alloc(bufSize), Memory.alloc(bufSize)];
  globals.lenOut = Memory.alloc(8);
  api.configure(uint64(opts.interval), globals.buffers[0], globals.buffers[1], uint64(bufSize));
}

function follow(tid) {
  if (stopping || threads.has(tid) || tid === deferredMain)
    return;
  if (config.bare) { // baseline for the benchmark: Stalker without phasescope's counters
    threads.set(tid, null);
    if (tid === Process.getCurrentThreadId())
      Stalker.follow();
    else
      Stalker.follow(tid);
    send({ type: 'thread-started', tid });
    return;
  }
  const cap = config.slots;
  const state = Memory.alloc(STATE_SIZE);
  const arena = Memory.alloc(roundPages(cap * 16));
  // Cold code: the slow-path stub and one 26-byte trampoline per block.
  const coldSize = roundPages(cap * 26 + PAGE);
  const cold = Memory.alloc(coldSize);
  Memory.protect(cold, coldSize, 'rwx');
  api.threadInit(state, uint64(tid), arena, uint64(cap), cold, uint64(coldSize));
  threads.set(tid, { state, arena, cold });
  const options = { transform: cm.transform, data: state };
  if (tid === Process.getCurrentThreadId())
    Stalker.follow(options);
  else
    Stalker.follow(tid, options);
  send({ type: 'thread-started', tid });
}

function close(tid, unfollow) {
  const t = threads.get(tid);
  if (t === undefined)
    return;
  threads.delete(tid);
  if (unfollow)
    Stalker.unfollow(tid);
  if (t !== null) {
    api.threadClose(t.state);
    retired.push([Date.now(), t]);
  }
  send({ type: 'thread-exited', tid });
}

function drain(force) {
  const now = Date.now();
  while (retired.length > 0 && now - retired[0][0] > 5000)
    retired.shift();
  if (!force && unacked > config.window)
    return; // host is behind: data stays here, and the C side counts what it cannot keep
  const buf = api.drain(globals.lenOut);
  const len = globals.lenOut.readU64().toNumber();
  const meta = {
    type: 'data',
    dropped_records: api.stats(0).toNumber(),
    dropped_instructions: api.stats(1).toNumber(),
    far_blocks: api.stats(2).toNumber(),
    blocks: api.stats(3).toNumber(),
    flag_saves: api.stats(4).toNumber(),
    bytes: len,
  };
  if (len === 0) {
    if (meta.dropped_records !== config.reportedDrops) {
      config.reportedDrops = meta.dropped_records;
      send(meta);
    }
    return;
  }
  config.reportedDrops = meta.dropped_records;
  unacked += len;
  send(meta, buf.readByteArray(len));
}

function pump() {
  drain(false);
  drainTimer = setTimeout(pump, config.drainMs);
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
    close(tid, false);
  drain(true);
  drain(true);
  send(message);
  // The process is about to go: hold it until the host has everything.
  recv('final-ack', () => {}).wait();
}

function installHooks() {
  observers.push(Process.attachThreadObserver({
    onAdded(thread) {
      follow(thread.id);
    },
    onRemoved(thread) {
      const self = thread.id === Process.getCurrentThreadId();
      close(thread.id, !self);
      if (self)
        Stalker.unfollow();
    },
  }));
  observers.push(Process.attachModuleObserver({
    onAdded(m) {
      send({ type: 'module-added', module: moduleTuple(m) });
    },
    onRemoved(m) {
      send({ type: 'module-removed', base: m.base.toString() });
    },
  }));
  for (const name of ['exit', '_exit']) {
    const fn = Module.getGlobalExportByName(name);
    observers.push(Interceptor.attach(fn, {
      onEnter(args) {
        finish({ type: 'exit', status: args[0].toInt32() });
      },
    }));
  }
  Process.setExceptionHandler(details => {
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

function followMainEarly(mainTid) {
  const hooks = [];
  deferredMain = mainTid;
  const adopt = () => {
    deferredMain = null;
    follow(mainTid);
  };
  const onEnter = () => {
    if (Process.getCurrentThreadId() === mainTid)
      adopt();
  };
  for (const fn of initFunctions()) {
    try {
      hooks.push(Interceptor.attach(fn, { onEnter }));
    } catch (e) {
      // not hookable: the fallback below follows the thread a moment after resume
    }
  }
  // Fallback (static binaries, no init functions): follow it by id once it runs.
  setTimeout(() => {
    for (const h of hooks)
      h.detach();
    adopt();
  }, hooks.length > 0 ? 1000 : 0);
}

rpc.exports = {
  init(opts) {
    setup(opts);
    config.reportedDrops = 0;
    recv('ack', onAck);
    send({
      type: 'modules',
      modules: Process.enumerateModules().map(moduleTuple),
    });
    return { arch: Process.arch, platform: Process.platform, pid: Process.id };
  },
  start(mainTid) {
    // A spawned process is still suspended: its main thread is followed from the first code it
    // runs before main (or by id once it runs), not from here.
    if (mainTid !== null)
      followMainEarly(mainTid);
    installHooks();
    for (const t of Process.enumerateThreads())
      follow(t.id);
    pump();
    return Array.from(threads.keys());
  },
  stop() {
    stopping = true;
    for (const o of observers)
      o.detach();
    observers = [];
    Process.setExceptionHandler(() => false);
    for (const tid of Array.from(threads.keys()))
      Stalker.unfollow(tid);
    Stalker.flush();
    Stalker.garbageCollect();
    return new Promise(resolve => {
      // Give followed threads a moment to leave the instrumented code before the last harvest.
      setTimeout(() => {
        if (drainTimer !== null)
          clearTimeout(drainTimer);
        for (const tid of Array.from(threads.keys()))
          close(tid, false);
        drain(true);
        drain(true);
        resolve(true);
      }, 50);
    });
  },
};
