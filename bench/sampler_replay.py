#!/usr/bin/env python3
"""The sampler's own work per sample, without the machine's noise: the rings of a real sampled run
are recorded once, then replayed through :class:`~phasescope.sources.sampler.Sampler`'s reading
and window cutting (parse, windows, stacks, keys, names) and timed in CPU time. The windows'
digest says whether two trees make the same windows of the same bytes.

    python3 bench/sampler_replay.py capture OUT.pkl [--no-stacks --wake-every 1 --poll 1.5] -- PROGRAM [ARGS]
                                         (needs perf_event access; those options: as a live run without --log)
    python3 bench/sampler_replay.py replay OUT.pkl [...] [--reps 6] [--no-stacks] [--engine] [--vs OTHER/host]

``replay`` prints, per recording, the samples, windows, the minimum CPU time over ``--reps``
replays (ELF symbol tables read once before: a fixed cost, not a per-sample one), per sample, and
the digest; ``--vs`` replays with another tree too (its ``host/``), alternating, in one run.
``--no-stacks`` reads leaf IPs only (a run without ``--log`` or ``--profile``); ``--engine`` also
feeds the windows to the live engine (sampled preset) and prints its CPU a window and a digest of
its results, which must not change when only the cost does.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
import time


class Recorded:
    """A ring that gives back what was read from the real one, one read at a time."""

    def __init__(self, fd: int):
        self.fd, self.chunks = fd, []

    def read(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def close(self) -> None:
        pass


def capture(out: str, argv: list, stacks: bool = True, wake_every: float = 0.0, poll: float = 0.2) -> None:
    from phasescope.sources.procfs import module_map_from_proc
    from phasescope.sources.sampler import Sampler
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    s = Sampler(p.pid, stacks=stacks, wake_every=wake_every).start()
    reads, modules = [], None  # (cpu, bytes) per ring read, None at each poll's end
    for cpu, ring in s._rings.items():
        def read(real=ring.read, cpu=cpu):
            data = real()
            reads.append((cpu, data))
            return data
        ring.read = read
    while p.poll() is None:
        s.poll(poll)
        reads.append(None)
        try:
            modules = module_map_from_proc(p.pid) or modules
        except OSError:
            pass
    s.stop()
    with open(out, "wb") as f:
        pickle.dump({"pid": p.pid, "id_tid": s._id_tid, "own": s._own, "reads": reads, "modules": modules}, f)
    print(f"{out}: {s.samples} samples, {sum(1 for r in reads if r)} ring reads")


def replay_once(rec: dict, names=None, stacks: bool = True):
    from phasescope.sources.sampler import Sampler
    s = Sampler(rec["pid"], modules=rec["modules"], stacks=stacks)
    s._names = names or s._names
    s._started, s._id_tid, s._own = True, dict(rec["id_tid"]), set(rec["own"])
    s._last_scan = float("inf")  # no /proc fallback for lost EXIT records: the recorded pid is long gone
    # (under load a replay outlasting 1 s would end its thread early and cut a window short)
    s._rings = {r[0]: Recorded(-1 - r[0]) for r in rec["reads"] if r}
    windows = []
    t0 = time.process_time()
    for r in rec["reads"]:
        if r is None:
            windows += s.poll(0)
        else:
            s._rings[r[0]].chunks.append(r[1])
    windows += s.stop()
    return time.process_time() - t0, s, windows


def digest(windows) -> str:
    h = hashlib.sha256()
    for w in windows:
        h.update(repr((w.thread, w.seq, w.keys.tolist(), w.counts.tolist(), w.pcs.tolist(), w.start_ns, w.end_ns,
                       w.partial, w.samples, w.stacks, sorted((w.frames or {}).items()))).encode())
    return h.hexdigest()[:16]


def engine_once(windows, together: int = 1):
    """The live engine's CPU time over ``windows`` (the sampled preset, as ``--mode sampled`` runs
    it) and a digest of every result (phases, distances, predictions)."""
    from phasescope.commands.monitor import MonitorCommand
    from phasescope.commands.options import engine_config_from_args
    from phasescope.pipeline.flow import Flow
    args = MonitorCommand("phasescope").parser().parse_args(["--mode", "sampled", "-f", "x"])
    flow = Flow(engine_config_from_args(args, preset_default="sampled"), [])
    h = hashlib.sha256()
    flow.subscribe(lambda r, iv: h.update(repr((r.phase, r.distance, r.new_phase, r.predictions, r.predicted,
                                                r.confidence, r.expected_remaining, r.merged, r.macro, r.relabel, r.relabel_seqs,
                                                r.footprint.tolist())).encode()))
    t0 = time.process_time()
    if together > 1:  # as the live loop feeds a wake-up's windows (Flow.feed_together, stop 46)
        for at in range(0, len(windows), together):
            flow.feed_together(windows[at:at + together])
    else:
        for w in windows:
            flow.feed(w)
    flow.flush()
    return time.process_time() - t0, h.hexdigest()[:16]


def replay(paths: list, reps: int, stacks: bool, engine: bool, together: int = 1) -> None:
    for path in paths:
        with open(path, "rb") as f:
            rec = pickle.load(f)
        _, s, _ = replay_once(rec, stacks=stacks)  # reads the ELF symbol tables
        best, windows = min((replay_once(rec, s._names, stacks) for _ in range(reps)), key=lambda r: r[0])[::2]
        print(f"{os.path.basename(path)}: {s.samples} samples, {len(windows)} windows, {best * 1e3:.1f} ms CPU, "
              f"{best / max(1, s.samples) * 1e6:.1f} us a sample, windows {digest(windows)}", flush=True)
        if engine:
            runs = [engine_once(windows, together) for _ in range(reps)]
            print(f"  engine: {min(r[0] for r in runs) / max(1, len(windows)) * 1e3:.3f} ms a window, "
                  f"results {runs[0][1]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("out")
    c.add_argument("--no-stacks", action="store_true", help="rings of leaf samples, as a run without --log")
    c.add_argument("--wake-every", type=float, default=0.0, help="a ring's wake-up, in seconds of CPU "
                   "(a run without the dashboard: 1.0)")
    c.add_argument("--poll", type=float, default=0.2, help="the longest wait between reads (the live loop: 1.5)")
    c.add_argument("argv", nargs="+")
    r = sub.add_parser("replay")
    r.add_argument("paths", nargs="+")
    r.add_argument("--reps", type=int, default=6)
    r.add_argument("--rounds", type=int, default=1, help="alternations with --vs")
    r.add_argument("--vs", default="", help="another tree's host/ directory, replayed in turn")
    r.add_argument("--no-stacks", action="store_true", help="leaf only, as a run without --log or --profile")
    r.add_argument("--engine", action="store_true", help="also the engine's CPU a window and its results' digest")
    r.add_argument("--together", type=int, default=1, help="--engine: windows fed in batches of N, as a wake-up's")
    a = ap.parse_args()
    if a.cmd == "capture":
        return capture(a.out, a.argv, not a.no_stacks, a.wake_every, a.poll)
    if not a.vs:
        return replay(a.paths, a.reps, not a.no_stacks, a.engine, a.together)
    flags = ["--no-stacks"] * a.no_stacks + ["--engine"] * a.engine
    for _ in range(a.rounds):
        for label, host in (("this tree", os.environ.get("PYTHONPATH", "")), ("--vs", os.path.abspath(a.vs))):
            print(f"[{label}]", flush=True)
            subprocess.run([sys.executable, os.path.abspath(__file__), "replay", *a.paths, "--reps", str(a.reps), *flags],
                           env={**os.environ, "PYTHONPATH": host}, check=True)


if __name__ == "__main__":
    main()
