"""The locality model on real processes (issue 21): three --locality --phase-db training runs of a
program with two phases (tests/programs/locality_growth.c: one working set that grows with the
input, one that stays at 256 KiB); the model's prediction for a held-out size 8x larger than the
largest is within 3 points of the truth by construction (uniform random 64-byte blocks of S bytes:
an LRU cache of C bytes misses 1 - C/S of them), at every cache size from 32 KiB to 8 MiB, for both
phases, and a held-out run of that size finds the same phases through the database.

The truth is the construction's, not the held-out run's windows: a run samples a handful of
windows per phase (fewer when the host falls behind and the agent holds windows back), so what it
measures is itself an estimate."""

import pytest
import json
import shutil

from conftest import run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process

TRAIN = (384 << 10, 768 << 10, 1536 << 10)
HELD_OUT = 12 << 20
FIXED = 256 << 10  # locality_growth.c's FIXED_BYTES
CHECK = [1 << s for s in range(15, 24)]  # 32 KiB .. 8 MiB


def _main_two(phases) -> dict:
    """'grow' / 'fixed' -> the two main phases (most instructions first): the one whose hottest code is
    grow, and the other (fixed is a static function whose name the symbol lookup may not find)."""
    a, b = phases[:2]
    grow = a if "!grow" in (a["top_code"][0].get("symbol") or "") else b
    return {"grow": grow, "fixed": b if grow is a else a}


def test_held_out_input_predicted_within_3_points(build, tmp_path):
    exe = build("locality_growth.c", "-O2")
    db = tmp_path / "phases.json"
    for size in TRAIN:
        r = run_cli("--locality", "--no-dashboard", "--phase-db", str(db), "--input-size", str(size),
                    "-f", exe, str(size), "3", "4000000")
        assert r.returncode == 0, r.stderr
    trained = tmp_path / "trained.json"
    shutil.copy(db, trained)
    summary = tmp_path / "held.json"
    r = run_cli("--locality", "--no-dashboard", "--phase-db", str(db), "--input-size", "12MiB",
                "--summary", str(summary), "-f", exe, str(HELD_OUT), "3", "4000000", timeout=300)
    assert r.returncode == 0, r.stderr
    measured = _main_two(json.loads(summary.read_text())["phases"])
    truth = {"grow": lambda c: max(0.0, 1 - c / HELD_OUT), "fixed": lambda c: max(0.0, 1 - c / FIXED)}

    r = run_cli("locality-model", str(trained), "--predict", "12MiB", "--json")
    assert r.returncode == 0, r.stderr
    predicted = _main_two(json.loads(r.stdout)["phases"])
    for name in ("grow", "fixed"):
        assert predicted[name]["phase"] == measured[name]["phase"]  # matched by code, through the database
        got = dict(predicted[name]["miss_rate_curve"])
        rows = [(c, got[c], truth[name](c)) for c in CHECK]
        assert max(abs(g - w) for _, g, w in rows) <= 0.03, (name, rows)
    # the growing working set's jumps are found where it crosses each cache size (1 - C/S: half-way at 2C)
    text = run_cli("locality-model", str(trained), "--caches", "1MiB", "--json")
    crit = next(p for p in json.loads(text.stdout)["phases"] if p["phase"] == predicted["grow"]["phase"])["critical"]
    assert len(crit) == 1 and (1 << 20) / 1.5 <= crit[0]["begins"] <= (1 << 20) * 1.5, crit
