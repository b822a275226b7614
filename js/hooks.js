// Hooks: threads the program creates (JVM threads followed later), fork, exec, exit, crashes, and the
// spawned main thread before main.

// A JVM thread followed from its first instruction (while its creator, itself followed, is still
// in the clone path) makes Java code compute wrong values later (java -version: 3 runs of 3 with
// bare Stalker); followed 20 ms after it appears, 3 of 3 ran right. Threads created once libjvm.so
// is loaded are followed that much later: what they run meanwhile is not counted.
// Other threads are followed inside Frida's hook on their start, where no hook or replacement sees
// the mmap of the Stalker context: attached to a program that left no room within reach of its code,
// their Stalker code may lie out of reach (far forms; following them later instead lost short-lived
// threads: test_robust_threads' churn counted 166 of 600).
const JVM_THREAD_DELAY_MS = 20;
let jvmLoaded = false;
const lateThreads = new Set();

// HotSpot's JIT compiler threads ("C1 CompilerThread0", "C2 CompilerThread0", named by the time
// they are followed) are not followed: under Stalker they compiled 12-20x slower than natively, so
// each Java activity ran its interpreter and C1 code for far longer than natively, and recurred
// on other tiers' code (issue 32, stop 48). Their instructions are not counted (said once).
function isJitCompiler(tid) {
  let name;
  try {
    name = File.readAllText(`/proc/self/task/${tid}/comm`);
  } catch (e) {
    return false;
  }
  return /^C[12] CompilerThre/.test(name);
}

function followLater(tid) {
  lateThreads.add(tid);
  setTimeout(() => {
    if (!lateThreads.delete(tid) || isJitCompiler(tid))
      return; // gone meanwhile, or a JIT compiler thread (kept native)
    try {
      followSurely(tid);
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
  const jvmThere = !config.watch && Process.findModuleByName('libjvm.so') !== null; // attached to a JVM
  observers.push(Process.attachThreadObserver({
    onAdded(thread) {
      if (jvmLoaded && !config.watch)
        followLater(thread.id);
      else if (!(jvmThere && isJitCompiler(thread.id)))
        followSurely(thread.id);
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
        watchJit(m);
        sayUnfollowable('the JVM (libjvm.so) exactly: what its threads run in their first ' +
            `${JVM_THREAD_DELAY_MS} ms is not counted, nor what its JIT compiler threads run (not followed: they compile ` +
            'as fast as natively)' + (nearReserved ? '' : ', and Java code can go wrong ' +
            '(Stalker\'s code could not be kept within 2 GB of the libraries)') + ' (issue 32)');
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
    const sig = signalOf(details);
    if (sig.sender !== null) { // sent (kill -SEGV, raise, abort), not a fault: see requeue
      if (Cloak.hasCurrentThread()) {
        redirect(sig.signo, sig.info);
        return true; // one of Frida's threads got it: a program thread gets it instead, as untraced
      }
      const disposition = programDisposition(sig.signo);
      if (disposition === null || !disposition.isNull()) {
        if (disposition !== null && hookedHandlers.get(disposition.toString()) === null) // hooked (faults.js): not a fault to translate
          sentTo.set(Process.getCurrentThreadId(), (sentTo.get(Process.getCurrentThreadId()) || 0) + 1);
        return false; // ignored, or the program's own handler: Frida does as the program said
      }
      finish({ type: 'crash', signal: sig.name, address: details.address.toString(), killed: sig.sender !== Process.id });
      requeue(sig.signo);
      return false;
    }
    if (sig.signo !== 0 && ptr(1).equals(programDisposition(sig.signo) || NULL)) // an ignored fault: the kernel
      programDisposition(sig.signo, NULL); // makes it SIG_DFL and the program dies of it (Frida retried it forever)
    const handles = programHandles(details.type);
    if (handles === HOOK_PENDING)
      return true; // resumed as it was: the same fault comes again once the hook is live
    if (handles)
      return false; // its own handler decides (a runtime's planned fault): see faults.js
    finish({ type: 'crash', signal: sig.name, address: details.address.toString() });
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

// The hooks stay attached (inert once the thread is adopted; init code runs once): detaching them
// here, inside the first one's onEnter, left the second one's patched prologue in place until every
// open Interceptor transaction ended, and the thread, followed from that onEnter, could reach it
// first: Stalker kept a copy of the jump into a trampoline whose context was freed later, and the
// main thread crashed in Frida's invocation code before the program's own code ran (about 1 spawn
// in 400 under load; stop 36's CI saw /bin/echo end with no thread and no exit reported).
function followMainEarly(mainTid) {
  let hooked = 0;
  deferredMain = mainTid;
  adoptMain = () => {
    if (deferredMain === null)
      return;
    deferredMain = null;
    followSurely(mainTid);
  };
  const onEnter = () => {
    if (Process.getCurrentThreadId() === mainTid)
      adoptMain();
  };
  for (const fn of initFunctions()) {
    try {
      observers.push(Interceptor.attach(fn, { onEnter }));
      hooked++;
    } catch (e) {
      // not hookable: resumed() follows the thread by id instead
    }
  }
  return hooked > 0;
}
