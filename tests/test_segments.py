"""engine/segments.py: variable-length segments (seed 001) and Q-phase refinement (seed 003), on
synthetic unit streams whose right answer is known by construction; one replay through the CLI, and
both modes live on a real program."""

import json
import subprocess
import sys

import numpy as np
import pytest

from phasescope.engine.interval import Interval
from phasescope.engine.phase_engine import EngineConfig, PhaseEngine
from phasescope.engine.segments import SegmentConfig, Segmenter, locus, qphase_cut, segment_stream
from phasescope.errors import InputError
from phasescope.formats.log import dumps, to_record

from conftest import read_records, run_cli

MOD = 0x1234ABCD << 32
# Two phases of one module: different blocks, at different code addresses (the locus moves).
PHASES = {"A": np.array([MOD | (0x1000 + 16 * i) for i in range(24)], np.uint64),
          "B": np.array([MOD | (0x9000 + 16 * i) for i in range(24)], np.uint64)}


def units(spec, thread=1, seed=0, jitter=0.05):
    """``spec``: [(phase, n), ...] -> that thread's units, counts jittered by +-jitter."""
    rng = np.random.default_rng(seed)
    base = np.arange(100, 100 + 24 * 37, 37)
    out = []
    for phase, n in spec:
        for _ in range(n):
            counts = (base * rng.uniform(1 - jitter, 1 + jitter, 24)).astype(np.uint64)
            out.append(Interval(thread, len(out), int(counts.sum()), PHASES[phase], counts))
    return out


def lengths(pieces, thread=None):
    return [p.units for p in pieces if thread is None or p.thread == thread]


def run(config, ivs):
    return list(segment_stream(ivs, config))


def test_variable_cuts_exactly_at_the_phase_change():
    pieces = run(SegmentConfig("variable", 0.5, 3, 100), units([("A", 37), ("B", 45)]))
    assert lengths(pieces) == [37, 45]
    assert [p.seq for p in pieces] == [0, 1]
    assert sum(p.instructions for p in pieces) == sum(u.instructions for u in units([("A", 37), ("B", 45)]))


def test_qphase_cuts_a_mixed_nominal_interval_where_the_locus_moves():
    assert lengths(run(SegmentConfig("qphase", 0.5, 1, 10), units([("A", 4), ("B", 6)]))) == [4, 6]
    # nominal intervals of 10: A A..A | A(4) B(6) | B..B: only the mixed one is cut, at 4
    pieces = run(SegmentConfig("qphase", 0.5, 2, 10), units([("A", 14), ("B", 16)]))
    assert lengths(pieces) == [10, 4, 6, 10]
    assert qphase_cut(units([("A", 7), ("B", 3)]), 1) == 7
    assert qphase_cut(units([("A", 7), ("B", 3)]), 4) == 6  # the nearest cut that leaves both parts 4 long
    assert qphase_cut(units([("A", 7), ("B", 3)]), 6) == 0  # no cut leaves both parts 6 long


def test_locus_is_normalised_per_module():
    loc = locus(units([("A", 1), ("B", 1)]))
    assert loc.shape == (2, 2)  # one module: its share, and share x normalised mean offset
    assert np.allclose(loc[:, 0], 1.0)
    assert 0 <= loc[0, 1] < 0.01 < 0.99 < loc[1, 1] <= 1.0


def test_noise_below_the_threshold_never_cuts():
    ivs = units([("A", 250)], jitter=0.2)
    for mode in ("variable", "qphase"):
        seg = Segmenter(SegmentConfig(mode, 0.5, 3, 100))
        pieces = [p for iv in ivs for p in seg.push(iv)] + seg.flush()
        assert seg.cuts == 0
        assert lengths(pieces) == [100, 100, 50]


def test_min_and_max_length_are_respected():
    # a 2-unit blip of B is shorter than --segment-min 3: no segment shorter than 3 (but the last)
    ivs = units([("A", 37), ("B", 2), ("A", 40), ("B", 300)])
    pieces = run(SegmentConfig("variable", 0.5, 3, 50), ivs)
    assert all(3 <= n <= 50 for n in lengths(pieces)[:-1])
    assert sum(lengths(pieces)) == len(ivs)
    assert lengths(pieces)[0] == 37  # the change into the blip is still cut exactly
    q = run(SegmentConfig("qphase", 0.5, 3, 10), units([("A", 9), ("B", 1), ("A", 10)]))
    assert all(n >= 3 for n in lengths(q))


def test_streams_are_per_thread_and_partial_units_flush():
    a = units([("A", 20), ("B", 10)], thread=1)
    b = units([("B", 5), ("A", 25)], thread=2, seed=1)
    a[-1].partial = True
    mixed = [iv for pair in zip(a, b) for iv in pair]
    seg = Segmenter(SegmentConfig("variable", 0.5, 3, 100))
    pieces = [p for iv in mixed for p in seg.push(iv)]
    assert lengths(pieces, 1) == [20, 10]  # thread 1's partial last unit flushed it
    assert pieces[-1].partial
    pieces += seg.flush()
    assert lengths(pieces, 2) == [5, 25]


def test_fixed_passes_units_through():
    ivs = units([("A", 3), ("B", 3)])
    assert run(SegmentConfig(), ivs) == ivs


def test_each_segment_is_one_interval_of_its_own_phase():
    engine = PhaseEngine()
    res = engine.feed_many(run(SegmentConfig("variable", 0.5, 3, 100), units([("A", 37), ("B", 45), ("A", 20)])))
    assert [r.phase for r in res] == [res[0].phase, res[1].phase, res[0].phase]
    assert res[0].phase != res[1].phase


@pytest.mark.parametrize("kw", [{"threshold": 0}, {"threshold": 3}, {"min_units": 0},
                                {"min_units": 5, "max_units": 4}, {"mode": "wavelet"}])
def test_bad_config(kw):
    with pytest.raises(InputError):
        SegmentConfig(**kw)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "phasescope.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_replay_segment_modes_through_the_cli(tmp_path):
    ivs = units([("A", 37), ("B", 45)])
    log = tmp_path / "units.jsonl"
    engine = PhaseEngine(EngineConfig())
    with open(log, "w") as f:
        for iv in ivs:
            f.write(dumps(to_record(iv, engine.feed(iv))) + "\n")
    total = sum(iv.instructions for iv in ivs)
    for mode, expect in (("variable", [37, 45]), ("qphase", [37, 45])):
        out, summary = tmp_path / f"{mode}.jsonl", tmp_path / f"{mode}.json"
        proc = cli("replay", log, "--segment-mode", mode, "--segment-max", 100 if mode == "variable" else 82,
                   "--log", out, "--summary", summary)
        assert proc.returncode == 0, proc.stderr
        recs = read_records(out)
        assert [r["instructions"] for r in recs] == [sum(iv.instructions for iv in ivs[:expect[0]]),
                                                     sum(iv.instructions for iv in ivs[expect[0]:])]
        assert sum(r["instructions"] for r in recs) == total
        assert recs[0]["phase"] != recs[1]["phase"]
        assert json.loads(summary.read_text())["config"]["segments"]["mode"] == mode
    proc = cli("replay", log, "--segment-mode", "variable", "--segment-min", 5, "--segment-max", 4)
    assert proc.returncode == 2 and "segment max" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["variable", "qphase"])
def test_live_segments_follow_the_programs_phases(build, tmp_path, mode):
    """phased.c runs hash, hash, float, chase per round (about 52M, 20M and 23M instructions). On
    1M-instruction units, a segment never straddles two functions' work for long: the main phases
    come back in the program's order, round after round, and each names its own function."""
    exe = build("phased.c")
    log, summary = tmp_path / "log.jsonl", tmp_path / "summary.json"
    r = run_cli("--no-dashboard", "--interval", "1000000", "--segment-mode", mode, "--segment-max", "20",
                "--log", str(log), "--summary", str(summary), "-f", exe, "3", "1")
    assert r.returncode == 0, r.stderr
    recs = read_records(log)
    s = json.loads(summary.read_text())
    assert s["config"]["segments"]["mode"] == mode
    assert sum(rec["instructions"] for rec in recs) == s["whole"]["instructions"]
    assert all(rec["instructions"] <= 20 * 1_000_100 for rec in recs)  # no piece past --segment-max units
    assert len({rec["instructions"] // 1_000_000 for rec in recs}) > 2  # lengths vary: not fixed intervals
    main = {p["phase"]: p["top_code"][0]["symbol"].split("!")[-1].split("+")[0]
            for p in s["phases"] if p["share"] >= 0.05}
    assert sorted(main.values()) == ["chase_phase", "float_phase", "hash_phase"]
    runs = [rec["phase"] for rec in recs if rec["phase"] in main]
    runs = [p for i, p in enumerate(runs) if i == 0 or p != runs[i - 1]]
    assert [main[p] for p in runs] == ["hash_phase", "float_phase", "chase_phase"] * 3


@pytest.mark.slow
def test_segment_modes_without_fine_units_are_refused_live():
    r = run_cli("--no-dashboard", "--segment-mode", "qphase", "-f", "/bin/true")
    assert r.returncode == 2 and "--interval" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_merged_piece_keeps_how_far_back_its_window_began():
    """The reach of a window is counted in the merged interval's own units: a window that began two
    pieces back, in the last of three pieces, began inside the merged interval (reach 0); one that
    began three back reaches one before it."""
    from phasescope.engine.segments import merge
    pieces = units([("A", 3)])
    pieces[2].locality, pieces[2].locality_reach = np.array([64], np.uint64), 2
    assert merge(pieces, 0).locality_reach == 0
    pieces[2].locality_reach = 3
    assert merge(pieces, 0).locality_reach == 1 and merge(pieces, 0).locality.tolist() == [64]
    pieces[1].locality, pieces[2].locality = np.array([128], np.uint64), None
    assert merge(pieces, 0).locality.tolist() == [128]
