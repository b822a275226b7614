"""Command-line option groups shared by subcommands: the phase engine's (live runs and replay), the
signal source's (live runs and bench), the device's and the target's (as in frida-tools), and a
live run's (its outputs: :mod:`phasescope.commands.outputs`)."""

from __future__ import annotations

import argparse
from typing import Optional

from phasescope.commands.sizes import parse_size, size_option
from phasescope.commands.outputs import add_output_options
from phasescope.commands.sources import DEFAULT_MODE, SOURCES, mode_help
from phasescope.engine.config import (EVICT_POLICIES, FULL_POLICIES, MODES as SEGMENT_MODES, PREDICTORS, PRESETS,
                                      TESTS, TRANSITION_LABELS, UPDATE_POLICIES, EngineConfig, PredictorConfig,
                                      SegmentConfig, TrackerConfig)
from phasescope.errors import InputError
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES
from phasescope.engine.macro import MacroConfig
from phasescope.sources.agent import REP_COUNTS

_T = TrackerConfig(**PRESETS["default"])
_M = MacroConfig()
_M_DEFAULT = {"macro_window": _M.window, "macro_threshold": _M.threshold}
DEFAULT_RATE = 10**9 // DEFAULT_PERIOD_NS
_P = PredictorConfig()
_UNSET = object()  # --bits not given (None means --full-precision)
#: options the page tracker (engine/page_tracker.py) has no use for
TABLE_ONLY = ("update_policy", "full_policy", "transition", "confirm", "adaptive", "noise_z", "stay", "test",
              "transition_label", "archive", "calibrate", "threshold_max")


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Add every tracker and predictor option (defaults: ``PRESETS["default"]``, the predictors' ISCA 2003 sizes)."""
    g = parser.add_argument_group("phase tracker (Sherwood, Sair & Calder, ISCA 2003)",
                                  "Defaults: --tracker default; each option below overrides the preset.")
    g.add_argument("--tracker", choices=sorted(PRESETS), default=None,
                   help="preset: 'default' is 'confirmed' (below: the paper's agreement with SimPoint with 2-3x "
                        "fewer phase IDs, docs/quality.md); 'paper' is ISCA 2003 exactly (6-bit footprints, "
                        "threshold 0.1, 64-entry LRU table); 'stable' (issue 28) adds full precision, mean "
                        "representatives, one-off intervals labelled with their nearest phase until a second "
                        "matches, an archive of evicted phases and a threshold calibrated per program; 'clustered' is 'stable' with "
                        "its threshold taken from the program's own k-means clusters (SimPoint's BIC, re-run every "
                        "128 intervals) and a 30-phase table folded by merging; 'drift' is 'clustered' with a threshold of at least "
                        "0.15 where the program drifts inside its clusters instead of jumping between them (re-clustered every 256); "
                        "'confirmed' (issue 28) is 'paper' that makes a new ID only when a second interval recurs near "
                        "one that matched nothing within 40 intervals (until then: its nearest phase; the log then "
                        "relabels it) and, once 18 phases are known, 2x the threshold from each, with mean representatives, "
                        "per-phase thresholds widened by their matches' spread (up to 2x) and an archive of evicted "
                        "phases; 'kmeans' labels each interval with "
                        "its nearest k-means centroid, re-clustered online; 'coarse' keeps full-precision footprints, threshold 0.3, mean "
                        "representatives, 16 entries that fold their two closest phases together when full; 'sampled' (the default in sampled "
                        "mode) is the page tracker: code-page vectors, per-thread hysteresis, thresholds each phase "
                        "calibrates on its own windows up to --threshold 0.9 (chosen on bench/truth/run.py); 'split' is "
                        "'sampled' whose phases split in two where two activities of one engine take turns (SQLite's "
                        "point queries and updates; not the default: more false changes, docs/quality.md)")
    g.add_argument("--test", choices=TESTS, default=None,
                   help="the table tracker on sampled windows: manhattan (the threshold, grown by --noise-z times "
                        "the expected sampling noise; the default) or multinomial (the G statistic against each "
                        "representative, within --noise-z sd)")
    g.add_argument("--noise-z", type=float, default=None, metavar="Z",
                   help="the table tracker on sampled windows: manhattan test, add Z times the expected sampling "
                        "noise to the threshold; multinomial test, match when the fit is within Z sd of the "
                        "representative's own windows (default 0)")
    g.add_argument("--buckets", type=int, default=None, metavar="N",
                   help=f"accumulator buckets, i.e. footprint dimensions (default {_T.buckets})")
    bits = g.add_mutually_exclusive_group()
    bits.add_argument("--bits", type=int, default=_UNSET, metavar="B",
                      help=f"bits per footprint entry (default {_T.bits}, as the paper; --tracker coarse: full "
                           "precision)")
    bits.add_argument("--full-precision", action="store_const", const=None, dest="bits",
                      help="keep footprints unquantized")
    g.add_argument("--evict-policy", choices=EVICT_POLICIES, default=None,
                   help=f"full table: drop the least recently (lru, the paper) or least often (lfu) matched "
                        f"phase (default {_T.evict_policy}; --tracker coarse and sampled: lfu)")
    g.add_argument("--transition", action=argparse.BooleanOptionalAction, default=None,
                   help="intervals matching no stable phase share one transition ID (0) until a candidate "
                        f"recurs (Lau et al., HPCA 2005; default {'on' if _T.transition else 'off'})")
    g.add_argument("--confirm", type=int, default=None, metavar="N",
                   help=f"with --transition: intervals that must match a candidate before it becomes a phase "
                        f"(default {_T.confirm})")
    g.add_argument("--transition-label", choices=TRANSITION_LABELS, default=None,
                   help="with --transition: an unconfirmed interval is labelled transition (ID 0) or with its "
                        f"nearest phase (nearest, as k-means assigns every point) (default {_T.transition_label})")
    g.add_argument("--archive", type=int, default=None, metavar="N",
                   help="keep N evicted phases so that a recurrence gets its old ID back (0: off, the paper; "
                        f"default {_T.archive})")
    g.add_argument("--calibrate", type=float, default=None, metavar="FACTOR",
                   help="per-program threshold: FACTOR x the median distance between consecutive intervals, "
                        f"from --threshold up to --threshold-max (0: off, the paper; default {_T.calibrate:g})")
    g.add_argument("--threshold-max", type=float, default=None, metavar="FRACTION",
                   help=f"with --calibrate: the highest threshold (default {_T.threshold_max:g})")
    g.add_argument("--adaptive", action=argparse.BooleanOptionalAction, default=None,
                   help="per-phase threshold from the spread of its own matches, up to 2x --threshold "
                        f"(default {'on' if _T.adaptive else 'off'})")
    g.add_argument("--stay", type=float, default=None, metavar="FACTOR",
                   help="hysteresis: an interval keeps its thread's current phase while within FACTOR x the "
                        f"threshold of it, even when another phase is nearer (0: off; default {_T.stay:g})")
    add_interval_option(g)
    g.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                   help=f"match threshold, Manhattan distance as a fraction of the interval (default {_T.threshold})")
    g.add_argument("--table-size", type=int, default=None, metavar="N",
                   help=f"phase table entries (default {_T.table_size})")
    g.add_argument("--update-policy", choices=UPDATE_POLICIES, default=None,
                   help="on a match: keep the representative (none, the paper) or average it in (mean)")
    g.add_argument("--full-policy", choices=FULL_POLICIES, default=None,
                   help="table full and no match: evict a phase (evict, see --evict-policy), join the nearest "
                        "phase (nearest), or fold the two closest phases together to make room (merge) "
                        f"(default {_T.full_policy})")
    s = parser.add_argument_group(
        "segments (what the tracker classifies; engine/segments.py)",
        "variable and qphase re-cut each thread's recorded intervals (units, e.g. --interval 100000 live) "
        "before the tracker")
    _S = SegmentConfig()
    s.add_argument("--segment-mode", choices=SEGMENT_MODES, default=_S.mode,
                   help="fixed: classify the intervals as they come (default); variable: variable-length "
                        "segments cut where two consecutive units differ (Akamatsu et al., seed 001); qphase: "
                        "nominal intervals of --segment-max units, each cut once where the locus of execution "
                        "changes most when its first and last units differ (Q-phase, seed 003)")
    s.add_argument("--segment-threshold", type=float, default=_S.threshold, metavar="D",
                   help="Manhattan distance between two units' normalised footprints (0..2) that marks "
                        f"different phases (default {_S.threshold})")
    s.add_argument("--segment-min", type=int, default=_S.min_units, metavar="UNITS",
                   help=f"shortest segment (qphase: shortest part of a cut interval), in units (default {_S.min_units})")
    s.add_argument("--segment-max", type=int, default=_S.max_units, metavar="UNITS",
                   help=f"variable: longest segment; qphase: the nominal interval, in units (default {_S.max_units})")
    m = parser.add_argument_group("macro phases (a second time scale; engine/macro.py)")
    m.add_argument("--macro-window", type=int, default=None, metavar="N",
                   help="macro phases over each thread's last N phases, shown beside them and logged (Lau et "
                        "al., ISPASS 2005; the log places each change where it began: macro_relabel; 0: off; "
                        f"default {_M.window})")
    m.add_argument("--macro-threshold", type=float, default=None, metavar="D",
                   help="Manhattan distance between two windows' histograms of phases (0..2) under which they "
                        f"are one macro phase (default {_M.threshold})")
    p = parser.add_argument_group("phase predictors")
    p.add_argument("--rle-entries", type=int, default=_P.rle_entries, metavar="N",
                   help=f"RLE Markov table entries (default {_P.rle_entries})")
    p.add_argument("--markov-entries", type=int, default=_P.markov_entries, metavar="N",
                   help=f"Markov-1 and Markov-2 table entries (default {_P.markov_entries})")
    p.add_argument("--gpht-depth", type=int, default=_P.gpht_depth, metavar="N",
                   help=f"GPHT history depth in intervals (default {_P.gpht_depth})")
    p.add_argument("--shown-prediction", choices=PREDICTORS, default=_P.shown, metavar="NAME",
                   help=f"the predictor whose prediction is shown and acted on (default {_P.shown}: the next phase of a "
                        "recurring order once such claims have held, else a change only where it has beaten 'no "
                        "change', in exact mode in its phase too, and the phase that came more than half the times after the same "
                        "runs, while the changes shown are ahead of 'no change' (exact mode); cycle: without those "
                        "runs; rle_markov: the paper's); one of "
                        + ", ".join(PREDICTORS))
    p.add_argument("--gpht-entries", type=int, default=_P.gpht_entries, metavar="N",
                   help=f"GPHT entries, LRU (default {_P.gpht_entries})")


def add_interval_option(g) -> None:
    """--interval (live runs, bench, replay); None when absent, so that replay keeps the recorded
    intervals."""
    g.add_argument("--interval", type=int, default=None, metavar="INSNS",
                   help=f"instructions per interval (live default {_T.interval:,}); replay merges consecutive "
                        "recorded intervals of a thread up to this size (default: as recorded)")


def engine_config_from_args(args: argparse.Namespace, interval_default: Optional[int] = _T.interval,
                            preset_default: str = "default") -> EngineConfig:
    """Validated engine configuration (InputError with a clear message on an out-of-range value).
    ``interval_default``: the interval when ``--interval`` is absent (replay: None, as recorded);
    ``preset_default``: the tracker preset when ``--tracker`` is absent (sampled mode: ``sampled``)."""
    preset = dict(PRESETS[getattr(args, "tracker", None) or preset_default])
    for name in ("buckets", "threshold", "table_size", "update_policy", "full_policy", "evict_policy", *TABLE_ONLY):
        value = getattr(args, name, None)
        if value is not None:
            preset[name] = value
    if getattr(args, "bits", _UNSET) is not _UNSET:
        preset["bits"] = args.bits
    if preset.get("method", "table") != "table":
        given = [f"--{name.replace('_', '-')}" for name in TABLE_ONLY if getattr(args, name, None) is not None]
        if getattr(args, "bits", _UNSET) is not _UNSET:
            given.append("--bits/--full-precision")
        if given:
            other = ("the page tracker (--tracker sampled, the sampled-mode default)" if preset["method"] == "pages"
                     else "the k-means tracker (--tracker kmeans)")
            raise InputError(f"{', '.join(given)}: an option of the table tracker (--tracker default or paper), "
                             f"not of {other}")
    tracker = TrackerConfig(interval=interval_default if args.interval is None else args.interval, **preset)
    segments = SegmentConfig(getattr(args, "segment_mode", "fixed"), getattr(args, "segment_threshold", 0.5),
                             getattr(args, "segment_min", 3), getattr(args, "segment_max", 100))
    return EngineConfig(tracker, PredictorConfig(
        rle_entries=args.rle_entries, markov_entries=args.markov_entries,
        gpht_depth=args.gpht_depth, gpht_entries=args.gpht_entries, shown=args.shown_prediction), segments,
        MacroConfig(*(_M_DEFAULT[n] if getattr(args, n, None) is None else getattr(args, n)
                      for n in ("macro_window", "macro_threshold"))))


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
    t.add_argument("-a", "--system-wide", action="store_true",
                   help="every process on every CPU, as perf -a (sampled mode; nothing injected): one phase "
                        "engine per process, a dashboard of the busiest; --phase-db is then a directory")
    a = p.add_argument_group("system-wide (-a)")
    a.add_argument("--comm", action="append", default=[], metavar="NAME",
                   help="-a: follow processes with this command name (repeatable; default: every process)")
    a.add_argument("--pids", metavar="PID[,PID...]", help="-a: follow these processes")
    a.add_argument("--cgroup", metavar="PATH",
                   help="-a: follow processes in this cgroup or below it (its path as /proc/PID/cgroup says, "
                        "e.g. /system.slice/nginx.service)")
    a.add_argument("--max-processes", type=int, default=256, metavar="N",
                   help="-a: phase engines alive at once; the least recently active is retired to make room "
                        "(default 256)")


def add_source_options(p: argparse.ArgumentParser):
    """The signal source's group, --mode, --rate, --window and --bursts (live runs and bench; check
    them with :func:`validate_source_options`); returned for a command's own source options."""
    s = p.add_argument_group("signal source")
    s.add_argument("--mode", choices=tuple(SOURCES), default=None, help=mode_help())
    s.add_argument("--rate", type=int, default=DEFAULT_RATE, metavar="HZ",
                   help=f"sampled mode: samples per second of each thread's CPU time (default {DEFAULT_RATE})")
    s.add_argument("--window", type=int, default=DEFAULT_WINDOW_SAMPLES, metavar="SAMPLES",
                   help=f"sampled mode: samples per interval (default {DEFAULT_WINDOW_SAMPLES})")
    s.add_argument("--bursts", action=argparse.BooleanOptionalAction, default=False,
                   help="sampled mode: follow a thread with Stalker for one exact interval when it enters a new "
                        "phase (the one thing in sampled mode that injects an agent into the target) (summary phases[].burst: instructions, blocks, top code; at most one per phase, "
                        "one at a time). Off by default: a burst costs its thread Stalker's start-up on that "
                        "interval's code, 5-15%% of a second-long run, about 1 s per burst on a compiler")
    return s


def validate_source_options(args: argparse.Namespace) -> None:
    """Settle --mode (sampled with -a, else exact); one-line InputErrors for source options that
    the chosen --mode has no use for."""
    for dest, label in (("device", "-D/--device"), ("host", "-H/--host")):
        if getattr(args, dest, None) == "":  # an unset shell variable: not taken as no option
            raise InputError(f"{label}: an empty value names no device")
    if args.mode is None:
        args.mode = "sampled" if getattr(args, "system_wide", False) else DEFAULT_MODE
    if args.bursts and args.mode != "sampled":
        raise InputError("--bursts needs --mode sampled (exact mode follows every interval already)")
    if args.mode != "sampled":  # a value other than the default was given, and would do nothing
        given = [f"--{dest}" for dest, default in (("rate", DEFAULT_RATE), ("window", DEFAULT_WINDOW_SAMPLES))
                 if getattr(args, dest) != default]
        if given:
            raise InputError(f"{' and '.join(given)} set sampled mode's samples: give --mode sampled (exact mode "
                             "counts every instruction; its interval is --interval)")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The engine's options, the signal source and a live run's outputs (live monitor and demo)."""
    add_engine_options(p)
    s = add_source_options(p)
    s.add_argument("--kernel-samples", action="store_true",
                   help="sampled mode: keep the samples that hit kernel mode (the target's system time), all "
                        "as one key named [kernel], so syscall-heavy phases show as such (default: user code "
                        "only; the kernel drops those ticks)")
    s.add_argument("--locality", action="store_true",
                   help="exact mode: sample windows of memory addresses (loads and stores) and report each "
                        "phase's reuse distances and LRU miss-rate curve (summary phases[].locality, a dashboard column)")
    s.add_argument("--locality-window", type=int, default=65536, metavar="N",
                   help="--locality: consecutive accesses per window (default 65536)")
    s.add_argument("--locality-every", type=int, default=8, metavar="M",
                   help="--locality: one window every M intervals of each thread (default 8)")
    s.add_argument("--locality-size", type=size_option("--locality-size"), default=1 << 20, metavar="SIZE",
                   help="--locality: cache size of the dashboard's miss-rate column, a power of two from 4KiB to "
                        "64MiB, in bytes or with a unit (default 1MiB)")
    s.add_argument("--rep-count", choices=REP_COUNTS, default="iterations",
                   help="exact mode: a rep string instruction (memcpy's rep movsb) counts its iterations, as "
                        "callgrind does (default), or once, as the hardware retires it and valgrind exp-bbv's .bb "
                        "files count it")
    s.add_argument("--input-size", metavar="SIZE",
                   help="--locality with --phase-db: the run's input (data) size, with a unit (e.g. 4MiB, 512KiB, "
                        "100MB), saved with each phase's reuse signature for locality-model (default: the data "
                        "the run's windows touched together)")
    o = p.add_argument_group("output")
    o.add_argument("-o", "--output", metavar="FILE",
                   help="phasescope's own lines (changes, status, report) go to FILE instead of stderr")
    add_output_options(o)
    o.add_argument("--bbv", metavar="FILE", help="SimPoint .bb file, written as intervals arrive")
    o.add_argument("--no-dashboard", action="store_true",
                   help="plain line output (automatic when stdout is not a terminal)")
    o.add_argument("--duration", type=float, metavar="SECONDS", help="stop, detach and exit after SECONDS")
    o.add_argument("--status-every", type=float, default=5.0, metavar="SECONDS",
                   help="plain output: seconds between status lines (default 5)")
    o.add_argument("--refresh", type=float, default=4.0, metavar="HZ",
                   help="dashboard refreshes per second, at most (default 4; after a slow draw, on a large "
                        "terminal, the next waits 16x its time)")
    o.add_argument("--stdio", choices=("inherit", "pipe"),
                   help="spawned target's stdio: inherit, or pipe (shown after the dashboard closes); "
                        "default: pipe with the dashboard, inherit without")




def validate_run_options(args: argparse.Namespace) -> None:
    """One-line InputErrors for out-of-range run options; settles --mode (sampled with -a)."""
    if getattr(args, "system_wide", False):
        validate_system_options(args)
    elif getattr(args, "comm", None) or getattr(args, "pids", None) or getattr(args, "cgroup", None):
        raise InputError("--comm, --pids and --cgroup filter what -a follows: give -a")
    validate_source_options(args)
    if args.duration is not None and not 0 < args.duration < float("inf"):  # also rejects nan
        raise InputError(f"--duration must be a positive, finite number of seconds (got {args.duration})")
    if not 0 < args.status_every < float("inf"):
        raise InputError(f"--status-every must be a positive, finite number of seconds (got {args.status_every})")
    if not 0 < args.refresh <= 60:
        raise InputError(f"--refresh must be in (0, 60] (got {args.refresh})")
    if args.segment_mode != "fixed" and args.mode == "exact" and args.interval is None:
        raise InputError(f"--segment-mode {args.segment_mode} re-cuts fine units into segments: give --interval "
                         f"(e.g. 100000; at the default {_T.interval:,} a whole run is a few segments)")
    if args.kernel_samples and args.mode != "sampled":
        raise InputError("--kernel-samples needs --mode sampled (exact mode follows user code only)")
    validate_source_options(args)
    if getattr(args, "locality", False):
        from phasescope.engine.locality import CACHE_BYTES
        if args.mode != "exact":
            raise InputError("--locality needs --mode exact (it samples addresses in the inline hot path)")
        if not 1 <= args.locality_window <= 1 << 24:
            raise InputError(f"--locality-window must be in [1, 16777216] (got {args.locality_window})")
        if args.locality_every < 1:
            raise InputError(f"--locality-every must be at least 1 (got {args.locality_every})")
        if args.locality_size not in CACHE_BYTES:
            raise InputError(f"--locality-size must be a power of two from {CACHE_BYTES[0]} to "
                             f"{CACHE_BYTES[-1]} (got {args.locality_size})")
    if getattr(args, "input_size", None) is not None:
        if not getattr(args, "locality", False):
            raise InputError("--input-size needs --locality (it labels the run's reuse signatures)")
        parse_size(args.input_size, "--input-size")


def validate_system_options(args: argparse.Namespace) -> None:
    """-a: sampled mode only, no target, filters well formed (one-line InputErrors)."""
    if args.pid is not None or args.name is not None or args.program is not None:
        raise InputError("-a follows every process: it takes no -p, -n or -f (filter with --comm, --pids, --cgroup)")
    if args.mode == "exact":
        raise InputError("-a samples the whole system: it needs --mode sampled (exact mode traces one process)")
    if args.bursts:
        raise InputError("-a injects nothing: --bursts (which injects an agent) is not available with it")
    if args.device or args.usb or args.host:
        raise InputError("-a samples this machine's kernel: -D/-U/-H do not apply")
    if args.bbv:
        raise InputError("--bbv writes one program's vectors for SimPoint: not with -a (use --log, which has pid)")
    if args.max_processes < 1:
        raise InputError(f"--max-processes must be at least 1 (got {args.max_processes})")
    process_filter(args)


def process_filter(args: argparse.Namespace):
    """The :class:`~phasescope.sources.system_sampler.ProcessFilter` of --comm, --pids and --cgroup."""
    from phasescope.sources.system_sampler import ProcessFilter
    if "" in args.comm:
        raise InputError("--comm: an empty value names no command (it would match no process)")
    pids = set()
    for part in ([] if args.pids is None else args.pids.split(",")):
        try:
            pid = int(part)
        except ValueError:
            pid = 0
        if pid <= 0:
            raise InputError(f"--pids takes process ids separated by commas (got {args.pids!r})")
        pids.add(pid)
    if args.cgroup is not None and not args.cgroup.startswith("/"):
        raise InputError(f"--cgroup takes a cgroup path starting with / as /proc/PID/cgroup shows it "
                         f"(got {args.cgroup!r})")
    chosen = ProcessFilter(frozenset(args.comm), frozenset(pids), args.cgroup)
    if args.cgroup is not None and not chosen.cgroup_exists():
        raise InputError(f"--cgroup {args.cgroup}: no such cgroup (no directory of that path in a cgroup "
                         "hierarchy, and no process in it)")
    return chosen
