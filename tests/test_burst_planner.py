"""The burst planner (engine/bursts.py): which phases ask for a burst, and which phase a finished
burst belongs to."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from phasescope.engine.bursts import ATTEMPTS, BurstPlanner, burst_summary
from phasescope.engine.interval import Interval


def _iv(thread, start_ns=0, counts=(1,)):
    n = len(counts)
    return Interval(thread=thread, seq=0, instructions=int(sum(counts)), keys=np.arange(n, dtype=np.uint64),
                    counts=np.array(counts, dtype=np.uint64), pcs=np.arange(100, 100 + n, dtype=np.uint64),
                    start_ns=start_ns, end_ns=start_ns + 5)


def _result(phase, new):
    return SimpleNamespace(phase=phase, new_phase=new)


def test_one_burst_per_new_phase_and_refusals_are_retried_a_few_times():
    answers, asked = [False, True], []
    clock = iter(range(10, 1000, 10))
    planner = BurstPlanner(lambda tid: asked.append(tid) or answers.pop(0), clock=lambda: next(clock))
    planner.on_interval(_result(0, True), _iv(7))    # refused: another burst runs
    planner.on_interval(_result(0, False), _iv(8))   # retried on the phase's next interval: granted
    planner.on_interval(_result(0, False), _iv(7))   # granted once: never again
    assert asked == [7, 8]
    assert planner.finished(_iv(8, start_ns=25)) == 0
    assert planner.finished(_iv(8, start_ns=30)) is None  # one burst, one phase

    asked.clear()
    refusing = BurstPlanner(lambda tid: asked.append(tid) or False)
    refusing.on_interval(_result(1, False), _iv(7))  # not a new phase: no burst asked
    assert asked == []
    refusing.on_interval(_result(1, True), _iv(7))
    for _ in range(ATTEMPTS + 2):
        refusing.on_interval(_result(1, False), _iv(7))
    assert len(asked) == ATTEMPTS


def test_a_burst_belongs_to_the_latest_request_before_it_started():
    t = [0]
    planner = BurstPlanner(lambda tid: True, clock=lambda: t[0])
    t[0] = 100
    planner.on_interval(_result(3, True), _iv(7))  # given up by the agent: no record ever comes
    t[0] = 200
    planner.on_interval(_result(4, True), _iv(7))
    assert planner.finished(_iv(7, start_ns=150)) == 3  # started before the second request
    assert planner.finished(_iv(7, start_ns=250)) == 4
    assert planner.finished(_iv(7, start_ns=50)) is None  # older than every request


def test_burst_summary_orders_the_top_blocks():
    b = burst_summary(_iv(7, counts=(5, 80, 15)))
    assert b["instructions"] == 100 and b["blocks"] == 3 and b["thread"] == 7
    assert [(c["key"], c["pc"], c["share"]) for c in b["top_code"]] == [(1, 101, 0.8), (2, 102, 0.15), (0, 100, 0.05)]
