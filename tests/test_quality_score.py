"""The scorer and the offline reference on label streams whose scores are known by construction."""

import subprocess
import sys
import os

import numpy as np
import pytest

from phasescope.errors import InputError
from phasescope.engine.interval import Interval
from phasescope.quality import simpoint
from phasescope.quality.labels import LabelStream, read_labels, read_simpoint_labels, write_simpoint_labels
from phasescope.quality.metrics import adjusted_rand_index, align, score, top_coverage

HOST = os.path.join(os.path.dirname(__file__), "..", "host")


def stream(labels, preds=None, threads=None, instructions=None):
    return LabelStream(np.array(labels), None if instructions is None else np.array(instructions, float),
                       None if threads is None else np.array(threads),
                       {k: np.array(v) for k, v in (preds or {}).items()})


def test_figure6_definitions_on_a_hand_counted_stream():
    ref = stream([0, 0, 0, 1, 1, 2, 2, 2])  # reference changes at pairs 2-3 and 4-5; 5 same pairs
    live = stream([5, 5, 6, 6, 7, 8, 8, 9])  # live changes at 1-2, 3-4, 4-5, 6-7
    s = score(live, ref)
    assert s["pairs"] == 7 and s["reference_changes"] == 2 and s["live_changes"] == 4
    assert s["changes_detected"] == pytest.approx(1 / 2)  # 4-5 found, 2-3 missed
    assert s["same_agreed"] == pytest.approx(2 / 5)  # 0-1 and 5-6 agree; 1-2, 3-4, 6-7 do not
    assert s["misclassified"] == pytest.approx(4 / 7)
    assert s["phases"] == 5 and s["reference_phases"] == 3


def test_pairs_are_per_thread():
    # Interleaved threads: each thread stays in its own phase, so there is no change at all.
    ref = stream([0, 1, 0, 1, 0, 1], threads=[1, 2, 1, 2, 1, 2])
    live = stream([3, 4, 3, 4, 3, 4], threads=[1, 2, 1, 2, 1, 2])
    s = score(live, ref)
    assert s["pairs"] == 4 and s["reference_changes"] == 0 and s["live_changes"] == 0
    assert s["same_agreed"] == 1.0 and s["changes_detected"] is None


def test_prediction_scores_overall_and_at_changes():
    labels = [0, 0, 1, 1, 0, 0, 1, 1]
    always_next_change = [0, 1, 1, 0, 0, 1, 1, 0]  # predicted after each interval
    live = stream(labels, {"oracle": always_next_change})
    p = score(live, stream(labels))["predictors"]
    assert p["oracle"]["overall"] == 1.0 and p["oracle"]["changes"] == 1.0
    assert p["last_phase"]["overall"] == pytest.approx(4 / 7) and p["last_phase"]["changes"] == 0.0
    assert p["oracle"]["changes_n"] == 3


def test_recurring_changes_bound_what_history_can_foresee():
    from phasescope.quality.metrics import recurring_changes
    # changes: 0>1, 1>2, 2>0 (all new), then 0>1, 1>2 (seen), 2>3 (new), 3>0 (new): 2 of 7
    labels = np.array([0, 0, 1, 2, 2, 0, 1, 1, 2, 3, 0])
    assert recurring_changes(labels, np.zeros(len(labels), np.int64)) == pytest.approx(2 / 7)
    # per thread: the same pair on another thread was not seen by this one
    assert recurring_changes(np.array([0, 1, 0, 1]), np.array([1, 1, 2, 2])) == 0.0
    assert recurring_changes(np.array([5, 5, 5]), np.zeros(3, np.int64)) is None


@pytest.mark.parametrize("seed", range(5))
def test_ari_matches_sklearn(seed):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 + seed * 3, 300)
    b = np.where(rng.random(300) < 0.7, a, rng.integers(0, 7, 300))
    assert adjusted_rand_index(a, b) == pytest.approx(metrics.adjusted_rand_score(a, b), abs=1e-12)


def test_ari_known_values():
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 9, 9]) == 1.0
    assert adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    assert adjusted_rand_index([0, 0, 0], [0, 0, 0]) == 1.0


def test_top20_coverage():
    labels = list(range(30)) + [0] * 70  # 30 phases; phase 0 has 71 intervals, 29 have one
    assert top_coverage(labels) == pytest.approx((71 + 19) / 100)


def test_alignment_by_instruction_fraction():
    live = stream([0] * 10, instructions=[1] * 10)
    ref = stream([7, 8], instructions=[3, 7])  # first 30% of the instructions are 7
    assert align(live, ref).tolist() == [7, 7, 7] + [8] * 7
    assert align(live, stream([1, 2, 3, 4, 5])).tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_labels_file_round_trip_and_bad_input(tmp_path):
    path = tmp_path / "labels"
    write_simpoint_labels(str(path), [0, 1, 1], [0.5, 0.25, 0])
    assert read_labels(str(path)).labels.tolist() == [0, 1, 1]
    bad = tmp_path / "bad"
    bad.write_text("0 0.1\nx 0.2\n")
    with pytest.raises(InputError, match=r"bad:2: malformed label line"):
        read_simpoint_labels(str(bad))


@pytest.mark.slow  # computes for seconds (long synthetic traces): not in the fast lane
def test_bic_picks_the_number_of_well_separated_clusters():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(3)
    centers = rng.normal(0, 10, (4, 15))
    truth = rng.integers(0, 4, 400)
    pts = centers[truth] + rng.normal(0, 0.3, (400, 15))
    ref = simpoint.cluster(pts, max_k=10)
    assert ref.k == 4
    assert adjusted_rand_index(ref.labels, truth) == 1.0


def test_choose_k_is_the_smallest_reaching_90_percent_of_the_range():
    assert simpoint.choose_k([0, 50, 89, 91, 100, 95]) == 4
    assert simpoint.choose_k([5.0]) == 1


def _interval(seq, blocks):
    keys = np.array(list(blocks), dtype=np.uint64)
    counts = np.array(list(blocks.values()), dtype=np.uint64)
    return Interval(thread=1, seq=seq, instructions=int(counts.sum()), keys=keys, counts=counts)


def test_reference_of_intervals_recovers_phases_known_by_construction():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(0)
    phases = [{k: 100 + 10 * i for i, k in enumerate(range(p * 40, p * 40 + 40))} for p in range(3)]
    truth = ([0] * 20 + [1] * 10 + [2] * 15) * 3
    ivs = []
    for i, p in enumerate(truth):
        b = {k: int(v * rng.uniform(0.9, 1.1)) for k, v in phases[p].items()}
        ivs.append(_interval(i, b))
    ref = simpoint.reference_of(ivs)
    assert ref.k == 3
    assert adjusted_rand_index(ref.labels, truth) == 1.0
    assert ref.labels[0] == 0  # renumbered in order of first appearance


def cli(*args):
    env = dict(os.environ, PYTHONPATH=HOST)
    return subprocess.run([sys.executable, "-m", "phasescope.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow
def test_score_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "x.jsonl"
    log.write_text('{"thread": 1, "thread_seq": 0, "instructions": 5, "phase": 0, "blocks": []}\n')
    bad = tmp_path / "bad"
    bad.write_text("zero\n")
    r = cli("score", str(log), "--reference", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "malformed label line" in r.stderr
    r = cli("score", str(tmp_path / "missing"), "--reference", str(bad))
    assert r.returncode == 2 and "cannot read" in r.stderr
    nophase = tmp_path / "nophase.jsonl"
    nophase.write_text('{"thread": 1}\n')
    r = cli("score", str(nophase), "--reference", str(bad))
    assert r.returncode == 2 and "missing field 'phase'" in r.stderr


@pytest.mark.slow
def test_score_cli_against_itself(tmp_path):
    log = tmp_path / "x.jsonl"
    log.write_text("".join(f'{{"thread": 1, "thread_seq": {i}, "instructions": 5, "phase": {p}, '
                           f'"predictions": {{"last_phase": {p}}}, "blocks": []}}\n'
                           for i, p in enumerate([0, 0, 1, 1, 0])))
    r = cli("score", str(log), "--reference", str(log), "--json")
    assert r.returncode == 0, r.stderr
    import json
    s = json.loads(r.stdout)
    assert s["changes_detected"] == 1.0 and s["same_agreed"] == 1.0 and s["ari"] == 1.0


def test_missing_sklearn_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    for call in (lambda: simpoint.cluster(np.zeros((3, 2))), simpoint.require_sklearn):
        with pytest.raises(InputError, match=r"needs scikit-learn: pip install 'phasescope\[quality\]'"):
            call()
