"""System-wide CPU-clock sampling (``phasescope -a``): every process on every CPU, as ``perf -a``.

One ``cpu-clock`` event per online CPU (``pid=-1``), one ring each, with ``task`` and ``comm``
records: samples carry ``(pid, tid)``, ``PERF_RECORD_FORK``/``EXIT`` give thread and process
lifetimes, ``PERF_RECORD_COMM`` (with ``comm_exec``) names and ``exec``. Nothing is injected and
nothing is traced. Windows are cut per thread exactly as :class:`~phasescope.sources.sampler.Sampler`
cuts them, and carry the thread's ``pid`` and ``comm``.

Which processes are followed: every one but phasescope itself, or those a
:class:`ProcessFilter` accepts (command names, pids, a cgroup), decided once per process when it
is first seen and again at ``exec``. Memory is bounded by what is live: a thread's state goes at
its exit, a process's (its module map, its name) at its end.

CPU-wide events need ``perf_event_paranoid`` <= 0 or ``CAP_PERFMON`` (root has both).
"""

from __future__ import annotations

import errno
import os
import select
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Set

import numpy as np

from phasescope.engine.interval import Interval
from phasescope.errors import InputError
from phasescope.sources.modules import ModuleMap
from phasescope.sources.perf_event import (DEFAULT_RING_PAGES, LOST_RECORD, PERF_RECORD_COMM, PERF_RECORD_EXIT,
                                          PERF_RECORD_FORK, PERF_RECORD_LOST, PERF_RECORD_MISC_COMM_EXEC,
                                          PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_USER, PERF_RECORD_SAMPLE,
                                          SAMPLE_RECORD, TASK_RECORD, CHAIN_AT, Ring, comm_record,
                                          online_cpus, paranoid_level, perf_event_open, records)
from phasescope.sources.procfs import module_map_from_proc, process_comm, process_exe
from phasescope.sources.sample_code import refreshed_modules, stable_keys
from phasescope.sources.sample_records import SAMPLE_DTYPE, leaves
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES
from phasescope.sources.sampler import Sampler, _Thread


@dataclass(frozen=True)
class ProcessFilter:
    """Which processes ``-a`` follows: all (the default), or those whose command name is in
    ``comms``, whose pid is in ``pids``, or whose cgroup path starts with ``cgroup``."""

    comms: FrozenSet[str] = frozenset()
    pids: FrozenSet[int] = frozenset()
    cgroup: Optional[str] = None

    @property
    def everything(self) -> bool:
        return not (self.comms or self.pids or self.cgroup)

    def accepts(self, pid: int, comm: str) -> bool:
        """Whether process ``pid`` named ``comm`` is followed."""
        if self.everything:
            return True
        if pid in self.pids or comm in self.comms:
            return True
        return self.cgroup is not None and self.in_cgroup(pid)

    def in_cgroup(self, pid: int) -> bool:
        """Whether ``pid`` is in :attr:`cgroup` or below it, in any hierarchy."""
        return any(path == self.cgroup or path.startswith(self.cgroup.rstrip("/") + "/") for path in cgroups_of(pid))

    def cgroup_exists(self) -> bool:
        """Whether :attr:`cgroup` is a directory of a mounted cgroup hierarchy, or holds a process now
        (in a cgroup namespace, /proc/PID/cgroup's paths need not be the mounts')."""
        if any(os.path.isdir(mount + self.cgroup) for mount in _cgroup_mounts()):
            return True
        return any(self.in_cgroup(int(e)) for e in os.listdir("/proc") if e.isdigit())

    def describe(self) -> str:
        parts = ([f"comm {','.join(sorted(self.comms))}"] if self.comms else []) + \
                ([f"pid {','.join(map(str, sorted(self.pids)))}"] if self.pids else []) + \
                ([f"cgroup {self.cgroup}"] if self.cgroup else [])
        return " or ".join(parts) or "every process"


def _cgroup_mounts() -> List[str]:
    """Mount points of the cgroup and cgroup2 file systems (/proc/self/mountinfo)."""
    try:
        with open("/proc/self/mountinfo") as f:
            return [line.split()[4] for line in f if line.split(" - ", 1)[-1].startswith(("cgroup ", "cgroup2 "))]
    except OSError:
        return []


def cgroups_of(pid: int) -> List[str]:
    """The cgroup paths of ``pid`` (one per hierarchy, from /proc/PID/cgroup); empty when gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return [line.rstrip("\n").split(":", 2)[2] for line in f if line.count(":") >= 2]
    except OSError:
        return []


@dataclass
class ProcessInfo:
    """What the sampler knows of one live process."""

    pid: int
    comm: str
    exe: Optional[str]
    followed: bool
    modules: Optional[ModuleMap] = None
    looked_up: Set[int] = field(default_factory=set)
    threads: Set[int] = field(default_factory=set)
    leader_exited: bool = False


def system_refusal(e: OSError) -> str:
    """One line: why the kernel refused CPU-wide sampling and what to change."""
    if e.errno in (errno.EACCES, errno.EPERM):
        return (f"cannot sample the whole system: perf_event_open denied ({e.strerror}, perf_event_paranoid is "
                f"{paranoid_level()}); run as root, grant CAP_PERFMON, or set /proc/sys/kernel/perf_event_paranoid "
                "to 0 or lower")
    if e.errno in (errno.ENOENT, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENODEV):
        return f"cannot sample the whole system: this kernel has no perf software cpu-clock event ({e.strerror})"
    if e.errno == errno.EMFILE:
        return "cannot sample the whole system: too many open files (raise ulimit -n)"
    return f"cannot sample the whole system: perf_event_open failed ({e.strerror})"


class SystemSampler(Sampler):
    """Sample every process on every CPU (see the module docstring). ``poll``, ``stop`` and
    ``run_out`` as :class:`Sampler`; windows carry ``pid`` and ``comm``. :meth:`take_ended`
    returns the processes that ended since its last call; :attr:`processes` the live ones."""

    def __init__(self, process_filter: ProcessFilter = ProcessFilter(), period_ns: int = DEFAULT_PERIOD_NS,
                 window_samples: int = DEFAULT_WINDOW_SAMPLES, ring_pages: int = DEFAULT_RING_PAGES,
                 kernel: bool = False, stacks: bool = True):
        super().__init__(0, period_ns=period_ns, window_samples=window_samples, ring_pages=ring_pages,
                         kernel=kernel, modules=ModuleMap(), stacks=stacks)
        self.filter = process_filter
        self.processes: Dict[int, ProcessInfo] = {}
        self.skipped = 0  # samples of processes the filter leaves out
        self._me = os.getpid()
        self._ended: List[ProcessInfo] = []

    def _attr(self):
        a = super()._attr()
        a.inherit = a.inherit_thread = 0  # CPU-wide: every task on the CPU, nothing to inherit
        a.mmap = 0  # a library replaced at the same address is followed for one process (Sampler), not here
        a.comm = a.comm_exec = 1
        return a

    def start(self) -> "SystemSampler":
        """One event and ring per online CPU; one line (InputError) if the kernel refuses."""
        if self._started:
            return self
        self._started = True
        self._cpus = online_cpus()
        try:
            for cpu in self._cpus:
                try:
                    fd = perf_event_open(self._attr(), -1, cpu)
                except OSError as e:
                    raise InputError(system_refusal(e)) from None
                try:
                    self._rings[cpu] = Ring(fd, self.ring_pages)
                except OSError as e:
                    os.close(fd)
                    raise InputError(f"cannot map a perf ring buffer: {e.strerror} (raise ulimit -l or "
                                     "/proc/sys/kernel/perf_event_mlock_kb)") from None
                self._poller.register(fd, select.POLLIN)
                self._polled.add(fd)
        except BaseException:
            self._close_all()
            raise
        return self

    # -- processes --------------------------------------------------------------------------
    def _process(self, pid: int, comm: Optional[str] = None) -> ProcessInfo:
        proc = self.processes.get(pid)
        if proc is None:
            comm = comm or process_comm(pid)
            followed = self._follows(pid, comm)
            proc = self.processes[pid] = ProcessInfo(pid, comm, process_exe(pid) if followed else None, followed)
            if followed:
                self._read_maps(proc)
        return proc

    def _follows(self, pid: int, comm: str) -> bool:
        return pid != self._me and self.filter.accepts(pid, comm)

    def _read_maps(self, proc: ProcessInfo) -> None:
        """Read the modules now: a short-lived process may be gone when its first window is cut."""
        try:
            proc.modules = module_map_from_proc(proc.pid)
        except OSError:
            proc.modules = ModuleMap()
        proc.looked_up = set()

    def _exec(self, pid: int, comm: str) -> None:
        proc = self._process(pid, comm)
        proc.comm = comm
        proc.exe = process_exe(pid)
        proc.followed = self._follows(pid, comm)
        if proc.followed:
            self._read_maps(proc)

    def take_ended(self) -> List[ProcessInfo]:
        """Processes that ended since the last call (their windows have all been returned)."""
        ended, self._ended = self._ended, []
        return ended

    # -- records ----------------------------------------------------------------------------
    def _parse(self, chunks: List[bytes], exits: List[int]) -> np.ndarray:
        recs: list = []
        data = b"".join(chunks)  # records in ring order (a process's exit, fork or exec on one CPU may be
        # taken before its samples on another: -a's loop reads its rings every tick, not once a batch)
        unpack_sample = SAMPLE_RECORD.unpack_from
        procs, threads = self.processes, self._t
        for rtype, misc, off, size in records(data):
            if rtype == PERF_RECORD_SAMPLE:
                _, _, _, _, ip, pid, tid, t = unpack_sample(data, off)
                proc = procs.get(pid) or self._process(pid)
                if not proc.followed:
                    self.skipped += 1
                    continue
                if tid not in threads:
                    self._thread(tid, tid, pid)
                    proc.threads.add(tid)
                chain = data[off + CHAIN_AT: off + size] if self.stacks else b""
                if misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_USER:
                    recs.append((ip, tid, t, chain))
                else:
                    self._kernel_sample(recs, tid, t, chain)
            elif rtype == PERF_RECORD_LOST:
                self.lost += LOST_RECORD.unpack_from(data, off + 8)[1]
            elif rtype == PERF_RECORD_FORK:
                pid, ppid, tid, _, _ = TASK_RECORD.unpack_from(data, off + 8)
                if pid == tid and pid != ppid:  # a new process: a copy of its parent until exec
                    parent = procs.get(ppid)
                    self._process(pid, parent.comm if parent is not None else None)
            elif rtype == PERF_RECORD_EXIT:
                pid, _, tid, _, t = TASK_RECORD.unpack_from(data, off + 8)
                proc = procs.get(pid)
                if proc is None:
                    continue
                if tid == pid:  # the leader: the process has ended once its threads are gone
                    proc.leader_exited = True
                    exits.extend((other, t) for other in proc.threads)
                    if not proc.threads:
                        self._end(proc)
                elif tid in threads:
                    exits.append((tid, t))
            elif rtype == PERF_RECORD_COMM and misc & PERF_RECORD_MISC_COMM_EXEC:
                self._exec(*comm_record(data, off, size))
        self.samples += len(recs)
        recs = np.array(recs, dtype=SAMPLE_DTYPE)
        return recs if self.stacks else leaves(recs)  # as the held samples are kept

    # -- windows and lifetimes -----------------------------------------------------------------
    def _window(self, th: _Thread, recs: np.ndarray, partial: bool, keyed: Optional[tuple] = None) -> Interval:
        iv = super()._window(th, recs, partial, keyed)  # never keyed together: -a's threads are not the target's
        proc = self.processes.get(th.pid)
        iv.pid, iv.comm = th.pid, proc.comm if proc is not None else None
        return iv

    def modules_of(self, pid: int) -> ModuleMap:
        proc = self.processes.get(pid)
        return proc.modules if proc is not None and proc.modules is not None else ModuleMap()

    def keys_for(self, ips: np.ndarray, pid: Optional[int] = None) -> np.ndarray:
        proc = self.processes.get(pid)
        if proc is None:
            return stable_keys(None, ips)
        proc.modules, proc.looked_up = refreshed_modules(pid, ips, proc.modules, proc.looked_up)
        return stable_keys(proc.modules, ips)

    def _vanished(self) -> List[int]:
        """Live threads whose /proc entry is gone (their EXIT records were lost, or a sample came
        after them); processes without threads whose /proc entry is gone end here too."""
        for proc in [p for p in self.processes.values() if not p.threads and not os.path.exists(f"/proc/{p.pid}")]:
            self._end(proc)
        return [tid for tid, th in self._t.items() if not th.exited and not os.path.exists(f"/proc/{th.pid}/task/{tid}")]

    def _retire(self, th: _Thread) -> None:
        """Forget an exited thread; a process whose threads are all gone has ended."""
        self._t.pop(th.tid, None)
        self.threads.discard(th.tid)
        proc = self.processes.get(th.pid)
        if proc is not None:
            proc.threads.discard(th.tid)
            if not proc.threads and (proc.leader_exited or not os.path.exists(f"/proc/{proc.pid}")):
                self._end(proc)

    def _end(self, proc: ProcessInfo) -> None:
        if self.processes.pop(proc.pid, None) is not None and proc.followed:
            self._ended.append(proc)

    def stop(self) -> List[Interval]:
        """The remaining (partial) windows; every descriptor closed."""
        out = super().stop()
        self.processes.clear()
        return out

    @property
    def open_fds(self) -> int:
        return len(self._rings)
