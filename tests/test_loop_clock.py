"""The live loop's deadlines (pipeline/loop_clock.py), on clock readings chosen by hand: a watched
run wakes for its view, checkpoints and quiet bound; an unwatched one only for --duration, a
passed-on signal's grace and a checkpoint its data's wake-ups missed."""

from __future__ import annotations

from types import SimpleNamespace

from phasescope.pipeline.loop_clock import CHECKPOINT_EVERY, IDLE_READ, MAX_QUIET, LoopClock, on_terminal

VIEW = SimpleNamespace(due=100.0 + 3.0)  # the view's next draw, 3 s after the start


def test_an_unwatched_run_sleeps_until_its_data_comes():
    clock = LoopClock(VIEW, watched=False, deadline=None, now=100.0)
    assert clock.due(100.0) == 2 * CHECKPOINT_EVERY  # once: the rings read and saved if no batch came
    assert clock.checkpoint_due(110.0)
    clock.flowing = False  # that read brought nothing
    assert clock.due(110.0) == IDLE_READ  # no checkpoint, no status line, no quiet bound: one idle read
    assert clock.due(110.0) > MAX_QUIET * 10


def test_an_unwatched_run_wakes_for_duration_and_a_passed_on_signal():
    clock = LoopClock(VIEW, watched=False, deadline=120.0, now=100.0)
    clock.flowing = False
    assert clock.due(100.0) == 20.0
    assert clock.due(100.0, passed_on=103.5) == 3.5


def test_a_checkpoint_the_data_missed_is_made_up_while_reads_bring_windows():
    clock = LoopClock(VIEW, watched=False, deadline=None, now=100.0)  # the checkpoint due at 105
    assert clock.due(101.0) == 100.0 + 2 * CHECKPOINT_EVERY - 101.0
    assert not clock.checkpoint_due(104.9)
    assert clock.checkpoint_due(106.0)  # a wake-up at 106 made it
    assert clock.next_checkpoint == 106.0 + CHECKPOINT_EVERY
    assert clock.due(107.0) == 106.0 + 2 * CHECKPOINT_EVERY - 107.0  # its windows: the rings may hold more
    clock.flowing = False  # a read brought nothing: the target is quiet
    assert clock.due(107.0) == 106.0 + IDLE_READ - 107.0


def test_an_idle_run_still_reads_its_rings_now_and_then():
    """A target that sleeps, works less than a batch, sleeps again: no ring wakes the loop, so once a
    read brought nothing the rings are read IDLE_READ after the last checkpoint, and again after it
    (before r47e: never, until the next batch or the end; minutes for a thread working 1 s a minute)."""
    clock = LoopClock(VIEW, watched=False, deadline=None, now=100.0)
    clock.flowing = False
    assert clock.due(101.0) == 100.0 + IDLE_READ - 101.0  # no checkpoint yet: counted from the start
    assert clock.checkpoint_due(100.0 + IDLE_READ)  # that read saves what it brought
    assert clock.due(100.0 + IDLE_READ) == IDLE_READ


def test_a_watched_run_wakes_for_its_view_checkpoint_and_quiet_bound():
    clock = LoopClock(VIEW, watched=True, deadline=None, now=100.0)
    assert clock.due(100.0) == MAX_QUIET  # 1.5 s before the view's 3
    assert clock.due(102.0) == 1.0  # the view at 103
    clock.view = SimpleNamespace(due=200.0)
    assert clock.due(104.0) == 1.0  # the checkpoint at 105
    assert clock.due(104.0, passed_on=104.25) == 0.25


def test_on_terminal():
    assert not on_terminal(SimpleNamespace())  # no isatty: a StringIO-like stream
    with open(__file__) as f:
        assert not on_terminal(f)
    assert not on_terminal(f)  # closed: ValueError, not a traceback
