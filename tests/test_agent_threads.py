"""Four threads doing different work, two of them created after attach: every thread is followed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

from agent_support import callgrind_functions, collect, functions
from conftest import end_process, held_by_another_tracer, run_cli, wait_for
from phasescope.sources.events import Unfollowable
from phasescope.sources.session import TraceSession
from phasescope.sources.device import resolve_device, resolve_target

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_four_threads_two_started_after_attach(build, tmp_path):
    binary = build("threads4.c", "-pthread")
    n = 400_000
    proc = subprocess.Popen([binary, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().startswith(b"ready")
        device = resolve_device()
        session = TraceSession(device, resolve_target(device, pid=proc.pid), interval=1_000_000)
        session.start()
        before = set(session.threads)
        assert len(before) == 3  # main and the two waiting workers

        proc.stdin.write(b"go\n")
        proc.stdin.close()
        trace = collect(session)
        out = proc.stdout.read().decode()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

    assert trace.ended.how == "exited" and trace.ended.code == 0
    workers = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"worker (\d) tid (\d+)", out)}
    assert len(workers) == 4
    assert workers[0] in before and workers[1] in before
    assert workers[2] not in before and workers[3] not in before
    assert set(workers.values()) <= set(trace.started) | before
    assert set(workers.values()) <= set(trace.exited)

    module = next(m for m in session.modules.modules if os.path.realpath(m.path) == os.path.realpath(binary))
    ranges = {name: (start, size) for start, size, name in functions(binary)}
    theirs = callgrind_functions([binary, str(n)], tmp_path, stdin=b"go\n") if shutil.which("valgrind") else {}
    for k, tid in workers.items():
        mine = [i for i in trace.intervals if i.thread == tid]
        assert mine, f"no intervals from worker {k}"
        assert [i.seq for i in mine] == list(range(len(mine)))
        assert mine[-1].partial
        total = sum(i.instructions for i in mine)
        assert total == sum(int(i.counts.sum()) for i in mine)
        pcs = np.concatenate([i.pcs for i in mine])
        counts = np.concatenate([i.counts for i in mine])
        start, size = ranges[f"work{k}"]
        off = pcs - np.uint64(module.base)
        in_work = int(counts[(pcs >= module.base) & (off >= start) & (off < start + size)].sum())
        assert in_work > 0.95 * total  # the thread spends its life in its work function
        if theirs:
            assert in_work == pytest.approx(theirs[f"work{k}"], rel=0.01)


@pytest.mark.parametrize("bare", [False, "handled"])
def test_every_thread_of_a_running_program_is_followed_counting_or_bare(build, bare):
    # Threads that exist at attach are followed by id (a ptrace helper stops each). Whether the
    # follow took is told by the blocks compiled for the thread: bare="handled" (the JVM benches'
    # baseline) compiles without counters, and was once taken for a failed follow (stop 40's review).
    exe = build("workers3.c", "-pthread")
    target = subprocess.Popen([exe, "tick"], stdout=subprocess.PIPE)
    try:
        assert target.stdout.readline().startswith(b"ready")
        tids = wait_for(lambda: (lambda t: t if len(t) == 3 else None)(
            {int(t) for t in os.listdir(f"/proc/{target.pid}/task")}), what="three threads")
        device = resolve_device()
        session = TraceSession(device, resolve_target(device, pid=target.pid), interval=1_000_000, bare=bare)
        session.start()
        said, until = [], time.monotonic() + 1.5  # the agent's retries end within 0.3 s
        try:
            for event in session.events(timeout=1):
                if isinstance(event, Unfollowable):
                    said.append(event.reason)
                if time.monotonic() > until:
                    break
            assert set(session.threads) == tids and not said, (session.threads, tids, said)
        finally:
            if bare:  # bare Stalker keeps no hot code to release the spinning workers by: the
                end_process(target)  # unload would wait ~15 s for them, so the target goes first
            session.stop()
        assert bare or target.poll() is None  # detached, it runs on
    finally:
        end_process(target)


def test_a_thread_another_tracer_holds_is_named_not_lost_silently(build, tmp_path):
    # Stalker follows another thread through a ptrace helper; while another tracer holds that
    # thread the helper cannot attach, and Frida 17 says nothing. The thread ran uncounted, and
    # the run looked whole (what a JIT's concurrent code writes can also cause: stop 39's CI lost
    # most of a JVM run). Exact mode tries again, then names the thread in one line.
    exe = build("workers3.c", "-pthread")
    with contextlib.ExitStack() as stack:
        target = subprocess.Popen([exe, "tick"], stdout=subprocess.PIPE)
        stack.callback(end_process, target)
        assert target.stdout.readline().startswith(b"ready")
        workers = wait_for(lambda: sorted(int(t) for t in os.listdir(f"/proc/{target.pid}/task")
                                          if int(t) != target.pid)[:2], what="the two workers")
        held = workers[0]
        stack.enter_context(held_by_another_tracer(held))  # let go before the target is ended
        summary = tmp_path / "s.json"
        done = run_cli("--no-dashboard", "--summary", str(summary), "-p", str(target.pid), "--duration", "2",
                       timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [ln for ln in done.stderr.splitlines() if f"exact mode cannot follow thread {held}:" in ln]
        assert len(lines) == 1 and "another tracer holds" in lines[0], done.stderr[-2000:]
        s = json.loads(summary.read_text())
        assert any(r.startswith(f"thread {held}:") for r in s["session"]["not_followed"]), s["session"]
        # The threads it could stop were followed and counted; the target runs on.
        assert set(s["threads"]) == {str(target.pid), str(workers[1])}, list(s["threads"])
        assert target.poll() is None
