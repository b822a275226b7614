// The RPC the host calls (see the header of state.js for the messages).

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
    restoreIgnored(opts.ignored || []);
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
    // Before any thread is followed (a spawned program: before it maps anything). A program
    // exact mode cannot follow right is left untouched: the host says why and exits.
    const refused = reserveNear(mainTid !== null);
    if (refused !== null)
      return { threads: [], refused };
    // A spawned process is still suspended: its main thread is followed from the first code it
    // runs before main (or by id once it runs), not from here.
    if (mainTid !== null)
      earlyHooks = followMainEarly(mainTid);
    const jvm = Process.findModuleByName('libjvm.so'); // attached to a JVM: before its threads are followed
    if (jvm !== null)
      watchJit(jvm);
    // The thread observer reports every existing pthread at once (and follows it). Not
    // Process.enumerateThreads(): it lists the same pthreads but also reads each thread's CPU
    // context through a ptrace helper, which stalls for 15 s on about one attach in eight.
    installHooks();
    pump();
    return { threads: Array.from(threads.keys()), refused: null };
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
    // The threads Stalker may hold: in watch mode only the bursts' (every thread of the program is
    // in `threads` there, a bursting one in `bursts` too), else every one in `threads`.
    const followed = Array.from((config.watch ? bursts : threads).keys());
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
      // Once the last intervals are shipped (hasLeft zeroes the counts), wait for the threads to
      // leave; then say which ones the unload must wait for.
      const settle = () => {
        if (stillLeaving(leaving) && Date.now() - since < LEAVE_MAX_MS)
          setTimeout(settle, BURST_POLL_MS);
        else
          blockedInCopies(followed, blocked => resolve({ blocked }));
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
