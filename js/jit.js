// Code a JIT rewrites in place (issue 32, agent/jit.c): HotSpot's writes to its code (its icache
// flushes, inline cache stubs, objects a GC moved; found in libjvm.so's symbol table) are hooked, and
// the blocks they touch are invalidated in every followed thread, so each recompiles from the new
// code at its next entry instead of running a stale copy.
const JIT_SLOTS = 1 << 16; // index entries to start with (16 bytes each); doubled when 3/4 full
const JIT_SYMBOLS = {
  lo: '_ZN9CodeCache10_low_boundE',
  hi: '_ZN9CodeCache11_high_boundE',
  range: '_ZN14AbstractICache16invalidate_rangeEPhi',
  word: '_ZN14AbstractICache15invalidate_wordEPh',
  stub: '_ZN17InlineCacheBuffer23assemble_ic_buffer_codeEPhPvS0_',
  stubSize: '_ZN17InlineCacheBuffer17ic_stub_code_sizeEv',
  oops: '_ZN7nmethod7oops_doEP10OopClosureb',
  fix: '_ZN7nmethod19fix_oop_relocationsEPhS0_b',
};
// What keys compiled code by its Java method (agent/jit_keys.c); without them it is keyed by address.
const JIT_KEY_SYMBOLS = { find: '_ZN9CodeCache16find_blob_unsafeEPv', nmethodVtable: '_ZTV7nmethod' };
// HotSpot's VMStructs table and its layout words, as agent/jit.c reads them (PS_VMS_*).
const JIT_STRUCTS = ['gHotSpotVMStructs', 'gHotSpotVMStructEntryArrayStride', 'gHotSpotVMStructEntryTypeNameOffset',
  'gHotSpotVMStructEntryFieldNameOffset', 'gHotSpotVMStructEntryOffsetOffset'];
let jitWatched = false;
let jitStructs = null; // kept alive: agent/jit.c reads it

// Invalidates `n` block starts at `starts` in every followed thread (Stalker stops another thread
// through a ptrace helper only where that thread compiled the block).
function jitInvalidate(starts, n) {
  for (let i = 0; i < n; i++) {
    const start = starts.add(i * 8).readPointer();
    for (const tid of threads.keys()) {
      try {
        Stalker.invalidate(tid, start);
      } catch (e) {
        // the thread ended meanwhile
      }
    }
  }
}

// Hooks the JVM's writes to its code once `m` (libjvm.so) is loaded, before any of its code runs. Says in
// one line what is not protected where its symbol table lacks them.
function watchJit(m) {
  if (jitWatched || config.watch || config.bare === true || Process.arch !== 'x64')
    return;
  jitWatched = true;
  const at = {};
  for (const [key, name] of Object.entries(JIT_SYMBOLS))
    at[key] = m.findSymbolByName(name);
  const structs = JIT_STRUCTS.map(name => m.findExportByName(name));
  if (Object.values(at).some(p => p === null) || structs.some(p => p === null)) {
    sayUnfollowable(`code HotSpot rewrites in place (${m.path} has no symbol table to find its flushes): ` +
        'Stalker may run stale copies of it, and Java code can then go wrong (issue 32)');
    return;
  }
  const stubSize = new NativeFunction(at.stubSize, 'int', [])();
  jitStructs = Memory.alloc(structs.length * 8);
  structs.forEach((p, i) => jitStructs.add(i * 8).writePointer(p));
  const find = m.findSymbolByName(JIT_KEY_SYMBOLS.find);
  const vtable = m.findSymbolByName(JIT_KEY_SYMBOLS.nmethodVtable); // an object's vptr: 2 words in
  api.jit_init(at.lo, at.hi, uint64(JIT_SLOTS), uint64(stubSize), jitStructs, find || NULL,
      find === null || vtable === null ? NULL : vtable.add(16));
  const cb = new NativeCallback(jitInvalidate, 'void', ['pointer', 'uint64']);
  hookCallbacks.push(cb);
  observers.push(Interceptor.attach(at.range, { onEnter: cm.jit_range_enter }, cb));
  observers.push(Interceptor.attach(at.word, { onEnter: cm.jit_word_enter }, cb));
  observers.push(Interceptor.attach(at.stub, { onEnter: cm.jit_stub_enter, onLeave: cm.jit_span_leave }, cb));
  observers.push(Interceptor.attach(at.oops, { onEnter: cm.jit_oops_enter, onLeave: cm.jit_span_leave }, cb));
  observers.push(Interceptor.attach(at.fix, { onEnter: cm.jit_fix_enter, onLeave: cm.jit_span_leave }, cb));
}
