"""The default tracker (``confirmed``, issue 28) on streams known by construction: when an interval
that matches nothing gets its ID, and how the log settles the intervals that waited for it."""

import numpy as np
import pytest

from phasescope.engine.interval import Interval
from phasescope.engine.phase_engine import PhaseEngine
from phasescope.engine.phase_table import settled
from phasescope.engine.config import EngineConfig
from phasescope.engine.tracker import PRESETS, Tracker, TrackerConfig
from phasescope.errors import InputError
from phasescope.formats.log import dumps, settled_phases, to_record
from phasescope.quality.labels import read_log_labels


def phase(p):
    """Footprint (32 buckets summing to 32) of phase ``p``: all its work in bucket ``p``."""
    f = np.zeros(32)
    f[p] = 32.0
    return f


def confirmed(**over):
    return Tracker(TrackerConfig(**dict(PRESETS["confirmed"], bits=None, **over)))


def test_the_default_is_confirmed_and_paper_stays_the_paper():
    assert PRESETS["default"] is PRESETS["confirmed"]
    assert PRESETS["paper"]["transition"] is False and PRESETS["paper"]["update_policy"] == "none"


def test_the_first_interval_starts_a_phase_at_once():
    # Nothing to be near and nothing to wait for: a one-interval run has its own phase, P0 (new).
    m = confirmed().classify_many(phase(3)[None, :])[0]
    assert (m.phase, m.new_phase, m.transition, m.relabel) == (0, True, False, None)


def test_a_candidate_confirmed_later_relabels_its_first_interval_wherever_it_was():
    # A A b A b: b's first interval (seq 2) is labelled A meanwhile; b's second confirms it, two
    # intervals later (seq 3 is A): the relabel names seq 2, not the previous interval.
    a, b = phase(0), phase(1)
    ms = confirmed().classify_many(np.array([a, a, b, a, b]))
    assert [m.phase for m in ms] == [0, 0, 0, 0, 1]
    assert [m.transition for m in ms] == [False, False, True, False, False]
    assert ms[4].new_phase and (ms[4].relabel, ms[4].relabel_seqs) == (1, (2,))
    assert settled(ms) == [0, 0, 1, 0, 1]


def test_a_candidate_spans_threads():
    # Thread 1 runs A then b; thread 2's b confirms it: thread 1's b is relabelled.
    a, b = phase(0), phase(1)
    ms = confirmed().classify_many(np.array([a, b, b]), threads=np.array([1, 1, 2]))
    assert ms[2].relabel_seqs == (1,) and settled(ms) == [0, 1, 1]


def test_a_one_off_is_never_relabelled():
    a, c = phase(0), phase(2)
    ms = confirmed().classify_many(np.array([a, a, c, a, a]))
    assert [m.phase for m in ms] == [0] * 5 and all(m.relabel is None for m in ms)
    assert ms[2].transition


def test_a_segment_of_several_units_is_its_own_evidence():
    # Variable segments (engine/segments.py): a piece of 5 units that matches nothing is a phase at
    # once (its units are alike: the segmenter cut none between them); a 1-unit piece waits.
    a, b = phase(0), phase(1)
    c = (b + phase(2)) / 2  # nearer b than a
    ms = confirmed().classify_many(np.array([a, b, c, c]), units=np.array([5, 5, 1, 1]))
    assert [m.phase for m in ms] == [0, 1, 1, 2] and [m.new_phase for m in ms] == [True, True, False, True]
    assert ms[3].relabel_seqs == (2,)


def test_a_loaded_phase_matches_its_first_interval_directly():
    # A phase database's phases are stable: a run that starts in one gets its ID, no transition.
    t = confirmed()
    t.preload([(7, phase(1))], next_id=8)
    ms = t.classify_many(np.array([phase(1), phase(2)]))
    assert (ms[0].phase, ms[0].new_phase, ms[0].transition) == (7, False, False)
    assert (ms[1].phase, ms[1].transition) == (7, True)  # new code waits as a candidate near 7


def interval(seq, key):
    keys = np.array([(0x1234 << 32) | (key * 4096 + 16 * i) for i in range(8)], np.uint64)
    return Interval(1, seq, 8000, keys, np.full(8, 1000, np.uint64))


def test_the_log_record_names_the_intervals_it_relabels():
    engine = PhaseEngine()
    ivs = [interval(i, k) for i, k in enumerate([0, 0, 1, 0, 1])]
    recs = [to_record(iv, r) for iv, r in zip(ivs, engine.feed_many(ivs))]
    assert [r["phase"] for r in recs] == [0, 0, 0, 0, 1] and recs[0]["new_phase"]
    assert (recs[4]["relabel"], recs[4]["relabel_seq"]) == (1, [2])
    assert all("relabel" not in r and "relabel_seq" not in r for r in recs[:4])
    assert settled_phases(recs) == [0, 0, 1, 0, 1]


def test_the_log_record_places_a_macro_change_where_it_began():
    # 40 intervals of A, then 40 of B. B's first interval waits as a candidate (labelled A) until
    # its second confirms B and relabels it; the macro window follows that relabel, so the change
    # point sees the last 7 phases all B at B's 7th interval (before the window followed relabels,
    # at its 8th). That record relabels the six before it: the log's macro phases change at B's
    # first interval.
    engine = PhaseEngine()
    ivs = [interval(i, k) for i, k in enumerate([0] * 40 + [1] * 40)]
    recs = [to_record(iv, r) for iv, r in zip(ivs, engine.feed_many(ivs))]
    live, log = [r["macro"] for r in recs], settled_phases(recs, kind="macro_")
    assert live == [0] * 46 + [1] * 34 and log == [0] * 40 + [1] * 40
    assert (recs[46]["macro_relabel"], recs[46]["macro_relabel_seq"]) == (1, list(range(40, 46)))
    assert sum("macro_relabel" in r for r in recs) == 1 and recs[41]["relabel_seq"] == [40]


def test_settled_phases_are_per_process_and_refuse_a_bad_relabel():
    # An -a log interleaves processes, each numbering its seq from 0.
    recs = [{"pid": 1, "phase": 0}, {"pid": 2, "phase": 0}, {"pid": 1, "phase": 0},
            {"pid": 2, "phase": 1, "relabel": 1, "relabel_seq": [0]}]
    assert settled_phases(recs) == [0, 1, 0, 1]
    with pytest.raises(InputError, match="relabel_seq"):
        settled_phases([{"phase": 0}, {"phase": 1, "relabel": 1, "relabel_seq": [1]}], "x.jsonl")
    with pytest.raises(InputError, match="macro_relabel_seq"):
        settled_phases([{"macro": 0}, {"macro": 1, "macro_relabel": 1, "macro_relabel_seq": [2]}], "x", "macro_")
    with pytest.raises(InputError, match="record 1: no field 'macro'"):  # a log from before macro phases were logged
        settled_phases([{"phase": 0}, {"phase": 1}], "x", "macro_")


def test_settled_phases_restart_where_a_process_s_engine_did(tmp_path):
    # -a gives each process its own engine, numbered from seq 0; a process it retired to make room
    # that comes back (or a reused pid) gets a new engine, from seq 0 again. Each engine's relabels
    # (micro and macro) name its own records, never the first engine's.
    recs = []
    for _ in range(2):
        engine, ivs = PhaseEngine(), [interval(i, k) for i, k in enumerate([0] * 40 + [1] * 40)]
        for iv in ivs:
            iv.pid, iv.comm = 7, "x"
        recs += [to_record(iv, r) for iv, r in zip(ivs, engine.feed_many(ivs))]
    assert settled_phases(recs) == ([0] * 40 + [1] * 40) * 2
    assert settled_phases(recs, kind="macro_") == ([0] * 40 + [1] * 40) * 2
    log = tmp_path / "a.jsonl"  # and as phasescope score reads the log
    log.write_text("".join(dumps(r) + "\n" for r in recs))
    assert read_log_labels(str(log)).labels.tolist() == ([0] * 40 + [1] * 40) * 2


def test_score_reads_the_labels_the_log_settles(tmp_path):
    engine = PhaseEngine()
    ivs = [interval(i, k) for i, k in enumerate([0, 0, 1, 0, 1])]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(dumps(to_record(iv, r)) + "\n" for iv, r in zip(ivs, engine.feed_many(ivs))))
    assert read_log_labels(str(log)).labels.tolist() == [0, 0, 1, 0, 1]


def test_a_one_off_must_recur_within_the_window_to_become_a_phase():
    # ``recur`` (40 in the default): c's second interval 40 intervals after its first confirms it;
    # 41 after, the first has been dropped and the second waits as a new candidate.
    a, c = phase(0), phase(2)
    assert PRESETS["confirmed"]["recur"] == 40
    for gap, confirmed_phase in ((40, True), (41, False)):
        ms = confirmed().classify_many(np.array([a, c] + [a] * (gap - 1) + [c]))
        assert ms[-1].new_phase is confirmed_phase and ms[-1].transition is not confirmed_phase
        assert (ms[-1].relabel_seqs == (1,)) is confirmed_phase


def test_intervals_between_activities_get_no_ids_of_their_own():
    # A demo-like loop: three activities of 30 intervals each, and between each two an interval
    # that straddles them (half of each). Each boundary recurs once per round (93 intervals), so it
    # is never confirmed: the settled labels hold the three activities' IDs, each boundary carrying
    # its nearest one. Without the window (``recur`` 0) every boundary gets an ID.
    def mix(p, q):
        return (phase(p) + phase(q)) / 2
    one_round = [f for p in range(3) for f in [phase(p)] * 30 + [mix(p, (p + 1) % 3)]]
    stream = np.array(one_round * 4)
    assert len(set(settled(confirmed().classify_many(stream)))) == 3
    assert len(set(settled(confirmed(recur=0).classify_many(stream)))) == 6


def fringe(p, by):
    """Phase ``p`` with a fraction ``by`` of its work moved to bucket 31: ``2 * by`` from it."""
    f = phase(p)
    f[p], f[31] = 32.0 * (1 - by), 32.0 * by
    return f


def known_then(n, *tail):
    """``n`` phases of 3 intervals each (each confirmed), then ``tail`` twice over, after phase 0."""
    return np.array([phase(p) for p in range(n) for _ in range(3)] + [f for t in tail for f in (phase(0), t) * 2])


def test_a_crowded_table_confirms_no_fringe_of_a_known_phase():
    # 18 phases known (the default's ``crowd``): a behaviour 1.5 thresholds from phase 0 recurs, but
    # it is within ``apart`` (2x) of it, so it stays phase 0 (live and settled); one 4 thresholds
    # away is still a phase. Without ``apart`` the fringe gets an ID of its own.
    assert (PRESETS["confirmed"]["apart"], PRESETS["confirmed"]["crowd"]) == (2.0, 18)
    near, far = fringe(0, 0.075), fringe(0, 0.2)
    stream = known_then(18, near, far)
    labels = settled(confirmed().classify_many(stream))
    assert labels[54:58] == [0, 0, 0, 0] and labels[58:62] == [0, 18, 0, 18]
    assert len(set(labels)) == 19
    old = settled(confirmed(apart=0.0).classify_many(stream))
    assert old[54:58] == [0, 18, 0, 18] and len(set(old)) == 20


def test_a_program_s_first_phases_stay_fine_grained():
    # With 17 phases known the table is not crowded: the same fringe is a phase of its own (cc1's
    # and the compressors' early phases are 1-1.5 thresholds apart, and SimPoint keeps them apart).
    labels = settled(confirmed().classify_many(known_then(17, fringe(0, 0.075))))
    assert labels[51:55] == [0, 17, 0, 17]


def test_a_segment_in_a_crowded_table_is_held_to_the_same_rule():
    # A 5-unit segment needs no second interval (above), but near a known phase of a crowded
    # table it is no phase either; far from every one it is.
    known = [phase(p) for p in range(18)]
    stream = np.array(known + [fringe(0, 0.075), fringe(0, 0.2)])
    ms = confirmed().classify_many(stream, units=np.array([5] * 18 + [5, 5]))
    assert (ms[18].phase, ms[18].transition) == (0, True)
    assert (ms[19].phase, ms[19].new_phase) == (18, True)


def test_a_step_just_under_the_threshold_beside_identical_intervals_is_a_phase():
    # tclsh (stop 46): a phase of identical intervals, then a step 0.94 thresholds away (3.0 of
    # 3.2 units) for 20 intervals. It matches the phase, beyond the phase's own spread (0); at its
    # 4th interval (``offshoot``) it is a phase of its own, and the log gives its first 3 that ID.
    assert PRESETS["confirmed"]["offshoot"] == 4
    stream = np.array([phase(0)] * 20 + [fringe(0, 3.0 / 64)] * 20)
    ms = confirmed().classify_many(stream)
    assert ms[23].new_phase and ms[23].relabel_seqs == (20, 21, 22)
    assert settled(ms) == [0] * 20 + [1] * 20
    assert set(settled(confirmed(offshoot=0).classify_many(stream))) == {0}


def test_a_noisy_phase_widened_over_a_tight_neighbour_gives_it_up():
    # cc1 (stop 46): a noisy phase (its intervals 2-3.1 units from its centre) whose ``adaptive``
    # threshold grew to ~4 units matches a tight behaviour 3.6 units from its centre. With
    # ``offshoot`` that behaviour's intervals share an ID of their own; without, they are the
    # noisy phase's.
    rng = np.random.default_rng(0)
    centre = np.zeros(32)
    centre[:8] = 4.0

    def noisy():
        f, (i, j), u = centre.copy(), rng.choice(8, 2, replace=False), rng.uniform(1.0, 1.55)
        f[i], f[j] = f[i] - u, f[j] + u
        return f
    tight = centre.copy()
    tight[0], tight[8] = 4.0 - 1.8, 1.8
    stream = np.array([centre] * 10 + [noisy() for _ in range(30)] + [f for _ in range(10) for f in (noisy(), tight)])
    for offshoot, own in ((4, True), (0, False)):
        labels = np.array(settled(confirmed(offshoot=offshoot).classify_many(stream)))
        mine = set(labels[41::2].tolist())
        assert len(mine) == 1 and (mine.isdisjoint(labels[:10].tolist()) is own)


def test_noise_and_small_steps_below_the_floor_stay_one_phase():
    # Below 0.75 thresholds (2.4 units) nothing is offered: a step of 1.5 units for 20 intervals
    # (bc's one-bucket drift, which SimPoint keeps whole) and intervals scattered 0-2.3 units from
    # their phase's centre keep one ID.
    rng = np.random.default_rng(1)
    step = fringe(0, 0.75 / 32)
    scattered = [phase(0) + np.r_[-s, s, np.zeros(30)] for s in rng.uniform(0, 1.15, 100)]
    for stream in ([phase(0)] * 20 + [step] * 20 + [phase(0)] * 5, scattered):
        assert set(settled(confirmed().classify_many(np.array(stream)))) == {0}


def test_offshoot_needs_the_candidate_pool():
    with pytest.raises(InputError, match="offshoot must be 0"):
        TrackerConfig(**dict(PRESETS["paper"], offshoot=4))
    with pytest.raises(InputError, match="offshoot must be 0"):
        TrackerConfig(**dict(PRESETS["confirmed"], offshoot=-1))


def noisy_behaviour(seed):
    """200 intervals of one behaviour whose work moves between 16 buckets at random, 3.5 units (1.1
    thresholds) from its centre on average: pairs of them are often further apart than the threshold."""
    rng, centre = np.random.default_rng(seed), np.r_[np.full(16, 2.0), np.zeros(16)]
    out = []
    for _ in range(200):
        f = centre.copy()
        for i, j in (rng.choice(16, 2, replace=False) for _ in range(3)):
            u = rng.uniform(0.3, 1.0)
            f[i], f[j] = f[i] - u, f[j] + u
        out.append(f)
    return np.array(out)


def test_phases_that_overlap_fold_into_one():
    # bzip2 (stop 47): one noisy behaviour became several phases (their centres closer than their
    # spreads). With ``overlap`` they fold: the ID matched more often keeps the intervals, the log
    # relabels the other's; without, the behaviour stays split.
    assert PRESETS["confirmed"]["overlap"] == 0.45
    share = {}
    for overlap in (0.45, 0):
        tops, counts = [], []
        for seed in range(6):
            labels = settled(confirmed(overlap=overlap).classify_many(noisy_behaviour(seed)))
            tops.append(np.bincount(labels).max() / len(labels))
            counts.append(len(set(labels)))
        share[overlap] = (np.mean(tops), counts)
    assert share[0.45][0] >= 0.85 and share[0][0] <= 0.75
    assert all(a < b for a, b in zip(share[0.45][1], share[0][1]))


def test_a_fold_relabels_every_interval_of_the_phase_folded_away():
    # The interval that folds a phase carries ``merged`` (gone, kept) and relabels every earlier
    # interval of the phase folded away, so the log settles to the labels the tracker ends with.
    ms = confirmed().classify_many(noisy_behaviour(2))
    folds = [m for m in ms if m.merged is not None]
    labels = settled(ms)
    assert folds and set(labels) == {folds[-1].phase}
    for m in folds:
        assert m.phase == m.relabel == m.merged[1] and m.relabel_seqs and not m.new_phase
        assert m.merged[0] not in labels


def two_noisy_modes(seed):
    """600 intervals of one behaviour that takes turns between two modes 2.9 units apart (0.9
    thresholds), each interval scattered about its mode as :func:`noisy_behaviour`'s are."""
    rng, a = np.random.default_rng(seed), np.r_[np.full(16, 2.0), np.zeros(16)]
    b = a + np.r_[-1.45, -1.45, np.zeros(14), 1.45, 1.45, np.zeros(14)]
    out = []
    for k in range(600):
        f = (a if k % 2 else b).copy()
        for i, j in (rng.choice(16, 2, replace=False) for _ in range(3)):
            u = rng.uniform(0.3, 1.0)
            f[i], f[j] = f[i] - u, f[j] + u
        out.append(np.maximum(f, 0) * 32 / np.maximum(f, 0).sum())
    return out


def test_a_phase_that_has_folded_takes_no_new_phase_within_its_spread(monkeypatch):
    # bzip2 (stop 47): once two modes of one behaviour have folded, the intervals far from the
    # folded centre kept making new candidates that became phases and folded again: 34 IDs shown
    # live for 19 settled. Within FOLDED_REACH x its spread of a folded phase no candidate becomes
    # a phase, so fewer IDs are ever shown (never more, on any seed).
    from phasescope.engine import tracker

    def shown(seed):
        return len({m.phase for m in confirmed().classify_many(np.array(two_noisy_modes(seed)))})
    gated = [shown(seed) for seed in range(6)]
    monkeypatch.setattr(tracker, "FOLDED_REACH", 0.0)
    ungated = [shown(seed) for seed in range(6)]
    assert all(g <= u for g, u in zip(gated, ungated)) and sum(gated) <= sum(ungated) - 6


def test_two_tight_behaviours_taking_turns_stay_two_phases():
    # zstd (stop 47): two tight behaviours (0.5 units from their centres) 3.6 units apart, taking
    # turns: their centres are far apart against their spreads, so they never fold.
    rng = np.random.default_rng(3)
    a, b = phase(0), fringe(0, 1.8 / 32)
    jitter = lambda f: f + np.r_[[s := rng.uniform(0, 0.25), -s], np.zeros(30)]  # noqa: E731
    stream = np.array([jitter(f) for _ in range(100) for f in (a, a, b)])
    labels = np.array(settled(confirmed().classify_many(stream)))
    assert len(set(labels[0::3].tolist())) == 1 and set(labels[0::3]).isdisjoint(labels[2::3])


def test_classifying_a_whole_stream_is_classifying_one_interval_at_a_time():
    # classify_many keeps a distance matrix whose columns follow the table's slots; a fold frees a
    # slot and moves the last one into it, an eviction reuses one. Random streams of noisy modes
    # (some fold), far one-offs and three threads, in a roomy table and in one of 4 slots (folds
    # and evictions interleave): every Match equals the one a fresh tracker gives one at a time.
    folds = evictions = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        modes = two_noisy_modes(seed)[:300]
        far = [np.roll(m, int(rng.integers(1, 31))) for m in two_noisy_modes(seed + 100)[:300]]
        fps = np.array([far[k] if rng.random() < 0.15 else modes[k] for k in range(300)])
        threads = rng.integers(1, 4, len(fps))
        for size in (64, 4):
            many = confirmed(table_size=size).classify_many(fps, threads=threads)
            t = confirmed(table_size=size)
            one = [t.classify_many(f[None, :], threads=threads[i:i + 1])[0] for i, f in enumerate(fps)]
            assert many == one, f"seed {seed}, table {size}"
            folds += sum(m.merged is not None for m in many)
            evictions += sum(m.evicted is not None for m in many)
    assert folds >= 12 and evictions >= 12


def test_no_prediction_names_a_phase_folded_away():
    # After a fold the predictors' tables still hold the folded phase's ID: the engine's predictions
    # (every predictor's, and the shown one) name the phase it became. The engine is fed intervals
    # whose blocks hash to the buckets of a noisy behaviour (one key found per bucket).
    engine = PhaseEngine(EngineConfig(tracker=TrackerConfig(**dict(PRESETS["confirmed"], bits=None))))
    keys, k = {}, 1
    while len(keys) < 32:
        key = (0x1234 << 32) | (16 * k)
        fp, _ = engine.tracker.footprints([np.array([key], np.uint64)], [np.array([1000], np.uint64)])
        keys.setdefault(int(np.argmax(fp[0])), key)
        k += 1

    def blocks(seq, f):
        on = [b for b in range(32) if f[b] > 0]
        counts = np.array([round(f[b] * 1000) for b in on], np.uint64)
        return Interval(1, seq, int(counts.sum()), np.array([keys[b] for b in on], np.uint64), counts)
    results = engine.feed_many(blocks(i, f) for i, f in enumerate(noisy_behaviour(2)))
    folds = {r.merged[0]: r.seq for r in results if r.merged is not None}
    assert folds
    for r in results:
        named = set(r.predictions.values()) | {r.prediction}
        assert not any(gone in named and r.seq >= at for gone, at in folds.items())
