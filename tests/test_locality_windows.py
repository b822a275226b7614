"""Access-window records: split from interval records, joined with the interval's phase."""

from __future__ import annotations

import numpy as np
import pytest

from phasescope.target import wire
from phasescope.engine.windows import (
    FLAG_PARTIAL,
    FLAG_REVERSED,
    LocalityJoin,
    encode_window,
    split,
)
from phasescope.errors import PhasescopeError


def interval_record(thread, seq, pairs):
    header = np.zeros(1, wire.HEADER)
    header[0]["kind"] = wire.KIND_INTERVAL
    header[0]["thread"] = thread
    header[0]["seq"] = seq
    header[0]["instructions"] = sum(c for _, c in pairs)
    header[0]["npairs"] = len(pairs)
    return header.tobytes() + np.array(pairs, wire.PAIR).tobytes()


def test_split_separates_windows_from_intervals():
    addrs = np.arange(5000, dtype=np.uint64) * np.uint64(64) + np.uint64(0x7F00_0000_0000)
    buf = (interval_record(7, 0, [(0x401000, 10), (0x401020, 5)])
           + encode_window(7, 1, addrs, flags=FLAG_REVERSED, skipped=3)
           + interval_record(7, 1, [(0x401000, 15)])
           + encode_window(8, 4, addrs[:10], flags=FLAG_PARTIAL))
    intervals, windows = split(buf)
    recs = wire.records(intervals)
    assert [(int(h["thread"]), int(h["seq"]), len(p)) for h, p in recs] == [(7, 0, 2), (7, 1, 1)]
    assert [(w.thread, w.seq, w.partial, w.skipped, len(w.blocks)) for w in windows] == [
        (7, 1, False, 3, 5000), (8, 4, True, 0, 10)]
    assert windows[0].blocks.tolist() == (addrs >> np.uint64(6)).tolist()  # reversed back


@pytest.mark.parametrize("cut", [1, 20, 41, 50])
def test_split_rejects_truncated_windows(cut):
    buf = encode_window(1, 0, np.arange(4, dtype=np.uint64))
    with pytest.raises(PhasescopeError):
        split(buf[:len(buf) - cut] if cut < len(buf) else buf[:cut])


def test_split_rejects_unknown_kinds():
    with pytest.raises(PhasescopeError):
        split(np.array([9, 0, 0, 0], "<u4").tobytes() + bytes(32))


def test_join_tags_windows_with_their_interval_phase_in_either_order():
    join = LocalityJoin(min_accesses=100)
    small = np.resize(np.arange(0, 32 * 1024, 64, dtype=np.uint64), 65536)  # 32 KiB cycle
    stream = np.arange(65536, dtype=np.uint64) * np.uint64(64)
    _, (w1, w2, w3) = split(encode_window(1, 5, small) + encode_window(2, 9, stream)
                            + encode_window(2, 10, stream[:50]))
    join.add_window(w1)           # window first, phase later
    join.interval(1, 5, phase=3)
    join.interval(2, 9, phase=4)  # phase first, window later
    join.add_window(w2)
    join.add_window(w3)           # too short
    join.interval(1, 6, phase=3)  # no window: nothing
    loc = join.locality
    assert sorted(loc.phases()) == [3, 4]
    assert loc.to_dict(3)["windows"] == 1 and loc.to_dict(4)["windows"] == 1
    assert loc.miss_rate(3, 256 * 1024) == pytest.approx(512 / 65536)
    assert loc.miss_rate(4, 1024 * 1024) == 1.0
    assert join.short == 1 and join.orphaned == 0


def test_join_bounds_windows_whose_interval_never_comes():
    join = LocalityJoin(min_accesses=1, max_pending=3)
    _, ws = split(b"".join(encode_window(1, s, [64, 128]) for s in range(5)))
    for w in ws:
        join.add_window(w)
    assert join.orphaned == 2
    join.interval(1, 4, phase=0)
    assert join.locality.to_dict(0)["windows"] == 1


def test_locality_program_runs_natively(build):
    """The --locality end-to-end fixture (two chases, 32 KiB and 32 MiB) builds and runs."""
    import subprocess

    exe = build("locality_phases.c")
    out = subprocess.run([exe, "2", "100000"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and len(out.stdout.strip()) > 0
