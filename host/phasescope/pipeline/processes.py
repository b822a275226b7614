"""One phase engine per process, for streams that carry several (``-a``, and the children a
sampled target forks): each process's windows go to its own engine, made when it is first seen.

A restarted program keeps its phase IDs through a directory of phase databases, one per program
(:func:`program_key`: its executable's name and path), preloaded when the program is first seen
and saved when it ends. Memory is bounded however many processes come and go: at most
``max_processes`` engines live (the least recently active one is retired to make room), and
ended processes leave a short record in a bounded list.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Optional

from phasescope.engine import EngineConfig, Interval, PhaseEngine
from phasescope.errors import PhasescopeError

if TYPE_CHECKING:
    from phasescope.sinks.phase_db import PhaseDb

MAX_PROCESSES = 256  # engines alive at once
FINISHED_KEPT = 200  # ended processes the summary and report remember
RECENT_S = 5.0  # the dashboard's CPU share is over this many seconds
TOP_PHASES = 8


def program_key(comm: str, exe: Optional[str]) -> str:
    """The name a program's phase database has: its executable's basename and a hash of its path
    (``comm`` when the executable is unknown), safe as a file name."""
    base = os.path.basename(exe) if exe else (comm or "unknown")
    base = re.sub(r"[^A-Za-z0-9._+-]", "_", base)[:40] or "unknown"
    import hashlib  # here: OpenSSL's library loads for -a and forked children only
    return f"{base}-{hashlib.sha1((exe or comm).encode()).hexdigest()[:8]}"


@dataclass
class ProcessRun:
    """One followed process: its engine, its phase database and what the view shows of it."""

    pid: int
    comm: str
    exe: Optional[str]
    engine: PhaseEngine
    db: Optional[PhaseDb] = None
    started: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    cpu_ns: int = 0
    changes: int = 0
    recent: Deque = field(default_factory=lambda: deque(maxlen=256))  # (monotonic, cpu_ns) of windows
    confidence: Dict[int, Optional[float]] = field(default_factory=dict)
    ended: Optional[str] = None

    def observe(self, r) -> None:
        """What the row shows of each classified interval."""
        self.confidence[r.thread] = r.confidence
        self.changes += r.phase_changed

    @property
    def key(self) -> str:
        return program_key(self.comm, self.exe)

    def recent_cpu(self, now: float) -> float:
        """CPU seconds sampled over the last :data:`RECENT_S` seconds."""
        return sum(ns for t, ns in self.recent if now - t <= RECENT_S) / 1e9

    def busiest_thread(self) -> Optional[int]:
        threads = self.engine.stats.threads
        return max(threads, key=lambda t: threads[t].weight) if threads else None

    def row(self, now: float) -> dict:
        """What the dashboard, the status lines and the summary say of this process."""
        tid = self.busiest_thread()
        ts = self.engine.stats.threads.get(tid) if tid is not None else None
        return {"pid": self.pid, "comm": self.comm, "exe": self.exe, "key": self.key,
                "cpu_s": self.cpu_ns / 1e9, "recent_cpu_s": self.recent_cpu(now),
                "threads": len(self.engine.stats.threads), "intervals": self.engine.stats.intervals,
                "phases": len(self.engine.stats.phases), "changes": self.changes, "thread": tid,
                "phase": ts.phase if ts else None, "run_length": ts.run_length if ts else 0,
                "next": ts.predictions.get(self.engine.config.predictors.shown) if ts else None,
                "confidence": self.confidence.get(tid) if tid is not None else None, "ended": self.ended}

    def summary(self, now: float) -> dict:
        """The process's part of the run's summary (its main phases only: bounded)."""
        s = self.engine.summary()
        main = sorted(s["phases"], key=lambda p: -(p.get("share") or 0))[:TOP_PHASES]
        return {**self.row(now), "phases_seen": len(s["phases"]),
                "phases": [{**{k: p.get(k) for k in ("phase", "share", "intervals", "runs", "known", "top_code")},
                            "mean_run": p["run_length"]["mean"]} for p in main],
                "predictors": s["predictors"].get(s["primary_predictor"])}


class ProcessEngines:
    """Route each process's intervals to its own engine. ``subscribers`` get every engine's
    ``(result, interval)``; ``exe_of(pid)`` names a process's executable (for its phase database);
    ``note(text)`` tells the user of a phase database that cannot be used."""

    def __init__(self, config: EngineConfig, subscribers: List[Callable] = (), *, max_processes: int = MAX_PROCESSES,
                 phase_db_dir: Optional[str] = None, exe_of: Callable[[int], Optional[str]] = lambda pid: None,
                 note: Callable[[str], None] = lambda text: None,
                 name_code: Callable[[int, list], list] = lambda pid, pcs: [None] * len(pcs)):
        self.config = config
        self.subscribers = list(subscribers)
        self.max_processes = max_processes
        self.phase_db_dir = phase_db_dir
        self.exe_of = exe_of
        self.note = note
        self.name_code = name_code  # (pid, pcs) -> each pc's name (module!function or module+offset), or None
        self.runs: Dict[int, ProcessRun] = {}
        self.finished: Deque[dict] = deque(maxlen=FINISHED_KEPT)
        self.seen = 0
        self.retired = 0  # engines retired to make room (their processes still ran)
        self.notes: List[str] = []
        self._locks: Dict[str, tuple] = {}  # --phase-db: each program's database held (phase_db.hold_lock)

    def subscribe(self, fn) -> None:
        """Call ``fn(result, interval)`` for every interval of every process from now on."""
        self.subscribers.append(fn)
        for run in self.runs.values():
            run.engine.subscribe(fn)

    def feed(self, iv: Interval) -> None:
        """Classify ``iv`` (which has ``pid`` and ``comm``) in its process's engine."""
        run = self.runs.get(iv.pid) or self._start(iv.pid, iv.comm)
        now = time.monotonic()
        run.last_seen = now
        if iv.comm and iv.comm != run.comm:  # exec: the process now runs another program
            run.comm = iv.comm
        run.cpu_ns += iv.cpu_ns or 0
        run.recent.append((now, iv.cpu_ns or 0))
        run.engine.feed(iv)

    def end(self, pid: int, how: str = "exited") -> None:
        """Process ``pid`` ended: save its phase database, keep a short record, drop its engine."""
        run = self.runs.pop(pid, None)
        if run is not None:
            run.ended = how
            self._save_db(run)
            self.finished.append(self._named(run.summary(time.monotonic())))

    def close(self) -> None:
        """The run ends: save the phase databases of the processes still running, release them."""
        for run in self.runs.values():
            self._save_db(run)
        if self._locks:
            from phasescope.sinks.phase_db import release_lock
            for lock in self._locks.values():
                release_lock(lock)
            self._locks.clear()

    def busiest(self, n: int) -> List[dict]:
        """Rows of the ``n`` processes with the most CPU sampled recently (then in all)."""
        now = time.monotonic()
        rows = sorted((r.row(now) for r in self.runs.values()), key=lambda r: (-r["recent_cpu_s"], -r["cpu_s"]))
        return rows[:n]

    def summary(self) -> List[dict]:
        """Every process kept: the live ones (busiest first), then the ended ones."""
        now = time.monotonic()
        live = sorted((self._named(r.summary(now)) for r in self.runs.values()), key=lambda p: -p["cpu_s"])
        return live + list(self.finished)

    def _named(self, summary: dict) -> dict:
        """``summary`` with each top block's ``symbol``, named while the process's modules are known."""
        blocks = [b for p in summary["phases"] for b in p["top_code"] or ()]
        for block, name in zip(blocks, self.name_code(summary["pid"], [b["pc"] for b in blocks])):
            block["symbol"] = name
        return summary

    def _start(self, pid: int, comm: Optional[str]) -> ProcessRun:
        if len(self.runs) >= self.max_processes:  # make room: retire the least recently active
            idle = min(self.runs.values(), key=lambda r: r.last_seen)
            self.retired += 1
            self.end(idle.pid, "retired")
        engine = PhaseEngine(self.config)
        run = ProcessRun(pid, comm or "", self.exe_of(pid), engine)
        if self.phase_db_dir is not None:
            try:
                from phasescope.sinks.phase_db import PhaseDb, hold_lock  # only with --phase-db
                path = os.path.join(self.phase_db_dir, run.key + ".json")
                if path not in self._locks:  # held once for all the program's processes, to the end of the run
                    self._locks[path] = hold_lock(path)
                run.db = PhaseDb(path, self.config, lock=False)
                run.db.prepare(engine)
            except PhasescopeError as e:  # one program's database is unusable: say so, go on without it
                self._say(f"phasescope: {comm}[{pid}]: phase database not used: {e}")
                run.db = None
        engine.subscribe(self._observe)  # not a closure over the run: no cycle keeps a finished engine
        for fn in self.subscribers:
            engine.subscribe(fn)
        self.runs[pid] = run
        self.seen += 1
        return run

    def _observe(self, r, iv: Interval) -> None:
        run = self.runs.get(iv.pid)
        if run is not None:
            run.observe(r)

    def _save_db(self, run: ProcessRun) -> None:
        if run.db is not None:
            try:
                run.db.on_end(run.engine.summary())
            except PhasescopeError as e:
                self._say(f"phasescope: {run.comm}[{run.pid}]: phase database not saved: {e}")

    def _say(self, text: str) -> None:
        self.notes.append(text)
        self.note(text)
