"""The engine's configuration: the tracker's (:mod:`.tracker`, with its named presets), the
predictors' (:mod:`.predict`), the segments' (:mod:`.segments`) and the whole engine's. Each
checks its own fields (:class:`~phasescope.errors.InputError`, one line). Nothing here imports
numpy or the engine itself, so that a live run checks its whole command line and starts its
target before those load (issue 31)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional

from phasescope.engine.macro import MacroConfig
from phasescope.errors import InputError

UPDATE_POLICIES = ("none", "mean")
MIN_INTERVAL = 1000
MAX_INTERVAL = 1 << 40  # instructions: about 20 minutes of one core's work
MAX_TABLE_CELLS = 1 << 24  # table_size x buckets: a 128 MiB table
MAX_PREDICTOR_ENTRIES = 1 << 16  # per predictor table and thread: the paper's have 256, the GPHT 1024
MAX_GPHT_DEPTH = 64  # phases of history
FULL_POLICIES = ("evict", "nearest", "merge")
EVICT_POLICIES = ("lru", "lfu")
TESTS = ("manhattan", "multinomial")
METHODS = ("table", "pages", "kmeans")
TRANSITION_LABELS = ("transition", "nearest")
CALIBRATE_ON = ("gap", "nearest", "kmeans")  # what a calibrated threshold measures (TrackerConfig.calibrate_on)

PREDICTORS = ("rle_markov", "last_phase", "markov1", "markov2", "rle_markov_q", "duration", "gpht", "hybrid",
              "gated", "measured", "order_length", "cycle", "context")
#: The prediction shown by default: ``context``. On the page tracker's streams (sampled mode) it is
#: ``cycle``, the change a recurring order claims where its claims have held, else ``measured``'s,
#: which shows a change only where it has been right more often than "no change" (issue 27). The
#: hybrid before them (74.6% overall against last-phase's 73.0% on bench/quality/run.py) lost 3-9
#: points to last-phase on sampled workloads; ``measured`` alone foretold 18-50% of the truth
#: cycles' changes, ``cycle`` 59-77% (docs/quality.md). In exact mode the changes of ``measured``,
#: ``hybrid`` or the runs before (a majority next phase, while its proposals hold) are shown once
#: earned in their phase (issue 28: ``measured`` alone made more mispredictions than last-phase on
#: xz and zstd; the runs before foretell 70% and 58% of two fixed cycles' changes, ``cycle`` 64%
#: and 47%, stop 42).
PRIMARY = "context"

MODES = ("fixed", "variable", "qphase")


@dataclass(frozen=True)
class TrackerConfig:
    """Tracker parameters; every default is the paper's, except ``table_size`` which it leaves open.

    ``table_size`` 64: the paper's top 20 phases cover over 90% of execution on average (over 80%
    in the worst program), so 64 entries (1.5 KB at 6 bits) leave room for rare phases.
    ``interval`` is the nominal interval in instructions (the live agent cuts there; None in a
    replay that keeps the recorded intervals); the tracker normalises by each interval's actual
    count, so it only scales ``threshold`` to instructions. Live intervals are at least
    :data:`MIN_INTERVAL` instructions, so that one interval is more than a few blocks.
    """

    buckets: int = 32
    bits: Optional[int] = 6
    interval: Optional[int] = 10_000_000
    threshold: float = 0.10
    table_size: int = 64
    update_policy: str = "none"
    full_policy: str = "evict"
    evict_policy: str = "lru"
    transition: bool = False
    confirm: int = 2
    candidates: int = 16
    adaptive: bool = False
    noise_z: float = 0.0
    stay: float = 0.0
    test: str = "manhattan"
    #: footprints by random projection of each block (module docstring) instead of hashed buckets
    projection: bool = False
    #: ``table``: this module's tracker; ``pages``: :mod:`phasescope.engine.page_tracker` (page
    #: vectors hashed into ``buckets``, per-thread hysteresis, self-calibrated thresholds capped
    #: at ``threshold``; it uses ``table_size`` and ``evict_policy``, and no other option)
    method: str = "table"
    #: evicted phases kept (ID and representative) so that a recurrence gets its old ID back (0: off)
    archive: int = 0
    #: per-program threshold: ``calibrate`` x the median interval-to-interval distance seen so far
    #: (its last :data:`CALIBRATION_WINDOW`), from ``threshold`` up to ``threshold_max`` (0: off)
    calibrate: float = 0.0
    threshold_max: float = 1.0
    #: what ``calibrate`` measures: ``gap``, each thread's distance to its previous interval,
    #: ``nearest``, an interval's distance to the nearest of the last ``CALIBRATION_WINDOW``
    #: intervals (engine/tracker.py; how tight the program's recurring behaviour is, not how often
    #: it changes), or ``kmeans``, an interval's distance to its cluster's mean when SimPoint's
    #: k-means clusters the last ``CALIBRATION_WINDOW`` (engine/kmeans.py; every ``kmeans_every``)
    calibrate_on: str = "gap"
    #: the quantile of those distances that ``calibrate`` multiplies (0.5: the median)
    calibrate_quantile: float = 0.5
    #: with ``transition``: an unconfirmed interval is labelled ``transition`` (the one ID 0) or
    #: ``nearest`` (its nearest stable phase, as k-means assigns every point; still ``transition``)
    transition_label: str = "transition"
    #: how often (intervals) k-means re-clusters recent intervals (engine/kmeans.py): for
    #: ``calibrate_on`` ``kmeans`` (the last ``CALIBRATION_WINDOW``) and for ``method`` ``kmeans``
    #: (engine/kmeans_tracker.py: the last ``kmeans_window``; ``table_size`` bounds k)
    kmeans_every: int = 128
    kmeans_window: int = 1024
    #: with ``calibrate_on`` ``kmeans``: a window whose median consecutive distance is under
    #: ``drift_ratio`` x its median distance to its cluster's mean drifts within its clusters
    #: (engine/tracker.py), and its threshold is at least ``drift_floor`` (0: off)
    drift_ratio: float = 0.0
    drift_floor: float = 0.10
    #: with ``transition``: a candidate not matched again within ``recur`` intervals is dropped (Lau
    #: et al.: intervals that do not recur soon are transitions; 0: kept until the pool is full)
    recur: int = 0
    #: with ``transition``: once the table holds ``crowd`` stable phases, a candidate is confirmed
    #: only when it is at least ``apart`` x its threshold from each of them, else it leaves the
    #: pool (engine/tracker.py; 0: off)
    apart: float = 0.0
    crowd: int = 0
    #: with ``transition``: an interval that a stable phase matches beyond that phase's own spread
    #: (the mean + 2 sd of its matches' distances, from 0.75 x the threshold up to the threshold)
    #: is also offered to the candidate pool, within half the threshold; ``offshoot`` such
    #: intervals that agree make a new phase, a tight behaviour beside a phase that would swallow
    #: it (engine/tracker.py; 0: off)
    offshoot: int = 0
    #: a phase whose representative comes closer to another's than ``overlap`` x the sum of their
    #: spreads (the mean distance of each one's matches) folds into it: two IDs over one noisy
    #: behaviour (engine/tracker.py; 0: off)
    overlap: float = 0.0
    #: a phase matched fewer than ``retire`` times that no interval has matched for 400 intervals
    #: (engine/folds.py ``RETIRE_IDLE``) folds into its nearest phase, its intervals relabelled: a
    #: short-lived phase of a program's start or of a passage between activities (0: off)
    retire: int = 0
    #: the page tracker (sampled mode) splits a phase whose recent windows are two activities taking
    #: turns (engine/phase_split.py; ``--tracker split``; docs/quality.md, stop 41)
    split: bool = False

    def __post_init__(self):
        _require(isinstance(self.buckets, int) and 1 <= self.buckets <= 1 << 20,
                 f"buckets must be an integer from 1 to {1 << 20} (got {self.buckets!r})")
        _require(self.bits is None or (isinstance(self.bits, int) and 1 <= self.bits <= 52),
                 f"bits must be an integer from 1 to 52, or full precision (got {self.bits!r})")
        _require(self.interval is None or (isinstance(self.interval, int)
                                           and MIN_INTERVAL <= self.interval <= MAX_INTERVAL),
                 f"interval must be from {MIN_INTERVAL} to {MAX_INTERVAL} instructions (got {self.interval!r})")
        _require(isinstance(self.threshold, (int, float)) and 0 <= self.threshold <= 2,
                 f"threshold must be a fraction of the interval from 0 to 2 (got {self.threshold!r})")
        _require(isinstance(self.table_size, int) and 1 <= self.table_size <= MAX_TABLE_CELLS // self.buckets,
                 f"table size must be from 1 to {MAX_TABLE_CELLS // self.buckets} with {self.buckets} buckets "
                 f"(got {self.table_size!r})")
        _require(self.update_policy in UPDATE_POLICIES,
                 f"update policy must be one of {', '.join(UPDATE_POLICIES)} (got {self.update_policy!r})")
        _require(self.full_policy in FULL_POLICIES,
                 f"full-table policy must be one of {', '.join(FULL_POLICIES)} (got {self.full_policy!r})")
        _require(self.evict_policy in EVICT_POLICIES,
                 f"eviction policy must be one of {', '.join(EVICT_POLICIES)} (got {self.evict_policy!r})")
        _require(isinstance(self.confirm, int) and self.confirm >= 1,
                 f"confirm must be at least 1 interval (got {self.confirm!r})")
        _require(isinstance(self.candidates, int) and self.candidates >= 1,
                 f"candidates must be at least 1 (got {self.candidates!r})")
        _require(isinstance(self.noise_z, (int, float)) and 0 <= self.noise_z <= 20,
                 f"noise z must be from 0 to 20 (got {self.noise_z!r})")
        _require(isinstance(self.stay, (int, float)) and (self.stay == 0 or 1 <= self.stay <= 10),
                 f"stay must be 0 (off) or a factor from 1 to 10 (got {self.stay!r})")
        _require(isinstance(self.archive, int) and 0 <= self.archive <= MAX_TABLE_CELLS // self.buckets,
                 f"archive must be from 0 to {MAX_TABLE_CELLS // self.buckets} phases (got {self.archive!r})")
        _require(isinstance(self.calibrate, (int, float)) and 0 <= self.calibrate <= 10,
                 f"calibrate must be a factor from 0 (off) to 10 (got {self.calibrate!r})")
        _require(isinstance(self.threshold_max, (int, float)) and 0 <= self.threshold_max <= 2,
                 f"threshold max must be a fraction of the interval from 0 to 2 (got {self.threshold_max!r})")
        _require(isinstance(self.recur, int) and self.recur >= 0,
                 f"recur must be 0 (off) or a number of intervals (got {self.recur!r})")
        _require(isinstance(self.apart, (int, float)) and (self.apart == 0 or 1 <= self.apart <= 10),
                 f"apart must be 0 (off) or a factor from 1 to 10 (got {self.apart!r})")
        _require(isinstance(self.crowd, int) and self.crowd >= 0,
                 f"crowd must be a number of phases, 0 or more (got {self.crowd!r})")
        _require(isinstance(self.offshoot, int) and self.offshoot >= 0 and (self.transition or not self.offshoot),
                 f"offshoot must be 0 (off) or a number of intervals, with transition (got {self.offshoot!r})")
        _require(isinstance(self.overlap, (int, float)) and 0 <= self.overlap <= 10,
                 f"overlap must be a number from 0 to 10 (got {self.overlap!r})")
        _require(isinstance(self.retire, int) and 0 <= self.retire <= 1 << 20,
                 f"retire must be an integer from 0 to {1 << 20} (got {self.retire!r})")
        _require(self.transition_label in TRANSITION_LABELS,
                 f"transition label must be one of {', '.join(TRANSITION_LABELS)} (got {self.transition_label!r})")
        _require(self.calibrate_on in CALIBRATE_ON,
                 f"calibrate-on must be one of {', '.join(CALIBRATE_ON)} (got {self.calibrate_on!r})")
        _require(isinstance(self.calibrate_quantile, (int, float)) and 0 <= self.calibrate_quantile <= 1,
                 f"calibrate quantile must be from 0 to 1 (got {self.calibrate_quantile!r})")
        _require(isinstance(self.drift_ratio, (int, float)) and 0 <= self.drift_ratio <= 100,
                 f"drift ratio must be from 0 (off) to 100 (got {self.drift_ratio!r})")
        _require(isinstance(self.drift_floor, (int, float)) and 0 <= self.drift_floor <= 2,
                 f"drift floor must be a fraction of the interval from 0 to 2 (got {self.drift_floor!r})")
        _require(self.method == "table" or not (self.archive or self.calibrate),
                 "archive and calibrate are options of the table tracker")
        _require(self.test in TESTS, f"test must be one of {', '.join(TESTS)} (got {self.test!r})")
        _require(self.method in METHODS, f"method must be one of {', '.join(METHODS)} (got {self.method!r})")
        _require(self.method != "pages" or (self.bits is None and self.buckets % 32 == 0),
                 "the page tracker keeps full-precision vectors in a multiple of 32 buckets (no --bits)")
        _require(self.method != "kmeans" or (self.bits is None and not self.projection and self.test == "manhattan"),
                 "the k-means tracker projects full-precision footprints itself (no --bits)")
        _require(isinstance(self.kmeans_window, int) and 2 <= self.kmeans_window <= 1 << 16,
                 f"k-means window must be from 2 to {1 << 16} intervals (got {self.kmeans_window!r})")
        _require(isinstance(self.kmeans_every, int) and self.kmeans_every >= 1,
                 f"k-means period must be at least 1 interval (got {self.kmeans_every!r})")
        _require(not self.projection or (self.method == "table" and self.bits is None and self.test == "manhattan"
                                         and not self.noise_z),
                 "a projected footprint is full precision (no --bits) for the table tracker's Manhattan test")
        _require(self.test == "manhattan" or self.bits is None,
                 "the multinomial test needs full-precision footprints (counts), not --bits")

    @property
    def scale(self) -> float:
        """M: footprint units per interval (sum of a full-precision footprint; 1 for page vectors)."""
        if self.method == "pages":
            return 1.0
        if self.bits is None:  # projected too: mean distance 2 x buckets between disjoint code
            return float(self.buckets)
        k = math.floor(math.log2(((1 << self.bits) - 1) / self.buckets))
        return float(self.buckets * 2.0**k)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["scale"] = self.scale
        d["threshold_instructions"] = None if self.interval is None else self.threshold * self.interval
        return d


#: Named tracker settings: ``paper`` is ISCA 2003 exactly (plus the 64-entry table it leaves
#: open; the dataclass defaults above), exact mode's ``default`` until issue 28 (``confirmed`` now). Issue 17 widened bench/quality/ to 16 real programs
#: (compilers, interpreters, databases, compressors, a query tool, an HTTP server, python3 driving
#: libraries), split once into a tuning and a held-out half, scored against SimPoint 3.2 (-maxK 30)
#: on the same vectors: the earlier default (``coarse``: full precision, threshold 0.3, 16 entries
#: folded by merging, chosen against a max-k 10 reference on five programs) scored mean ARI 0.34
#: (tuning) and 0.47 (held out) against the paper's 0.63 and 0.61, and no variant tried on the
#: tuning half (buckets 32/128, threshold 0.05-0.2, 64/256 entries, LRU/LFU, mean or fixed
#: representatives, merging) beat the paper there without losing more than 0.05 ARI on some program.
#: Footprints past the hardware budget (docs/quality.md, "A better footprint"): 2048-16384 full-precision
#: buckets at threshold 0.175-0.2 won the tuning half (the best 0.72 against 0.65) but the best
#: lost 0.10 on one held-out program; random projection (``projection``) lost everywhere.
PRESETS = {
    "paper": dict(buckets=32, bits=6, threshold=0.10, table_size=64, update_policy="none", full_policy="evict",
                  evict_policy="lru", transition=False, confirm=2, candidates=16, adaptive=False),
    "coarse": dict(buckets=32, bits=None, threshold=0.30, table_size=16, update_policy="mean", full_policy="merge",
                   evict_policy="lfu", transition=False, confirm=2, candidates=16, adaptive=False),
    # Sampled mode: the page tracker (engine/page_tracker.py), chosen on bench/truth/run.py's
    # tuning half against constructed truth; the table's thresholds saw one phase in long python3
    # and sqlite3 runs (issue 15). 1024 buckets of code pages; 0.9 caps each phase's match threshold.
    "sampled": dict(method="pages", buckets=1024, bits=None, threshold=0.9, table_size=128, update_policy="mean",
                    full_policy="evict", evict_policy="lfu", transition=False, confirm=2, candidates=16,
                    adaptive=False),
}
# Issue 27, stop 41: ``sampled`` whose phases split in two where two activities of one engine take
# turns (point queries and updates of SQLite). Not the default: on the held-out half py-db-B's ARI
# went 0.62 -> 0.75-0.77 and its changes seen within 2 windows 0.80 -> 0.95, but its false changes
# 0 -> 0.71-1.64 per 10 s and its recurrences with their first ID 1.00 -> 0.81 (docs/quality.md).
PRESETS["split"] = dict(PRESETS["sampled"], split=True)
# Issue 28 (bench/quality/generalize.py against SimPoint 3.2 -maxK 30, chosen on the tuning half
# cc1, python3, sqlite3, bzip2, truth-A; docs/quality.md): the paper's table with full-precision
# footprints and mean representatives; an interval that matches nothing waits as a candidate until
# a second one matches it, labelled with its nearest phase meanwhile (as k-means assigns every
# point); evicted phases are archived so a recurrence gets its old ID back; the threshold is 2x the
# program's median interval-to-interval distance, from 0.1 to 0.25 of the interval. Not the default:
# it collapses cc1 (ARI 0.13 with 8 IDs, against the paper's 0.57) and gzip (held out).
PRESETS["stable"] = dict(PRESETS["paper"], bits=None, update_policy="mean", transition=True,
                         transition_label="nearest", archive=4096, calibrate=2.0, threshold_max=0.25)
# Issue 28, continued: ``stable`` with its threshold calibrated on the program's own clusters
# (engine/kmeans.py: SimPoint's k-means and BIC on the last 512 intervals, every 128; the
# threshold is 2x the median distance of an interval to its cluster's mean, 0.02 to 0.25) and a
# 30-phase table folded by merging (SimPoint's -maxK 30). Chosen on the tuning half (docs/quality.md).
PRESETS["clustered"] = dict(PRESETS["stable"], calibrate_on="kmeans", calibrate=2.0, calibrate_quantile=0.5,
                            threshold=0.02, full_policy="merge", table_size=30)
# Issue 28, continued: ``clustered`` with a drift test (engine/tracker.py): where the program's
# consecutive intervals are closer than ``drift_ratio`` (3) x their distance to their k-means cluster's
# mean, it drifts or flickers inside its clusters (bc) instead of jumping between tight ones (cc1),
# k-means has cut one behaviour into pieces, and the threshold is at least ``drift_floor`` (0.15 of an interval).
# It re-clusters every 256 intervals (``clustered``: 128), which halves the k-means's cost at no measured loss.
PRESETS["drift"] = dict(PRESETS["clustered"], drift_ratio=3.0, drift_floor=0.15, kmeans_every=256)
# Issue 28, an ID budget: the paper's 6-bit table, but an interval that matches nothing gets a new ID
# only once a second interval recurs near it (``transition``, Lau et al. HPCA 2005); until then it
# carries its nearest phase's ID (as k-means assigns every point). Representatives follow their
# intervals' mean, each phase's threshold widens with its own matches' spread (``adaptive``, up to
# 2x), and evicted phases are archived so a recurrence gets its old ID back. Chosen on the tuning
# half (docs/quality.md): IDs 40-102 -> 15-51, no tuning program more than 0.02 below ``paper``.
# Since stop 39 a candidate that no interval matches within 40 intervals is dropped (``recur``): the
# intervals that straddle two activities recur once per round of a program's loop (the demo's), and
# no longer become phases of their own (tuning-half mean ARI +0.000, held-out -0.003; 28 and less
# lost 0.10 on bzip2: docs/quality.md). Since stop 40, once 18 phases are known a new one must be 2x
# its threshold from each (``apart``, ``crowd``): the parts of a loop body longer than an interval
# no longer each get an ID (truth-A 43 -> 30 IDs; tuning mean +0.001, held out +0.013; 14 and
# less lost 0.03 on cc1: docs/quality.md). Since stop 46 a tight behaviour that a phase matches
# beyond its own spread gets its own ID after 4 such intervals (``offshoot``): cc1's noisy phase
# had widened over two tight neighbours, tclsh's identical intervals over a step 0.94 thresholds
# away (tuning mean +0.04, cc1 0.40 -> 0.56, tclsh 0.61 -> 0.72: docs/quality.md). Since stop 47
# two phases whose centres come closer than 0.45x the sum of their spreads fold into one
# (``overlap``): bzip2's noisy main behaviour had four IDs (tuning mean +0.06, bzip2 0.40 -> 0.82;
# held out +0.001, truth-B 41 -> 37 IDs: docs/quality.md). Since stop 48 a phase matched fewer than
# 10 times and not in the last 400 intervals folds into its nearest (``retire``): a program's start
# and the passages between its activities kept an ID for each part that recurred just enough to be
# confirmed (truth-E 43 -> 25 IDs for SimPoint's 16; tuning mean -0.003 to +0.001; held out -0.005,
# perl -0.04, truth-D 48 -> 31 IDs: docs/quality.md).
PRESETS["confirmed"] = dict(PRESETS["paper"], transition=True, transition_label="nearest", update_policy="mean",
                            adaptive=True, archive=4096, recur=40, apart=2.0, crowd=18, offshoot=4, overlap=0.45,
                            retire=10)
# Online SimPoint (engine/kmeans_tracker.py): k-means labels, not a threshold. Lost to the paper on
# the tuning half (docs/quality.md); kept as the measured alternative.
PRESETS["kmeans"] = dict(PRESETS["paper"], method="kmeans", buckets=128, bits=None, table_size=30)
# The default since issue 28 (docs/quality.md): ``confirmed``. The run's first interval starts a
# phase at once, a confirmed candidate relabels its earlier intervals in the log, a phase database's
# phases are stable from the start, and a segment's units count toward ``confirm``.
PRESETS["default"] = PRESETS["confirmed"]


def preset(name: str = "default", **overrides) -> TrackerConfig:
    """A named tracker setting (``PRESETS``), with some fields overridden."""
    d = dict(PRESETS[name])
    d.update(overrides)
    return TrackerConfig(**d)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


@dataclass(frozen=True)
class PredictorConfig:
    """Table sizes; the paper's Markov predictors all have 256 entries, the GPHT of Isci et al.
    (MICRO 2006) 1024 entries indexed by the last 8 phases."""

    rle_entries: int = 256
    markov_entries: int = 256
    gpht_depth: int = 8
    gpht_entries: int = 1024
    shown: str = PRIMARY  # the predictor whose prediction is shown

    def __post_init__(self):
        for name in ("rle_entries", "markov_entries", "gpht_depth", "gpht_entries"):
            v, most = getattr(self, name), MAX_GPHT_DEPTH if name == "gpht_depth" else MAX_PREDICTOR_ENTRIES
            if not isinstance(v, int) or not 1 <= v <= most:  # each thread's tables are allocated whole
                raise InputError(f"{name.replace('_', ' ')} must be from 1 to {most} (got {v!r})")
        if self.shown not in PREDICTORS:
            raise InputError(f"shown prediction must be one of {', '.join(PREDICTORS)} (got {self.shown!r})")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SegmentConfig:
    """``threshold``: Manhattan distance between two units' normalised footprints (0..2) above
    which they are taken to be in different phases; ``min_units``/``max_units``: a piece's length
    bounds, in units (``qphase``: ``max_units`` is the nominal interval)."""

    mode: str = "fixed"
    threshold: float = 0.5
    min_units: int = 3
    max_units: int = 100

    def __post_init__(self):
        if self.mode not in MODES:
            raise InputError(f"segment mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if not 0 < self.threshold <= 2:
            raise InputError(f"segment threshold must be in (0, 2] (got {self.threshold!r})")
        if not isinstance(self.min_units, int) or self.min_units < 1:
            raise InputError(f"segment min must be at least 1 unit (got {self.min_units!r})")
        if not isinstance(self.max_units, int) or self.max_units < self.min_units:
            raise InputError(f"segment max must be at least segment min (got {self.max_units!r})")

    def to_dict(self) -> dict:
        return {"mode": self.mode, "threshold": self.threshold, "min_units": self.min_units,
                "max_units": self.max_units}


@dataclass(frozen=True)
class EngineConfig:
    tracker: TrackerConfig = field(default_factory=preset)  # the "default" preset, as on the command line
    predictors: PredictorConfig = field(default_factory=PredictorConfig)
    #: what the tracker classifies (engine/segments.py): applied to the stream before the engine
    #: (a :class:`~phasescope.engine.segments.Segmenter` in live runs, ``segment_stream`` in replay)
    segments: SegmentConfig = field(default_factory=SegmentConfig)
    #: the second time scale (engine/macro.py): macro phases over windows of these phases
    macro: MacroConfig = field(default_factory=MacroConfig)

    def to_dict(self) -> dict:
        return {"tracker": self.tracker.to_dict(), "predictors": self.predictors.to_dict(),
                "segments": self.segments.to_dict(), "macro": self.macro.to_dict()}
