#!/usr/bin/env python3
"""Do the summary's per-phase statistics count each interval where the log settles it? Replays
each LOG (``phasescope replay LOG --log --summary``, any replay options after ``--``) and prints the
intervals whose phase differs: the summary's counts (a folded phase counted as the phase it ended
up in, ``merged_into`` through :func:`final_ids`) against the log's settled labels
(:func:`settled_phases`). 0 is right; ``off by 2`` is one interval in the wrong phase.

    python3 bench/quality/summary_vs_log.py LOG... [-- REPLAY OPTIONS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "host")
sys.path.insert(0, HOST)

from phasescope.engine.stats import final_ids  # noqa: E402
from phasescope.formats.log import settled_phases  # noqa: E402


def off_by(path: str, options: list) -> tuple:
    """(intervals, folds, intervals counted in the wrong phase x 2) of one replay of ``path``."""
    with tempfile.TemporaryDirectory() as tmp:
        log, summary = os.path.join(tmp, "log.jsonl"), os.path.join(tmp, "summary.json")
        env = dict(os.environ, PYTHONPATH=HOST)
        subprocess.run([sys.executable, "-m", "phasescope.cli", "replay", path, "--log", log, "--summary", summary,
                        *options], check=True, capture_output=True, env=env)
        with open(log) as f:
            records = [r for r in map(json.loads, f) if "phase" in r]
        with open(summary) as f:
            s = json.load(f)
    final = final_ids({p["phase"]: p["merged_into"] for p in s["phases"] if p["merged_into"] is not None})
    counted = Counter()
    for p in s["phases"]:
        counted[final.get(p["phase"], p["phase"])] += p["intervals"]
    settled = Counter(settled_phases(records))
    return len(records), s["table"]["merges"], sum(((settled - counted) + (counted - settled)).values())


def main() -> None:
    args = sys.argv[1:]
    logs, options = (args[: args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    for path in logs:
        n, folds, off = off_by(path, options)
        print(f"{os.path.basename(path)}: {n} intervals, {folds} folds, summary vs log off by {off}")


if __name__ == "__main__":
    main()
