#!/usr/bin/env python3
"""Stress loops for a target's life around phasescope (issue 26), too long for CI; each runs under
CPU hogs (busy shells) on tests/programs/workers3.c, a 3-thread target:

    python3 bench/lifecycle.py stopped [--tries 100] [--hogs 3]
        attach, then SIGSTOP the target before the detach, during it (0-190 ms in), or the moment
        Frida's helper holds its main thread (in turn), then SIGKILL it while stopped: counts targets
        not reapable within 15 s and Frida helpers left tracing them (goal: 0 leftovers), and
        targets not left stopped
    python3 bench/lifecycle.py forks [--forks 500] [--hogs 3]
        exact mode on ``workers3 fork N``: a forked child that hangs hangs the run (goal: 0 hangs)
    python3 bench/lifecycle.py cycles [--cycles 300] [--mode exact|sampled] [--hogs 3]
        attach for 0.5 s and detach, again and again, on one target (goal: 0 target deaths)
    python3 bench/lifecycle.py blocked [--tries 20] [--hogs 3]
        exact mode spawns, or attaches to (in turn), tests/programs/robust.c ``churn 2 50 20000
        wait``: it runs its threads traced, then blocks reading stdin when ``--duration`` detaches;
        then it is sent its last line. Counts detaches that could not unload the agent (Stalker frees a thread's code only
        once the thread is back from its system call), targets that did not end or whose output
        differs, and agents still loaded after the target's thread came back (goal: 0 of the last two)

Prints one line per failure and a last line with the counts; exit status 0 when there are none.
Run as root (Frida and perf attach), from the repository with phasescope installed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

from phasescope.sources.stopped import is_stopped, maps_agent, stuck_helpers, tracer  # noqa: E402

PHASESCOPE = [sys.executable, "-m", "phasescope.cli", "--no-dashboard"]


def build(out_dir: str) -> str:
    exe = os.path.join(out_dir, "workers3")
    subprocess.run(["cc", "-O1", "-g", "-pthread", "-o", exe, str(ROOT / "tests/programs/workers3.c")], check=True)
    return exe


@contextmanager
def hogs(n: int):
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def start_target(exe: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # "ready PID"
    return proc


def wait_lines(path: str, n: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path, "rb") as f:
                if f.read().count(b"\n") >= n:
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    return False


def finish(proc: subprocess.Popen, timeout: float) -> bool:
    """Kill and reap ``proc``; False if it could not be reaped in time."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def stopped(exe: str, tries: int, tmp: str) -> int:
    failures = running = 0
    for i in range(tries):
        if i % 10 == 0:
            print(f"try {i}: {failures} leftovers so far", flush=True)
        when = ("during", "before", "helper")[i % 3]
        target = start_target(exe, "tick")
        log = os.path.join(tmp, "log.jsonl")
        if os.path.exists(log):
            os.unlink(log)
        mon = subprocess.Popen(PHASESCOPE + ["--interval", "1000000", "--log", log, "-p", str(target.pid)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_lines(log, 3, 60)
        if when == "before":
            os.kill(target.pid, signal.SIGSTOP)
            mon.send_signal(signal.SIGINT)
        elif when == "during":
            mon.send_signal(signal.SIGINT)
            time.sleep(0.01 * (i % 20))  # somewhere inside the detach
            os.kill(target.pid, signal.SIGSTOP)
        else:
            mon.send_signal(signal.SIGINT)
            end = time.monotonic() + 30
            while not tracer(f"/proc/{target.pid}/status") and time.monotonic() < end:
                pass
            os.kill(target.pid, signal.SIGSTOP)
        try:
            _, err = mon.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            err = "phasescope did not end in 90 s"
            finish(mon, 10)
        time.sleep(0.2)
        state = "stopped" if is_stopped(target.pid) else "RUNNING"
        helpers = stuck_helpers(target.pid)
        reaped = finish(target, 15)
        running += state != "stopped"
        if not reaped or helpers or state != "stopped":
            failures += not reaped or bool(helpers)
            print(f"try {i} ({when}): target {state}, reaped={reaped}, helpers={helpers}; "
                  f"phasescope: {err.strip().splitlines()[-1:] if err.strip() else ''}", flush=True)
            for h in stuck_helpers(target.pid):
                os.kill(h, signal.SIGKILL)
            finish(target, 5)
    print(f"stopped: {failures} leftovers in {tries} tries ({running} left running: the agent did not unload "
          "in time, or the target was not seen stopped)")
    return failures


def forks(exe: str, n: int) -> int:
    r = subprocess.run(PHASESCOPE + ["-f", exe, "fork", str(n)], capture_output=True, text=True,
                       timeout=max(600, n))
    ok = r.returncode == 0 and f"forks {n}" in r.stdout
    print(f"forks: {'0 hangs' if ok else 'HANG or failure'} in {n} forks "
          f"(exit {r.returncode}; {r.stderr.strip().splitlines()[-1:]})")
    return 0 if ok else 1


def cycles(exe: str, n: int, mode: str) -> int:
    target = start_target(exe, "tick")
    failures = 0
    try:
        for i in range(n):
            if i % 10 == 0:
                print(f"cycle {i}: {failures} failures so far", flush=True)
            r = subprocess.run(PHASESCOPE + ["--mode", mode, "--duration", "0.5", "-p", str(target.pid)],
                               capture_output=True, text=True, timeout=120)
            if target.poll() is not None:
                print(f"cycle {i}: target died ({target.returncode}); {r.stderr.strip().splitlines()[-1:]}")
                return 1
            if r.returncode != 0:
                failures += 1
                print(f"cycle {i}: exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}", flush=True)
    finally:
        finish(target, 15)
    print(f"cycles ({mode}): 0 target deaths in {n} cycles, {failures} runs with a non-zero exit")
    return failures


def blocked(exe: str, tries: int) -> int:
    failures = stuck = 0
    for i in range(tries):
        how = ("spawn", "attach")[i % 2]
        started = time.monotonic()
        args = [exe, "churn", "2", "50", "20000", "wait"]
        # phasescope's stderr to a file: a spawned target shares its stdio, so the pipes would not
        # end before the target does (which waits for our last line), and closing its stdin would
        # end the target's wait at once (EOF) instead of leaving it blocked
        errors = tempfile.TemporaryFile(mode="w+")
        if how == "spawn":
            mon = subprocess.Popen(PHASESCOPE + ["--duration", "3", "-f", *args], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=errors, text=True)
            target = mon
        else:
            target = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        pid = int(target.stdout.readline().split()[1])  # "ready PID"
        if how == "attach":
            mon = subprocess.Popen(PHASESCOPE + ["--duration", "3", "-p", str(pid)], stdout=subprocess.DEVNULL,
                                   stderr=errors, text=True)
            time.sleep(1.5)  # attached
        target.stdin.write("go\n")
        target.stdin.flush()
        out = [target.stdout.readline() for _ in range(3)]  # round 1, round 2, churn ... total
        done = target.stdout.readline()
        try:
            mon.wait(timeout=60)  # the detach at --duration; the target reads stdin meanwhile
            late = ""
        except subprocess.TimeoutExpired:
            late = "; phasescope did not end in 60 s"
            finish(mon, 10)
        errors.seek(0)
        err = errors.read() + late
        errors.close()
        detach_s = time.monotonic() - started
        was_stuck = "could not be unloaded" in err
        stuck += was_stuck
        loaded = maps_agent(pid)
        try:
            with open(f"/proc/{pid}/fd/0", "w") as stdin:  # the target's own stdin
                stdin.write("quit\n")
        except OSError as e:
            err += f"; stdin: {e}"
        end = time.monotonic() + 20
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        ended = not alive(pid)
        right = done == "done\n" and out[2].startswith("churn 100 threads total")
        if not ended:
            print(f"try {i} ({how}): the target did not end 20 s after its last line (agent loaded: "
                  f"{maps_agent(pid)})", flush=True)
            os.kill(pid, signal.SIGKILL)
        if how == "attach":
            target.wait(timeout=10)
        target.stdin.close()
        target.stdout.close()
        if not ended or not right:
            failures += 1
            print(f"try {i} ({how}): ended={ended} right={right} {out + [done]!r}; {err.strip().splitlines()[-1:]}",
                  flush=True)
        else:
            print(f"try {i} ({how}): phasescope ended {detach_s:.1f} s after the start, the unload "
                  f"{'stuck' if was_stuck else 'clean'}, agent loaded after: {loaded}; the target ended{late}", flush=True)
    print(f"blocked: {stuck} of {tries} detaches left the agent loaded until the thread came back; "
          f"{failures} targets that did not end right")
    return failures


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("loop", choices=["stopped", "forks", "cycles", "blocked"])
    ap.add_argument("--tries", type=int, default=100)
    ap.add_argument("--forks", type=int, default=500)
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--mode", choices=["exact", "sampled"], default="exact")
    ap.add_argument("--hogs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, hogs(args.hogs):
        if args.loop == "blocked":
            robust = os.path.join(tmp, "robust")
            subprocess.run(["cc", "-O1", "-pthread", "-o", robust, str(ROOT / "tests/programs/robust.c")], check=True)
            return 1 if blocked(robust, args.tries) else 0
        exe = build(tmp)
        if args.loop == "stopped":
            return 1 if stopped(exe, args.tries, tmp) else 0
        if args.loop == "forks":
            return forks(exe, args.forks)
        return 1 if cycles(exe, args.cycles, args.mode) else 0


if __name__ == "__main__":
    sys.exit(main())
