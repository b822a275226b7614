"""bench/truth's attached workloads and prediction scores: openssl speed traced with -p by its
driver, and the shown prediction scored on a stream whose answer is known by construction."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "truth")
sys.path.insert(0, BENCH)
from truth_score import lost_cpu, prediction_scores, score_stream, wall_to_cpu  # noqa: E402


def test_prediction_scores_count_changes_said_and_come():
    phases = np.array([0, 0, 1, 1, 2, 2])
    # after each window: stay, change to 1 (right), stay, change to 0 (wrong: 2 came), stay
    preds = np.array([0, 1, 1, 0, 2, 2])
    s = prediction_scores(phases, preds)
    assert s["shown_acc"] == pytest.approx(4 / 5) and s["last_acc"] == pytest.approx(3 / 5)
    assert s["chg_prec"] == pytest.approx(1 / 2) and s["chg_recall"] == pytest.approx(1 / 2)


def test_two_runs_are_compared_at_the_same_points_of_each_activity():
    # bench/truth/modes.py: each run's windows are placed on its own truth clock, and read at the
    # same fractions of the same activities; here run B's activities last twice as long.
    from modes import POINTS, at_points
    truth_a = [("a", 0, 100), ("b", 100, 300)]
    truth_b = [("a", 0, 200), ("b", 200, 600)]
    a = at_points(np.array([50, 50, 100, 100.0]), np.array([1, 1, 2, 2]), truth_a, 2)
    b = at_points(np.array([200, 200, 200.0]), np.array([7, 8, 8]), truth_b, 2)
    assert a.tolist() == [1] * POINTS + [2] * POINTS
    assert b.tolist() == [7] * POINTS + [8] * POINTS


def test_dropped_intervals_keep_their_place_on_the_truth_clock():
    # an exact log of 10 windows of 100 ns: "a" for 5, then "b" for 5, but the agent dropped the
    # 2nd and 3rd of "a" (seq 1 and 2 missing). Placed without them, 2 "b" windows would fall on "a".
    truth = [("a", 0, 500), ("b", 500, 1000)]
    seqs, cpu = np.array([0, 3, 4, 5, 6, 7, 8, 9]), np.full(8, 100.0)
    phases = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    lost = lost_cpu(seqs, cpu)
    assert lost.tolist() == [0, 200, 0, 0, 0, 0, 0, 0]
    assert score_stream(cpu, phases, np.full(8, -1), truth, lost=lost)["ari"] == pytest.approx(1.0)
    assert score_stream(cpu, phases, np.full(8, -1), truth)["ari"] < 0.7


def test_changes_in_start_up_are_no_false_changes_but_a_change_inside_an_activity_is():
    # 14 windows of 0.1 s of CPU: start-up (no activity) for 2, "a" for 4, "b" for 8. The changes in
    # start-up (window 1) and out of it (window 2) are in no activity, the one into "b" (window 6)
    # is real; the one 0.6 s into "b" (window 12) is false.
    truth = [("a", 2e8, 6e8), ("b", 6e8, 14e8)]
    phases = np.array([0, 5, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3])
    s = score_stream(np.full(14, 1e8), phases, np.full(14, -1), truth)
    assert s["false_per_10s"] == pytest.approx(1 / (12e8 / 1e10))
    assert s["detected"] == pytest.approx(1.0) and s["true_changes"] == 1


def test_wall_clock_stamps_land_on_the_windows_cpu_clock():
    # three windows of 100 ns of CPU; the thread was off the CPU for 200 ns inside the second one
    start, end, cpu = np.array([0, 100, 400]), np.array([100, 400, 500]), np.full(3, 100.0)
    t = [-5, 50, 100, 250, 450, 600]
    assert wall_to_cpu(t, start, end, cpu).tolist() == [0, 50, 100, 150, 250, 300]


def test_a_stamped_truth_is_placed_on_the_main_threads_windows(tmp_path):
    # the main thread (3 windows of 100 samples of 1 ms) was off the CPU for 200 ms in its second;
    # a helper thread ran one window meanwhile. "a" is stamped from 50 to 250 ms, "b" to 450 ms.
    from truth_score import place_truth, read_truth
    window = lambda tid, seq, start, end: json.dumps({
        "thread": tid, "thread_seq": seq, "mode": "sampled", "instructions": None, "samples": 100,
        "cpu_ns": 100_000_000, "start_ns": start, "end_ns": end, "blocks": [[4096, 100]]})
    ms = 1_000_000
    (tmp_path / "log.jsonl").write_text("\n".join([
        window(7, 0, 0, 100 * ms), window(9, 0, 100 * ms, 200 * ms), window(7, 1, 100 * ms, 400 * ms),
        window(7, 2, 400 * ms, 500 * ms)]) + "\n")
    truth = tmp_path / "truth.jsonl"
    own = [(40 * ms, 170 * ms), (170 * ms, 260 * ms)]  # the workload's own reading of its CPU time
    truth.write_text("".join(json.dumps({"activity": a, "start_ns": o[0], "end_ns": o[1], "start_wall_ns": s,
                                         "end_wall_ns": e}) + "\n"
                             for a, o, s, e in (("a", own[0], 50 * ms, 250 * ms), ("b", own[1], 250 * ms, 450 * ms))))
    for _ in range(2):  # placing again changes nothing
        place_truth(str(truth), str(tmp_path / "log.jsonl"))
        assert read_truth(str(truth)) == [("a", 50 * ms, 150 * ms), ("b", 150 * ms, 250 * ms)]
    rows = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [(r["own_start_ns"], r["own_end_ns"]) for r in rows] == own


def test_sample_keys_rekey_the_same_samples_by_page_function_and_caller(tmp_path):
    # bench/truth/sample_keys.py: one window, three samples: two in function f (one at each end of
    # a page boundary it straddles), one in g (f's first page); the third sample has a caller.
    from sample_keys import rewrite
    m = 7 << 32
    f1, f2, g, caller = m | 0x1ff0, m | 0x2010, m | 0x1100, m | 0x5000
    rec = {"seq": 0, "thread": 1, "thread_seq": 0, "mode": "sampled", "instructions": None, "samples": 3,
           "cpu_ns": 100, "blocks": [[g, 1], [f1, 1], [f2, 1]], "stacks": [[1, f1], [1, f2], [1, g, caller]],
           "frames": [[f1, "m", "f"], [f2, "m", "f"], [g, "m", "g"], [caller, "m", None]]}
    (tmp_path / "w.jsonl").write_text(json.dumps(rec) + "\n")
    (tmp_path / "w.truth.jsonl").write_text("")

    def groups(variant):
        assert rewrite(str(tmp_path), "w", variant, str(tmp_path / variant)) == pytest.approx(1 / 3)
        out = json.loads((tmp_path / variant / "w.jsonl").read_text())
        assert out["samples"] == sum(n for _, n in out["blocks"]) and "stacks" not in out
        return sorted(n for _, n in out["blocks"])
    assert groups("page") == [1, 2]  # f1 and g share a page, f2 is the next one
    assert groups("func") == [1, 2]  # f's two samples, g's one
    assert groups("funcpage") == [3]  # f starts in g's page (as far as its samples show)
    assert groups("caller") == [1, 1, 1]  # g's sample has a caller, f1's not: apart
    assert groups("page+func") == [1, 1, 2, 2]  # each sample once under each part
    assert groups("bigfunc") == [1, 2]  # f spans two pages: one key; g keeps its page, apart from f1
    assert groups("sharedfunc") == [1, 1, 1]  # f1's page holds f and g: parted; f2's page only f
    assert groups("page16k") == [3]  # 0x0000-0x3fff: one 16 KiB page


def test_an_exact_logs_stamped_truth_is_placed_by_the_wall_clock_and_not_stretched(tmp_path):
    # An exact log of 22 intervals of 100 ns CPU, one every 100 ns of wall time: "a" for 10, "b" for
    # 10, then 2 of the interpreter's teardown. The workload's own reading (user time) is short of
    # the intervals' CPU (user and system). Placed by its wall stamps, every interval falls in its
    # activity; stretched onto the truth's end, the tail moves "b"'s first interval into "a".
    from types import SimpleNamespace
    from truth_score import exact_truth
    ivs = [SimpleNamespace(start_ns=100 * i, end_ns=100 * (i + 1), cpu_ns=100) for i in range(22)]
    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps({"activity": a, "start_ns": s, "end_ns": e, "start_wall_ns": ws,
                                         "end_wall_ns": we}) + "\n"
                             for a, s, e, ws, we in (("a", 0, 930, 0, 1000), ("b", 930, 1850, 1000, 2000))))
    placed, stamped = exact_truth(str(truth), ivs)
    assert stamped and placed == [("a", 0, 1000), ("b", 1000, 2000)]
    phases, cpu, none = np.array([0] * 10 + [1] * 10 + [2] * 2), np.full(22, 100.0), np.full(22, -1)
    assert score_stream(cpu, phases, none, placed, stretch=False)["ari"] == pytest.approx(1.0)
    assert score_stream(cpu, phases, none, placed)["ari"] < 0.9
    truth.write_text(json.dumps({"activity": "a", "start_ns": 0, "end_ns": 930}) + "\n")  # no stamps
    assert exact_truth(str(truth), ivs) == ([("a", 0, 930)], False)


def test_the_sqlite_shell_stamps_the_wall_clock_in_seconds(tmp_path):
    # the script's stamp, run by the same SQLite in this process, reads CLOCK_REALTIME (ms)
    import sqlite3
    import time
    from sqlshell import stamp, stamps
    before = time.time()
    line = sqlite3.connect(":memory:").execute(stamp("cte")).fetchone()[0]
    after = time.time()
    (tmp_path / "out.txt").write_text("@@setup 1.5\nRun Time: real 0.1 user 0.25 sys 0\n" + line + "\n")
    (kind0, t0, u0), (kind, t, u) = stamps(tmp_path / "out.txt")
    assert (kind0, t0, u0, kind, u) == ("setup", 1_500_000_000, 0, "cte", 250_000_000)
    assert before - 0.002 <= t / 1e9 <= after + 0.002


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_openssl_speed_attached_with_its_algorithms_as_truth(tmp_path):
    truth, log, report = tmp_path / "t.jsonl", tmp_path / "log.jsonl", tmp_path / "out.txt"
    cmd = [sys.executable, os.path.join(BENCH, "toolwork.py"), str(truth), "md5,sha256", "2", "--",
           sys.executable, "-m", "phasescope.cli", "--mode", "sampled", "--no-dashboard", "--log", str(log),
           "-o", str(report)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise
    assert proc.returncode == 0, err.decode()[-2000:]
    rows = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [r["activity"] for r in rows] == ["md5", "sha256"]
    # the first announcement at the tool's CPU time since the attach: 0, or a 10 ms tick it spent
    # setting up under load (CI at load 2-3 saw 10 ms)
    assert 0 <= rows[0]["start_ns"] <= rows[0]["end_ns"] == rows[1]["start_ns"] <= rows[1]["end_ns"]
    assert rows[1]["end_ns"] > 0  # the tool's CPU time since the attach
    # and the wall clock at each announcement, which truth_score.place_truth puts among the windows
    assert rows[0]["start_wall_ns"] <= rows[0]["end_wall_ns"] == rows[1]["start_wall_ns"] < rows[1]["end_wall_ns"]
    assert log.read_text().count("\n") >= 1  # windows of the attached tool


def test_a_window_is_the_activity_most_of_its_stacks_name():
    # bench/truth/stack_truth.py: the first frame (leaf first) named main.act<Kind> names a sample's
    # activity; a window needs half its samples named and 60% of those on one activity.
    from types import SimpleNamespace
    from stack_truth import window_activity
    frames = {1: ("srv", "runtime.mallocgc"), 2: ("srv", "main.actJSON"), 3: ("srv", "main.actMap"),
              4: ("srv", "net/http.serve")}
    iv = lambda stacks, samples: SimpleNamespace(stacks=stacks, frames=frames, samples=samples)
    assert window_activity(iv([[7, 1, 2, 4], [3, 3, 4]], 10), "main.act") == "json"
    assert window_activity(iv([[5, 1, 3, 2]], 10), "main.act") == "map"  # the innermost act names it
    assert window_activity(iv([[4, 1, 2], [6, 1, 4]], 10), "main.act") is None  # under half named
    assert window_activity(iv([[5, 2], [5, 3]], 10), "main.act") is None  # no activity has 60%


def test_excursions_merge_a_phase_whose_short_runs_sit_inside_another_and_nothing_else():
    # bench/truth/excursions.py: phase 1 makes runs of 2 and 3 windows inside phase 0's runs: at the
    # second, 1 is 0 from its first run on. Phase 2's run of 6 and phase 3's single run of 2 inside
    # 0 stay; 1's third run ends in 2, not between runs of 0 (k=3 merges nothing); runs of 4 (over
    # --max-run) do not count.
    from excursions import merge_excursions
    stream = [0] * 5 + [1] * 2 + [0] * 4 + [1] * 3 + [0] * 3 + [1] * 2 + [2] * 6 + [0] * 2 + [3] * 2 + [0] * 2
    want = [0] * 5 + [0] * 2 + [0] * 4 + [0] * 3 + [0] * 3 + [0] * 2 + [2] * 6 + [0] * 2 + [3] * 2 + [0] * 2
    assert merge_excursions(stream).tolist() == want
    assert merge_excursions(stream, k=3).tolist() == stream
    assert merge_excursions([0] * 3 + [1] * 4 + [0] * 3 + [1] * 4 + [0] * 3, max_run=3).tolist() == \
        [0] * 3 + [1] * 4 + [0] * 3 + [1] * 4 + [0] * 3
