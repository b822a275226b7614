"""Command-line option groups shared by subcommands: the phase engine's (live runs and replay), the
device's and the target's (as in frida-tools), and a live run's outputs."""

from __future__ import annotations

import argparse
from typing import Optional

from phasescope.engine.phase_engine import EngineConfig
from phasescope.errors import InputError
from phasescope.engine.predict import PredictorConfig
from phasescope.engine.tracker import FULL_POLICIES, UPDATE_POLICIES, TrackerConfig

_T = TrackerConfig()
_P = PredictorConfig()


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Add every tracker and predictor option (defaults from ISCA 2003)."""
    g = parser.add_argument_group("phase tracker (Sherwood, Sair & Calder, ISCA 2003)")
    g.add_argument("--buckets", type=int, default=_T.buckets, metavar="N",
                   help=f"accumulator buckets, i.e. footprint dimensions (default {_T.buckets})")
    bits = g.add_mutually_exclusive_group()
    bits.add_argument("--bits", type=int, default=_T.bits, metavar="B",
                      help=f"bits per footprint entry (default {_T.bits})")
    bits.add_argument("--full-precision", action="store_const", const=None, dest="bits",
                      help="keep footprints unquantized")
    g.add_argument("--interval", type=int, default=None, metavar="INSNS",
                   help=f"instructions per interval (live default {_T.interval:,}); replay merges consecutive "
                        "recorded intervals of a thread up to this size (default: as recorded)")
    g.add_argument("--threshold", type=float, default=_T.threshold, metavar="FRACTION",
                   help=f"match threshold, Manhattan distance as a fraction of the interval (default {_T.threshold})")
    g.add_argument("--table-size", type=int, default=_T.table_size, metavar="N",
                   help=f"phase table entries (default {_T.table_size})")
    g.add_argument("--update-policy", choices=UPDATE_POLICIES, default=_T.update_policy,
                   help="on a match: keep the representative (none, the paper) or average it in (mean)")
    g.add_argument("--full-policy", choices=FULL_POLICIES, default=_T.full_policy,
                   help="table full and no match: evict the least recently matched phase (evict) "
                        "or join the nearest phase (nearest)")
    p = parser.add_argument_group("phase predictors")
    p.add_argument("--rle-entries", type=int, default=_P.rle_entries, metavar="N",
                   help=f"RLE Markov table entries (default {_P.rle_entries})")
    p.add_argument("--markov-entries", type=int, default=_P.markov_entries, metavar="N",
                   help=f"Markov-1 and Markov-2 table entries (default {_P.markov_entries})")


def engine_config_from_args(args: argparse.Namespace, interval_default: Optional[int] = _T.interval) -> EngineConfig:
    """Validated engine configuration (InputError with a clear message on an out-of-range value).
    ``interval_default``: the interval when ``--interval`` is absent (replay: None, as recorded)."""
    tracker = TrackerConfig(
        buckets=args.buckets,
        bits=args.bits,
        interval=interval_default if args.interval is None else args.interval,
        threshold=args.threshold,
        table_size=args.table_size,
        update_policy=args.update_policy,
        full_policy=args.full_policy,
    )
    return EngineConfig(tracker, PredictorConfig(rle_entries=args.rle_entries, markov_entries=args.markov_entries))


def add_device_options(p: argparse.ArgumentParser) -> None:
    """frida-tools' device options: -D ID, -U, -H HOST[:PORT]."""
    g = p.add_argument_group("device (as in frida-tools)")
    d = g.add_mutually_exclusive_group()
    d.add_argument("-D", "--device", metavar="ID", help="connect to the device with the given ID")
    d.add_argument("-U", "--usb", action="store_true", help="connect to USB device")
    d.add_argument("-H", "--host", metavar="HOST[:PORT]", help="connect to a remote frida-server")


def add_target_options(p: argparse.ArgumentParser) -> None:
    """-p PID, -n NAME, -f PROGRAM, and the spawned program's arguments as positionals."""
    t = p.add_argument_group("target")
    t.add_argument("-p", "--attach-pid", dest="pid", type=int, metavar="PID", help="attach to PID")
    t.add_argument("-n", "--attach-name", dest="name", metavar="NAME", help="attach to the process named NAME")
    t.add_argument("-f", "--file", dest="program", metavar="PROGRAM",
                   help="spawn PROGRAM; its arguments follow as positionals (after -- if they start with -)")
    t.add_argument("args", nargs="*", metavar="ARGS", help="arguments of the spawned PROGRAM")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The engine's options and a live run's outputs, shared by the live monitor and the demo."""
    add_engine_options(p)
    o = p.add_argument_group("output")
    o.add_argument("-o", "--output", metavar="FILE",
                   help="phasescope's own lines (changes, status, report) go to FILE instead of stderr")
    o.add_argument("--log", metavar="FILE", help="per-interval JSON Lines log, flushed every interval")
    o.add_argument("--summary", metavar="FILE",
                   help="JSON summary (per phase, per thread, predictors), rewritten atomically every few "
                        "seconds and on every exit path")
    o.add_argument("--bbv", metavar="FILE", help="SimPoint .bb file, written as intervals arrive")
    add_policy_options(o)
    o.add_argument("--no-dashboard", action="store_true",
                   help="plain line output (automatic when stdout is not a terminal)")
    o.add_argument("--duration", type=float, metavar="SECONDS", help="stop, detach and exit after SECONDS")
    o.add_argument("--status-every", type=float, default=5.0, metavar="SECONDS",
                   help="plain output: seconds between status lines (default 5)")
    o.add_argument("--refresh", type=float, default=4.0, metavar="HZ", help="dashboard refreshes per second (default 4)")
    o.add_argument("--stdio", choices=("inherit", "pipe"),
                   help="spawned target's stdio: inherit, or pipe (shown after the dashboard closes); "
                        "default: pipe with the dashboard, inherit without")


def add_policy_options(o) -> None:
    """--events and --phase-db (live runs, demo and replay)."""
    o.add_argument("--events", metavar="ADDRESS",
                   help="serve JSON Lines events (hello, interval, phase_change, prediction, phase_new, end) on "
                        "unix:PATH or tcp:HOST:PORT, to any number of clients; no authentication")
    o.add_argument("--events-allow-remote", action="store_true",
                   help="let --events tcp: bind a non-loopback address (anyone who connects sees code and phases)")
    o.add_argument("--events-queue", type=int, default=4096, metavar="N",
                   help="events queued per client before that client's events are dropped (default 4096)")
    o.add_argument("--phase-db", metavar="FILE",
                   help="phase database: load the representatives of earlier runs (same code, same phase ID), "
                        "save this run's at the end")


def policy_sinks(args, config) -> list:
    """The sinks of --events and --phase-db (each validates its input before the target is touched)."""
    from phasescope.sinks.events import EventServer
    sinks = []
    if getattr(args, "phase_db", None):
        from phasescope.sinks.phase_db import PhaseDb
        sinks.append(PhaseDb(args.phase_db, config))
    if args.events:
        if args.events_queue < 1:
            raise InputError(f"--events-queue must be at least 1 (got {args.events_queue})")
        sinks.append(EventServer(args.events, allow_remote=args.events_allow_remote, queue_events=args.events_queue))
    return sinks


def validate_run_options(args: argparse.Namespace) -> None:
    """One-line InputErrors for out-of-range run options."""
    if args.duration is not None and not 0 < args.duration < float("inf"):  # also rejects nan
        raise InputError(f"--duration must be positive (got {args.duration})")
    if not 0 < args.status_every < float("inf"):
        raise InputError(f"--status-every must be positive (got {args.status_every})")
    if not 0 < args.refresh <= 60:
        raise InputError(f"--refresh must be in (0, 60] (got {args.refresh})")
