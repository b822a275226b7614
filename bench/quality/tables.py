#!/usr/bin/env python3
"""Issue 28's tables, tuning half then held-out half: per program SimPoint's k, SimPoint's ARI
against itself (seeds 2, 3, 4), and for each setting its ARI against SimPoint 3.2 -maxK 30 and its
phase IDs, flagged ``s`` (below SimPoint's own ARI - 0.05), ``p`` (more than 0.05 below ``paper``),
``k`` (more IDs than 2x SimPoint's k); on the constructed-truth logs, truth ARI of the phases and of
their macro phases, as the log settles them and (after the slash) as the live view showed them, and
in brackets the live view's mean lag behind each of the log's macro changes, in intervals. Each log is parsed once into a ``generalize.Program`` kept as NAME.pkl beside
it (cc1's 1.3 GB log takes some 20 minutes to parse on a loaded machine); delete it to redo.

    python3 bench/quality/tables.py --simpoint PATH [--macro FIELD=VALUE:...] DIR[,DIR...] SETTING...

Several directories (comma-separated) are scored as one split: each half's mean covers them all.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generalize  # noqa: E402  (puts host/ and bench/truth on the path)
import programs  # noqa: E402
from run import setting_value, tracker_config  # noqa: E402


def load(log: str, binary: str, macro: str = "") -> "generalize.Program":
    """The log's Program, from its pickle when there is one; its macro phases with today's defaults
    but for ``macro`` (``FIELD=VALUE:...`` of engine/macro.py's MacroConfig)."""
    cache = log[: -len(".jsonl")] + ".pkl"
    fields = {k: setting_value(v) for k, v in (f.split("=", 1) for f in macro.split(":") if f)}
    if os.path.exists(cache):
        with open(cache, "rb") as f:
            p = pickle.load(f)
        p.macro = generalize.MacroConfig(**fields)  # not the pickle's
        return p
    p = generalize.Program(log, binary, [2, 3, 4])
    p.macro = generalize.MacroConfig(**fields)
    p.phases(tracker_config("paper", 10_000_000))  # computes the footprints the pickle keeps
    with open(cache, "wb") as f:
        pickle.dump(p, f)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the captures' directory, or several separated by commas")
    ap.add_argument("settings", nargs="+", help="names of bench/quality/run.py or PRESET:FIELD=VALUE:...")
    ap.add_argument("--simpoint", required=True, metavar="PATH")
    ap.add_argument("--macro", default="", metavar="FIELD=VALUE:...",
                    help="macro phases other than the defaults (e.g. recent=12:change=1.6:threshold=1.0)")
    args = ap.parse_args()
    progs = [load(os.path.join(d, n + ".jsonl"), args.simpoint, args.macro) for n in programs.PROGRAMS
             for d in args.dir.split(",") if os.path.exists(os.path.join(d, n + ".jsonl"))]
    names = ["paper"] + [s for s in args.settings if s != "paper"]
    res = {s: {p.name: p.scores(*p.phases(tracker_config(s, 10_000_000))) for p in progs} for s in names}
    for split in ("tune", "held-out"):
        ps = [p for p in progs if programs.PROGRAMS[p.name][1] == split]
        print(f"\n**{split}**\n\n| program | SimPoint k | SimPoint vs itself | "
              + " | ".join(f"`{s}` ARI (IDs)" for s in names) + " | truth ARI micro / macro (log / live) |")
        print("| --- " * (4 + len(names)) + "|")
        for p in ps:
            k, cells = len(set(p.sp30.tolist())), []
            for s in names:
                r = res[s][p.name]
                flags = "".join(f for f, bad in (("s", r["ari"] < p.sp30_self - 0.05),
                                                 ("p", r["ari"] < res["paper"][p.name]["ari"] - 0.05),
                                                 ("k", r["phases"] > 2 * k)) if bad)
                cells.append(f"{r['ari']:.2f} ({r['phases']}) {flags}".strip())
            truth = "-" if p.truth is None else ", ".join(
                "{truth:.2f} / {macro_truth:.2f} / {macro_truth_live:.2f} ({macro_lag:.1f})".format(**res[s][p.name])
                for s in names)
            print(f"| {p.name} | {k} | {p.sp30_self:.2f} | " + " | ".join(cells) + f" | {truth} |")
        print(f"| **mean** | | {np.mean([p.sp30_self for p in ps]):.2f} | "
              + " | ".join(f"**{np.mean([res[s][p.name]['ari'] for p in ps]):.3f}**" for s in names) + " | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
