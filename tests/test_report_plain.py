"""The end-of-run report to a file or pipe is written without rich when rich would write exactly
that (issue 31: rich's import and layout were a sixth of a sampled run's fixed CPU): the same
bytes as rich's, on summaries of real engine runs and on names rich would change."""

from __future__ import annotations

import io

import numpy as np
import pytest

from phasescope.engine import EngineConfig, PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.tracker import preset
from phasescope.view import report


def summary(mode: str, tracker: str, phases: int = 3, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    engine = PhaseEngine(EngineConfig(tracker=preset(tracker)))
    for i in range(20 * phases):
        keys = (np.arange(20, dtype=np.uint64) + 100 * (i // 20)) << np.uint64(12)
        counts = rng.integers(1, 50, 20).astype(np.uint64)
        engine.feed(Interval(1, i, None if mode == "sampled" else int(counts.sum()), keys, counts,
                             start_ns=i * 10**8, end_ns=(i + 1) * 10**8, mode=mode,
                             samples=int(counts.sum()) if mode == "sampled" else 0, period_ns=10**6))
    s = engine.summary()
    for n, p in enumerate(s["phases"]):  # hot code as the live run names it
        p["top_code"][0].update(symbol=f"prog!loop_{n}", disassembly=[f"0x{n:x}10: mov rax, qword ptr [rip + 0x{n}8]",
                                                                        f"0x{n:x}17: jne 0x{n:x}10"])
    return s


def both(s: dict, monkeypatch, top: int = 20):
    """(the report without rich, the report through rich) of summary ``s``, to a file."""
    def printed():
        out = io.StringIO()
        report.print_report(s, top, out)
        report.print_hot_code(s, 3, out)
        return out.getvalue()

    with monkeypatch.context() as m:
        m.setattr(report, "_console", None)  # the plain path must not touch rich
        plain = printed()
    with monkeypatch.context() as m:
        m.setattr(report, "_plain_text", lambda items, width: None)
        rich = printed()
    return plain, rich


@pytest.mark.parametrize("mode,tracker,phases,top", [("exact", "default", 3, 20), ("sampled", "sampled", 4, 20),
                                                      ("exact", "paper", 6, 2)])
def test_the_plain_report_is_rich_s_to_the_byte(monkeypatch, mode, tracker, phases, top):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    plain, rich = both(summary(mode, tracker, phases), monkeypatch, top)
    assert plain == rich and "┏" in plain and "prog!loop_0" in plain


@pytest.mark.parametrize("symbol", ["prog!" + "x" * 130,  # longer than the width: rich wraps it
                                    "prog!f:smile:",  # an emoji code
                                    "libc.so.6!café"])  # not ASCII
def test_what_rich_would_change_goes_through_rich(monkeypatch, symbol):
    s = summary("sampled", "sampled")
    s["phases"][0]["top_code"][0]["symbol"] = symbol
    out = io.StringIO()
    report.print_hot_code(s, 3, out)
    with monkeypatch.context() as m:
        m.setattr(report, "_plain_text", lambda items, width: None)
        rich = io.StringIO()
        report.print_hot_code(s, 3, rich)
    assert out.getvalue() == rich.getvalue()
    items = [(f"P0: {symbol}", {"markup": False})]
    assert report._plain_text(items, report.WIDTH) is None


def test_a_forced_colour_goes_through_rich(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    out = io.StringIO()
    report.print_report(summary("sampled", "sampled"), 20, out)
    assert "\x1b[" in out.getvalue()  # rich's styles, as before


def test_what_exact_mode_did_not_follow_is_one_line_however_long(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    s = summary("exact", "default")
    reason = "the JVM (libjvm.so) exactly: what its threads run in their first 20 ms is not counted (issue 32)"
    s["session"] = {"not_followed": [f"{reason}; {reason}"], "not_followed_more": 3}
    plain, rich = both(s, monkeypatch)
    assert plain == rich and f"exact mode could not follow {reason}; {reason}\n" in plain
