"""The live monitor: ``phasescope [device options] (-p PID | -n NAME | -f PROGRAM [ARGS...])``.

Data flow: :class:`~phasescope.session.TraceSession` events -> :class:`~phasescope.engine.PhaseEngine`
-> sinks (JSONL log, BBV, summary) and the view (:mod:`phasescope.view.snapshot`: rich dashboard or plain
lines). The loop runs on the main thread; SIGINT/SIGTERM only set a flag, so the engine is never
interrupted half-way and every exit path detaches cleanly and writes the summary.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import List, Optional

import frida
from rich.console import Console
from rich.live import Live

from phasescope import __version__
from phasescope.view.dashboard import render
from phasescope.engine.phase_engine import PhaseEngine
from phasescope.errors import InputError, PhasescopeError
from phasescope.view.snapshot import LiveState
from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.view.report import print_hot_code, print_report
from phasescope.target.session import (AgentError, Dropped, Ended, Forked, IntervalEvent, ModulesChanged, Output, ThreadExited, ThreadStarted,
                      TraceSession, resolve_device, resolve_target)
from phasescope.sinks.files import BbvWriter, JsonlLog, SummaryWriter
from phasescope.target.symbols import Symbolizer

#: Exit codes: 0 normal end (target exited 0, or detached on request), 1 target exited non-zero
#: or a runtime failure, 2 bad input, 3 target killed or crashed.
EXIT_OK, EXIT_TARGET_FAILED, EXIT_KILLED = 0, 1, 3
HOT_PHASES = 20  # phases whose top blocks are named and disassembled
TOP_BLOCKS = 8
HOT_REPORTED = 3  # phases whose hottest block the final report shows
OUTPUT_KEEP = 1 << 20  # bytes of a piped target's output kept to show after the dashboard closes


def add_device_options(p: argparse.ArgumentParser) -> None:
    """frida-tools' device options."""
    g = p.add_argument_group("device (as in frida-tools)")
    d = g.add_mutually_exclusive_group()
    d.add_argument("-D", "--device", metavar="ID", help="connect to the device with the given ID")
    d.add_argument("-U", "--usb", action="store_true", help="connect to USB device")
    d.add_argument("-H", "--host", metavar="HOST[:PORT]", help="connect to a remote frida-server")


def add_output_options(p: argparse.ArgumentParser) -> None:
    """Logs, display and run-length options shared by the live monitor and the demo."""
    add_engine_options(p)
    o = p.add_argument_group("output")
    o.add_argument("--log", metavar="FILE", help="per-interval JSON Lines log, flushed every interval")
    o.add_argument("--summary", metavar="FILE",
                   help="JSON summary (per phase, per thread, predictors), rewritten atomically every few "
                        "seconds and on every exit path")
    o.add_argument("--bbv", metavar="FILE", help="SimPoint .bb file, written as intervals arrive")
    o.add_argument("--no-dashboard", action="store_true",
                   help="plain line output (automatic when stdout is not a terminal)")
    o.add_argument("--duration", type=float, metavar="SECONDS", help="stop, detach and exit after SECONDS")
    o.add_argument("--status-every", type=float, default=5.0, metavar="SECONDS",
                   help="plain output: seconds between status lines (default 5)")
    o.add_argument("--refresh", type=float, default=4.0, metavar="HZ", help="dashboard refreshes per second (default 4)")
    o.add_argument("--stdio", choices=("inherit", "pipe"),
                   help="spawned target's stdio: inherit, or pipe (shown after the dashboard closes); "
                        "default: pipe with the dashboard, inherit without")


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] (-p PID | -n NAME | -f PROGRAM [ARGS...])\n"
              f"       {prog} {{demo,replay,export-bbv,bench}} ...",
        description="Live program-phase monitor: follows every thread of a native process with Frida's Stalker "
                    "and tracks and predicts its phases (Sherwood, Sair & Calder, ISCA 2003).",
        epilog="subcommands: demo (trace the bundled phased workload), replay (re-run the tracker over a log or "
               ".bb file), export-bbv (log -> SimPoint .bb), bench (tracing overhead vs native). "
               "-f takes the rest of the command line as the program and its arguments.")
    p.add_argument("--version", action="version", version=f"phasescope {__version__}")
    add_device_options(p)
    t = p.add_argument_group("target")
    t.add_argument("-p", "--attach-pid", dest="pid", type=int, metavar="PID", help="attach to PID")
    t.add_argument("-n", "--attach-name", dest="name", metavar="NAME", help="attach to the process named NAME")
    t.add_argument("-f", "--file", dest="argv", nargs=argparse.REMAINDER, metavar="PROGRAM [ARGS]",
                   help="spawn PROGRAM with ARGS (must come last)")
    add_output_options(p)
    return p


def _validate(args) -> None:
    if args.duration is not None and not 0 < args.duration < float("inf"):  # also rejects nan
        raise InputError(f"--duration must be positive (got {args.duration})")
    if not 0 < args.status_every < float("inf"):
        raise InputError(f"--status-every must be positive (got {args.status_every})")
    if not 0 < args.refresh <= 60:
        raise InputError(f"--refresh must be in (0, 60] (got {args.refresh})")
    if args.argv is not None and not args.argv:
        raise InputError("-f needs a PROGRAM")


def _short(target, width: int = 40) -> str:
    """The target as the dashboard header shows it: paths cut to their basenames, at most ``width``."""
    if target.argv is None:
        return target.describe()
    text = " ".join(os.path.basename(a) if os.sep in a else a for a in target.argv)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Stop:
    """SIGINT/SIGTERM set a flag; a second signal aborts the wait for the agent."""

    def __init__(self):
        self.requested: Optional[str] = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


class Monitor:
    """One live run: session -> engine -> sinks and view, until the target ends or we detach."""

    SUMMARY_EVERY = 5.0

    def __init__(self, args, argv: Optional[List[str]] = None):
        _validate(args)
        self.args = args
        self.config = engine_config_from_args(args)
        # Open every output first: an unwritable path fails before we touch the target.
        self.log = JsonlLog(args.log) if args.log else None
        self.bbv = BbvWriter(args.bbv) if args.bbv else None
        self.summary_writer = SummaryWriter(args.summary) if args.summary else None
        self.dashboard = not args.no_dashboard and sys.stdout.isatty()
        stdio = args.stdio or ("pipe" if self.dashboard else "inherit")
        device = resolve_device(args.device, args.usb, args.host)
        self.target = resolve_target(device, pid=args.pid, name=args.name, argv=argv or args.argv)
        self.session = TraceSession(device, self.target, interval=self.config.tracker.interval, stdio=stdio)
        self.engine = PhaseEngine(self.config)
        self.output = bytearray()
        self.output_dropped = 0
        self.ended: Optional[Ended] = None
        self.stop_reason: Optional[str] = None
        self.forked: List[int] = []  # children the target forked (not traced)
        self.agent_errors: List[str] = []
        self.started_wall = time.time()
        self._next_status = time.monotonic() + args.status_every

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> int:
        with _Stop() as stop:
            self.session.start()
            self.symbols = Symbolizer(self.session)
            self.view = LiveState(self.engine, _short(self.target), self.session.pid, self.symbols.describe)
            self.view.status = "tracing"
            self.view.threads_followed = len(self.session.threads)
            self.engine.on("interval", self._on_interval)
            if self.log is not None:
                self.engine.on("interval", lambda r, iv: self.log.write(iv, r))
            if self.bbv is not None:
                self.engine.on("interval", lambda r, iv: self.bbv.write(iv))
            try:
                if self.dashboard:
                    self._loop_dashboard(stop)
                else:
                    self.engine.on("interval", self._print_change)
                    self._loop(stop, self._plain_tick)
            except PhasescopeError as e:  # e.g. the log's disk is full: detach, keep the summary, say why
                self.stop_reason = str(e)
                raise
            finally:
                self._finish()
        return self._exit_code()

    def _loop(self, stop: _Stop, tick) -> None:
        deadline = None if self.args.duration is None else time.monotonic() + self.args.duration
        next_summary = time.monotonic() + self.SUMMARY_EVERY
        for event in self.session.events(timeout=0.05):
            if event is not None:
                self._handle(event)
                if isinstance(event, Ended):
                    break
            now = time.monotonic()
            if self.stop_reason is None:
                if stop.requested:
                    self._request_stop(f"stopped by {stop.requested}")
                elif deadline is not None and now >= deadline:
                    self._request_stop(f"--duration {self.args.duration:g}s reached")
            if now >= next_summary:
                self._resolve_hot_code()
                if self.summary_writer is not None:
                    self.summary_writer.write(self._summary())
                next_summary = now + self.SUMMARY_EVERY
            tick(now)

    def _request_stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.view.status = "detaching"
        self._resolve_hot_code()  # last chance to ask the agent
        self.session.stop()  # queues the final partial intervals, then Ended("detached")

    def _on_interval(self, r, iv) -> None:
        if r.new_phase:  # name its hot code now, while the code is surely mapped
            self._resolve_hot_code([self.engine.stats.phases[r.phase]])

    def _resolve_hot_code(self, phases=None) -> None:
        """Name the top blocks of the main phases and disassemble the hottest one of each."""
        phases = self.engine.stats.by_share()[:HOT_PHASES] if phases is None else phases
        tops = [p.top_code(TOP_BLOCKS) for p in phases]
        self.symbols.resolve(b["pc"] for top in tops for b in top if b["pc"] is not None)
        for top in tops:
            if top and top[0]["pc"] is not None:
                self.symbols.block(top[0]["pc"])

    def _handle(self, event) -> None:
        if isinstance(event, IntervalEvent):
            self.engine.feed(event.interval)
        elif isinstance(event, (ThreadStarted, ThreadExited)):
            self.view.threads_followed = len(self.session.threads)
        elif isinstance(event, Dropped):
            self.view.dropped = event.records
        elif isinstance(event, Output):
            self._keep_output(event.data)
        elif isinstance(event, ModulesChanged):
            self.symbols.invalidate()
        elif isinstance(event, AgentError):
            self.agent_errors.append(event.message)
            if not self.dashboard:
                print(f"phasescope: agent error: {event.message} (the trace may be incomplete)", file=sys.stderr,
                      flush=True)
        elif isinstance(event, Forked):
            self.forked.append(event.pid)
            if not self.dashboard:  # the dashboard owns the screen: said once at the end instead
                print(self._fork_note([event.pid]), file=sys.stderr, flush=True)
        elif isinstance(event, Ended):
            self.ended = event
            self.view.status = event.how

    def _keep_output(self, data: bytes) -> None:
        if self.dashboard:
            self.output += data
            if len(self.output) > OUTPUT_KEEP:
                cut = len(self.output) - OUTPUT_KEEP
                self.output_dropped += cut
                del self.output[:cut]
        else:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()

    # -- views ------------------------------------------------------------------------------------

    def _loop_dashboard(self, stop: _Stop) -> None:
        console = Console()
        period = 1.0 / self.args.refresh
        state = {"next": 0.0}

        with Live(console=console, screen=True, auto_refresh=False, redirect_stdout=False,
                  redirect_stderr=False) as live:
            def tick(now):
                if now >= state["next"]:
                    live.update(render(self.view.snapshot(), console.width, console.height), refresh=True)
                    state["next"] = now + period

            self._loop(stop, tick)

    def _plain_tick(self, now: float) -> None:
        if now >= self._next_status:
            print(self.view.status_line(), flush=True)
            self._next_status = now + self.args.status_every

    def _print_change(self, r, iv) -> None:
        if r.phase_changed or r.new_phase:
            print(self.view.change_line(r), flush=True)

    # -- the end ----------------------------------------------------------------------------------

    def _summary(self) -> dict:
        s = self.engine.summary()
        s["phasescope"] = __version__
        s["target"] = {"description": self.target.describe(), "pid": self.session.pid,
                       "spawned": self.target.spawn}
        s["session"] = {
            "started": self.started_wall,
            "elapsed_s": time.time() - self.started_wall,
            "interval": self.config.tracker.interval,
            "threads_followed": len(self.session.threads),
            "dropped_records": self.session.dropped.records,
            "dropped_instructions": self.session.dropped.instructions,
            "forked": self.forked,
            "agent_errors": self.agent_errors,
        }
        for p in s["phases"]:
            for block in p["top_code"]:
                block["symbol"] = None if block["pc"] is None else self.symbols.describe(block["pc"])
            hottest = p["top_code"][0] if p["top_code"] else None
            if hottest is not None and hottest["pc"] is not None:
                hottest["disassembly"] = [f"{a:#x}: {text}" for a, text in self.symbols.block(hottest["pc"])]
        end = self.ended
        s["end"] = {"how": end.how if end else "aborted", "code": end.code if end else None,
                    "signal": end.signal if end else None, "reason": self.stop_reason}
        return s

    def _finish(self) -> None:
        """Every exit path: detach if still attached, write the summary, close the logs."""
        if self.ended is None:
            try:
                self.session.stop()
            finally:
                self.ended = self.session.ended
        if self.session.abandoned or self.session.unload_stuck:
            self.stop_reason = "; ".join(filter(None, (self.stop_reason, self.session.abandoned,
                                                       self.session.unload_stuck)))
        if self.ended is not None and self.ended.how == "detached" and self.target.spawn and self.session.stdio == "pipe":
            # Its stdout is a pipe to us: once we exit it would die of SIGPIPE at its next write.
            self.stop_reason = (self.stop_reason or "stopped") + "; spawned target terminated, its output was piped"
            try:
                self.session.device.kill(self.session.pid)
            except frida.InvalidOperationError:
                pass  # it ended meanwhile
        try:
            summary = self._summary()
            if self.summary_writer is not None:
                self.summary_writer.write(summary)
        finally:
            for sink in (self.log, self.bbv):
                if sink is not None:
                    sink.close()
        if self.output:
            if self.output_dropped:
                print(f"[phasescope: {self.output_dropped} earlier bytes of target output not kept]", file=sys.stderr)
            sys.stdout.buffer.write(bytes(self.output))
            sys.stdout.flush()
        print_report(summary, top=20)
        print_hot_code(summary, top=HOT_REPORTED)
        self.summary = summary

    def _fork_note(self, pids: List[int]) -> str:
        pid = self.session.pid
        children = ", ".join(str(p) for p in pids[:10]) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")
        return f"phasescope: pid {pid} forked pid {children}; following only the original process (pid {pid})"

    def _exit_code(self) -> int:
        if self.dashboard and self.forked:
            print(self._fork_note(self.forked), file=sys.stderr)
        end = self.ended
        how = end.describe() if end else "ended"
        msg = f"phasescope: target {self.target.describe()} (pid {self.session.pid}) {how}"
        if self.stop_reason:
            msg += f" ({self.stop_reason})"
        print(msg, file=sys.stderr)
        if self.session.abandoned:
            return EXIT_TARGET_FAILED  # detached without the last intervals
        if end is None or end.how in ("detached", "exec"):  # exec: it runs on, as another program
            return EXIT_OK
        if end.how == "exited":
            return EXIT_OK if end.code == 0 else EXIT_TARGET_FAILED
        return EXIT_KILLED


def run(args, argv: Optional[List[str]] = None) -> int:
    """Run the live monitor; ``argv`` overrides the spawned program (used by ``phasescope demo``)."""
    if argv is None and args.pid is None and args.name is None and args.argv is None:
        raise InputError("give a target: -p PID, -n NAME or -f PROGRAM [ARGS...] (or try: phasescope demo)")
    return Monitor(args, argv).run()
