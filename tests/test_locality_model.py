"""Seed 004's locality model (phasescope.engine.locality_model, phasescope locality-model): synthetic
reuse streams whose growth with the input is known by construction (constant, linear, square root),
measured through sampled windows as live runs measure them, fitted on small sizes and checked
against the exact full-trace miss rates of a size 16x larger."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from phasescope.commands.options import parse_size
from phasescope.engine.locality import BLOCK_BYTES, PhaseLocality, exact_miss_rates, reuse_distances
from phasescope.engine.locality_model import PATTERNS, Run, confidence, fit, group_distances
from phasescope.errors import InputError

KIB, MIB = 1 << 10, 1 << 20
WINDOW = 65536
CHECK = [32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, MIB, 2 * MIB, 4 * MIB, 8 * MIB]


def cyclic(blocks: int, n: int, start: int = 0, base: int = 0) -> np.ndarray:
    """A cyclic sweep over ``blocks`` blocks: every reuse distance is blocks - 1."""
    return base + (start + np.arange(n)) % blocks


def constant_stream(size: int, n: int, rng) -> np.ndarray:
    """Reuses over 100 blocks whatever the input size (a fixed working set)."""
    return rng.integers(0, 100, n)


def linear_stream(size: int, n: int, rng) -> np.ndarray:
    """Uniform random blocks of the whole input: distances uniform on [0, size/64) (a hash table)."""
    return rng.integers(0, size // BLOCK_BYTES, n)


def sqrt_stream(size: int, n: int, rng) -> np.ndarray:
    """A sweep over rows of a square matrix of ``size`` bytes: sqrt(size/64) * 3 blocks, reused each sweep."""
    return cyclic(int(np.sqrt(size / BLOCK_BYTES) * 3), n, int(rng.integers(0, 1000)))


def mixed_stream(size: int, n: int, rng) -> np.ndarray:
    """Half constant, half linear, interleaved access by access (two reference groups)."""
    out = np.empty(n, np.int64)
    out[0::2] = constant_stream(size, (n + 1) // 2, rng) + (1 << 40)
    out[1::2] = linear_stream(size, n // 2, rng)
    return out


def run_of(make, size: int, rng, windows: int = 6) -> Run:
    """One 'run' of a phase as --locality sees it: windows of 64K consecutive accesses."""
    loc = PhaseLocality()
    for _ in range(windows):
        loc.add_blocks(0, make(size, WINDOW, rng))
    d = loc.to_dict(0)
    return Run(size, d["signature"], d["touched_bytes"])


_TRUTH: dict = {}


def truth(make, size: int, rng, n: int = 1 << 21) -> np.ndarray:
    """The exact miss rates of a long stream at the size (full trace), past its warm-up (its second half)."""
    if (make, size) not in _TRUTH:
        d = reuse_distances(make(size, n, rng))
        _TRUTH[make, size] = exact_miss_rates(d[n // 2:], [c // BLOCK_BYTES for c in CHECK])
    return _TRUTH[make, size]


def dominant(model) -> str:
    shares = model.patterns()
    return max(shares, key=shares.get)


@pytest.mark.slow  # computes for seconds (long synthetic traces): not in the fast lane
@pytest.mark.parametrize("make, pattern", [(constant_stream, "constant"), (linear_stream, "linear"),
                                           (sqrt_stream, "square root"), (mixed_stream, None)])
@pytest.mark.parametrize("train", [(256 * KIB, MIB), (256 * KIB, 512 * KIB, MIB)])
def test_known_growth_predicted_16x_larger(make, pattern, train):
    rng = np.random.default_rng(7)
    model = fit([run_of(make, s, rng) for s in train])
    if pattern is not None:
        assert dominant(model) == pattern and model.patterns()[pattern] >= 0.9, model.patterns()
    else:  # half of the accesses each way (the linear half's shortest distances are the groups that pair least well)
        shares = model.patterns()
        assert abs(shares["constant"] - 0.5) <= 0.05 and shares["linear"] >= 0.4, shares
    held = 16 * max(train)
    predicted = model.miss_rates(held, CHECK)
    exact = truth(make, held, rng)
    assert np.max(np.abs(predicted - exact)) <= 0.03, list(zip(CHECK, predicted.round(3), exact.round(3)))


def test_two_runs_follow_the_papers_ratio_rule():
    """Two runs: the pattern is the one whose p(s2)/p(s1) is closest to d2/d1."""
    sig = lambda d: [[1, 1.0], [int(d), 1.0], [int(d) + 1, 0.0], [1 << 20, 0.0]]  # every access at distance d
    for ratio, name in ((1.0, "constant"), (4 ** (1 / 3), "cube root"), (2.0, "square root"), (4.0, "linear")):
        m = fit([Run(1 * MIB, sig(1000)), Run(4 * MIB, sig(1000 * ratio))])
        assert dominant(m) == name, (ratio, m.patterns())
        # and it goes through both runs
        assert np.allclose(m.distances(4 * MIB), m.distances(4 * MIB).mean(), rtol=0.01)


def test_group_distances_are_the_distributions_quantiles():
    # P(d >= C) = 1 - C/1000 up to 1000 blocks: distances uniform on [0, 1000)
    sig = [[c, max(0.0, 1 - c / 1000)] for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)]
    d = group_distances(sig, touched_bytes=1000 * BLOCK_BYTES, groups=100)
    assert np.all(np.diff(d) >= 0)
    q = (np.arange(100) + 0.5) / 100 * 1000
    assert np.max(np.abs(d - q)[5:]) <= 60  # geometric interpolation between points an octave apart


def test_reuses_past_the_windows_lie_at_the_data_the_phase_touched():
    sig = [[1, 1.0], [64, 0.5]]  # half the accesses reuse beyond what the windows saw
    d = group_distances(sig, touched_bytes=4096 * BLOCK_BYTES, groups=10)
    assert list(d[5:]) == [4095] * 5


def test_critical_input_size_is_where_the_working_set_crosses_the_cache():
    rng = np.random.default_rng(3)
    make = lambda size, n, rng: cyclic(size // BLOCK_BYTES, n, int(rng.integers(0, 100)))
    model = fit([run_of(make, s, rng) for s in (64 * KIB, 128 * KIB, 256 * KIB)])
    for cache in (MIB, 8 * MIB):
        crit = model.critical_sizes(cache, 16 * KIB, 1 << 34)
        assert len(crit) == 1 and crit[0]["to"] - crit[0]["from"] >= 0.9, crit
        assert cache / 1.5 <= crit[0]["input_size"] <= cache * 1.5, crit


def test_confidence_checks_each_run_against_the_others():
    rng = np.random.default_rng(5)
    runs = [run_of(linear_stream, s, rng) for s in (256 * KIB, 512 * KIB, MIB)]
    c = confidence(runs, predict=16 * MIB)
    assert c["runs"] == 3 and len(c["leave_one_out"]) == 3 and c["max_error"] <= 0.03
    assert c["level"] == "high" and c["extrapolation"] == 16
    c2 = confidence(runs[:2])
    assert c2["leave_one_out"] == [] and c2["max_error"] is None and c2["level"] == "low"
    with pytest.raises(ValueError):
        fit([runs[0], runs[0]])


def test_sizes_with_units():
    assert parse_size("4096", "x") == 4096 and parse_size("64KiB", "x") == 64 * KIB
    assert parse_size("1.5MiB", "x") == 3 * MIB // 2 and parse_size("100MB", "x") == 10**8
    assert parse_size("2G", "x") == 2 << 30 and parse_size("512k", "x") == 512 * KIB
    for bad in ("", "MiB", "4 parsecs", "-1", "0"):
        with pytest.raises(InputError):
            parse_size(bad, "--input-size")


# -- the command, on databases made of synthetic runs ---------------------------------------------


def _db(path, phases):
    """A phase database of ``{phase: [Run, ...]}`` as --locality --phase-db runs save it."""
    reps = []
    for phase, runs in phases.items():
        reps.append({"phase": phase, "footprint": [0.0] * 32, "intervals": 10, "instructions": 1000 * (10 - phase),
                     "locality_runs": [{"run": i + 1, "input_size": r.input_size, "input_size_from": "given",
                                        "windows": 8, "accesses": 8 * WINDOW, "touched_bytes": r.touched_bytes,
                                        "signature": r.signature,
                                        "top_code": [{"key": 77 + phase, "share": 0.9, "symbol": f"prog!f{phase}"}]}
                                       for i, r in enumerate(runs)]})
    path.write_text(json.dumps({"format": "phasescope-phase-db", "version": 1, "settings": {}, "runs": 3,
                                "next_id": len(phases), "representatives": reps}))
    return path


@pytest.mark.slow
def test_predict_json_has_the_issues_shape(tmp_path):
    rng = np.random.default_rng(11)
    db = _db(tmp_path / "db.json", {0: [run_of(linear_stream, s, rng) for s in (256 * KIB, 512 * KIB, MIB)],
                                    1: [run_of(constant_stream, s, rng) for s in (256 * KIB, 512 * KIB, MIB)]})
    r = run_cli("locality-model", str(db), "--predict", "16MiB", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["phases"]
    assert [p["phase"] for p in out["phases"]] == [0, 1]
    for p in out["phases"]:
        assert set(p) == {"phase", "top_code", "miss_rate_curve"}
        assert p["top_code"][0]["symbol"] == f"prog!f{p['phase']}" and set(p["top_code"][0]) == {"key", "pc", "share", "symbol"}
        assert [b for b, _ in p["miss_rate_curve"]] == [1 << s for s in range(12, 27)]
    curve = dict(out["phases"][0]["miss_rate_curve"])
    assert abs(curve[8 * MIB] - 0.5) <= 0.03 and abs(curve[4 * MIB] - 0.75) <= 0.03  # 1 - C/S at 16 MiB
    r = run_cli("locality-model", str(db), "--predict", "16MiB")
    assert r.returncode == 0 and "P0 prog!f0" in r.stdout and "confidence: high" in r.stdout
    assert "linear 100%" in r.stdout and "critical input sizes: 32 KiB cache" in r.stdout


@pytest.mark.slow
def test_too_few_runs_and_runs_too_close_are_one_line(tmp_path):
    rng = np.random.default_rng(13)
    one = _db(tmp_path / "one.json", {0: [run_of(linear_stream, 256 * KIB, rng)]})
    r = run_cli("locality-model", str(one))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "2 or more runs" in r.stderr, r.stderr
    close = _db(tmp_path / "close.json", {0: [run_of(linear_stream, s, rng) for s in (256 * KIB, 300 * KIB)]})
    r = run_cli("locality-model", str(close))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "too close in size" in r.stderr, r.stderr
    for args in (("--predict", "lots"), ("--caches", "0")):
        r = run_cli("locality-model", str(close), *args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "phasescope-phase-db", "representatives": [{"phase": 0, "locality_runs": 5}]}')
    r = run_cli("locality-model", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a valid" in r.stderr


@pytest.mark.slow
def test_plot_of_the_model(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(17)
    db = _db(tmp_path / "db.json", {0: [run_of(linear_stream, s, rng) for s in (256 * KIB, 512 * KIB, MIB)],
                                    1: [run_of(sqrt_stream, s, rng) for s in (256 * KIB, 512 * KIB, MIB)]})
    out = tmp_path / "model.png"
    r = run_cli("locality-model", str(db), "--predict", "16MiB", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "2 phase(s)" in r.stderr
    r = run_cli("locality-model", str(db), "--plot", str(tmp_path / "model.nope"))
    assert r.returncode == 2 and "unknown image format" in r.stderr and r.stderr.count("\n") == 1
    r = run_cli("locality-model", str(db), "--plot", str(db))
    assert r.returncode == 2 and r.stderr.count("\n") == 1  # the database is never overwritten
