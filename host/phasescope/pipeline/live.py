"""One live run: a trace session feeds the engine, whose results go to the sinks and the view,
until the target ends or phasescope detaches.

The loop runs on the main thread; a stop request (Ctrl-C, SIGTERM, ``--duration``) only sets a
flag, so the engine is never interrupted half-way and every exit path detaches cleanly, writes
the summary and closes the logs.
"""

from __future__ import annotations

import os
import signal
import time
from typing import List, Optional, TextIO

from phasescope import __version__
from phasescope.engine import EngineConfig
from phasescope.pipeline.flow import Flow
from phasescope.pipeline.loop_clock import TICK, LoopClock, on_terminal
from phasescope.pipeline.processes import ProcessEngines
from phasescope.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_KILLED, EXIT_OK, PhasescopeError
from phasescope.sinks.base import Sink
from phasescope.sources.device import has_ended, is_local
from phasescope.sources.procfs import process_comm
from phasescope.sources.protocol import QUERY_TIMEOUT, Agent, Bursts, Locality, Session, Wakes, capability
from phasescope.sources.events import (AgentError, BurstEvent, ChildEnded, Dropped, Ended, Forked, IntervalEvent,
                                      ModulesChanged, Output, SAMPLED_INSTEAD, ThreadExited, ThreadStarted,
                                      Unfollowable)
from phasescope.sources.modules import KERNEL_KEY, KERNEL_NAME
from phasescope.sources.output import OutputRelay
from phasescope.sources.stopped import in_foreground, is_stopped, wait_while_stopped
from phasescope.sources.symbols import Symbolizer
from phasescope.view.plain import PlainView, said as _said
from phasescope.view.report import print_hot_code, print_report
from phasescope.view.snapshot import LiveState

HOT_PHASES = 20  # phases whose top blocks are named and disassembled
TOP_BLOCKS = 8
HOT_REPORTED = 3  # phases whose hottest block the final report shows
PASS_ON_GRACE = 3.0  # seconds a spawned target has to end on a stop signal passed on, then on SIGTERM
DRAIN_S = 1.0  # seconds the events a cut-short loop left may take to reach the end (sampled mode: at once)
NOT_FOLLOWED_KEPT = 16  # reasons exact mode could not follow kept in the summary (the rest counted)


class LiveRun:
    """Session -> engine -> sinks and view. ``session``: a :class:`~phasescope.sources.protocol.Session`
    (exact mode's agent session, or sampled mode's); ``dashboard``: the rich screen,
    else plain lines on ``out``; ``duration``: detach after so many seconds; ``owns_target``: a
    spawned target that must not outlive the run (the demo's workload)."""

    def __init__(self, session: Session, config: EngineConfig, sinks: List[Sink], *, dashboard: bool,
                 out: TextIO, title: str, refresh: float = 4.0, status_every: float = 5.0,
                 duration: Optional[float] = None, locality_size: Optional[int] = None,
                 owns_target: bool = False):
        self.session = session
        self.locality_size = locality_size  # --locality: the dashboard's miss-rate column (bytes)
        self.target = session.target
        self.config = config
        self.dashboard = dashboard
        self.out = out
        self.title = title
        self.refresh = refresh
        self.status_every = status_every
        self.duration = duration
        self.owns_target = owns_target  # the demo's workload: ended with the run, never left running
        bursts = capability(session, Bursts)  # new phases get one exact interval each
        self.flow = Flow(config, sinks, burst=bursts.burst if bursts is not None else None)
        self.agent = capability(session, Agent)  # an agent in the target: it may not answer, or not unload
        self.locality = capability(session, Locality)
        self.engine = self.flow.engine
        self.engine.subscribe(self._on_interval)
        #: --locality: phases for which a window was asked of the agent (one ask per phase)
        self.window_asked: set = set()
        self.terminated = False  # a piped spawned target was terminated when phasescope detached
        #: (signal, deadline): a stop signal was passed on to the spawned target, which should end by then
        self.passed_on: Optional[tuple] = None
        self.output = OutputRelay(hold=session.stdio == "pipe" and dashboard)
        self.ended: Optional[Ended] = None
        self.stop_reason: Optional[str] = None
        self.forked: List[int] = []  # children the target forked (not traced)
        #: children followed (sampled mode), each with its own engine, feeding the same sinks
        self.children = ProcessEngines(config, [self.flow.sinks.on_interval])
        self.agent_errors: List[str] = []
        self.not_followed: List[str] = []  # what exact mode could not follow or count, and why
        self.not_followed_more = 0  # reasons past NOT_FOLLOWED_KEPT (a fault's names its PC: one per PC)
        self.started_wall = time.time()
        self.summary: Optional[dict] = None
        self.symbols: Optional[Symbolizer] = None
        self.waited = 0.0  # seconds spent waiting for a stopped target to continue (part of --duration)
        #: the traced process's windows of the current wake-up, classified together once it has
        #: brought them all (a session that wakes on data ends each wake-up with another event or None)
        self.woken: List = []
        #: someone reads the run as it goes: the loop also wakes on the clock (pipeline/loop_clock.py)
        self.watched = dashboard or self.flow.sinks.watched or on_terminal(out)

    # -- the loop ---------------------------------------------------------------------------------

    def run(self, stop) -> int:
        """Trace until the target ends or ``stop.requested`` is set (a
        :class:`~phasescope.commands.runner.StopRequest`); the exit code."""
        self._finishing = stop.finishing  # once the loop detaches (_request_stop)
        try:
            if self._stayed_stopped(stop):
                return EXIT_OK
            self.session.start()
            self.symbols = Symbolizer(self.session)
            if self.agent is not None:
                self.agent.before_final_ack = self._resolve_hot_code  # the process is about to go
            pid = self.session.pid
            self.state = LiveState(self.engine, self.title, pid, self.symbols.describe, self.session.describe_mode(),
                                   locality_size=self.locality_size, stopped=lambda: is_stopped(pid))
            self.state.status = "tracing"
            self.state.threads_followed = len(self.session.threads)
            self.flow.start(self._start_info())
            self.view = self._dashboard() if self.dashboard else PlainView(self.state, self.out, self.status_every)
            try:
                with self.view:
                    self._loop(stop)
            except PhasescopeError as e:  # e.g. the log's disk is full: detach, keep the summary, say why
                self.stop_reason = str(e)
                raise
            except KeyboardInterrupt:  # a second stop signal: no more waiting; finish now (exit 130)
                pass
            finally:
                stop.finishing()
                if self.stop_reason is None and self.passed_on is None and stop.requested:
                    if self.ended is not None and self.target.spawn:  # it ended of it before the loop saw it
                        self.passed_on = (stop.requested, 0.0)
                    else:
                        self.stop_reason = f"stopped by {stop.requested}"  # a second signal came before the loop saw it
                self._finish()
        finally:
            stop.finishing()  # closing the sinks writes --profile
            self.flow.close()
            if self.symbols is not None:
                self.symbols.close()
        return self._exit_code()

    def _stayed_stopped(self, stop) -> bool:
        """A target to attach that the user stopped (SIGSTOP, Ctrl-Z) is traced once it runs, as
        strace -p and perf -p do (attaching would resume it: sources/stopped.py). True if the run
        ended first (Ctrl-C, --duration): nothing traced, said in one line."""
        pid = self.target.pid
        if self.target.spawn or pid is None or not is_stopped(pid):
            return False
        _said(print, f"phasescope: pid {pid} is stopped; tracing starts when it continues (kill -CONT {pid})",
              file=self.out, flush=True)
        began = time.monotonic()

        def give_up():
            if stop.requested:
                return f"stopped by {stop.requested}"
            if self.duration is not None and time.monotonic() - began >= self.duration:
                return f"--duration {self.duration:g}s reached"
            return None

        reason = wait_while_stopped(pid, give_up)
        self.waited = time.monotonic() - began
        if reason is None:
            return False
        _said(print, f"phasescope: target {self.target.describe()} stayed stopped; nothing traced ({reason})",
              file=self.out, flush=True)
        return True

    def _loop(self, stop) -> None:
        deadline = None if self.duration is None else time.monotonic() + self.duration - self.waited
        clock = LoopClock(self.view, self.watched, deadline, time.monotonic())

        def due() -> float:
            """Seconds until the loop has something to do on the clock (a stop signal ends the wait)."""
            return clock.due(time.monotonic(), None if self.passed_on is None else self.passed_on[1])

        def on_the_clock() -> None:
            """After each event (and a wake-up's windows): a stop signal, --duration, a checkpoint, the view."""
            now = time.monotonic()
            if self.stop_reason is None:
                if self.passed_on is not None:
                    if now >= self.passed_on[1]:
                        self._insist(now)
                elif stop.requested:
                    if not self._pass_on(stop.requested, now):
                        self._request_stop(f"stopped by {stop.requested}")
                elif deadline is not None and now >= deadline:
                    self._request_stop(f"--duration {self.duration:g}s reached")
            if clock.checkpoint_due(now):
                self._checkpoint()
            self.view.tick(now)

        on_the_clock()  # the first status line (tracing has started), before the first wait
        fresh = False  # windows came since the last wait's end
        wakes = capability(self.session, Wakes)  # sleeps until data, an event or a signal comes
        for event in wakes.events_until(due) if wakes is not None else self.session.events(timeout=TICK):
            if isinstance(event, IntervalEvent):
                fresh = True
                if wakes is not None and event.interval.pid is None:
                    self.woken.append(event.interval)
                    continue
            if self.woken:
                self._feed_woken()
                if event is not None:  # as after each window: a Ctrl-C is passed on before the end that came with it
                    on_the_clock()
            if event is not None:
                self._handle(event)
                if isinstance(event, Ended):
                    break
            else:  # a wait's end: did it bring windows?
                clock.flowing, fresh = fresh, False
            on_the_clock()

    def _feed_woken(self) -> None:
        """The wake-up's windows to the engine in one batch (its numpy work done once for all, the
        same results: docs/performance.md, stop 46)."""
        if self.woken:
            woken, self.woken = self.woken, []
            self.flow.feed_together(woken)

    def _request_stop(self, reason: str) -> None:
        """Detach: the run finishes from here (a further stop signal is kept, not raised: sampled
        mode's end came after the loop had read it, so one raised there lost the detach: "aborted")."""
        self._finishing()
        self.stop_reason = reason
        self.state.status = "detaching"
        # Last chance to ask the agent; not one the user stopped (SIGSTOP): it cannot answer, and
        # the detach, which continues it for the agent to unload, would wait QUERY_TIMEOUT first.
        if self.agent is None or not is_stopped(self.session.pid):
            self._resolve_hot_code()
        self.session.stop()  # queues the final partial intervals, then Ended("detached")

    def _pass_on(self, signame: str, now: float) -> bool:
        """A spawned local target gets the stop signal, as under ``perf record`` or ``strace``, and
        is traced on until it ends: True. Skipped when the terminal delivered it already (Ctrl-C
        reaches the foreground process group). False for an attached or remote target: detach."""
        pid = self.session.pid
        if not self.target.spawn or pid is None or not is_local(getattr(self.session, "device", None)):
            return False
        sig = signal.Signals[signame]
        if self.passed_on is not None or not (sig in (signal.SIGINT, signal.SIGQUIT) and in_foreground(pid)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        self.passed_on = (signame, now + PASS_ON_GRACE)
        self.state.status = f"{signame} passed on; waiting for the target to end"
        return True

    def _insist(self, now: float) -> None:
        """The target did not end on the signal passed on: SIGTERM, as perf does; on SIGTERM too,
        detach. A target already gone (a loaded host may report its end late) is waited for."""
        if has_ended(self.session.pid):  # it did end: its end is on its way
            self.passed_on = (self.passed_on[0], now + PASS_ON_GRACE)
        elif self.passed_on[0] != "SIGTERM":
            self._pass_on("SIGTERM", now)
        else:
            self._request_stop(f"stopped by {self.passed_on[0]}; the target did not end on it")

    def _on_interval(self, r, iv) -> None:
        if r.new_phase:  # name its hot code soon, while the code is surely mapped
            self._request_hot_code([self.engine.stats.phases[r.phase]])
        if (self.locality is not None and self.locality_size is not None and iv.locality is None
                and r.phase not in self.window_asked):
            loc = self.engine.stats.locality
            if loc is None or r.phase not in loc.phases():  # every phase gets at least one window
                self.window_asked.add(r.phase)
                self.locality.request_window(iv.thread)

    def _hot_pcs(self, phases=None):
        """(top block pcs, hottest block pc of each phase) of the main phases, or of ``phases``."""
        phases = self.engine.stats.by_share()[:HOT_PHASES] if phases is None else phases
        tops = [p.top_code(TOP_BLOCKS) for p in phases]
        tops += [p.burst["top_code"] for p in phases if p.burst is not None]
        names = [b["pc"] for top in tops for b in top if b["pc"] is not None]
        hottest = [top[0]["pc"] for top in tops if top and top[0]["pc"] is not None]
        return names, hottest

    def _request_hot_code(self, phases=None) -> None:
        self.symbols.request(*self._hot_pcs(phases))

    def _checkpoint(self) -> None:
        """At each checkpoint (pipeline/loop_clock.py): the main phases' hot code and the other phases'
        top blocks' names asked for (the summary names them all), the summary to the sinks that read it."""
        self._request_hot_code()
        self.symbols.request(self._hot_pcs(self.engine.stats.by_share()[HOT_PHASES:])[0])
        self.flow.checkpoint(self._summary)

    def _resolve_hot_code(self) -> None:
        """Before the target goes: its hot code's names, and what the sinks want named."""
        self.symbols.resolve(*self._hot_pcs())
        self.flow.sinks.before_end(self._names_now)

    def _names_now(self, pcs: List[int]) -> List[str]:
        self.symbols.resolve(pcs)
        return [self.symbols.describe(pc) for pc in pcs]

    def _handle(self, event) -> None:
        if isinstance(event, IntervalEvent):
            if event.interval.pid is not None:  # a forked child's (sampled mode): its own engine
                self.children.feed(event.interval)
                return
            self.flow.feed(event.interval)
        elif isinstance(event, BurstEvent):
            phase = self.flow.burst(event.interval)
            if phase is not None:
                self._request_hot_code([self.engine.stats.phases[phase]])
        elif isinstance(event, (ThreadStarted, ThreadExited)):
            self.state.threads_followed = len(self.session.threads)
        elif isinstance(event, Dropped):
            self.state.dropped = event.records
        elif isinstance(event, Output):
            self.output.write(event.fd, event.data)
        elif isinstance(event, ModulesChanged):
            self.symbols.invalidate()
        elif isinstance(event, AgentError):
            self.agent_errors.append(event.message)
            self.view.note(f"phasescope: agent error: {event.message} (the trace may be incomplete)")
        elif isinstance(event, Unfollowable):
            if len(self.not_followed) < NOT_FOLLOWED_KEPT:
                self.not_followed.append(event.reason)
            else:
                self.not_followed_more += 1
            self.view.note(f"phasescope: exact mode cannot follow {event.reason}; {SAMPLED_INSTEAD}")
        elif isinstance(event, ChildEnded):
            self.children.end(event.pid)
        elif isinstance(event, Forked):
            self.forked.append(event.pid)
            if not self.dashboard:  # the dashboard owns the screen: said once at the end instead
                self.view.note(self._fork_note([event.pid]))
        elif isinstance(event, Ended):
            self.ended = event
            self.state.status = event.how

    # -- the end ----------------------------------------------------------------------------------

    def _start_info(self) -> dict:
        local = is_local(getattr(self.session, "device", None))
        return {"target": self.target.describe(), "pid": self.session.pid, "mode": self.session.mode,
                "comm": process_comm(self.session.pid) if local else None, "config": self.config.to_dict()}

    def _module_files(self) -> list:
        """The files of the code the target ran; none for a remote target (another machine's paths)."""
        if not is_local(getattr(self.session, "device", None)):
            return []
        return sorted({m.path for m in self.session.modules.modules if m.path.startswith("/")})

    def _summary(self, final: bool = False) -> dict:
        """The run's summary; before the end (a checkpoint), ``end.how`` is ``running``."""
        s = self.engine.summary()
        s["phasescope"] = __version__
        s["target"] = {"description": self.target.describe(), "pid": self.session.pid,
                       "spawned": self.target.spawn}
        s["session"] = {
            "started": self.started_wall,
            "elapsed_s": time.time() - self.started_wall,
            **self.session.info(),
            "threads_followed": len(self.session.threads),
            "dropped_records": self.session.dropped.records,
            "dropped_instructions": self.session.dropped.instructions,
            "forked": self.forked,
            "agent_errors": self.agent_errors,
            "not_followed": self.not_followed,
            "not_followed_more": self.not_followed_more,
            "modules": self._module_files(),
        }
        for p in s["phases"]:
            for block in p["top_code"] + (p["burst"]["top_code"] if p["burst"] else []):
                block["symbol"] = (KERNEL_NAME if block["key"] == KERNEL_KEY else None if block["pc"] is None
                                   else self.symbols.describe(block["pc"]))
            hottest = p["top_code"][0] if p["top_code"] else None
            if hottest is not None and hottest["pc"] is not None:
                hottest["disassembly"] = [f"{a:#x}: {text}" for a, text in self.symbols.block(hottest["pc"])]
        s["children"] = self.children.summary()
        end = self.ended
        s["end"] = {"how": end.how if end else ("aborted" if final else "running"), "code": end.code if end else None,
                    "signal": end.signal if end else None, "reason": self.stop_reason}
        return s

    def _dashboard(self):
        """The rich screen; its modules (rich's layout, live display) load only for it."""
        from phasescope.view.dashboard import render
        from phasescope.view.screen import DashboardScreen
        return DashboardScreen(lambda w, h: render(self.state.snapshot(), w, h), self.refresh, self.state.version)

    def _finish(self) -> None:
        """Every exit path: detach if still attached, write the summary, report."""
        self._feed_woken()  # a loop cut short between a wake-up's windows
        self.symbols.settle(QUERY_TIMEOUT)
        if self.ended is None:
            self.flow.sinks.before_end(self._names_now)  # detaching: the target can still be read
            try:
                self.session.stop()
                if self.session.ended is None:  # sampled mode queues its last windows and the end
                    self._drain()
            finally:
                self.ended = self.session.ended
        if self.passed_on is not None and self.stop_reason is None:
            self.stop_reason = f"{self.passed_on[0]} passed on to it"
        terminate = (self.ended is not None and self.ended.how == "detached" and self.target.spawn
                     and (self.session.stdio == "pipe" or self.owns_target) and self._still_running())
        notes = ((self.agent.abandoned, None if terminate else self.agent.unload_stuck, self.agent.restopped)
                 if self.agent is not None else ())  # a terminated target takes the agent with it
        if any(notes):
            self.stop_reason = "; ".join(filter(None, (self.stop_reason,) + notes))
        if terminate:
            # Piped: its stdout is a pipe to us, once we exit it would die of SIGPIPE at its next write.
            why = "the demo's workload" if self.owns_target else "its output was piped"
            self.stop_reason = (self.stop_reason or "stopped") + f"; spawned target terminated, {why}"
            self.terminated = True
            self.session.kill()
        self.flow.flush()  # threads whose last unit never came
        self.summary = self._summary(final=True)
        try:
            self.flow.end(self.summary)
        finally:  # an output that could not be written is said after the report, not instead of it
            self._report()

    def _drain(self) -> None:
        """The events a loop cut short (a second stop signal) left before the session's end, so
        sampled mode ends "detached" as exact mode does, not "aborted" (bounded: DRAIN_S)."""
        for event in self.session.events(timeout=DRAIN_S):
            if event is None or isinstance(event, Ended):
                return
            self._handle(event)

    def _report(self) -> None:
        """The end report on the terminal; it may be gone (SIGHUP): each write that fails is
        skipped, not the ones after it."""
        _said(self.output.release)
        for note in self.view.notes:
            _said(print, note, file=self.out)
        _said(print_report, self.summary, top=20, file=self.out)
        _said(print_hot_code, self.summary, top=HOT_REPORTED, file=self.out)
        note = self._locality_note()
        if note:
            _said(print, note, file=self.out)

    def _still_running(self) -> bool:
        """Whether the detached target runs yet (a remote one is assumed to)."""
        if not is_local(getattr(self.session, "device", None)):
            return True
        return not has_ended(self.session.pid)

    def _locality_note(self) -> Optional[str]:
        """--locality: one line naming the main phases (1% or more) that got no window, and why."""
        if self.locality_size is None:
            return None
        bare = [p for p in self.summary["phases"]
                if p["share"] >= 0.01 and (p.get("locality") or {}).get("windows", 0) == 0]
        if not bare:
            return None
        dropped = self.session.dropped.records
        if dropped:
            why = (f"{dropped} records dropped: the host fell behind; a smaller --locality-window or a larger "
                   "--locality-every")
        elif all(p["intervals"] == 1 for p in bare):
            why = "one interval each: a window opens only at an interval's start"
        else:
            why = "they ran only between windows: a smaller --locality-every"
        bare = [p["phase"] for p in bare]
        return (f"phasescope: --locality: no locality window for phase(s) "
                f"{', '.join(f'P{p}' for p in bare[:10])}{' ...' if len(bare) > 10 else ''} ({why})")

    def _fork_note(self, pids: List[int]) -> str:
        pid = self.session.pid
        children = ", ".join(str(p) for p in pids[:10]) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")
        return f"phasescope: pid {pid} forked pid {children}; following only the original process (pid {pid})"

    def _exit_code(self) -> int:
        if self.dashboard and self.forked:
            print(self._fork_note(self.forked), file=self.out)
        end = self.ended
        how = end.describe() if end else "ended"
        if self.terminated:
            how = "detached"  # and terminated, as the reason says: not left running
        msg = f"phasescope: target {self.target.describe()} (pid {self.session.pid}) {how}"
        if self.stop_reason:
            msg += f" ({self.stop_reason})"
        _said(print, msg, file=self.out, flush=True)
        if self.agent is not None and self.agent.abandoned:
            return EXIT_FAILED  # detached without the last intervals
        if end is None or end.how in ("detached", "exec"):  # exec: it runs on, as another program
            return EXIT_OK
        if end.how == "exited":  # code None: an attached process whose status its parent took
            return EXIT_OK if end.code in (0, None) else EXIT_FAILED
        if end.how == "lost":
            return EXIT_FAILED
        return EXIT_INTERRUPTED if self.passed_on is not None else EXIT_KILLED

