#!/usr/bin/env python3
"""Follows the threads of tests/programs/follow_points.c at random points and counts what comes out
wrong (issue 32): blocked syscalls that fail instead of restarting, a red zone, vector registers,
MXCSR, the direction flag, the signal mask, a checksum. Natively every count is 0.

    python3 bench/follow_points.py [--runs N] [--mode bare|bare-attach|phasescope|phasescope-attach|ptrace]
                                   [--late MS] [--no-transform] [--generations G] [--ms MS]

bare: Frida spawns the program and Stalker follows each thread a random 0..--late ms after it
appears (the JVM's case: phasescope follows its threads late); the main thread, which Frida's spawn
holds stopped, cannot be followed so (Stalker.follow fails silently) and runs native. bare-attach: the program starts on
its own, Frida attaches 200 ms in and follows every thread at once, new ones late as above.
phasescope(-attach): the same through phasescope's CLI (-f, or -p). ptrace: no Stalker, a
random thread stopped and let go every --late ms. Prints per run the kinds that went wrong, then a
total; a run that printed no result (hung or died) is marked.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "tests", "programs", "follow_points.c")

SCRIPT = """
const late = %(late)d, withTransform = %(transform)s;
const options = withTransform ? { transform(it) { while (it.next() !== null) it.keep(); } } : {};
const seen = new Set();
function follow(id) {
  if (seen.has(id)) return;
  seen.add(id);
  setTimeout(() => { try { Stalker.follow(id, options); } catch (e) {} }, Math.random() * late);
}
Process.attachThreadObserver({ onAdded(t) { follow(t.id); } });
rpc.exports.followAll = () => { Process.enumerateThreads().forEach(t => follow(t.id)); };
"""


def build(out_dir: str) -> str:
    exe = os.path.join(out_dir, "follow_points")
    subprocess.run(["cc", "-O1", "-g", "-o", exe, SOURCE, "-lpthread"], check=True, timeout=120)
    return exe


def wrong_kinds(stdout: str) -> dict:
    """{kind: count} of the program's "kind wrong N" lines with N > 0."""
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "wrong" and int(parts[2]) > 0:
            found[parts[0]] = int(parts[2])
    return found


def run_bare(argv, late: int, transform: bool, attach: bool) -> str:
    import frida
    device = frida.get_local_device()
    code = SCRIPT % {"late": late, "transform": "true" if transform else "false"}
    with tempfile.TemporaryFile() as out:
        if attach:
            proc = subprocess.Popen(argv, stdout=out)
            time.sleep(0.2)
            session = device.attach(proc.pid)
            script = session.create_script(code)
            script.load()
            script.exports_sync.follow_all()
            proc.wait(timeout=600)
        else:
            # spawned by Frida: its stdout is ours, so read it through a pipe of a shell-less wrapper
            pid = device.spawn(argv, stdio="pipe")
            chunks, gone = [], threading.Event()
            device.on("output", lambda p, fd, data: chunks.append(data) if p == pid and fd == 1 else None)
            session = device.attach(pid)
            session.on("detached", lambda *_: gone.set())
            script = session.create_script(code)
            script.load()
            device.resume(pid)
            if not gone.wait(180):
                device.kill(pid)
            time.sleep(0.3)
            return b"".join(chunks).decode(errors="replace")
        out.seek(0)
        return out.read().decode(errors="replace")


def run_ptrace(argv, every_ms: int) -> str:
    """No Stalker: a random thread is stopped with PTRACE_ATTACH and let go, as Frida stops a thread to
    follow it, every EVERY_MS ms: what a stop alone does (epoll_wait's EINTR is documented in signal(7))."""
    import ctypes
    import random
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    status = ctypes.c_int()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out)
        while proc.poll() is None:
            time.sleep(every_ms / 1000)
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
            except FileNotFoundError:
                break
            tid = random.choice(tids)
            if libc.ptrace(16, tid, None, None) == 0:  # PTRACE_ATTACH
                libc.waitpid(tid, ctypes.byref(status), 0x40000000)  # __WALL
                libc.ptrace(17, tid, None, ctypes.c_void_p(18))  # PTRACE_DETACH, SIGCONT as Frida does
        proc.wait(timeout=600)
        out.seek(0)
        return out.read().decode(errors="replace")


def run_phasescope(argv, attach: bool) -> str:
    cli = [sys.executable, "-m", "phasescope.cli", "--no-dashboard"]
    if not attach:
        return subprocess.run(cli + ["-f", argv[0], "--", *argv[1:]], capture_output=True, text=True,
                              timeout=600).stdout
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out)
        time.sleep(0.2)
        ps = subprocess.Popen(cli + ["-p", str(proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.wait(timeout=600)
        ps.wait(timeout=60)
        out.seek(0)
        return out.read().decode(errors="replace")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mode", choices=("bare", "bare-attach", "phasescope", "phasescope-attach", "ptrace"),
                    default="bare")
    ap.add_argument("--late", type=int, default=50, help="follow new threads 0..LATE ms after they appear")
    ap.add_argument("--no-transform", action="store_true", help="bare: Stalker with no transform callback")
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--ms", type=int, default=150, help="each generation's life")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exe = build(d)
        argv = [exe, str(args.generations), str(args.ms)]
        native = wrong_kinds(subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout)
        print(f"native: {native or 'nothing wrong'}")
        total, right = {}, 0
        for i in range(args.runs):
            if args.mode == "ptrace":
                out = run_ptrace(argv, args.late)
            elif args.mode.startswith("bare"):
                out = run_bare(argv, args.late, not args.no_transform, args.mode == "bare-attach")
            else:
                out = run_phasescope(argv, args.mode == "phasescope-attach")
            finished = out.count(" wrong ") == 12
            found = wrong_kinds(out)
            right += finished and not found
            for k, v in found.items():
                total[k] = total.get(k, 0) + v
            print(f"run {i + 1}: {found or 'nothing wrong'}{'' if finished else ' (did not finish)'}", flush=True)
        print(f"{args.mode}: right {right} of {args.runs}; wrong by kind {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
