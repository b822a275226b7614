#!/usr/bin/env python3
"""How far apart sampled footprints of the same phase are, against different phases.

A window of n samples estimates the code's time distribution with error ~ 1/sqrt(n), so the
Manhattan distance between two windows of one phase is not ~0 as with exact counts, and the
paper's fixed 10% threshold splits one phase into many. This script samples real programs with
known phases (twice each, so pairs also compare across runs), cuts windows of 100, 400 and 1000
samples, computes footprints with phasescope's tracker (default config: 32 buckets, 6 bits) and
prints the distribution of distances (as a fraction of the interval, the unit of ``threshold``):

* same: consecutive windows of the same phase within a run, and same-phase windows across runs;
* diff: windows of different phases.

Programs: tests/programs/phased.c (three C loops; labels: function holding most samples) and a
Python program with four phases (json, regex, sort, big integers: wide interpreter footprints;
labels: the wall-clock boundaries the program prints). Windows across a boundary are dropped.

    PYTHONPATH=host python3 bench/sampled_noise.py [--rate 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host"))
from phasescope.sources.sampler import Sampler  # noqa: E402
from phasescope.engine.footprint import manhattan  # noqa: E402
from phasescope.engine.tracker import Tracker, TrackerConfig  # noqa: E402

SIZES = (100, 400, 1000)

PY_PHASES = r"""
import json, re, sys, time, random
r = random.Random(7)
def mark(name):
    print(name, time.time_ns(), flush=True)
sys.stdin.readline()
words = ["".join(r.choice("abcdefghijklmnop") for _ in range(r.randint(3, 10))) for _ in range(5000)]
def p_json(t):
    end = time.process_time() + t
    while time.process_time() < end:
        json.loads(json.dumps([{"w": w, "i": i, "l": [i, i * 2.5]} for i, w in enumerate(words[:2000])]))
def p_regex(t):
    text = " ".join(words) * 4
    end = time.process_time() + t
    while time.process_time() < end:
        re.findall(r"\b([a-h]+)([i-p]*)\b", text)
def p_sort(t):
    end = time.process_time() + t
    while time.process_time() < end:
        sorted(((w[::-1], len(w), i % 13) for i, w in enumerate(words * 4)), key=lambda x: (x[2], x[0]))
def p_bigint(t):
    end = time.process_time() + t
    while time.process_time() < end:
        x = 3 ** 20000
        for k in range(40):
            x = (x * x) % (7 ** 9000 + k)
for rep in range(2):
    for name, fn in (("json", p_json), ("regex", p_regex), ("sort", p_sort), ("bigint", p_bigint)):
        mark("begin " + name)
        fn(float(sys.argv[1]))
        mark("end " + name)
"""


def sample(argv, period_ns, stdin=b"go\n"):
    """Windows of 100 samples of the whole run of ``argv`` (which waits for a line), and its stdout."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    s = Sampler(p.pid, period_ns=period_ns, window_samples=min(SIZES)).start()
    p.stdin.write(stdin)
    p.stdin.close()
    wins = s.run_out(0.1)
    out = p.stdout.read().decode()
    p.wait()
    return [w for w in wins if not w.partial], out


def merge(wins, k):
    """Consecutive groups of ``k`` base windows of one thread as (keys, counts, start, end, members)."""
    out = []
    by_thread = {}
    for w in wins:
        by_thread.setdefault(w.thread, []).append(w)
    for ws in by_thread.values():
        for i in range(0, len(ws) - k + 1, k):
            g = ws[i:i + k]
            keys = np.concatenate([w.keys for w in g])
            counts = np.concatenate([w.counts for w in g])
            u, inv = np.unique(keys, return_inverse=True)
            out.append((u, np.bincount(inv, weights=counts).astype(np.uint64), g[0].start_ns, g[-1].end_ns, g))
    return out


def label_by_function(binary):
    funcs = []
    for line in subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and parts[3].endswith("_phase"):
            funcs.append((int(parts[0], 16), int(parts[1], 16), parts[3]))

    def label(win, s_modules_name=os.path.basename(binary)):
        keys, counts = win[0], win[1]
        c = Counter()
        for k, n in zip(keys.tolist(), counts.tolist()):
            off = k & 0xFFFFFFFF
            c[next((f for a, sz, f in funcs if a <= off < a + sz), "other")] += n
        name, n = c.most_common(1)[0]
        return name if name != "other" and n >= 0.95 * sum(c.values()) else None

    return label


def label_by_time(out):
    spans = []
    begin = {}
    for line in out.splitlines():
        kind, name, t = line.split()
        if kind == "begin":
            begin[name] = int(t)
        else:
            spans.append((begin.pop(name), int(t), name))

    def label(win):
        lo, hi = win[2], win[3]
        return next((n for a, b, n in spans if a <= lo and hi <= b), None)

    return label


def distances(runs, cfg):
    """runs: list of lists of (label, window). Returns {"same_consecutive", "same_cross", "diff"} arrays."""
    tr = Tracker(cfg)
    flat = [(ri, i, lab, w) for ri, run in enumerate(runs) for i, (lab, w) in enumerate(run) if lab]
    fps, _ = tr.footprints([w[0] for _, _, _, w in flat], [w[1] for _, _, _, w in flat])
    d = manhattan(fps, fps) / cfg.scale
    full, totals = Tracker(TrackerConfig(bits=None)).footprints([w[0] for _, _, _, w in flat], [w[1] for _, _, _, w in flat])
    p = full / cfg.buckets
    # expected L1 between two multinomial samples of n draws from p: sum_b sqrt(2/pi) sqrt(2 p_b (1 - p_b) / n)
    predicted = (np.sqrt(2 / np.pi) * np.sqrt(2 * p * (1 - p) / totals[:, None])).sum(axis=1)
    same_c, same_x, diff = [], [], []
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            ra, ia, la, _ = flat[a]
            rb, ib, lb, _ = flat[b]
            if la != lb:
                diff.append(d[a, b])
            elif ra != rb:
                same_x.append(d[a, b])
            elif ib == ia + 1:
                same_c.append(d[a, b])
    return {"same_consecutive": np.array(same_c), "same_cross": np.array(same_x), "diff": np.array(diff),
            "predicted": predicted}


def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=10000, help="Hz of CPU time (more samples per second of run)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    period = 1_000_000_000 // a.rate
    cfg = TrackerConfig()
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "phased")
        src = os.path.join(HERE, "..", "tests", "programs", "phased.c")
        subprocess.run(["cc", "-O1", "-g", "-o", exe, src], check=True)
        pyf = os.path.join(tmp, "pyphases.py")
        with open(pyf, "w") as f:
            f.write(PY_PHASES)
        # phased: "wait" via a shell reading one line, then exec (sampled from the first instruction)
        programs = {
            "phased.c (3 C loops)": (["sh", "-c", 'read -r _; exec "$@"', "sh", exe, "4", "60"], None),
            "python (4 phases)": ([sys.executable, pyf, "0.6"], "time"),
        }
        for name, (argv, how) in programs.items():
            runs_raw = [sample(argv, period) for _ in range(2)]
            report[name] = {}
            for k in SIZES:
                n = k // min(SIZES)
                runs = []
                for wins, out in runs_raw:
                    merged = merge(wins, n)
                    lab = label_by_time(out) if how == "time" else label_by_function(exe)
                    runs.append([(lab(m), m) for m in merged])
                labs = Counter(l for run in runs for l, _ in run if l)
                ds = distances(runs, cfg)
                same = np.concatenate([ds["same_consecutive"], ds["same_cross"]])
                row = {"windows": dict(labs),
                       "same_p50": pct(same, 50), "same_p90": pct(same, 90), "same_p99": pct(same, 99),
                       "same_max": float(same.max()) if len(same) else float("nan"),
                       "same_consecutive_p90": pct(ds["same_consecutive"], 90),
                       "same_cross_p90": pct(ds["same_cross"], 90),
                       "diff_min": float(ds["diff"].min()) if len(ds["diff"]) else float("nan"),
                       "diff_p10": pct(ds["diff"], 10),
                       "split_at_0.10": float((same >= 0.10).mean()) if len(same) else float("nan"),
                       "same_mean": float(same.mean()) if len(same) else float("nan"),
                       "predicted_mean": float(ds["predicted"].mean())}
                report[name][k] = row
                if not a.json:
                    print(f"{name:22s} n={k:5d}  same: p50 {row['same_p50']:.3f} p90 {row['same_p90']:.3f} "
                          f"p99 {row['same_p99']:.3f} max {row['same_max']:.3f} (>=0.10: {100 * row['split_at_0.10']:.0f}%)"
                          f"  diff: min {row['diff_min']:.3f} p10 {row['diff_p10']:.3f}  windows {sum(labs.values())}"
                          f"  mean same {row['same_mean']:.3f} vs multinomial prediction {row['predicted_mean']:.3f}",
                          flush=True)
    # threshold(n) = base + c / sqrt(n): the smallest c that puts every same-phase p99 under it
    base = 0.10
    c = max((r["same_p99"] - base) * np.sqrt(k) for rows in report.values() for k, r in rows.items()
            if r["same_p99"] == r["same_p99"])
    # adaptive: threshold = base + z * predicted noise of the representative (multinomial, see above)
    z = max(r["same_p99"] / r["predicted_mean"] for rows in report.values() for r in rows.values())
    rule = {"base": base, "c": round(float(c), 2), "z": round(float(z), 2)}
    report["rule"] = rule
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"fixed rule covering p99 of same-phase pairs: threshold(n) = {base} + {rule['c']}/sqrt(n): "
              + ", ".join(f"n={k}: {base + rule['c'] / np.sqrt(k):.3f}" for k in SIZES))
        print(f"adaptive rule: threshold = {base} + {rule['z']} x expected multinomial L1 of the representative")


if __name__ == "__main__":
    main()
