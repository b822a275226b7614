"""The dashboard's layout at the sizes people use: every figure whole at 80x24, 100x30 and 160x48,
and a terminal below 80x24 says what it leaves out. Rendered from a snapshot whose figures are
known, so each can be looked for on the screen."""

import re

import numpy as np
import pytest
from rich.console import Console

from phasescope.view.dashboard import render
from phasescope.view.snapshot import ChangeRow, LABELS, PhaseRow, ScoreRow, Snapshot, ThreadRow
from phasescope.engine.predict import PREDICTORS, PRIMARY


def snapshot(locality=False):
    scores = [ScoreRow(LABELS[n] + (" *" if n == PRIMARY else ""), 0.987, 1.0 if i % 2 else 0.456, 0.999)
              for i, n in enumerate(sorted(PREDICTORS, key=lambda n: n != PRIMARY))]
    phases = [PhaseRow(p, share, 12 + p, 34.5, f"libsqlite3.so.0!sqlite3VdbeExec+0x{p:x}4d2",
                       0.425 if locality else None)
              for p, share in enumerate((0.388, 0.366, 0.127, 0.104, 0.015))]
    return Snapshot(target="/usr/bin/python3 workload.py --with a --long command line that goes on and on",
                    pid=123456, status="tracing", threads_followed=3, weight=13_400_000_000, unit="cpu_ns",
                    mode="sampled 1000 Hz", intervals=134, rate=9.2, dropped=0, elapsed=15.0,
                    threads=[ThreadRow(4242 + t, t, 26, 4, 0.86, 100 - t, tuple(range(5)) * 20, 7, (6, 7) * 50) for t in range(3)],
                    footprints=np.random.default_rng(0).random((60, 32)), footprint_phases=tuple([1, 2, 3] * 20),
                    phases=phases, scores=scores,
                    changes=[ChangeRow("03:04:12", 127 + k, 4242, k, k + 1) for k in range(6)],
                    locality_size=1 << 20 if locality else None)


def screen(s, width, height):
    console = Console(width=width, height=height, record=True, color_system=None, file=open("/dev/null", "w"))
    console.print(render(s, width, height))
    return console.export_text()


@pytest.mark.parametrize("width,height", [(80, 24), (100, 30), (160, 48)])
@pytest.mark.parametrize("locality", [False, True])
def test_every_figure_is_whole(width, height, locality):
    text = screen(snapshot(locality), width, height)
    lines = text.splitlines()
    assert len(lines) <= height and all(len(line) <= width for line in lines)
    for figure in ("pid 123456", "cpu 13.4s", "intervals 134 (9.2/s)", "dropped 0", "threads 3",
                   "38.8%", "36.6%", "12.7%", "10.4%", "34.5", "99%", "46%", "100%", "86%", "M7"):
        assert figure in text, (figure, text)
    if locality:
        assert "42%" in text
    assert LABELS[PRIMARY] + " *" in text  # the shown predictor is listed first, whatever the height
    assert "03:04:12 #132" in text  # the last phase change has room
    assert "%…" not in text  # what gives way is text (a code name, the command line), never a figure


def test_the_header_breaks_between_fields_not_inside_them():
    for width in (80, 100, 109):
        head = screen(snapshot(), width, 24).splitlines()[:2]
        assert head[0].startswith("phasescope /usr/bin/python3") and "pid 123456" in head[0]
        assert head[1].startswith("threads 3") and head[1].rstrip().endswith("15s")


def test_a_small_terminal_says_what_it_leaves_out():
    text = screen(snapshot(), 60, 12)
    assert "terminal 60x12" in text and "80x24" in text
    assert "4242" in text  # the threads are still shown


def test_the_end_of_run_report_fits_80_columns(monkeypatch):
    """Sampled and exact summaries, printed to an 80-column terminal: every share whole."""
    import io
    from phasescope.engine import EngineConfig, PhaseEngine
    from phasescope.engine.interval import Interval
    from phasescope.engine.tracker import preset
    from phasescope.view.report import print_report

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "80")
    rng = np.random.default_rng(1)
    # exact: a transition ID 0 (the widest label); default: ID 0 is a phase (its label is nearest)
    for mode, name in (("exact", "transition"), ("exact", "default"), ("sampled", "sampled")):
        tracker = preset("confirmed", transition_label="transition") if name == "transition" else preset(name)
        engine = PhaseEngine(EngineConfig(tracker=tracker))
        for i in range(60):
            keys = (np.arange(20, dtype=np.uint64) + 100 * (i // 20)) << np.uint64(12)
            counts = rng.integers(1, 50, 20).astype(np.uint64)
            engine.feed(Interval(1, i, None if mode == "sampled" else int(counts.sum()), keys, counts,
                                 start_ns=i * 10**8, end_ns=(i + 1) * 10**8, mode=mode,
                                 samples=int(counts.sum()) if mode == "sampled" else 0, period_ns=10**6,
                                 os={"cpu_ns": 10**8, "minflt": 0, "majflt": 0, "nvcsw": 0, "nivcsw": 0}))
        out = Terminal()
        summary = engine.summary()
        print_report(summary, 20, out)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # the terminal's colours
        assert all(len(line) <= 80 for line in text.splitlines()), text
        for p in summary["phases"][:20]:
            assert f"{100 * p['share']:.1f}%" in text
        assert "…" not in text
        assert ("0 (transition)" in text) == (name == "transition")  # a new phase's first interval is unconfirmed


def test_report_says_what_exact_mode_did_not_follow():
    # issue 32: what exact mode cannot count (a JVM thread's first 20 ms) is said in the report too,
    # not only in the line at the time; a summary without it (a replayed log) prints no such line.
    import io
    from phasescope.engine import EngineConfig, PhaseEngine
    from phasescope.engine.interval import Interval
    from phasescope.view.report import print_report
    engine = PhaseEngine(EngineConfig())
    keys, counts = np.arange(4, dtype=np.uint64) << np.uint64(12), np.full(4, 10, np.uint64)
    engine.feed(Interval(1, 0, 40, keys, counts, start_ns=0, end_ns=10**8))
    summary = engine.summary()
    out = io.StringIO()
    print_report(summary, 20, out)
    assert "could not follow" not in out.getvalue()
    summary["session"] = {"not_followed": ["the JVM (libjvm.so) exactly: what its threads run in their first 20 ms "
                                           "is not counted (issue 32)"]}
    out = io.StringIO()
    print_report(summary, 20, out)
    assert "exact mode could not follow the JVM (libjvm.so) exactly: what its threads run in their first 20 ms" in \
        " ".join(out.getvalue().split())
    summary["session"]["not_followed_more"] = 3  # a fault's reason names its PC: past 16, only counted
    out = io.StringIO()
    print_report(summary, 20, out)
    assert "exact mode could not follow 3 more (said at the time)" in out.getvalue()


def test_a_slow_draw_spaces_out_the_next_one():
    # a draw that takes longer than the refresh period must not take the live loop's whole time:
    # at 160x50 on a loaded machine a draw took 0.3 s, and a 4 Hz dashboard then drew between
    # every two intervals (2 intervals/s processed, a backlog of minutes after Ctrl-C)
    import time
    from phasescope.view.screen import DRAW_SHARE, DashboardScreen

    def slow(width, height):
        time.sleep(0.05)
        return "x"

    screen = DashboardScreen(slow, hz=60)
    with screen:
        now = time.monotonic()
        screen.tick(now)
        assert screen.due >= now + DRAW_SHARE * 0.05
        # the caller's own work between its ``now`` and the tick is not counted as drawing
        screen.draw = lambda width, height: "x"
        time.sleep(max(0.0, screen.due - time.monotonic()))
        now = time.monotonic()
        time.sleep(0.2)
        screen.tick(now)
    assert screen.due < now + 0.4


def test_a_state_that_did_not_change_is_drawn_once_a_second(monkeypatch):
    # A sleeping target, one waiting for input, or one sampled at 97 Hz (a window a second): four
    # draws a second of an unchanged state cost 5-10% of a core for nothing. Drawn again when the
    # version moves, else each IDLE_REDRAW for the header's clock. The times are the caller's
    # (tick's ``now``), so nothing here waits.
    from phasescope.view import screen as screen_module
    from phasescope.view.screen import IDLE_REDRAW, DashboardScreen

    monkeypatch.setattr(screen_module, "DRAW_SHARE", 0)  # a draw slowed by load spaces out none here
    draws, version = [], [0]
    screen = DashboardScreen(lambda width, height: draws.append(width) or "x", hz=4, version=lambda: version[0])
    with screen:
        t = 1000.0
        screen.tick(t)
        screen.tick(t + 0.25)
        screen.tick(t + 0.5)  # periods with nothing new
        assert len(draws) == 1
        version[0] += 1  # an interval came
        screen.tick(t + 0.75)
        assert len(draws) == 2
        for k in range(1, 4):
            screen.tick(t + 0.75 + k * 0.25)
        assert len(draws) == 2
        screen.tick(t + 0.75 + IDLE_REDRAW)  # nothing new for IDLE_REDRAW: drawn for the clock
        assert len(draws) == 3
        always = DashboardScreen(lambda width, height: draws.append(width) or "x", hz=4)  # no version
        always.tick(t)
        always.tick(t + 0.25)
        assert len(draws) == 5


def test_the_report_prints_names_as_they_are():
    # a symbol or argument with ":name:" in it is printed as it is, not as rich's emoji for it
    import io
    from phasescope.view.report import print_hot_code
    block = {"key": 1, "pc": 0x401000, "share": 0.9, "symbol": "prog!a:smile:b",
             "disassembly": ["0x401000: jne :fire:"]}
    summary = {"phases": [{"phase": 0, "share": 1.0, "instructions": None, "top_code": [block]}]}
    out = io.StringIO()
    print_hot_code(summary, 20, out)
    assert "P0 (100.0% of CPU time): prog!a:smile:b, 90% of the phase's sampled CPU time" in out.getvalue()
    assert "    0x401000: jne :fire:" in out.getvalue()


@pytest.mark.parametrize("mode, said", [("sampled", "0.00 s CPU sampled"), ("exact", "0 instructions")])
def test_before_its_first_interval_a_run_counts_in_its_mode_s_unit(mode, said):
    """A sampled run said "0 instructions" until its first window (a stopped or idle target: for
    good; stop 47)."""
    from phasescope.engine import EngineConfig, PhaseEngine
    from phasescope.view.snapshot import LiveState
    state = LiveState(PhaseEngine(EngineConfig()), "prog", 1, lambda pc: "", mode=mode)
    assert f"0 intervals, {said}," in state.status_line()
    assert state.snapshot().unit == ("instructions" if mode == "exact" else "cpu_ns")


def test_a_stopped_target_is_shown_stopped_only_while_tracing():
    from phasescope.engine import EngineConfig, PhaseEngine
    from phasescope.view.snapshot import LiveState
    state = LiveState(PhaseEngine(EngineConfig()), "prog", 77, lambda pc: "", stopped=lambda: True)
    state.status = "tracing"
    assert state.status_line().split("] ", 1)[1].startswith("target stopped (kill -CONT 77 continues it):")
    assert state.snapshot().status == state.shown_status
    state.status = "detaching"
    assert state.shown_status == "detaching"


def test_the_report_marks_a_folded_phase_with_the_phase_that_counts_it():
    # A passage's phase (ID 1) retires into phase 0 (``retire``): before r48d the end-of-run report
    # said "2 phases" and listed 1 as a phase of its own, where the log and the summary's
    # merged_into had folded it (live bzip2: "13 phases", 4 at the end).
    import io
    from phasescope.view.report import print_report
    from test_stats_settled import on_footprints
    from test_tracker_retire import passage

    engine, _ = on_footprints(passage(0))
    out = io.StringIO()
    print_report(engine.summary(), 20, out)
    text = out.getvalue()
    assert "2 phases (1 folded into others: 1 at the end)" in text
    assert re.search(r"│ 1>0 +│", text), text
