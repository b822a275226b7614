#!/usr/bin/env python3
"""Whether a sampled run's windows depend on when its rings were read: a real run's ring reads are
recorded (phasescope's CLI run in this process, each window its own wake-up: many small reads), then
replayed through a :class:`~phasescope.sources.sampler.Sampler` as they were read and as one read
per ring (an unwatched run's late batch). Both must give the same windows and drop no sample of a
followed child as another process's (docs/performance.md, issue 31, stop 48).

    python3 bench/ring_order.py capture OUT.pkl -- PHASESCOPE-ARGS   (needs perf_event access)
    python3 bench/ring_order.py replay OUT.pkl [...] [--stacks]

``replay`` prints, per recording and way of reading, the windows by process, the samples dropped as
another process's (``foreign``) and whether the two ways agree.
"""

from __future__ import annotations

import argparse
import pickle
import sys

from sampler_replay import Recorded


def capture(out: str, argv: list) -> None:
    import phasescope.commands.sources as sources
    from phasescope import cli
    from phasescope.sources import perf_event, sampler
    sources.UNWATCHED_WAKE = 0.0  # a wake-up for each window: reads as small as a live run makes
    reads, state = [], {}
    real_read, real_drain = perf_event.Ring.read, sampler.Sampler._drain

    def read(ring):
        data = real_read(ring)
        reads.append((ring.fd, data))
        return data

    def drain(s, final):
        windows = real_drain(s, final)
        reads.append(None)  # a drain's end
        state.update(pid=s.pid, id_tid=dict(s._id_tid), own=set(s._own))
        return windows
    perf_event.Ring.read, sampler.Sampler._drain = read, drain
    code = cli.main(argv)
    with open(out, "wb") as f:
        pickle.dump({**state, "reads": reads}, f)
    print(f"{out}: exit {code}, {sum(1 for r in reads if r)} ring reads", file=sys.stderr)


def replay(rec: dict, together: bool, stacks: bool):
    """``(windows, sampler)`` of a recording read as recorded, or in one read per ring."""
    from phasescope.sources.modules import ModuleMap
    from phasescope.sources.sampler import Sampler
    s = Sampler(rec["pid"], modules=ModuleMap(), stacks=stacks, children=True)
    s._started, s._id_tid, s._own = True, dict(rec["id_tid"]), set(rec["own"])
    s._last_scan = float("inf")  # the recorded pids are gone: no /proc look for lost EXIT records
    fds = sorted({r[0] for r in rec["reads"] if r})
    s._rings = {fd: Recorded(fd) for fd in fds}
    drains: list = [[]]
    for r in rec["reads"]:
        drains[-1].append(r) if r is not None else drains.append([])
    windows = []
    if together:
        for fd in fds:
            s._rings[fd].chunks = [b"".join(data for d in drains for f, data in d if f == fd)]
        windows += s.poll(0)
    else:
        for d in drains:
            for fd, data in d:
                s._rings[fd].chunks.append(data)
            windows += s.poll(0)
    windows += s.stop()
    return [(w.pid or 0, w.thread, w.seq, tuple(zip(w.keys.tolist(), w.counts.tolist()))) for w in windows], s


def main() -> None:
    if sys.argv[1:2] == ["capture"] and "--" in sys.argv:
        return capture(sys.argv[2], sys.argv[sys.argv.index("--") + 1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["replay"])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--stacks", action="store_true", help="replay with call chains (a run with --log)")
    a = ap.parse_args()
    for path in a.paths:
        with open(path, "rb") as f:
            rec = pickle.load(f)
        got = {}
        for together in (False, True):
            windows, s = got[together] = replay(rec, together, a.stacks)
            by_pid = {}
            for w in windows:
                by_pid[w[0]] = by_pid.get(w[0], 0) + 1
            print(f"{path}: {'one read a ring' if together else 'as read'}: windows by pid {by_pid}, "
                  f"foreign {s.foreign}")
        print(f"{path}: {'same' if sorted(got[False][0]) == sorted(got[True][0]) else 'DIFFERENT'} windows")


if __name__ == "__main__":
    main()
