"""Command-line options of the phase engine, shared by the live monitor and replay."""

from __future__ import annotations

import argparse

from .engine import EngineConfig
from .predict import PredictorConfig
from .tracker import FULL_POLICIES, UPDATE_POLICIES, TrackerConfig

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
    p.add_argument("--gpht-depth", type=int, default=_P.gpht_depth, metavar="N",
                   help=f"GPHT history depth in intervals (default {_P.gpht_depth})")
    p.add_argument("--gpht-entries", type=int, default=_P.gpht_entries, metavar="N",
                   help=f"GPHT entries, LRU (default {_P.gpht_entries})")


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    """Validated engine configuration (InputError with a clear message on an out-of-range value)."""
    tracker = TrackerConfig(
        buckets=args.buckets,
        bits=args.bits,
        interval=_T.interval if args.interval is None else args.interval,
        threshold=args.threshold,
        table_size=args.table_size,
        update_policy=args.update_policy,
        full_policy=args.full_policy,
    )
    return EngineConfig(tracker, PredictorConfig(
        rle_entries=args.rle_entries, markov_entries=args.markov_entries,
        gpht_depth=args.gpht_depth, gpht_entries=args.gpht_entries))
