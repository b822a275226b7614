"""Command-line options of the phase engine, shared by the live monitor and replay."""

from __future__ import annotations

import argparse

from .engine import EngineConfig
from .predict import PredictorConfig
from .tracker import EVICT_POLICIES, FULL_POLICIES, PRESETS, UPDATE_POLICIES, TrackerConfig

_T = TrackerConfig(**PRESETS["default"])
_P = PredictorConfig()
_UNSET = object()  # --bits not given (None means --full-precision)


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Add every tracker and predictor option (defaults from ISCA 2003)."""
    g = parser.add_argument_group("phase tracker (Sherwood, Sair & Calder, ISCA 2003)",
                                  "Defaults: --tracker default; each option below overrides the preset.")
    g.add_argument("--tracker", choices=sorted(PRESETS), default="default",
                   help="preset: 'paper' is ISCA 2003 exactly (6-bit footprints, threshold 0.1, 64-entry LRU "
                        "table); 'default' keeps full-precision footprints, threshold 0.3, mean representatives, 256 entries, "
                        "least-used eviction (chosen on bench/quality/run.py)")
    g.add_argument("--buckets", type=int, default=None, metavar="N",
                   help=f"accumulator buckets, i.e. footprint dimensions (default {_T.buckets})")
    bits = g.add_mutually_exclusive_group()
    bits.add_argument("--bits", type=int, default=_UNSET, metavar="B",
                      help=f"bits per footprint entry (default {_T.bits})")
    bits.add_argument("--full-precision", action="store_const", const=None, dest="bits",
                      help="keep footprints unquantized")
    g.add_argument("--evict-policy", choices=EVICT_POLICIES, default=None,
                   help=f"full table: drop the least recently (lru, the paper) or least often (lfu) matched "
                        f"phase (default {_T.evict_policy})")
    g.add_argument("--transition", action=argparse.BooleanOptionalAction, default=None,
                   help="intervals matching no stable phase share one transition ID (0) until a candidate "
                        "recurs (Lau et al., HPCA 2005; default off)")
    g.add_argument("--confirm", type=int, default=None, metavar="N",
                   help=f"with --transition: intervals that must match a candidate before it becomes a phase "
                        f"(default {_T.confirm})")
    g.add_argument("--adaptive", action=argparse.BooleanOptionalAction, default=None,
                   help="per-phase threshold from the spread of its own matches, up to 2x --threshold "
                        f"(default {'on' if _T.adaptive else 'off'})")
    g.add_argument("--interval", type=int, default=None, metavar="INSNS",
                   help=f"instructions per interval (live default {_T.interval:,}); replay merges consecutive "
                        "recorded intervals of a thread up to this size (default: as recorded)")
    g.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                   help=f"match threshold, Manhattan distance as a fraction of the interval (default {_T.threshold})")
    g.add_argument("--table-size", type=int, default=None, metavar="N",
                   help=f"phase table entries (default {_T.table_size})")
    g.add_argument("--update-policy", choices=UPDATE_POLICIES, default=None,
                   help="on a match: keep the representative (none, the paper) or average it in (mean)")
    g.add_argument("--full-policy", choices=FULL_POLICIES, default=None,
                   help="table full and no match: evict the least recently matched phase (evict) "
                        "or join the nearest phase (nearest)")
    p = parser.add_argument_group("phase predictors")
    p.add_argument("--rle-entries", type=int, default=_P.rle_entries, metavar="N",
                   help=f"RLE Markov table entries (default {_P.rle_entries})")
    p.add_argument("--markov-entries", type=int, default=_P.markov_entries, metavar="N",
                   help=f"Markov-1 and Markov-2 table entries (default {_P.markov_entries})")
    p.add_argument("--gpht-depth", type=int, default=_P.gpht_depth, metavar="N",
                   help=f"GPHT history depth in intervals (default {_P.gpht_depth})")
    p.add_argument("--gpht-entries", type=int, default=_P.gpht_entries, metavar="N",
                   help=f"GPHT entries, LRU (default {_P.gpht_entries})")


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    """Validated engine configuration (InputError with a clear message on an out-of-range value)."""
    preset = dict(PRESETS[getattr(args, "tracker", "default")])
    for name in ("buckets", "threshold", "table_size", "update_policy", "full_policy", "evict_policy",
                 "transition", "confirm", "adaptive"):
        value = getattr(args, name, None)
        if value is not None:
            preset[name] = value
    if getattr(args, "bits", _UNSET) is not _UNSET:
        preset["bits"] = args.bits
    tracker = TrackerConfig(interval=_T.interval if args.interval is None else args.interval, **preset)
    return EngineConfig(tracker, PredictorConfig(
        rle_entries=args.rle_entries, markov_entries=args.markov_entries,
        gpht_depth=args.gpht_depth, gpht_entries=args.gpht_entries))
