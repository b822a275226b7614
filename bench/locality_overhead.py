#!/usr/bin/env python3
"""What --locality costs: traced/native without and with --locality, on bench/cpu_bound.c and
tests/programs/locality_phases.c (cc -O2). Configurations, interleaved, minimum of --runs:

    native          the program alone
    traced          phasescope's agent (exact mode), no --locality
    loc-off         --locality, but windows never open after the first (every = 2**40): the cost
                    of the memory slots outside windows (a 5-byte NOP before each memory access)
    locality        --locality with the defaults (a 65536-access window every 8 intervals)

Times the target under the session (start to end report, as ``phasescope bench`` does).

    PYTHONPATH=host python3 bench/locality_overhead.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WORKLOADS = [
    ("cpu_bound", HERE / "cpu_bound.c", ["4"]),
    ("locality_phases", ROOT / "tests" / "programs" / "locality_phases.c", ["2", "4000000"]),
]
CONFIGS = {
    "traced": None,
    "loc-off": {"window": 65536, "every": 1 << 40},
    "locality": {"window": 65536, "every": 8},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from phasescope.commands.bench import _native, _traced
    from phasescope.sources.device import resolve_device, resolve_target
    from phasescope.sources.session import TraceSession

    device = resolve_device()
    results = {}
    with tempfile.TemporaryDirectory(prefix="phasescope-locbench-") as tmp:
        for label, source, wargs in WORKLOADS:
            exe = str(Path(tmp) / label)
            subprocess.run(["cc", "-O2", "-o", exe, str(source)], check=True)
            argv_ = [exe, *wargs]
            target = resolve_target(device, argv=argv_)
            times = {name: [] for name in ("native", *CONFIGS)}
            for _ in range(args.runs):  # interleaved
                times["native"].append(_native(argv_))
                for name, loc in CONFIGS.items():
                    session = TraceSession(device, target, stdio="pipe", locality=loc)
                    times[name].append(_traced(session, name)[0])
            best = {k: min(v) for k, v in times.items()}
            results[label] = {"seconds": best,
                              "ratio": {k: best[k] / best["native"] for k in CONFIGS},
                              "locality/traced": best["locality"] / best["traced"],
                              "loc-off/traced": best["loc-off"] / best["traced"]}
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'workload':<16} {'native s':>9} " + " ".join(f"{k + '/nat':>13}" for k in CONFIGS)
          + f" {'loc-off/traced':>15} {'locality/traced':>16}")
    for label, r in results.items():
        print(f"{label:<16} {r['seconds']['native']:>9.3f} "
              + " ".join(f"{r['ratio'][k]:>13.2f}" for k in CONFIGS)
              + f" {r['loc-off/traced']:>15.2f} {r['locality/traced']:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
