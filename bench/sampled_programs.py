#!/usr/bin/env python3
"""Both modes on real programs of this system, through phasescope itself (``phasescope bench``):
sampled/native (sampled mode, the watch-only agent and the kernel sampler; end to end includes
Frida's injection) and, unless --no-exact, traced/native and bare Stalker/native in exact mode.

    python3 bench/sampled_programs.py [--runs 3] [--exact-runs 1] [--no-exact] [--bursts] [--json]

Workloads are those of bench/sampled_overhead.py: bzip2 -9 and xz -6 (compressors), python3 (an
interpreter), cc1 -O2 (gcc's compiler proper) and sqlite3 (a database). Goals (issue 9): sampled/
native <= 1.03 (1.10 at worst); exact traced/bare <= 1.15. ``--bursts`` adds sampled mode with exact
bursts (interleaved with the sampled runs): bursts/native and bursts/sampled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from phasescope.commands.bench import measure  # noqa: E402
from sampled_overhead import make_data, workloads  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="sampled-mode runs per program (minimum counts)")
    ap.add_argument("--exact-runs", type=int, default=1, help="exact-mode runs per program")
    ap.add_argument("--no-exact", action="store_true", help="sampled mode only")
    ap.add_argument("--bursts", action="store_true", help="also sampled mode with exact bursts")
    ap.add_argument("--trust-threshold", type=int, default=None, help="Stalker.trustThreshold in exact mode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="phasescope-programs-") as tmp:
        for name, argv in workloads(make_data(tmp), tmp):
            row = {"program": name}
            s = measure(argv, runs=args.runs, mode="sampled", options={"rate": 1000, "window": 100, "bursts": args.bursts})
            row["native_s"] = s["seconds"]["native"]
            row["sampled"] = s["ratios"]["sampled"]
            row["sampled_end_to_end"] = s["ratios"]["end-to-end"]
            if args.bursts:
                row.update(bursts=s["ratios"]["bursts"], bursts_over_sampled=s["ratios"]["bursts/sampled"],
                           burst_count=s["bursts"])
            if not args.no_exact:
                e = measure(argv, runs=args.exact_runs, valgrind=False, trust_threshold=args.trust_threshold)
                row.update(traced=e["ratios"]["traced"], bare=e["ratios"]["bare"],
                           traced_over_bare=e["ratios"]["traced/bare"])
            rows.append(row)
            print(json.dumps(row) if args.json else
                  f"{name:<22} native {row['native_s']:6.2f} s  sampled {row['sampled']:.3f}x "
                  f"(end to end {row['sampled_end_to_end']:.3f}x)"
                  + (f"  bursts {row['bursts']:.3f}x ({row['burst_count']}; over sampled "
                     f"{row['bursts_over_sampled']:.3f}x)" if args.bursts else "")
                  + ("" if args.no_exact else f"  exact {row['traced']:.2f}x  bare {row['bare']:.2f}x  "
                     f"traced/bare {row['traced_over_bare']:.2f}x"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
