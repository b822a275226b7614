// The drain: ships the C side's records to the host with flow control (acks), and the end messages.

function drain(force) {
  const now = Date.now();
  // Stalker frees an unfollowed thread's context only in garbageCollect(), once the thread has
  // left instrumented code; without this, every short-lived thread leaks ~250 KB of RSS.
  if (!force && gcUntil > now && !Array.from(bursts.values()).some(b => b.leaving))
    Stalker.garbageCollect();
  while (retired.length > 0 && now - retired[0][0] > 5000)
    releaseRegion(retired.shift()[1]);
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
