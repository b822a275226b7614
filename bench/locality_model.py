"""How well ``phasescope locality-model`` predicts miss rates for inputs never run (issue 21).

For each kernel of bench/locality_kernels.c (a matrix multiply, a hash table, a binary search tree,
a stencil): three training runs on small inputs (``--locality --phase-db --input-size``), then
held-out runs 8x and 32x larger than the largest training input, measured with windows of 2M
accesses (so that they see caches up to 8 MiB themselves). The model fitted on the training runs
predicts each held-out size; the table gives, for each main phase of the held-out run (10% of its
instructions or more), the largest difference between predicted and measured miss rate over the
cache sizes 32 KiB - 8 MiB that the held-out windows measured exactly (where a window never fills a
cache, its estimate is an upper bound: left out, and the count of sizes compared says so). Phases
are named by the function of their hottest block (nm, from the block's key).

Truth on small cases (``--trace``, needs valgrind): the kernel at a size between the training sizes
(1.06 MiB, not one of them; a shorter run) under ``valgrind --tool=lackey --trace-mem=yes``: every load
and store of the whole process, their exact reuse distances over the full trace, kept for the
kernel function's accesses; against it, the model's prediction for that size and phasescope's own
windowed measurement of the same run (at the cache sizes its windows measure exactly).

    python3 bench/locality_model.py [--kernels matrix,hash,tree,stencil] [--dir DIR] [--trace]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KIB, MIB = 1 << 10, 1 << 20
CHECK = [1 << s for s in range(15, 24)]  # 32 KiB .. 8 MiB

# kernel -> (bytes of data for an argument, training arguments, held-out arguments, kernel function)
KERNELS = {
    "matrix": (lambda n: 24 * n * n, (128, 181, 256), (724, 1448), "matrix_multiply"),
    "hash": (lambda s: 16 * s, (24576, 49152, 98304), (786432, 3145728), "hash_lookup"),
    "tree": (lambda n: 32 * n, (12288, 24576, 49152), (393216, 1572864), "tree_lookup"),
    "stencil": (lambda n: 16 * n * n, (160, 226, 320), (905, 1810), "stencil_sweeps"),
}
TRAIN_EVERY = ("--locality-every", "2")  # short kernels: a window every other interval
HELD_OUT_OPTIONS = ("--locality", "--locality-window", "2097152", "--locality-every", "2")


def phasescope(*args, timeout=900) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "phasescope.cli", *args], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"phasescope {' '.join(args)}: exit {r.returncode}: {r.stderr[-500:]}")
    return r


def traced(exe: str, kernel: str, arg: int, db: Path, size: int, options, summary: Path, *extra) -> dict:
    phasescope(*options, "--no-dashboard", "--phase-db", str(db), "--input-size", str(size), "--summary",
               str(summary), "-f", exe, kernel, str(arg), *extra)
    return json.loads(summary.read_text())


def functions(exe: str) -> list:
    """[(start, end, name)] of the functions in ``exe`` (nm)."""
    out = subprocess.run(["nm", "-S", "--defined-only", exe], capture_output=True, text=True, check=True).stdout
    return [(int(p[0], 16), int(p[0], 16) + int(p[1], 16), p[3]) for p in (l.split() for l in out.splitlines())
            if len(p) == 4 and p[2] in "tT"]


def hottest_function(exe: str, phase: dict) -> str:
    """The function of the phase's hottest block (a stable key's low 32 bits are its offset in the module)."""
    offset = phase["top_code"][0]["key"] & 0xFFFFFFFF
    return next((name for lo, hi, name in functions(exe) if lo <= offset < hi), hex(offset))


def exact_curve(phase: dict) -> dict:
    """The phase's measured miss rates where its windows measured them exactly (a window that never fills a
    cache counts its first uses as misses: an upper bound, left out)."""
    exact = {b for b, u in phase["locality"]["uncertainty"] if u <= 0.005}
    return {b: r for b, r in phase["locality"]["miss_rate_curve"] if b in exact}


def max_error(predicted: dict, measured: dict):
    """(largest |predicted - measured| over CHECK where measured, how many sizes were measured)."""
    diffs = [abs(predicted[c] - measured[c]) for c in CHECK if measured.get(c) is not None]
    return (max(diffs) if diffs else None), len(diffs)


def held_out(exe: str, kernel: str, work: Path, train_window: int) -> list:
    """Rows of the held-out table for one kernel."""
    size_of, train, held, _ = KERNELS[kernel]
    db = work / f"{kernel}.db.json"
    for arg in train:
        traced(exe, kernel, arg, db, size_of(arg), ("--locality", "--locality-window", str(train_window), *TRAIN_EVERY),
               work / f"{kernel}-{arg}.json")
    rows = []
    for arg in held:
        size = size_of(arg)
        copy = work / f"{kernel}-{arg}.db.json"
        shutil.copy(db, copy)  # the held-out run gets the same phase IDs, and the training DB stays as it was
        s = traced(exe, kernel, arg, copy, size, HELD_OUT_OPTIONS, work / f"{kernel}-{arg}.json")
        model = json.loads(phasescope("locality-model", str(db), "--predict", str(size), "--json").stdout)
        full = {p["phase"]: p for p in json.loads(phasescope("locality-model", str(db), "--json").stdout)["phases"]}
        predicted = {p["phase"]: dict(p["miss_rate_curve"]) for p in model["phases"]}
        for p in s["phases"]:
            if p["share"] < 0.10:
                continue
            sym = hottest_function(exe, p)
            if p["phase"] not in predicted:
                rows.append({"kernel": kernel, "phase": p["phase"], "symbol": sym, "held_out": size,
                             "times": size / size_of(train[-1]), "error": None, "measured": 0,
                             "note": "not modelled (no training runs of this phase)"})
                continue
            err, n = max_error(predicted[p["phase"]], exact_curve(p))
            pats = full[p["phase"]]["patterns"]
            rows.append({"kernel": kernel, "phase": p["phase"], "symbol": sym, "held_out": size,
                         "times": size / size_of(train[-1]), "error": err, "measured": n,
                         "share": p["share"], "patterns": {k: v for k, v in pats.items() if v >= 0.01},
                         "confidence": full[p["phase"]]["confidence"]["level"],
                         "predicted": [round(predicted[p["phase"]][c], 3) for c in CHECK],
                         "measured_curve": [None if m is None else round(m, 3)
                                            for m in (exact_curve(p).get(c) for c in CHECK)]})
    return rows


# -- truth on small cases: valgrind lackey's full trace ----------------------------------------------


def function_range(exe: str, name: str):
    """(start, end) of the function ``name`` (or a compiler clone of it, name.constprop.0) in ``exe``."""
    for lo, hi, fn in functions(exe):
        if re.fullmatch(rf"{re.escape(name)}(\..*)?", fn):
            return lo, hi
    raise SystemExit(f"{exe}: no function {name}")


def full_trace_curve(exe: str, kernel: str, arg: int, work_steps: int, function: str, work: Path):
    """Exact LRU miss rates (CHECK sizes) of ``function``'s accesses over the whole run's full trace."""
    from phasescope.engine.locality import BLOCK_SHIFT, exact_miss_rates, reuse_distances
    log = work / f"{kernel}-{arg}.lackey"
    subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", exe, kernel, str(arg),
                    str(work_steps)], check=True, capture_output=True)
    lo, hi = function_range(exe, function)
    addrs, mine, pc = [], [], 0
    with open(log) as f:
        for line in f:
            if line.startswith("I"):
                pc = int(line[3:line.index(",")], 16)
            elif line.startswith(" ") and line[1] in "LSM":
                addrs.append(int(line[3:line.index(",")], 16))
                mine.append(lo <= pc < hi)
    os.unlink(log)
    blocks = np.array(addrs, np.uint64) >> np.uint64(BLOCK_SHIFT)
    d = reuse_distances(blocks)[np.array(mine)]
    return dict(zip(CHECK, exact_miss_rates(d, [c >> BLOCK_SHIFT for c in CHECK]))), int(len(d))


def small_truth(exe: str, exe_nopie: str, kernel: str, work: Path) -> dict:
    size_of, train, _, function = KERNELS[kernel]
    arg = {"matrix": 215, "hash": 69632, "tree": 34816, "stencil": 264}[kernel]  # 1.06 MiB: between training sizes
    steps = 3_000_000
    exact, n = full_trace_curve(exe_nopie, kernel, arg, steps, function, work)
    size = size_of(arg)
    db = work / f"{kernel}.db.json"
    model = json.loads(phasescope("locality-model", str(db), "--predict", str(size), "--json").stdout)
    copy = work / f"{kernel}-small.db.json"
    shutil.copy(db, copy)
    s = traced(exe, kernel, arg, copy, size, ("--locality", "--locality-every", "1"), work / f"{kernel}-small.json",
               str(steps))
    main = max((p for p in s["phases"] if hottest_function(exe, p).startswith(function)),
               key=lambda p: p["share"], default=None)
    if main is None:
        return {"kernel": kernel, "size": size, "accesses": n, "note": "the kernel's phase not named in the summary"}
    pred = next((dict(p["miss_rate_curve"]) for p in model["phases"] if p["phase"] == main["phase"]), None)
    windows = exact_curve(main)
    return {"kernel": kernel, "size": size, "accesses": n,
            "model_error": None if pred is None else max(abs(pred[c] - exact[c]) for c in CHECK),
            "windows_error": max_error(exact, windows)[0],
            "exact": [round(float(exact[c]), 3) for c in CHECK],
            "model": None if pred is None else [round(pred[c], 3) for c in CHECK]}


def critical_check(exe: str, kernel: str, work: Path, caches=(32 * KIB, 64 * KIB)) -> list:
    """Predicted critical input sizes of the kernel's main phase against where the measured miss rate
    jumps: measured runs at sizes 2^(1/4) apart around each prediction; the jump lies between the
    two runs where the measured rate passes half-way between its values at the ends of the sweep."""
    size_of, train, _, function = KERNELS[kernel]
    db = work / f"{kernel}.db.json"
    model = json.loads(phasescope("locality-model", str(db), "--caches", ",".join(str(c) for c in caches),
                                  "--json").stdout)
    main = model["phases"][0]
    out = []
    for crit in main["critical"]:
        if crit["to"] - crit["from"] < 0.2:
            continue  # a small jump: not one a sweep locates
        arg_of = {"matrix": lambda b: round((b / 24) ** 0.5), "hash": lambda b: b // 16, "tree": lambda b: b // 32,
                  "stencil": lambda b: round((b / 16) ** 0.5)}[kernel]
        sizes = [crit["input_size"] * 2 ** (k / 4) for k in range(-6, 7)]
        rates = []
        for b in sizes:
            arg = arg_of(b)
            copy = work / f"{kernel}-crit.db.json"
            shutil.copy(db, copy)
            s = traced(exe, kernel, arg, copy, size_of(arg), ("--locality", "--locality-every", "2"),
                       work / f"{kernel}-crit-{arg}.json")
            p = next((p for p in s["phases"] if p["phase"] == main["phase"]), None)
            rates.append(None if p is None else exact_curve(p).get(crit["cache_bytes"]))
        pts = [(size_of(arg_of(b)), r) for b, r in zip(sizes, rates) if r is not None]
        lo, hi = pts[0][1], pts[-1][1]
        at = next((i for i, (_, r) in enumerate(pts) if r >= (lo + hi) / 2), None)
        between = None if not at else (pts[at - 1][0], pts[at][0])  # the measured jump lies in here
        factor = None if between is None else max(crit["input_size"] / between[0], between[1] / crit["input_size"], 1)
        out.append({"kernel": kernel, "cache_bytes": crit["cache_bytes"], "predicted": crit["input_size"],
                    "measured": between, "factor": factor, "from": lo, "to": hi, "sweep": pts})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--dir", help="keep the databases, summaries and results here (default: a temporary directory)")
    ap.add_argument("--trace", action="store_true", help="also the full-trace truth on small cases (valgrind)")
    ap.add_argument("--critical", action="store_true",
                    help="also check the matrix kernel's critical input sizes (32 and 64 KiB caches) against sweeps")
    ap.add_argument("--train-window", type=int, default=65536,
                    help="--locality-window of the training runs (default 65536, phasescope's)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="locality-model-"))
    work.mkdir(parents=True, exist_ok=True)
    exe, exe_nopie = str(work / "locality_kernels"), str(work / "locality_kernels_nopie")
    subprocess.run(["cc", "-O2", "-g", "-o", exe, str(HERE / "locality_kernels.c")], check=True)
    subprocess.run(["cc", "-O2", "-g", "-no-pie", "-o", exe_nopie, str(HERE / "locality_kernels.c")], check=True)
    rows, truths = [], []
    for kernel in args.kernels.split(","):
        rows += held_out(exe, kernel, work, args.train_window)
        if args.trace:
            truths.append(small_truth(exe, exe_nopie, kernel, work))
    crits = critical_check(exe, "matrix", work) if args.critical and "matrix" in args.kernels.split(",") else []
    (work / "results.json").write_text(json.dumps({"held_out": rows, "full_trace": truths, "critical": crits},
                                                  indent=1))
    print("| kernel | phase (hottest code) | held-out input | x largest training | max error, 32 KiB-8 MiB | sizes measured | patterns | confidence |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        err = "-" if r["error"] is None else f"{100 * r['error']:.1f} points"
        pats = ", ".join(f"{k} {100 * v:.0f}%" for k, v in r.get("patterns", {}).items())
        print(f"| {r['kernel']} | P{r['phase']} {r['symbol']} | {r['held_out'] / MIB:.1f} MiB | {r['times']:.0f}x | "
              f"{err} | {r['measured']} | {pats or r.get('note', '')} | {r.get('confidence', '-')} |")
    if truths:
        print()
        print("| kernel | input | kernel accesses (full trace) | model vs full trace | windows vs full trace |")
        print("| --- | --- | --- | --- | --- |")
        for t in truths:
            f = lambda x: "-" if x is None else f"{100 * x:.1f} points"
            print(f"| {t['kernel']} | {t['size'] / KIB:.0f} KiB | {t['accesses']:,} | {f(t.get('model_error'))} | "
                  f"{f(t.get('windows_error'))} |")
    if crits:
        print()
        print("| kernel | cache | predicted critical input size | measured jump (half-way) between | within a factor of | measured rates |")
        print("| --- | --- | --- | --- | --- | --- |")
        for c in crits:
            measured = "-" if c["measured"] is None else f"{c['measured'][0] / MIB:.2f} and {c['measured'][1] / MIB:.2f} MiB"
            ratio = "-" if c["factor"] is None else f"{c['factor']:.2f}"
            print(f"| {c['kernel']} | {c['cache_bytes'] // KIB} KiB | {c['predicted'] / MIB:.2f} MiB | {measured} | "
                  f"{ratio} | {100 * c['from']:.0f}% -> {100 * c['to']:.0f}% |")
    print(f"\n(details: {work / 'results.json'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
