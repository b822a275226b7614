"""What ``phasescope -a`` costs, the three figures of issue 20:

1. phasescope's own CPU (user + system, from /proc) while N busy processes run, as a share of one
   core;
2. a CPU-bound program's time with ``-a`` running against without it, paired runs in one session
   (min of each);
3. phasescope's resident memory while 1,000 short-lived processes come and go (flat = bounded).

    python3 bench/system_wide.py [--busy 50] [--seconds 20] [--runs 3] [--short 1000]

Runs as root (CPU-wide events need perf_event_paranoid <= 0 or CAP_PERFMON).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: sum(i * i for i in range(1000))\n"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_monitor(*extra: str) -> subprocess.Popen:
    mon = subprocess.Popen([sys.executable, "-m", "phasescope.cli", "-a", "--no-dashboard", *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while "sampling" not in (mon.stderr.readline() or "sampling"):
        pass
    return mon


def stop_monitor(mon: subprocess.Popen) -> None:
    mon.send_signal(2)
    mon.communicate(timeout=120)


def own_cpu(busy: int, seconds: float) -> float:
    """phasescope's CPU share of one core while ``busy`` python3 processes spin."""
    mon = start_monitor()
    procs = [subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)]) for _ in range(busy)]
    time.sleep(1.0)
    c0, t0 = cpu_seconds(mon.pid), time.monotonic()
    for p in procs:
        p.wait()
    c1, t1 = cpu_seconds(mon.pid), time.monotonic()
    stop_monitor(mon)
    return (c1 - c0) / (t1 - t0)


def slowdown(exe: str, arg: str, runs: int) -> tuple:
    """(min native seconds, min seconds with -a running), interleaved runs."""
    native, traced = [], []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([exe, arg], check=True, stdout=subprocess.DEVNULL)
        native.append(time.perf_counter() - t)
        mon = start_monitor()
        t = time.perf_counter()
        subprocess.run([exe, arg], check=True, stdout=subprocess.DEVNULL)
        traced.append(time.perf_counter() - t)
        stop_monitor(mon)
    return min(native), min(traced)


def short_lived(count: int) -> list:
    """phasescope's RSS (MiB) after each fifth of ``count`` short-lived processes."""
    mon = start_monitor()
    marks = []
    for i in range(count):
        subprocess.run(["/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done"], check=True)
        if (i + 1) % (count // 5) == 0:
            time.sleep(0.3)
            marks.append(rss_mib(mon.pid))
    stop_monitor(mon)
    return marks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--short", type=int, default=1000)
    ap.add_argument("--parts", default="cpu,slowdown,memory", help="which figures (default all three)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "sampled_two")
        subprocess.run(["cc", "-O2", "-o", exe, str(HERE.parent / "tests/programs/sampled_two.c")], check=True)
        if "cpu" in parts:
            share = own_cpu(args.busy, args.seconds)
            print(f"phasescope's own CPU with {args.busy} busy processes: {100 * share:.1f}% of one core", flush=True)
        if "slowdown" in parts:
            native, traced = slowdown(exe, "800000000", args.runs)
            print(f"sampled_two 800M: native {native:.3f} s, with -a {traced:.3f} s: {traced / native:.3f}x "
                  f"(min of {args.runs})", flush=True)
        if "memory" in parts:
            marks = short_lived(args.short)
            print(f"RSS after each fifth of {args.short} short-lived processes (MiB): "
                  + ", ".join(f"{m:.1f}" for m in marks), flush=True)


if __name__ == "__main__":
    main()
