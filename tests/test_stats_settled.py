"""The summary's per-phase statistics are the settled labels' (issue 28): an interval relabelled
later (a candidate the default tracker confirmed) is counted under its settled phase, exactly as
a run fed those labels from the start would count it (one definition: phase_table.settled)."""

import math

import numpy as np

from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.engine.phase_engine import PhaseEngine
from phasescope.engine.phase_table import settled
from phasescope.engine.stats import Stats


def interval(thread, seq, key, t):
    """8 blocks of phase ``key``'s code; wall time and OS counters that differ per interval."""
    keys = np.array([(0x1234 << 32) | (key * 4096 + 16 * i) for i in range(8)], np.uint64)
    start = 1_000_000 * t
    return Interval(thread, seq, 8000, keys, np.full(8, 1000, np.uint64), start_ns=start,
                    end_ns=start + 500 + 37 * (t % 7), os={f: (t * (i + 3)) % 11 for i, f in enumerate(OS_FIELDS)})


def same(a, b, where="stats"):
    """``a`` equals ``b``, floats to 1e-9 (a relabel undoes running means)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a} != {b}"


def test_the_summary_counts_relabelled_intervals_under_their_settled_phase():
    # Two threads. Phase 1's first interval waits as a candidate labelled 0 (its nearest phase)
    # inside a run of 0, which the relabel splits, and is confirmed four intervals later; phase
    # 2's first comes on thread 2 (labelled 1 meanwhile) and is confirmed on thread 1; phase 3's
    # is confirmed by the next interval, which joins its run.
    t1 = [0, 0, 1, 0, 0, 0, 1, 1, 0, 2, 0, 3, 3, 0, 1]
    t2 = [0, 2, 0, 0, 0]
    order = [(1, k) for k in t1[:8]] + [(2, k) for k in t2] + [(1, k) for k in t1[8:]]
    seqs, ivs = {1: 0, 2: 0}, []
    for t, (thread, key) in enumerate(order):
        ivs.append(interval(thread, seqs[thread], key, t))
        seqs[thread] += 1
    engine = PhaseEngine()
    results = engine.feed_many(ivs)
    labels = settled(results)
    assert sum(len(r.relabel_seqs or ()) for r in results) >= 3 and labels != [r.phase for r in results]
    want = Stats()
    for seq, (iv, p) in enumerate(zip(ivs, labels)):
        want.add(iv, p, seq)
    live = Stats()
    for seq, (iv, r) in enumerate(zip(ivs, results)):
        live.add(iv, r.phase, seq)
    assert live.to_dict() != want.to_dict()  # the relabels move something
    got = engine.stats.to_dict()
    for t in got["threads"].values():
        t["predictions"] = {}  # the predictors' (live), not statistics
    same(got, want.to_dict())
    summary = {p["phase"]: p for p in engine.summary()["phases"]}
    assert {p: s["intervals"] for p, s in summary.items()} == {p: labels.count(p) for p in set(labels)}


def test_a_phase_all_of_whose_intervals_move_leaves_the_statistics():
    s = Stats()
    a = [interval(1, i, 0, i) for i in range(3)]
    s.add(a[0], 0, 0)
    s.add(a[1], 5, 1, pending=True)  # held in 5 for now (e.g. the page tracker's held window)
    s.add(a[2], 0, 2)
    s.relabel(0, [1])
    want = Stats()
    for i, iv in enumerate(a):
        want.add(iv, 0, i)
    same(s.to_dict(), want.to_dict())
    assert [p.phase for p in s.by_share()] == [0]


def test_a_phase_made_by_a_relabel_is_last_seen_at_its_intervals_end():
    # the relabel creates phase 7 (a confirmed candidate): its last seen is its interval's end
    # time, as a Stats fed the settled labels says (it was the interval's start)
    a = [interval(1, i, 0, i) for i in range(3)]
    s = Stats()
    s.add(a[0], 0, 0)
    s.add(a[1], 0, 1, pending=True)
    s.add(a[2], 0, 2)
    s.relabel(7, [1])
    want = Stats()
    for i, (iv, p) in enumerate(zip(a, (0, 7, 0))):
        want.add(iv, p, i)
    assert s.phases[7].last_ns == a[1].end_ns != a[1].start_ns
    same(s.to_dict(), want.to_dict())
