"""Sampled mode's shown prediction (``cycle``) where the tracker holds the window at a run's end
(it fits no phase: one activity gives way to the next), on streams known by construction (issue
27, stop 46)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from predict_streams import held_ends, jittered_cycle, random_order, shown_on_held  # noqa: E402


@pytest.mark.parametrize("seed", range(8))
def test_a_cycle_whose_runs_sometimes_run_long_is_foretold_at_its_held_windows(seed):
    # four activities in a fixed order, 8 turns; a run is 2 short, as long, 1 or 3 longer than its
    # activity's budget, and its last window is held. The runs that came long make claims that the
    # run outlived (the margin falls below 0), which hid the claims at the next changes' held
    # windows too: main foretold 5-17 of 31 changes, and 5-18 of the 23 from the third turn on.
    phases = jittered_cycle(seed, (8, 5, 7, 4), 8, jitter=(-2, 0, 1, 3))
    predictions, points = shown_on_held(held_ends(phases, seed))
    changes = [i for i in range(1, len(phases)) if phases[i] != phases[i - 1]]
    assert len(changes) == 31
    later = changes[8:]
    assert sum(predictions[i - 1] == phases[i] for i in later) >= 0.7 * len(later)
    assert points > 0


@pytest.mark.parametrize("seed", range(10))
def test_a_random_order_whose_runs_end_in_held_windows_does_not_lose_to_last_phase(seed):
    # six phases in a random order, runs of 2-6 windows, the last window of a run held 60% of the
    # time and any other 3%: no change can be foretold. measured's contexts (phase, run length,
    # candidate, held) open by chance; main's shown prediction lost 1.2-2.2 points to last-phase
    # on six of these ten streams. Now measured's changes pass the thread's record (Referee).
    stream = held_ends(random_order(seed, 6, 2, 6, 60), seed * 7 + 1, end=0.6, inside=0.03)
    assert shown_on_held(stream)[1] >= -1.0
