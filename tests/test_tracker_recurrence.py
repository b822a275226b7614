"""Issue 28's tracker options on footprint streams known by construction: an archive that gives a
recurring phase its old ID back, a threshold calibrated on the program's own interval-to-interval
distances, unconfirmed intervals labelled with their nearest phase, and macro phases."""

import numpy as np
import pytest

from phasescope.engine.macro import MacroConfig, MacroTracker, histogram_distance, macro_phases
from phasescope.engine.phase_table import settled
from phasescope.engine.tracker import PRESETS, TRANSITION, Tracker, TrackerConfig
from phasescope.errors import InputError


def phase(p, n=32):
    """Footprint (32 buckets summing to 32) of phase ``p``: all its work in bucket ``p``."""
    f = np.zeros(n)
    f[p % n] = 32.0
    return f


def cfg(**over):
    d = dict(PRESETS["paper"], bits=None)
    d.update(over)
    return TrackerConfig(**d)


def ids(config, fps):
    return [m.phase for m in Tracker(config).classify_many(np.array(fps))]


def test_archive_gives_an_evicted_phase_its_old_id_back():
    # A, then 4 other phases through a 4-entry LRU table (A is evicted), then A again.
    stream = [phase(0)] + [phase(p) for p in range(1, 5)] + [phase(0)]
    without = ids(cfg(table_size=4), stream)
    t = Tracker(cfg(table_size=4, archive=16))
    with_archive = [m.phase for m in t.classify_many(np.array(stream))]
    assert without[-1] not in without[:-1]  # the paper: a new ID
    assert with_archive[-1] == with_archive[0] and t.restored == 1
    assert with_archive[:-1] == without[:-1]  # nothing else changes


def test_archive_is_bounded_oldest_evicted_first():
    stream = [phase(p) for p in range(6)] + [phase(0), phase(2)]
    got = ids(cfg(table_size=2, archive=3), stream)
    # Evicted in order 0, 1, 2, 3: a 3-entry archive holds 1, 2, 3 when 0 comes back (a new ID, and
    # 4 is evicted over 1); then 2 comes back with its old ID.
    assert got[6] not in got[:6] and got[7] == got[2]


def test_calibrated_threshold_follows_the_programs_own_distances():
    rng = np.random.default_rng(1)
    base = np.full(32, 1.0)
    noisy = []
    for _ in range(200):  # one phase whose consecutive intervals are ~0.3 of an interval apart
        f = np.clip(base + rng.normal(0, 0.4, 32), 0, None)
        noisy.append(f / f.sum() * 32)
    fixed = ids(cfg(threshold=0.1, table_size=256), noisy)
    t = Tracker(cfg(threshold=0.1, table_size=256, calibrate=1.5))
    calibrated = [m.phase for m in t.classify_many(np.array(noisy))]
    assert len(set(fixed)) > 100  # the paper's fixed threshold: nearly every interval a new phase
    assert len(set(calibrated)) <= 3
    gaps = np.abs(np.diff(np.array(noisy), axis=0)).sum(axis=1)
    assert t._threshold_units == pytest.approx(1.5 * np.median(gaps))


def test_calibrated_threshold_stays_within_its_bounds():
    stream = [phase(p) for p in range(40)]  # disjoint code every interval: distance 2 intervals
    t = Tracker(cfg(threshold=0.1, calibrate=1.0, threshold_max=0.5))
    t.classify_many(np.array(stream))
    assert t._threshold_units == pytest.approx(0.5 * 32)
    t = Tracker(cfg(threshold=0.1, calibrate=1.0))
    t.classify_many(np.array([phase(0)] * 10))  # distance 0: the threshold's floor
    assert t._threshold_units == pytest.approx(0.1 * 32)
    t = Tracker(cfg(threshold=0.6, calibrate=1.0, threshold_max=0.25))
    t.classify_many(np.array(stream))  # a threshold over the cap wins
    assert t._threshold_units == pytest.approx(0.6 * 32)


def test_threshold_calibrated_on_nearest_distances_keeps_alternating_neighbours_apart():
    # Two phases 0.15 of an interval apart, alternating every interval (as cc1 moves between
    # functions), each interval within ~0.02 of its phase: consecutive gaps measure the change
    # rate (0.15), the distance to the nearest earlier interval measures the phase's own spread.
    rng = np.random.default_rng(2)
    a = np.full(32, 1.0)
    b = a.copy()
    b[1] += 2.4
    b[2:10] -= 0.3  # 2.4 of 32 units moved: 4.8 units, 0.15 of an interval from a
    truth = np.arange(400) % 2
    stream = []
    for t in truth:
        f = np.clip((a, b)[t] + rng.normal(0, 0.02, 32), 0, None)
        stream.append(f / f.sum() * 32)
    over = dict(threshold=0.02, calibrate=2.0, calibrate_quantile=0.75, update_policy="mean", table_size=64)
    gap = ids(cfg(**over), stream)
    t = Tracker(cfg(calibrate_on="nearest", **over))
    near = [m.phase for m in t.classify_many(np.array(stream))]
    assert len(set(gap)) == 1  # 2 x the gap (0.3) holds both phases
    late = near[10:]  # the first intervals have no near neighbour yet: the threshold starts wide
    assert len(set(late)) == 2 and all((x == late[0]) == (k == truth[10]) for x, k in zip(late, truth[10:]))
    seen = np.array(stream)
    nearest = [np.abs(seen[max(0, i - 512):i] - seen[i]).sum(axis=1).min() for i in range(1, len(seen))]
    assert t._threshold_units == pytest.approx(2.0 * np.quantile(nearest, 0.75))


def test_unconfirmed_interval_takes_its_nearest_phase_when_asked():
    a, b = phase(0), phase(1)
    odd = 0.8 * a + 0.2 * phase(5)  # 0.4 of an interval from A: matches nothing, nearest A
    stream = [a, a, odd, b, b]
    zero = Tracker(cfg(threshold=0.1, transition=True)).classify_many(np.array(stream))
    near = Tracker(cfg(threshold=0.1, transition=True, transition_label="nearest")).classify_many(np.array(stream))
    # The first interval starts a phase at once (an empty table); with ``nearest`` no interval is
    # the transition phase, so IDs start at 0. B's second interval confirms B and relabels its first.
    assert [m.phase for m in zero] == [1, 1, TRANSITION, TRANSITION, 2]
    assert [m.phase for m in near] == [0, 0, 0, 0, 1]
    assert [m.transition for m in near] == [False, False, True, True, False]
    assert near[4].relabel == 1 and near[4].relabel_seqs == (3,) and settled(near) == [0, 0, 0, 1, 1]
    assert zero[4].relabel_seqs == (3,) and settled(zero) == [1, 1, TRANSITION, 2, 2]  # the one-off stays 0


def test_new_options_out_of_range_are_refused():
    for bad in (dict(archive=-1), dict(calibrate=-1), dict(threshold_max=3), dict(transition_label="x"),
                dict(calibrate_on="x"), dict(calibrate_quantile=1.5)):
        with pytest.raises(InputError):
            cfg(**bad)


def test_paper_preset_has_none_of_them():
    c = TrackerConfig(**PRESETS["paper"])
    assert (c.archive, c.calibrate, c.transition_label) == (0, 0.0, "transition")
    assert (c.buckets, c.bits, c.threshold, c.table_size, c.update_policy, c.full_policy, c.evict_policy,
            c.transition) == (32, 6, 0.10, 64, "none", "evict", "lru", False)  # ISCA 2003
    assert PRESETS["default"] == PRESETS["confirmed"]  # issue 28: the paper's is the preset ``paper``


@pytest.mark.parametrize("name", ["stable", "confirmed"])
def test_recurring_phases_keep_few_ids(name):
    # Four phases in turn, each 5 noisy intervals, with a one-off between runs: the paper gives
    # every one-off an ID; stable and confirmed label each with its nearest phase and keep four IDs.
    rng = np.random.default_rng(3)
    stream, truth = [], []
    for _ in range(10):
        for p in range(4):
            for _ in range(5):
                f = np.clip(phase(p) / 32 * 24 + 0.25 + rng.normal(0, 0.02, 32), 0, None)
                stream.append(f / f.sum() * 32)
                truth.append(p)
            r = rng.uniform(0, 1, 32)
            stream.append(0.3 * phase(p) + 0.3 * phase(p + 1) + 0.4 * r / r.sum() * 32)
            truth.append(-1)
    got = np.array(settled(Tracker(TrackerConfig(**PRESETS[name])).classify_many(np.array(stream))))  # as the log ends
    paper = np.array(ids(TrackerConfig(**PRESETS["paper"]), stream))
    truth = np.array(truth)
    assert len(set(paper.tolist())) >= 40
    assert len(set(got.tolist())) == 4
    for p in range(4):
        assert len(set(got[truth == p].tolist())) == 1


def test_confirmed_is_the_paper_with_an_id_budget():
    # The paper's footprint (32 buckets, 6 bits), threshold and 64-entry LRU table; what differs is
    # when an ID is made (how soon a candidate must recur, and how far from known phases once there
    # are many, or beside a phase that would swallow it), how a representative moves and how wide
    # each phase's threshold is, and when two phases fold into one (or a short-lived one into its nearest).
    paper, confirmed = PRESETS["paper"], PRESETS["confirmed"]
    assert {k for k in confirmed if confirmed[k] != paper.get(k)} == {
        "transition", "transition_label", "update_policy", "adaptive", "archive", "recur", "apart", "crowd",
        "offshoot", "overlap", "retire"}


def test_confirmed_gives_a_new_phase_its_id_at_its_second_interval():
    # A for 6 intervals, then B (0.5 of an interval away) for 6: B's first interval matches nothing
    # and is labelled A (nearest) as a transition; its second confirms B, which keeps its ID after.
    # A and B alternating later keep those two IDs (B's representative is the mean of its first two).
    a, b = phase(0), 0.75 * phase(0) + 0.25 * phase(1)
    stream = [a] * 6 + [b] * 6 + [a, b] * 4
    got = Tracker(TrackerConfig(**PRESETS["confirmed"])).classify_many(np.array(stream))
    labels = [m.phase for m in got]
    assert labels[:7] == [0] * 7 and labels[7:12] == [1] * 5 and labels[12:] == [0, 1] * 4
    assert [m.transition for m in got[5:8]] == [False, True, False]
    assert got[0].new_phase  # the very first interval: an empty table, a phase at once
    assert got[7].new_phase and got[7].relabel == 1 and got[7].relabel_seqs == (6,)
    assert settled(got)[:12] == [0] * 6 + [1] * 6  # the log settles B's first interval as B


def macro_of(stream, **kw):
    """The live view's macro phases of one thread's micro phases."""
    return macro_phases([0] * len(stream), stream, MacroConfig(**kw))[0]


def settled_macro_of(stream, **kw):
    """The same as the log settles them (every macro relabel applied)."""
    return macro_phases([0] * len(stream), stream, MacroConfig(**kw))[1]


def test_macro_phases_see_an_alternation_as_one_activity():
    # Activity X alternates micro phases 1, 2; activity Y is 3, 4, 5 in turn; X recurs.
    x, y = [1, 2] * 40, [3, 4, 5] * 30
    got = macro_of(x + y + x, window=8, threshold=0.6)
    assert len(set(got[8:80])) == 1 and len(set(got[100:170])) == 1 and len(set(got[190:])) == 1
    assert got[190] == got[10] != got[120]  # X comes back under its macro ID
    assert len(set(got)) <= 4  # a window straddling a boundary may make one more


def test_macro_change_point_cuts_the_lag_of_a_change():
    # 100 intervals of X (micro 1, 2 in turn), then Y (3, 4 in turn): a 32-interval window leaves X
    # once half of it is Y; the change point (last 12 intervals far from X) restarts it on Y.
    x, y = [1, 2] * 50, [3, 4] * 50
    late = macro_of(x + y, window=32, threshold=1.0, recent=0)
    early = macro_of(x + y, window=32, threshold=1.0, recent=12, change=1.6)
    lag = lambda got: next(i for i in range(100, 200) if got[i] != got[99]) - 100
    assert lag(late) == 17  # 17 of 32 are Y: distance 17/32 x 2 over 1.0
    assert lag(early) == 9  # the 10th Y: 10 of the last 12 are Y, distance 10/12 x 2 over 1.6
    assert len(set(early[1:100])) == 1 and len(set(early[109:])) == 1  # no other change (the first
    # interval, a window of one phase, is its own)


def test_macro_defaults_follow_an_activity_within_seven_intervals_and_keep_its_id():
    # Activities of three micro phases each (as the truth workloads' libraries): X, Y, X, Z, Y. With
    # the defaults each change is seen by its 7th interval (all of the last 7 new: 1.8 from the
    # old mix); the old defaults (12, 1.6) saw it at the 10th. A recurrence gets its macro ID back.
    x, y, z = [1, 2, 3] * 20, [4, 5, 6] * 20, [7, 8, 9] * 20
    got = macro_of(x + y + x + z + y)
    for start in (60, 120, 180, 240):
        assert next(i for i in range(start, start + 60) if got[i] != got[start - 1]) - start == 6
        assert len(set(got[start + 6:start + 60])) == 1  # no other change inside the activity
    assert got[150] == got[30] != got[90] == got[270] != got[210]


def test_the_log_places_each_macro_change_where_it_began():
    # The same X, Y, X, Z, Y: live, each change shows at its 7th interval (above); the change point
    # relabels the six before it, so the log's macro phases change at each activity's first
    # interval, with the same IDs and no other change.
    x, y, z = [1, 2, 3] * 20, [4, 5, 6] * 20, [7, 8, 9] * 20
    live, log = macro_of(x + y + x + z + y), settled_macro_of(x + y + x + z + y)
    changes = [i for i in range(1, 300) if log[i] != log[i - 1]]
    assert changes == [60, 120, 180, 240]
    assert [log[i] for i in (30, 90, 150, 210, 270)] == [live[i] for i in (30, 90, 150, 210, 270)]
    assert sum(a != b for a, b in zip(live, log)) == 4 * 6


def test_the_log_gives_a_recurrence_its_macro_id_from_its_set_up_on():
    # X, Y, then X after seven intervals of set-up code: live, the set-up and the recurrence's start
    # show a young macro phase until it yields to X's; the log gives them X's ID, from the set-up
    # on (where the change point split the window), and the young ID appears nowhere.
    x, y, setup = list(range(1, 9)) * 8, [20, 21, 22] * 20, list(range(41, 48))
    live, log = macro_of(x + y + setup + x), settled_macro_of(x + y + setup + x)
    young = set(live[131:]) - {live[40]}  # the change point fires at the set-up's 7th interval
    assert young and not young & set(log)
    assert log[124:] == [log[40]] * len(log[124:]) and log[123] == log[100] != log[40]


def test_macro_relabels_name_only_the_thread_s_own_intervals():
    # Two threads taking turns, each with its own activities: every relabel names seqs (observation
    # order) of the observing thread, and the settled labels change once per thread, at Y's start.
    x, y = [1, 2, 3] * 20, [4, 5, 6] * 20
    m, owner, matches = MacroTracker(), [], []
    for micro in x + y:
        for t in (0, 1):
            owner.append(t)
            matches.append(m.observe(t, micro + 100 * t))
    assert all(owner[s] == owner[i] for i, mt in enumerate(matches) if mt.relabel is not None for s in mt.relabel_seqs)
    got = settled(matches)
    for t in (0, 1):
        mine = [g for g, o in zip(got, owner) if o == t]
        assert [i for i in range(1, len(mine)) if mine[i] != mine[i - 1]] == [60]


def test_macro_windows_follow_the_micro_tracker_s_relabels_in_any_thread():
    # Thread 0 runs micro phase 1 (seqs 0-19); thread 1's interval carries the micro tracker's
    # relabel of thread 0's seqs 13-19 to phase 2. Thread 0's next interval (2) makes its last 7
    # all 2: the change point fires at once and names the six before it in the thread's order.
    m = MacroTracker()
    first = [m.observe(0, 1).phase for _ in range(20)]
    m.observe(1, 9, 2, (13, 14, 15, 16, 17, 18, 19))
    got = m.observe(0, 2)
    assert got.phase != first[-1] and got.relabel == got.phase and got.relabel_seqs == tuple(range(14, 20))


def test_macro_defaults_ride_out_a_short_excursion():
    # Six intervals of other code inside an activity are no change of activity at the macro scale.
    x, other = [1, 2, 3] * 20, [7, 8] * 3
    got = macro_of(x + other + x)
    assert len(set(got[3:])) == 1


def test_a_recurrence_that_starts_with_other_code_gets_its_macro_id_back():
    # X (8 phases in turn), Y, then X again after 7 intervals of set-up code seen nowhere else. The
    # change point restarts the window on the set-up, which makes a macro phase of its own; once the
    # window is X again, that young phase yields to X's (before, it kept the recurrence for good).
    x, y, setup = list(range(1, 9)) * 8, [20, 21, 22] * 20, list(range(41, 48))
    got = macro_of(x + y + setup + x)
    assert got[-1] == got[40] != got[100]
    assert len(set(got[-20:])) == 1


def test_a_recurrence_gets_its_macro_id_back_in_each_of_interleaved_threads():
    # The same as above in four threads taking turns (each its own micro phases): a young macro
    # phase's age is counted in its thread's intervals. Counted in all threads' intervals, it aged
    # four times as fast and kept the recurrence for good in every thread.
    x, y, setup = list(range(1, 9)) * 8, [20, 21, 22] * 20, list(range(41, 48))
    m, got = MacroTracker(), {t: [] for t in range(4)}
    for micro in x + y + setup + x:
        for t in got:
            got[t].append(m.observe(t, micro + 100 * t).phase)
    for g in got.values():
        assert g[-1] == g[40] != g[100]


def test_macro_windows_are_per_thread():
    m = MacroTracker(MacroConfig(window=4, threshold=0.5))
    a = [m.observe(1, 7).phase for _ in range(6)]
    b = [m.observe(2, 9).phase for _ in range(6)]
    assert len(set(a)) == 1 and len(set(b)) == 1 and a[0] != b[0]


def test_micro_phases_of_nearby_code_are_one_mix_in_the_macro_windows():
    # bzip2's coding (stop 47): each call's intervals get micro IDs from a pool of nearby phases
    # (footprints 0.2 apart), a new few each call, so each call's windows were a new mix and a new
    # macro ID. Grouped by their footprints (``group``, 0.4) they are one mix: one macro phase for
    # the activity; a different activity (footprints 2 apart) is still another macro phase.
    rng = np.random.default_rng(0)
    near = lambda k: np.r_[0.5 - 0.1 * k, 0.5 + 0.1 * k, np.zeros(30)] if k < 5 else np.r_[np.zeros(30), 0.5, 0.5]  # noqa: E731
    micro, fps = [], []
    for call in range(8):  # activity X: micro IDs 10*call + 0..3, footprints near(0..3)
        for _ in range(40):
            k = int(rng.integers(4))
            micro.append(10 * call + k)
            fps.append(near(k) + rng.uniform(0, 0.02, 32))
    micro += [99] * 60
    fps += [near(9)] * 60  # activity Y
    grouped = macro_phases([0] * len(micro), micro, MacroConfig(group=0.4), fps)[1]
    assert len(set(grouped[:320])) == 1 and grouped[-1] != grouped[0]
    assert len(set(macro_phases([0] * len(micro), micro, MacroConfig(group=0), fps)[1][:320])) >= 4


def test_macro_groups_only_with_footprints():
    # Without footprints (sampled mode's windows, a stream of labels) the windows count micro IDs.
    x = [1, 2] * 40
    assert macro_phases([0] * 80, x, MacroConfig(group=0.4))[1] == macro_phases([0] * 80, x, MacroConfig(group=0))[1]


def test_histogram_distance():
    assert histogram_distance({1: 1.0}, {2: 1.0}) == 2.0
    assert histogram_distance({1: 0.5, 2: 0.5}, {1: 0.5, 2: 0.5}) == 0.0
    assert histogram_distance({1: 0.75, 2: 0.25}, {1: 0.25, 2: 0.75}) == pytest.approx(1.0)


def test_macro_options_out_of_range_are_refused():
    for bad in (dict(window=-1), dict(threshold=0), dict(threshold=3), dict(table_size=0),
                dict(recent=-1), dict(change=0), dict(change=2.5), dict(group=-0.1), dict(group=3)):
        with pytest.raises(InputError):
            MacroConfig(**bad)
