// Faults in followed code (issue 32). Runtimes fault on purpose (HotSpot: its CPU probe, safepoint
// polls and implicit null checks in compiled code) and their handler resumes the thread where the
// faulting PC says. Under Stalker that PC is in the thread's code cache: the program's handler is
// hooked to see the real instruction instead, and the thread goes on, still followed, where the
// handler decided (through Stalker's code for a `ret`, ps_ret_site, with that address pushed).
const SIGNALS_OF = { 'access-violation': [11, 7], 'arithmetic': [8], 'illegal-instruction': [4] };
const UC_GREGS = 40; // ucontext_t (x86-64 Linux): uc_mcontext.gregs, its [REG_RSP], [REG_RIP]
const UC_RSP = 160;
const UC_RIP = 168;
const hookedHandlers = new Map(); // handler -> {unhooked: its first bytes, retries} until its hook is live, then null
let sigaction = null;
// thread -> how many sent signals (not faults) its program handler is about to get: per thread, since
// several threads get them at once (one global thread id was overwritten: the other thread's was then
// translated as a fault of Stalker's code), and counted, since one may come during another (SA_NODEFER)
const sentTo = new Map();
const unfollowableSaid = new Set();

// Tells the host (once per reason) that exact counts may be wrong from here, before it happens.
function sayUnfollowable(reason) {
  if (!unfollowableSaid.has(reason)) {
    unfollowableSaid.add(reason);
    send({ type: 'unfollowable', reason });
  }
}
const faultScratch = Memory.alloc(16); // ps_fault_block's out: where the copy starts, its loop tag
const MAX_SCAN = 1 << 12; // instructions of compiled code searched for a fault's real instruction

// `size` bytes of zeroed memory (a struct sigaction, a sigset_t).
function zeroed(size) {
  const p = Memory.alloc(size);
  for (let i = 0; i < size; i += 8)
    p.add(i).writeU64(0);
  return p;
}

// The program's disposition of signal `sig` as it set it (Frida's sigaction keeps the program's
// own): NULL for SIG_DFL, ptr(1) for SIG_IGN, else its handler; null if it cannot be read. With
// `to` (NULL: SIG_DFL, ptr(1): SIG_IGN), sets it first, as the program's own sigaction would.
function programDisposition(sig, to = null) {
  if (sigaction === null)
    sigaction = new NativeFunction(Module.getGlobalExportByName('sigaction'), 'int', ['int', 'pointer', 'pointer']);
  if (to !== null) {
    const act = zeroed(152); // struct sigaction: no flags, an empty mask
    act.writePointer(to);
    sigaction(sig, act, NULL);
  }
  const sa = Memory.alloc(152); // struct sigaction
  return sigaction(sig, NULL, sa) === 0 ? sa.readPointer() : null;
}

// Frida's exceptor, as it attaches, keeps a SIG_IGN of the signals it takes over as SIG_DFL (its
// sigaction then says SIG_DFL, and it gives SIG_DFL back at the detach): a sent SIGSEGV killed an
// attached program that ignores it. `ignored`: those the host read as ignored in /proc/PID/status
// before the attach (options.ignored), given back to Frida's record of the program's.
function restoreIgnored(ignored) {
  for (const sig of ignored)
    programDisposition(sig, ptr(1));
}

// The program's own handler of signal `sig` (null: none, or SIG_DFL / SIG_IGN).
function programHandler(sig) {
  const h = programDisposition(sig);
  return h !== null && h.compare(ptr(1)) > 0 ? h : null;
}

// Whether the program handles this kind of fault itself (true, false), hooking its handlers (once
// each); HOOK_PENDING while a hook is not in place yet. Interceptor commits a hook when the last
// open transaction ends, and any thread about to run JavaScript holds one open (it begins one
// before it waits for the JavaScript lock): so a hook attached here, inside the fault, may not be
// live when the program's handler runs right after (the handler then saw Stalker's PC and aborted:
// 1 run in 15 of tests/programs/planned_faults.c under load). The fault is retried until it is.
const HOOK_PENDING = 'pending';
const PROLOGUE = 16; // bytes of a handler compared to tell that its hook is live
const MAX_RETRIES = 100000; // faults retried while waiting for a hook (each lets other threads run)

function programHandles(type) {
  if (Process.arch !== 'x64' || Process.platform !== 'linux' || config.watch || config.bare === true ||
      (transformFn !== cm.transform && transformFn !== cm.transform_bare))
    return false;
  let handles = false;
  for (const sig of SIGNALS_OF[type] || []) {
    const h = programHandler(sig);
    if (h === null)
      continue;
    handles = true;
    const key = h.toString();
    if (!hookedHandlers.has(key)) {
      hookedHandlers.set(key, { unhooked: codeBytes(h, PROLOGUE), retries: 0 });
      Interceptor.attach(h, { onEnter: onFaultEnter, onLeave: onFaultLeave });
    }
    const pending = hookedHandlers.get(key);
    if (pending !== null) {
      if (codeBytes(h, PROLOGUE) === pending.unhooked && pending.retries++ < MAX_RETRIES)
        return HOOK_PENDING;
      hookedHandlers.set(key, null); // live from here on (or never: then as before this wait)
    }
  }
  return handles;
}

// Which signal an exception is, and who sent it, from the kernel's siginfo: on x86-64 Linux the
// signal frame holds it right after the kernel's ucontext (rt_sigframe: pretcode, uc, info), which
// is what nativeContext points to. {signo, name, sender}: sender is null for a fault (si_code > 0:
// the instruction faults again once Frida's handler returns) and the sending pid for a signal sent
// with kill(2), tgkill(2), raise(3), abort(3) (si_code <= 0: nothing faults again); info: the
// siginfo. A frame that
// does not read as expected is taken as a fault, as before (Frida tells no more than the type).
const KERNEL_UCONTEXT = 304; // uc_flags, uc_link, uc_stack (24), uc_mcontext (256), uc_sigmask (8)
const SIGNALS_BY_TYPE = {
  'access-violation': { 11: 'SIGSEGV', 7: 'SIGBUS' }, 'abort': { 6: 'SIGABRT' }, 'illegal-instruction': { 4: 'SIGILL' },
  'arithmetic': { 8: 'SIGFPE' }, 'breakpoint': { 5: 'SIGTRAP' }, 'system': { 31: 'SIGSYS' },
};

function signalOf(details) {
  const names = SIGNALS_BY_TYPE[details.type] || {};
  const first = Object.keys(names)[0];
  const fault = { signo: first === undefined ? 0 : Number(first), name: names[first] || details.type, sender: null };
  if (Process.arch !== 'x64' || Process.platform !== 'linux' || !details.nativeContext)
    return fault;
  try {
    const info = details.nativeContext.add(KERNEL_UCONTEXT);
    const signo = info.readS32();
    if (!(signo in names))
      return fault;
    const sent = info.add(8).readS32() <= 0; // si_code: SI_USER 0, SI_QUEUE -1, SI_TKILL -6
    return { signo, name: names[signo], sender: sent ? info.add(16).readS32() : null, info };
  } catch (e) {
    return fault;
  }
}

// Frida's handler loses a sent signal the program leaves at SIG_DFL: unhandled, it puts SIG_DFL
// back and returns, which is right for a fault (the instruction faults again and the program dies
// of it) but not for `kill -SEGV`, after which the program ran on (stop 45). So the signal is
// queued again to this thread, blocked until the handler returns (Frida's runs with SA_NODEFER):
// the return restores the thread's mask, and the signal then ends the program as untraced.
let blockSignal = null;
let syscall = null;
const SYS_TGKILL = 234; // x86-64
const SYS_RT_TGSIGQUEUEINFO = 297;

function sys(nr, a, b, c, p = NULL) { // (an unused last argument is harmless)
  if (syscall === null)
    syscall = new NativeFunction(Module.getGlobalExportByName('syscall'), 'long', ['long', 'long', 'long', 'long', 'pointer']);
  return syscall(nr, a, b, c, p).toNumber();
}

function requeue(sig) {
  if (blockSignal === null)
    blockSignal = new NativeFunction(Module.getGlobalExportByName('pthread_sigmask'), 'int', ['int', 'pointer', 'pointer']);
  const set = zeroed(128); // sigset_t
  set.writeU64(uint64(1).shl(sig - 1));
  blockSignal(0 /* SIG_BLOCK */, set, NULL);
  sys(SYS_TGKILL, Process.id, Process.getCurrentThreadId(), sig);
}

// A signal sent to the process that the kernel gave one of Frida's own threads, as it does when
// every program thread blocks it (one takes it with sigwaitinfo, another joins, say): untraced a
// program thread gets it; traced it was lost. Queued again with its siginfo (the sender kept;
// si_code SI_QUEUE for kill's SI_USER and tgkill's SI_TKILL: the kernel lets only the main thread
// queue those) to a followed thread that does not block it (one in sigwaitinfo does not, while it
// waits); while none does (untraced it would stay pending), tried again later, less and less often.
function redirect(sig, info, wait = 0) {
  const copy = zeroed(128); // siginfo_t
  Memory.copy(copy, info, 128);
  if (copy.add(8).readS32() === 0 || copy.add(8).readS32() === -6) // SI_USER, SI_TKILL
    copy.add(8).writeS32(-1); // SI_QUEUE, sender kept
  const blocking = tid => {
    try {
      const m = File.readAllText(`/proc/self/task/${tid}/status`).match(/^SigBlk:\s*([0-9a-f]+)/m);
      return m === null || !uint64('0x' + m[1]).shr(sig - 1).and(1).equals(0);
    } catch (e) {
      return true; // gone
    }
  };
  for (const tid of Array.from(threads.keys()).filter(t => !blocking(t))) {
    if (sys(SYS_RT_TGSIGQUEUEINFO, Process.id, tid, sig, copy) === 0)
      return;
  }
  if (!finished)
    setTimeout(() => redirect(sig, copy, Math.min(1000, wait * 2 || 10)), wait || 10);
}

function codeBytes(p, size) {
  return Array.from(new Uint8Array(p.readByteArray(size))).join(',');
}

// The real instruction of compiled code at `pc` of the thread with state `region`, or null: the
// same bytes (relocation keeps a memory access as it is), as many times earlier in the copy.
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
  const sent = sentTo.get(Process.getCurrentThreadId()) || 0;
  if (sent > 0) { // a sent signal (kill -SEGV): the program's handler gets it as untraced (it may
    if (sent > 1) // have no ucontext: a handler set with signal())
      sentTo.set(Process.getCurrentThreadId(), sent - 1);
    else
      sentTo.delete(Process.getCurrentThreadId());
    return;
  }
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
  const loop = faultScratch.add(8).readU64();
  if (!loop.equals(0)) // in a register loop: the program's rsp and register back first
    api.fault_unloop(region, loop, uc.add(UC_GREGS));
  this.fault = { uc, pc, real, region, unlooped: !loop.equals(0) };
}

function onFaultLeave() {
  const f = this.fault;
  if (f === null)
    return;
  const resume = f.uc.add(UC_RIP).readPointer();
  if (resume.equals(f.real) && !f.unlooped) { // retry the same instruction (a stack page it made accessible)
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
