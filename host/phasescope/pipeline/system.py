"""System-wide monitoring (``phasescope -a``): every process gets its own phase engine.

The :class:`~phasescope.sources.system_sampler.SystemSampler` cuts every thread's windows on every
CPU; each window goes to the engine of its process (:class:`~phasescope.pipeline.processes.ProcessEngines`,
bounded, with per-program phase databases). The engines share the sinks (the log, the event
stream and the metrics carry ``pid`` and ``comm``) and the view (the busiest processes, each one's
current phase, next phase and confidence).
"""

from __future__ import annotations

import time
from typing import List, Optional, TextIO

from phasescope import __version__
from phasescope.engine import EngineConfig
from phasescope.errors import EXIT_OK
from phasescope.pipeline.processes import MAX_PROCESSES, RECENT_S, ProcessEngines
from phasescope.pipeline.flow import Flow
from phasescope.pipeline.loop_clock import CHECKPOINT_EVERY
from phasescope.sinks.base import Sink
from phasescope.sources.elf_symbols import ElfSymbols
from phasescope.sources.modules import KERNEL_KEY, KERNEL_NAME
from phasescope.sources.system_sampler import SystemSampler
from phasescope.view.plain import PlainView, said
from phasescope.view.screen import DashboardScreen
from phasescope.view.snapshot import transition
from phasescope.view.system_view import print_system_report, render


class SystemRun:
    """Sampler -> one engine per process -> shared sinks and view. ``dashboard``: the rich
    screen, else plain lines on ``out``; ``phase_db_dir``: a directory of per-program phase
    databases; ``max_processes``: engines alive at once."""

    def __init__(self, sampler: SystemSampler, config: EngineConfig, sinks: List[Sink], *, dashboard: bool,
                 out: TextIO, refresh: float = 4.0, status_every: float = 5.0, duration: Optional[float] = None,
                 phase_db_dir: Optional[str] = None, max_processes: int = MAX_PROCESSES):
        self.sampler = sampler
        self.config = config
        self.flow = Flow(config, sinks, engine=False)  # the engines are the processes' own
        self.dashboard = dashboard
        self.out = out
        self.refresh = refresh
        self.status_every = status_every
        self.duration = duration
        self.processes = ProcessEngines(config, [self.flow.sinks.on_interval], max_processes=max_processes,
                                        phase_db_dir=phase_db_dir, exe_of=self._exe_of,
                                        note=lambda text: self.view.note(text), name_code=self._name_code)
        self.elf = ElfSymbols()
        self._ended_now: dict = {}  # pid -> the ProcessInfo of a process ended in the windows being fed
        self._kept: dict = {}  # the sampler's processes when it stopped
        self.started_wall = time.time()
        self.started = time.monotonic()
        self.stop_reason: Optional[str] = None
        self.status = "starting"
        self.view = None

    @property
    def notes(self) -> List[str]:
        return self.processes.notes

    def _name_code(self, pid: int, pcs: list) -> list:
        """Each code address of process ``pid`` as ``module!function``, else ``module+0xoffset``
        (``[kernel]`` for kernel time), None when its modules are not known."""
        info = self._info(pid)
        modules = info.modules if info is not None else None
        if modules is None:
            return [KERNEL_NAME if pc == KERNEL_KEY else None for pc in pcs]
        user = [pc for pc in pcs if pc is not None and pc != KERNEL_KEY]
        functions = dict(zip(user, self.elf.names(modules, user)))
        return [KERNEL_NAME if pc == KERNEL_KEY else None if pc is None
                else f"{functions[pc][0]}!{functions[pc][1]}" if functions.get(pc) else modules.describe(pc)
                for pc in pcs]

    def _exe_of(self, pid: int) -> Optional[str]:
        proc = self._info(pid)
        return proc.exe if proc is not None else None

    def _info(self, pid: int):
        """What the sampler knew of ``pid``: also once it ended, or the sampler stopped (a process
        first classified then had no exe, so its phase database was named after its comm: two
        databases for one program; stop 47)."""
        return self._ended_now.get(pid) or self.sampler.processes.get(pid) or self._kept.get(pid)

    # -- what the view reads ----------------------------------------------------------------
    def subscribe(self, fn) -> None:
        """Call ``fn(result, interval)`` for every interval of every process."""
        self.processes.subscribe(fn)

    def busiest(self, n: int) -> List[dict]:
        return self.processes.busiest(n)

    def header(self) -> dict:
        s = self.sampler
        return {"status": self.status, "filter": s.filter.describe(), "elapsed": time.monotonic() - self.started,
                "rate_hz": 10**9 // s.period_ns, "cpus": len(s._rings), "processes": len(self.processes.runs),
                "seen": self.processes.seen, "samples": s.samples, "lost": s.lost, "skipped": s.skipped,
                "recent_s": RECENT_S}

    def status_line(self) -> str:
        h = self.header()
        top = ", ".join(f"{r['comm']}[{r['pid']}] P{r['phase']}" for r in self.busiest(3) if r["phase"] is not None)
        return (f"[{h['elapsed']:6.1f}s] {h['status']}: {h['processes']} processes followed ({h['seen']} seen), "
                f"{h['samples']} samples, {h['lost']} lost; busiest: {top or '-'}")

    def change_line(self, r, iv) -> str:
        return f"{iv.comm}[{iv.pid}] thread {r.thread}: {transition(r)}, predicted next P{r.prediction}"

    # -- the loop ---------------------------------------------------------------------------
    def run(self, stop) -> int:
        """Sample until ``stop.requested`` or ``--duration``, then report on ``out``; the exit code."""
        view = self.view = (DashboardScreen(lambda w, h: render(self, w, h), self.refresh) if self.dashboard
                            else PlainView(self, self.out, self.status_every))
        try:
            self.sampler.start()
        except BaseException:
            self.flow.close()
            raise
        self.status = "sampling"
        self.flow.start({"target": f"system-wide ({self.sampler.filter.describe()})", "pid": None,
                         "mode": "sampled", "config": self.config.to_dict()})
        deadline = None if self.duration is None else time.monotonic() + self.duration
        next_checkpoint = time.monotonic() + CHECKPOINT_EVERY
        try:
            with view:
                while True:
                    self._feed(self.sampler.poll(0.05))
                    now = time.monotonic()
                    if stop.requested:
                        self.stop_reason = f"stopped by {stop.requested}"
                        break
                    if deadline is not None and now >= deadline:
                        self.stop_reason = f"--duration {self.duration:g}s reached"
                        break
                    if now >= next_checkpoint:
                        self.flow.checkpoint(self.summary)
                        next_checkpoint = now + CHECKPOINT_EVERY
                    view.tick(now)
                self.status = "stopping"
                self._kept = dict(self.sampler.processes)  # stop() forgets them: the summary names code
                self._feed(self.sampler.stop())
        except KeyboardInterrupt:  # a second stop signal: finish now, with the report (exit 130)
            self.stop_reason = self.stop_reason or f"stopped by {stop.requested}"
        finally:
            stop.finishing()
            self._finish()
        for note in view.notes + self.notes:
            said(print, note, file=self.out)
        said(print_system_report, self.final, file=self.out)
        said(print, f"phasescope: system-wide sampling stopped ({self.stop_reason})", file=self.out, flush=True)
        return EXIT_OK

    def _feed(self, windows) -> None:
        ended = self.sampler.take_ended()  # their windows are among these: they are known while classified
        self._ended_now = {proc.pid: proc for proc in ended}
        for w in windows:
            self.processes.feed(w)
        for proc in ended:
            self.processes.end(proc.pid)  # its modules name its code in its last summary
        self._ended_now = {}

    # -- the end ----------------------------------------------------------------------------
    def summary(self) -> dict:
        """The run's summary: the processes kept (live ones busiest first, then ended ones)."""
        s, p = self.sampler, self.processes
        return {"phasescope": __version__, "mode": "system", "config": self.config.to_dict(),
                "session": {"started": self.started_wall, "elapsed_s": time.time() - self.started_wall,
                            "filter": s.filter.describe(), "rate_hz": 10**9 // s.period_ns,
                            "window_samples": s.window_samples, "samples": s.samples, "lost_samples": s.lost,
                            "skipped_samples": s.skipped, "processes_seen": p.seen,
                            "processes_followed_now": len(p.runs), "engines_retired": p.retired,
                            "max_processes": p.max_processes, "notes": p.notes},
                "processes": p.summary(), "end": {"how": "detached", "reason": self.stop_reason}}

    def _finish(self) -> None:
        """Every exit path: save the live programs' phase databases, the summary, close the sinks."""
        self.processes.close()
        self.final = self.summary()
        self.flow.end(self.final)
        self.flow.close()
