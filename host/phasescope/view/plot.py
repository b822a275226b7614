"""Figures of a recorded run (``phasescope plot LOG -o FILE.png``) and of a locality model
(``phasescope locality-model DB --plot FILE.png``: :func:`plot_locality_model`), drawn with matplotlib.

Four panels: the phase barcode over time, one row per thread; each phase's share of execution;
per-phase metrics against the whole run (the paper's Figure 7: coefficient of variation of ns per
instruction, of wall time per interval and of CPU time, within each main phase and over the whole
run); and the intervals' footprints as a heat map (Figure 3), recomputed by replaying the log
through :class:`~phasescope.engine.PhaseEngine` (rows are intervals, columns buckets).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

import numpy as np

from phasescope.engine import PhaseEngine
from phasescope.engine.phase_engine import EngineConfig
from phasescope.errors import InputError
from phasescope.formats.log import log_records, read_log

MAIN_PHASES = 12  # phases shown by name; the rest are "other"
HEAT_ROWS = 400  # intervals in the heat map at most (evenly sampled)


def load_records(path: str) -> List[dict]:
    """The log's records (the fields the figures use), InputError on a bad line. ``weight`` is a
    record's share of execution: its instructions, or in sampled mode its sampled CPU time."""
    out = []
    for where, r in log_records(path):
        try:
            sampled = r.get("instructions") is None
            cpu = r.get("cpu_ns") if sampled else (r.get("os") or {}).get("cpu_ns")
            out.append({"thread": int(r["thread"]), "phase": int(r["phase"]), "seq": int(r.get("seq", len(out))),
                        "thread_seq": int(r["thread_seq"]),
                        "instructions": None if sampled else int(r["instructions"]),
                        "weight": int(cpu) if sampled else int(r["instructions"]),
                        "start_ns": int(r.get("start_ns") or 0), "end_ns": int(r.get("end_ns") or 0),
                        "wall_ns": int(r.get("wall_ns") or 0), "partial": bool(r.get("partial", False)),
                        "cpu_ns": cpu})
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InputError(f"{where}: not a phasescope log record with a phase") from None
    if not out:
        raise InputError(f"{path}: no intervals")
    return out


def cv(values) -> Optional[float]:
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2 or v.mean() == 0:
        return None
    return float(v.std() / v.mean())


def metric_cvs(records: List[dict]) -> Dict[str, Dict[str, Optional[float]]]:
    """{metric: {"whole": cv, phase: cv, ...}} over complete intervals with timings."""
    full = [r for r in records if not r["partial"] and r["wall_ns"] > 0 and r["weight"] > 0]
    metrics = {"ns/instruction": lambda r: r["instructions"] and r["wall_ns"] / r["instructions"],
               "wall ns": lambda r: r["wall_ns"], "cpu ns": lambda r: r["cpu_ns"]}
    out = {}
    for name, f in metrics.items():
        rows = [r for r in full if f(r) is not None]
        d = {"whole": cv([f(r) for r in rows])}
        by_phase: Dict[int, list] = {}
        for r in rows:
            by_phase.setdefault(r["phase"], []).append(f(r))
        d.update({p: cv(v) for p, v in by_phase.items()})
        out[name] = d
    return out


def footprints(path: str, config: EngineConfig, rows: int = HEAT_ROWS):
    """Footprints of the log's intervals replayed through the engine: (matrix, phases), sampled evenly."""
    engine = PhaseEngine(config)
    fps, phases = [], []
    engine.subscribe(lambda r, iv: (fps.append(r.footprint), phases.append(r.phase)))
    engine.feed_many(read_log(path))
    if not fps:
        return np.zeros((0, config.tracker.buckets)), []
    pick = np.unique(np.linspace(0, len(fps) - 1, min(rows, len(fps))).astype(int))
    return np.array([fps[i] for i in pick]), [phases[i] for i in pick]


def check_output(out: str) -> None:
    """InputError unless ``out`` names a file of a format matplotlib writes (by its extension)."""
    if os.path.isdir(out):
        raise InputError(f"-o {out}: is a directory; give a file name, e.g. {os.path.join(out, 'phases.png')}")
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    kinds = Figure().canvas.get_supported_filetypes()
    ext = os.path.splitext(out)[1].lower().lstrip(".")
    if ext not in kinds:
        raise InputError(f"-o {out}: unknown image format {('.' + ext) if ext else '(no extension)'}; "
                         f"use one of {', '.join('.' + k for k in sorted(kinds))}")
    from phasescope.sinks.base import check_replaceable
    check_replaceable(out, ".phasescope-plot-")  # an unwritable place is said before the drawing


def plot_log(path: str, out: str, config: EngineConfig, title: Optional[str] = None) -> dict:
    """Draw the four panels of the log at ``path`` into ``out`` (PNG, SVG, PDF: by extension); what
    was drawn: counts, and Figure 7's metrics and phases."""
    check_output(out)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    records = load_records(path)
    sampled = records[0]["instructions"] is None
    total = sum(r["weight"] for r in records)
    share: Dict[int, int] = {}
    for r in records:
        share[r["phase"]] = share.get(r["phase"], 0) + r["weight"]
    ranked = sorted(share, key=lambda p: (-share[p], p))
    main = ranked[:MAIN_PHASES]
    cmap = plt.get_cmap("tab20")
    color = {p: cmap(i % 20) for i, p in enumerate(main)}
    other = (0.75, 0.75, 0.75, 1.0)

    fig = plt.figure(figsize=(14, 10), constrained_layout=True)
    grid = fig.add_gridspec(3, 2, height_ratios=[1.1, 1, 1.2])
    work = f"{total / 1e9:.2f} s of sampled CPU time" if sampled else f"{total:,} instructions"
    fig.suptitle(title or f"phasescope: {path} ({len(records)} intervals, {work})")

    # 1. barcode: one row per thread, time on x (or interval number when times are unknown)
    ax = fig.add_subplot(grid[0, :])
    threads = list(dict.fromkeys(r["thread"] for r in records))
    timed = all(r["end_ns"] > 0 for r in records)
    t0 = min(r["start_ns"] or r["end_ns"] for r in records) if timed else 0
    for row, t in enumerate(threads):
        mine = [r for r in records if r["thread"] == t]
        if timed:
            spans = [((r["start_ns"] or r["end_ns"]) / 1e9 - t0 / 1e9, max(r["end_ns"] - (r["start_ns"] or r["end_ns"]), 1) / 1e9)
                     for r in mine]
        else:
            spans = [(r["thread_seq"], 1) for r in mine]
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=[color.get(r["phase"], other) for r in mine],
                       linewidth=0)
    ax.set_yticks(range(len(threads)))
    ax.set_yticklabels([f"thread {t}" for t in threads])
    ax.set_ylim(len(threads) - 0.5, -0.5)
    ax.set_xlabel("seconds since the first interval" if timed else "interval (per thread)")
    ax.set_title("phase barcode (one cell per interval)")
    handles = [Patch(color=color[p], label=f"P{p}") for p in main]
    if len(ranked) > len(main):
        handles.append(Patch(color=other, label=f"{len(ranked) - len(main)} other"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)

    # 2. share of execution
    ax = fig.add_subplot(grid[1, 0])
    labels = [f"P{p}" for p in main] + (["other"] if len(ranked) > len(main) else [])
    values = [share[p] / total for p in main] + ([sum(share[p] for p in ranked[len(main):]) / total]
                                                  if len(ranked) > len(main) else [])
    ax.barh(labels, values, color=[color[p] for p in main] + [other] * (len(labels) - len(main)))
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of sampled CPU time" if sampled else "share of executed instructions")
    ax.set_title("each phase's share of execution")
    for i, v in enumerate(values):
        ax.text(v + 0.01, i, f"{v:.1%}", va="center", fontsize=8)

    # 3. Figure 7: CV per phase vs the whole run
    ax = fig.add_subplot(grid[1, 1])
    cvs = metric_cvs(records)
    # only metrics that vary (a sampled window's CPU time is fixed: its CV, 0, would be a legend
    # entry with no bar), and the phases with one of them
    names = [m for m in cvs if any(v for v in cvs[m].values())]
    shown = [p for p in main[:8] if any(cvs[m].get(p) is not None for m in names)]
    groups = ["whole"] + shown
    if not names:
        ax.text(0.5, 0.5, "no per-interval timing varies in this log\n(it records no wall time per interval)",
                ha="center", va="center", transform=ax.transAxes, fontsize=9)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(groups))
    for i, m in enumerate(names):
        ys = [cvs[m].get(g) or 0.0 for g in groups]
        ax.bar(x + i * width - 0.4 + width / 2, ys, width, label=m)
    ax.set_xticks(x)
    ax.set_xticklabels(["whole run"] + [f"P{p}" for p in shown])
    ax.set_ylabel("coefficient of variation per interval")
    ax.set_title("homogeneity: CV within each phase vs the whole run (Fig. 7)")
    if names:
        ax.legend(fontsize=8)

    # 4. Figure 3: footprints of intervals
    ax = fig.add_subplot(grid[2, :])
    fp, fp_phases = footprints(path, config)
    if len(fp):
        im = ax.imshow(fp.T, aspect="auto", interpolation="nearest", cmap="viridis", origin="lower")
        fig.colorbar(im, ax=ax, label="footprint units (1/M of the interval)", pad=0.01)
        ax.set_ylabel("bucket")
        ax.set_xlabel(f"interval (replayed; {len(fp)} of {len(records)} shown)" if len(fp) < len(records)
                      else "interval (replayed)")
    ax.set_title(f"footprints of intervals (Fig. 3), {fp.shape[1] if len(fp) else config.tracker.buckets} buckets")
    _save(fig, out)
    return {"intervals": len(records), "phases": len(ranked), "threads": len(threads),
            "fig7": {"metrics": names, "phases": shown}}


def plot_locality_model(phases, out: str, predict: Optional[int] = None, title: Optional[str] = None) -> None:
    """Seed 004's picture as heat maps: each phase's predicted miss rate against input size (y) and
    cache size (x), one panel per phase; the measured runs' input sizes are marked (white lines and
    dots where the run measured the cache size), and ``predict`` (dashed). ``phases``: [(report, model)]
    as ``phasescope locality-model`` makes them."""
    check_output(out)
    import matplotlib.pyplot as plt
    from phasescope.engine.locality import CACHE_BYTES
    from phasescope.engine.locality_model import measured_curve

    caches = np.array(CACHE_BYTES, np.float64)
    n = max(1, len(phases))
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.6), squeeze=False, constrained_layout=True)
    for ax, (report, model) in zip(axes[0], phases):
        sizes = [r["input_size"] for r in report["runs"]]
        lo, hi = min(sizes) / 4, max(max(sizes) * 256, (predict or 0) * 2)
        ys = 2.0 ** (np.arange(np.floor(np.log2(lo) * 4), np.ceil(np.log2(hi) * 4) + 1) / 4)
        grid = np.array([model.miss_rates(y, caches) for y in ys])
        im = ax.pcolormesh(np.log2(caches), np.log2(ys), grid, vmin=0, vmax=1, cmap="magma", shading="nearest")
        for run in model.runs:
            y = np.log2(run.input_size)
            ax.axhline(y, color="white", lw=0.8)
            measured = measured_curve(run, caches)
            xs = [np.log2(c) for c, m in zip(caches, measured) if m is not None]
            ax.scatter(xs, [y] * len(xs), s=10, color="white", zorder=3)
        if predict is not None:
            ax.axhline(np.log2(predict), color="cyan", lw=1, ls="--")
        xt = np.log2(caches)[::2]
        ax.set_xticks(xt)
        ax.set_xticklabels([_short(2 ** x) for x in xt], rotation=45, fontsize=7)
        yt = np.arange(np.ceil(np.log2(lo)), np.floor(np.log2(hi)) + 1, 2)
        ax.set_yticks(yt)
        ax.set_yticklabels([_short(2 ** y) for y in yt], fontsize=7)
        ax.set_xlabel("cache size (fully associative LRU, 64-byte blocks)")
        ax.set_ylabel("input size")
        sym = next((b["symbol"] for b in report["top_code"] if b.get("symbol")), None)
        ax.set_title(f"P{report['phase']}" + (f" {sym}" if sym else ""), fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="predicted miss rate")
    fig.suptitle(title or "predicted miss rate by input size and cache size (white: measured runs)")
    _save(fig, out)


def _save(fig, out: str) -> None:
    """Write the figure whole (:func:`~phasescope.sinks.base.write_whole`: a stop signal midway
    leaves the old file; a failed write is exit 1, one line) and close it."""
    import matplotlib.pyplot as plt
    from phasescope.sinks.base import write_whole
    kind = os.path.splitext(out)[1].lower().lstrip(".")  # the temporary file's name has no such extension
    try:
        write_whole(out, lambda p: fig.savefig(p, dpi=110, format=kind), ".phasescope-plot-")
    finally:
        plt.close(fig)


def _short(n: float) -> str:
    """4096 -> 4K, 1048576 -> 1M, 2^30 -> 1G."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.0f}{unit}"
    return f"{n:.0f}"
