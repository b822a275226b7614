#!/usr/bin/env python3
"""What phasescope costs beside the tools a user would pick instead, on the same programs in one run.

For each program (a CPU-bound C program, python3, sqlite3, cc1) and each observer, in interleaved
rounds (every configuration sees the same machine load), the minimum over ``--runs`` of:

* the target's own wall and CPU time, measured by ``/usr/bin/time`` wrapped directly around the
  program (so it is the program's time, whatever the observer does before or after it);
* the whole command's wall time and CPU (the observer's and the target's, from RUSAGE_CHILDREN);
* the observer's own CPU: the whole command's CPU minus the target's. It includes the observer's
  fixed start-up cost (phasescope's Python imports, perf's set-up). phasescope follows the program
  as ``/usr/bin/time``'s forked child, so its report names no hot block and capstone never loads:
  ``bench/observer_total.py`` measures it spawning the program itself. The CPU-bound program is also
  run short and long (``--steady``): the difference of the two, per second of the target, is the
  observer's steady-state cost, the figure the goals (1% / 3% of a core) are about.

Observers:
  native                       the program alone
  sampled N Hz                 ``phasescope --mode sampled --rate N --no-dashboard -o /dev/null -f ...``
  sampled N Hz (vs)            the same, from another tree (``--vs OTHER/host``): before and after a change
  perf record -F N [-g]        ``perf record -e cpu-clock -F N [-g] -o TMP -- ...`` (the event sampled mode
                               uses; perf's own data file, no report)
  exp-bbv                      ``valgrind --tool=exp-bbv`` (10M-instruction intervals; ``--bbv-runs``
                               runs, default 1: its slowdown is far above the machine's noise)
Exact mode and bare Stalker are timed by ``phasescope bench --json --no-valgrind`` (the target from
its resume to its exit, the same way for both): ``/usr/bin/time`` cannot sit between Frida and the
program, because exact mode follows the spawned process only, not a wrapper's child.

    python3 bench/peers.py [--runs 3] [--rates 1000,97] [--only NAME] [--no-exact] [--steady SHORT,LONG]
                           [--vs OTHER/host] [--json]

Needs perf (linux-perf), valgrind and root (or perf_event_paranoid <= 1) for perf record's and
sampled mode's CPU-clock events.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sampled_overhead import make_data, workloads  # noqa: E402  (the same system programs and inputs)


STEADY = "steady state"


def build_cpu_bound(tmp: str) -> str:
    exe = os.path.join(tmp, "cpu_bound")
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-o", exe, os.path.join(HERE, "cpu_bound.c")], check=True)
    return exe


def observers(rates, tmp: str, vs: str = "") -> dict:
    """Observer name -> a function of the target argv giving the full command (``vs``: a second
    phasescope tree, its host/ directory, run as "sampled N Hz (vs)" in the same rounds)."""
    trees = {"": [sys.executable]}
    if vs:
        trees[" (vs)"] = ["env", f"PYTHONPATH={os.path.abspath(vs)}", sys.executable]
    data = os.path.join(tmp, "perf.data")
    out = {"native": lambda argv: argv}
    for hz in rates:
        for tag, python in trees.items():
            out[f"sampled {hz} Hz{tag}"] = (lambda h, py: lambda argv: py + [
                "-m", "phasescope.cli", "--mode", "sampled", "--rate", str(h), "--no-dashboard", "-o", os.devnull,
                "-f", argv[0], "--", *argv[1:]])(hz, python)
        for g in ([], ["-g"]):
            out[" ".join(["perf record -F", str(hz), *g])] = (
                lambda h, g: lambda argv: ["perf", "record", "-q", "-e", "cpu-clock", *g, "-F", str(h), "-o", data,
                                           "--", *argv])(hz, g)
    # valgrind runs the program on its own CPU: /usr/bin/time must wrap valgrind, not sit under it
    out["exp-bbv"] = lambda argv: argv[:5] + ["valgrind", "-q", "--tool=exp-bbv", "--interval-size=10000000",
                                              f"--bb-out-file={tmp}/bb.out", "--pc-out-file=/dev/null", *argv[5:]]
    return out


def run_once(make, target: list, tmp: str) -> dict:
    """Run an observer around ``target`` wrapped in /usr/bin/time (5 words): the target's and the whole's times."""
    tfile = os.path.join(tmp, "time.out")
    full = make(["/usr/bin/time", "-f", "%e %U %S", "-o", tfile, *target])
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"peers: {' '.join(full)} exited with {p.returncode}: {p.stderr.decode(errors='replace')[-400:]}")
    with open(tfile) as f:
        e, u, s = (float(x) for x in f.read().split()[-3:])
    total = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return {"target_wall": e, "target_cpu": u + s, "wall": wall, "cpu": total, "observer_cpu": max(0.0, total - u - s)}


def measure(obs: dict, target: list, tmp: str, runs: int, bbv_runs: int) -> dict:
    """Observer name -> its runs, in interleaved rounds (exp-bbv only in the first ``bbv_runs``)."""
    out = {name: [] for name in obs}
    for i in range(runs):
        for name, make in obs.items():
            if name != "exp-bbv" or i < bbv_runs:
                out[name].append(run_once(make, target, tmp))
    return out


def best(runs: list) -> dict:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def steady_state(obs: dict, exe: str, rounds: tuple, tmp: str, runs: int) -> dict:
    """Observer name -> its CPU per second of the target once started, in % of a core: the
    difference between a long and a short run of the CPU-bound program (the fixed start-up cost
    cancels), and the fixed cost itself in seconds; also that extra CPU in seconds and as a share of
    the target's extra CPU (the figure a loaded machine leaves meaningful: wall time stretches
    with the load, the samples taken do not)."""
    short, long = (measure(obs, [exe, str(n)], tmp, runs, 0) for n in rounds)
    out = {}
    for name in obs:
        if name in ("native", "exp-bbv"):
            continue
        s, l = best(short[name]), best(long[name])
        extra = l["observer_cpu"] - s["observer_cpu"]
        per_s = extra / (l["target_wall"] - s["target_wall"])
        out[name] = {"per_second_pct": 100.0 * per_s, "fixed_s": s["observer_cpu"] - per_s * s["target_wall"],
                     "extra_cpu_s": extra, "of_target_cpu_pct": 100.0 * extra / (l["target_cpu"] - s["target_cpu"]),
                     "short_wall": s["target_wall"], "long_wall": l["target_wall"]}
    return out


def exact_and_bare(target: list, runs: int) -> dict:
    p = subprocess.run([sys.executable, "-m", "phasescope.cli", "bench", "--json", "--no-valgrind", "-r", str(runs),
                        "--", *target], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rates", default="1000,97", help="sample rates in Hz for sampled mode and perf record")
    ap.add_argument("--only", help=f"run only programs whose label contains this ('steady': only the {STEADY!r})")
    ap.add_argument("--no-exact", action="store_true", help="skip exact mode and bare Stalker")
    ap.add_argument("--bbv-runs", type=int, default=1, help="runs of valgrind exp-bbv (default 1; 0: none)")
    ap.add_argument("--rounds", type=int, default=25, help="rounds of bench/cpu_bound.c in the table (~3 s)")
    ap.add_argument("--steady", default="8,40", help="rounds of the short and long CPU-bound runs that give the "
                                                   "observers' steady-state CPU ('' to skip)")
    ap.add_argument("--vs", default="", help="another tree's host/ directory: its sampled mode too, in the same rounds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for tool in ("perf", "valgrind"):
        if not shutil.which(tool):
            sys.exit(f"peers: {tool} is not installed")
    rates = [int(x) for x in a.rates.split(",")]
    # An installed phasescope starts from cached bytecode. With PYTHONDONTWRITEBYTECODE set (this
    # machine's shell sets it) every run compiled ~115 modules again: about 0.2 s of CPU counted as
    # the observer's. Let the runs write and use the cache, and warm it once per tree.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for tree in ["", a.vs][:1 + bool(a.vs)]:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree)) if tree else None
        subprocess.run([sys.executable, "-m", "phasescope.cli", "--mode", "sampled", "--no-dashboard", "-o",
                        os.devnull, "-f", "/bin/true"], env=env, check=True, stderr=subprocess.DEVNULL)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        files = make_data(tmp)
        exe = build_cpu_bound(tmp)
        programs = [(f"cpu_bound.c -O2 ({a.rounds} rounds)", [exe, str(a.rounds)])] + [
            w for w in workloads(files, tmp) if not w[0].startswith(("bzip2", "xz"))]
        obs = observers(rates, tmp, a.vs)
        for label, target in programs:
            if a.only and a.only not in label:
                continue
            runs = measure(obs, target, tmp, a.runs, a.bbv_runs)
            native = {k: min(r[k] for r in runs["native"]) for k in ("target_wall", "target_cpu", "wall", "cpu")}
            row = {"program": label, "native": native, "observers": {}}
            for name in obs:
                if name == "native" or not runs[name]:  # exp-bbv with --bbv-runs 0
                    continue
                b = best(runs[name])
                row["observers"][name] = {
                    "target_slowdown": b["target_wall"] / native["target_wall"],
                    "target_cpu_ratio": b["target_cpu"] / native["target_cpu"],
                    "end_to_end": b["wall"] / native["wall"],
                    "observer_cpu_pct": 100.0 * b["observer_cpu"] / b["target_wall"]}
            if not a.no_exact:
                row["exact"] = exact_and_bare(target, a.runs)
            results.append(row)
            if not a.json:
                print(f"\n{label}: native {native['target_wall']:.2f} s")
                for name, r in row["observers"].items():
                    print(f"  {name:22s} target {r['target_slowdown']:.3f}x  cpu {r['target_cpu_ratio']:.3f}x  "
                          f"end-to-end {r['end_to_end']:.3f}x  observer {r['observer_cpu_pct']:.1f}% of a core",
                          flush=True)
                ratios = row.get("exact", {}).get("ratios")
                if ratios:
                    print(f"  {'bare Stalker':22s} target {ratios['bare']:.3f}x", flush=True)
                    print(f"  {'exact mode':22s} target {ratios['traced']:.3f}x  end-to-end {ratios['end-to-end']:.3f}x  "
                          f"traced/bare {ratios['traced/bare']:.3f}x", flush=True)
                elif "exact" in row:
                    print(f"  exact mode: {row['exact']['error']}", flush=True)
        if a.steady and (not a.only or a.only in STEADY):
            rounds = tuple(int(x) for x in a.steady.split(","))
            steady = steady_state({k: v for k, v in obs.items() if k != "exp-bbv"}, exe, rounds, tmp, a.runs)
            results.append({"steady_state": steady, "rounds": rounds})
            if not a.json:
                print(f"\n{STEADY} (cpu_bound.c, {rounds[0]} vs {rounds[1]} rounds): observer CPU per second "
                      "of the target, and its fixed cost")
                for name, r in steady.items():
                    print(f"  {name:22s} {r['per_second_pct']:5.2f}% of a core  fixed {r['fixed_s']:.3f} s CPU  "
                          f"extra {r['extra_cpu_s']:.3f} s = {r['of_target_cpu_pct']:.2f}% of the target's CPU  "
                          f"(target {r['short_wall']:.2f} s and {r['long_wall']:.2f} s)", flush=True)
    if a.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
