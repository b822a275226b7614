"""A run's outputs on the command line: the options that ask for sinks (live runs, demo and
replay) and the one place that builds those sinks from the parsed options."""

from __future__ import annotations

import argparse
import sys
from typing import List

from phasescope.commands.sizes import parse_size
from phasescope.engine.config import EngineConfig
from phasescope.errors import InputError


#: the output options that name a path (--bbv: live runs only), for the check that no output is
#: also an input (:func:`phasescope.commands.files.check_files`; ``--events unix:PATH`` included)
OUTPUT_FILES = {"--log": "log", "--summary": "summary", "--bbv": "bbv", "--phase-db": "phase_db", "--events": "events",
                "--profile": "profile"}


def add_output_options(o) -> None:
    """--log, --summary, --events, --metrics, --profile and --phase-db (read by :func:`open_sinks`)."""
    o.add_argument("--log", metavar="FILE", help="per-interval JSON Lines log, flushed every interval")
    o.add_argument("--summary", metavar="FILE",
                   help="JSON summary (per phase, per thread, predictors), replaced atomically: at the end and, "
                        "in a live run, every few seconds and on every exit path")
    o.add_argument("--events", metavar="ADDRESS",
                   help="serve JSON Lines events (hello, interval, phase_new, phase_merge, phase_change, prediction, "
                        "dropped, end) on unix:PATH or tcp:HOST:PORT, to any number of clients; no authentication")
    o.add_argument("--events-allow-remote", action="store_true",
                   help="let --events tcp: bind a non-loopback address (anyone who connects sees code and phases)")
    o.add_argument("--events-queue", type=int, default=4096, metavar="N",
                   help="events queued per client before that client's events are dropped (default 4096)")
    o.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve Prometheus/OpenMetrics metrics on HOST:PORT (current phase, prediction and "
                        "confidence per thread, intervals, phase changes, prediction accuracy, dropped data; "
                        "port 0: any free port); loopback only unless --metrics-allow-remote")
    o.add_argument("--metrics-allow-remote", action="store_true",
                   help="let --metrics bind a non-loopback address (anyone who can connect reads the phases)")
    o.add_argument("--profile", metavar="FILE",
                   help="write the run's phase-labelled profile here when it ends, in the format of the extension: "
                        "pprof .pb.gz, speedscope .json, collapsed .folded, Perfetto .perfetto-trace "
                        "(see phasescope profile)")
    o.add_argument("--phase-db", metavar="FILE",
                   help="phase database: load the representatives of earlier runs (same code, same phase ID), "
                        "save this run's at the end")


def open_sinks(args: argparse.Namespace, config: EngineConfig) -> List:
    """The sinks the options ask for, each file and socket opened and checked now, before the target
    is touched: --phase-db, --events, --metrics, --log, --profile, --bbv (live runs only) and --summary, in
    that order. Should one fail, those already opened are closed before the error propagates.
    Each sink's module loads only when it is asked for (most load numpy and the engine: a live run
    without them starts its target sooner)."""
    from phasescope.sinks.base import Sinks
    sinks: List = []
    try:
        if args.phase_db:
            from phasescope.sinks.phase_db import PhaseDb
            size = getattr(args, "input_size", None)  # --locality runs of seed 004's model
            sinks.append(PhaseDb(args.phase_db, config,
                                 input_size=None if size is None else parse_size(size, "--input-size")))
        if args.events:
            from phasescope.sinks.events import EventServer
            if args.events_queue < 1:
                raise InputError(f"--events-queue must be at least 1 (got {args.events_queue})")
            server = EventServer(args.events, allow_remote=args.events_allow_remote, queue_events=args.events_queue)
            sinks.append(server)
            if server.address != args.events:  # tcp:HOST:0: say which port clients should use
                print(f"phasescope: serving events on {server.address}", file=sys.stderr, flush=True)
        if args.metrics is not None:  # --metrics '' is refused there, not taken as no --metrics
            from phasescope.sinks.metrics import MetricsServer
            metrics = MetricsServer(args.metrics, allow_remote=args.metrics_allow_remote)
            sinks.append(metrics)
            if metrics.address != args.metrics:
                print(f"phasescope: serving metrics on http://{metrics.address}/metrics", file=sys.stderr,
                      flush=True)
        if args.log:
            from phasescope.sinks.log import JsonlLog
            sinks.append(JsonlLog(args.log))
        if args.profile:
            from phasescope.sinks.profile import ProfileWriter
            sinks.append(ProfileWriter(args.profile))
        if getattr(args, "bbv", None):
            from phasescope.sinks.bbv import BbvWriter
            sinks.append(BbvWriter(args.bbv))
        if args.summary:
            from phasescope.sinks.summary import SummaryWriter
            sinks.append(SummaryWriter(args.summary))
    except BaseException:
        Sinks(sinks).close()  # e.g. remove an event socket already bound
        raise
    return sinks
