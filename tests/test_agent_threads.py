"""Four threads doing different work, two of them created after attach: every thread is followed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from agent_support import callgrind_functions, collect, functions
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
