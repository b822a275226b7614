#!/usr/bin/env python3
"""Runs a program under bare Stalker with exact mode's handling of runtimes and no counters (the agent's
``bare="handled"``: the near reserve, JVM threads followed late, EFLAGS.AC, OF across the inline cache,
the program's fault handler shown the real PC), its output untouched: the baseline of
bench/jvm_exact.py --bare (issue 32). Exits with the program's code. ``--trust N`` sets
Stalker.trustThreshold (-1: every block checked against its snapshot at each entry, none linked);
``--exact`` runs exact mode's transform instead (no output files), for the same comparisons.

    python3 bench/jvm/bare_stalker.py [--trust N] [--exact] PROGRAM [ARGS...]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "host"))
from phasescope.sources.device import resolve_device, resolve_target  # noqa: E402
from phasescope.sources.events import Ended  # noqa: E402
from phasescope.sources.session import TraceSession  # noqa: E402


def main() -> int:
    argv, trust, bare = sys.argv[1:], None, "handled"
    while argv[:1] in (["--trust"], ["--exact"]):
        if argv[0] == "--exact":
            argv, bare = argv[1:], False
        elif len(argv) > 1 and argv[1].lstrip("-").isdigit():
            argv, trust = argv[2:], int(argv[1])
        else:
            argv = []
    if not argv:
        print("bare_stalker: usage: bare_stalker.py [--trust N] [--exact] PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    device = resolve_device()
    session = TraceSession(device, resolve_target(device, argv=argv), stdio="inherit", bare=bare,
                           trust_threshold=trust)
    ended = None
    session.start()
    try:
        for event in session.events():
            if isinstance(event, Ended):
                ended = event
    finally:
        session.stop()
    if ended is None or ended.how != "exited":
        print(f"bare_stalker: {ended.describe() if ended else 'ended without a report'}", file=sys.stderr)
        return 3
    return ended.code


if __name__ == "__main__":
    sys.exit(main())
