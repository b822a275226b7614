"""bench/foresight.py's bounds on a phase stream whose changes are counted by hand."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from foresight import stream_figures  # noqa: E402

# runs: 0x2 1 0x2 1 0x2 2; changes at 2 (into new 1), 3 (1 -> 0: 1 never ended before), 5 (0 -> 1
# after (0, run 2) as before, but the runs before differ), 6 (1 -> 0 as before) and 8 (into new 2)
STREAM = [0, 0, 1, 0, 0, 1, 0, 0, 2]


def test_shares_of_a_stream_s_changes():
    f = stream_figures(STREAM)
    assert (f["changes"], f["new"], f["seen_phase"], f["seen_short"], f["seen_long"]) == (5, 2, 2, 2, 0)
    # the online (phase, run) map names 1 after the second run of 0 (came) and 0 after the second
    # 1 (came), then 1 after the third run of 0, which 2 ended: +2, and no claim the run outlived
    assert f["online_short"] == 2
    # in hindsight (0, run 2) was followed by 1 twice and 2 once, (1, run 1) by 0 twice: 1 is named
    # after each run of 0 (right twice) and 0 after each 1 (right twice)
    assert f["hindsight_short"] == 4


def test_counted_changes_only():
    f = stream_figures(STREAM, counted={5, 8})
    assert (f["changes"], f["new"], f["seen_phase"], f["online_short"]) == (2, 1, 1, 1)
