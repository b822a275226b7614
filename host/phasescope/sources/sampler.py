"""CPU-time sampler of every thread of a running process: the signal of ``--mode sampled``.

Nothing runs in the target. The kernel's software ``cpu-clock`` event (``perf_event_open``,
``PERF_TYPE_SOFTWARE``/``PERF_COUNT_SW_CPU_CLOCK``, an hrtimer per task) interrupts each thread
every ``period_ns`` of its own CPU time and writes ``(identifier, ip, pid, tid, time)`` (and,
with ``stacks``, the user call chain) into a ring buffer this process maps and reads. Pure
Python: ctypes for the syscall, mmap for the rings, numpy for the keys.

Coverage of threads (the design choice)
----------------------------------------
``perf_event_open(2)`` offers two ways:

* per-thread events (``pid=tid, cpu=-1``), one ring each, and new threads found by polling
  ``/proc/PID/task``: a new thread runs unsampled until the next poll (up to the poll period,
  and a thread that lives shorter than that is never seen at all). An inherited event cannot
  be used instead: the kernel refuses ``mmap`` of an ``inherit`` event with ``cpu == -1``
  (``perf_mmap``: "Don't allow mmap() of inherited per-task counters").
* per-thread-per-CPU events with ``inherit=1`` (``pid=tid, cpu=N`` for every thread that exists
  at start and every online CPU), which is what ``perf record -p`` does. ``mmap`` is allowed
  there; one ring per CPU, every other event on that CPU redirected into it with
  ``PERF_EVENT_IOC_SET_OUTPUT``. A thread created later inherits its creator's events at
  ``clone()`` time, in the kernel, so it is sampled from its first instruction; inherited
  events write into their parent's ring. ``inherit_thread=1`` (Linux 5.13+) keeps forked
  child processes out.

We use the second: it covers new threads completely, costs nothing per new thread, and needs
``threads-at-start x CPUs`` descriptors. ``task=1`` adds ``PERF_RECORD_FORK``/``EXIT`` records,
from which threads are born and retired. ``PERF_SAMPLE_IDENTIFIER`` names the event of origin
(for an inherited event, its parent's): a thread that appeared while we were opening events may
be covered twice (inherited and its own event); such duplicates are dropped. An exited thread's
descriptors are closed once no live thread inherits from them (closing a parent event removes
its inherited children from the kernel).

Samples in the kernel: ``exclude_kernel=1`` (the default) makes the kernel itself drop a tick
that hits kernel mode, so a window is ``window_samples`` samples of *user* CPU time and system
time is not represented (it is not counted as lost). ``kernel=True`` (needs
``perf_event_paranoid`` <= 1 or root) keeps those ticks and folds every kernel IP into one key,
:data:`KERNEL_KEY`, so syscall-heavy phases show up as such.

Rings: ``1 + 2**n`` pages per CPU (default 128 data pages, the unprivileged ``perf_event_mlock_kb``
default of 516 KiB). Reading follows the documented protocol: load ``data_head``, then read the
records, then store ``data_tail``. On x86-64 (TSO) each ctypes/struct access is a separate
8-byte aligned load or store in the C runtime, loads are not reordered with loads and stores are
not reordered with earlier loads, so that sequence is the required acquire/release pairing
without explicit fences. Lost records (``PERF_RECORD_LOST``, ring full) are counted.

Ordering: a thread's samples may sit in two rings after a migration. Each poll takes a
watermark (the clock read before the rings are read) and holds back samples newer than it, so
samples reach the windows in time order.

Windows: each thread's samples are cut into windows of exactly ``window_samples`` samples,
i.e. ``window_samples x period_ns`` of user CPU time, emitted as an
:class:`~phasescope.engine.interval.Interval` with ``mode="sampled"``, ``instructions=None``
(never invented) and ``samples``/``period_ns``; ``counts`` are sample counts per key. A thread's last window is
emitted ``partial`` at its exit and at :meth:`Sampler.stop`.
"""

from __future__ import annotations

import math
import os
import select
import time
from typing import Dict, List, Optional, Set

import numpy as np

from phasescope.engine.arrays import unique_counts, unique_counts_rows
from phasescope.engine.interval import Interval
from phasescope.errors import InputError
from phasescope.sources.elf_symbols import ElfSymbols
from phasescope.sources.hotspot import HotSpotCode
from phasescope.sources.modules import KERNEL_KEY, ModuleMap
from phasescope.sources.perf_map import PerfMap
from phasescope.sources.perf_event import (CLOCK_REALTIME, DEFAULT_RING_PAGES, OpenedEvents, PerfEventAttr, Ring,
                                          event_id, online_cpus, open_on_cpus, sampling_attr, wakeup_samples)
from phasescope.sources.procfs import module_map_from_proc, process_comm, thread_ids
from phasescope.sources.sample_code import SampleCode
from phasescope.sources.sample_records import LEAF_DTYPE, SAMPLE_DTYPE, SampleRecords
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES, check_sampling
from phasescope.sources.stacks import window_stacks


class _Thread:
    __slots__ = ("tid", "pid", "seq", "recs", "pending", "last_end", "exited", "owner", "own_fds", "heirs")

    def __init__(self, tid: int, owner: int, pid: int):
        self.tid = tid
        self.pid = pid
        self.seq = 0
        self.recs: List[np.ndarray] = []  # SAMPLE_DTYPE chunks not yet in a window
        self.pending = 0
        self.last_end = 0
        self.exited = False
        self.owner = owner  # tid whose opened events sample this thread (itself, or its ancestor)
        self.own_fds: List[int] = []
        self.heirs = 0  # live threads (other than itself) sampled through this thread's events


class Sampler(SampleRecords, SampleCode):
    """Sample every thread of process ``pid`` by CPU time and cut per-thread windows.

    ``start()`` opens the events (raises :class:`InputError` with one line if the kernel refuses);
    ``poll(timeout)`` waits up to ``timeout`` seconds for data, reads every ring and returns the
    windows completed since the last call (list of :class:`~phasescope.engine.interval.Interval` (``mode="sampled"``, in time order per
    thread); ``stop()`` closes everything and returns the remaining partial windows.
    ``keys_for`` turns raw IPs into stable keys (default: :func:`module_map_from_proc` of the
    target, refreshed when an IP falls outside every known module).
    ``stacks`` (the default) also records each sample's user call chain (frame pointers): windows
    carry ``stacks`` and ``frames`` (:mod:`phasescope.sources.stacks`). ``wake_every``: seconds of
    a thread's CPU time whose windows a wake-up may bring at once (0: each window as it completes;
    :func:`~phasescope.sources.perf_event.wakeup_samples`).
    Counters: ``samples`` (accepted), ``leaf_only`` (samples whose stack is their leaf alone),
    ``lost`` (records the kernel dropped, ring full),
    ``duplicates`` (double-covered samples dropped), ``foreign`` (other processes' samples
    dropped), ``kernel_samples``; ``threads`` (every tid seen), ``live`` (tids not yet exited).
    """

    def __init__(self, pid: int, period_ns: int = DEFAULT_PERIOD_NS, window_samples: int = DEFAULT_WINDOW_SAMPLES,
                 ring_pages: int = DEFAULT_RING_PAGES, kernel: bool = False, modules: Optional[ModuleMap] = None,
                 children: bool = False, stacks: bool = True, before_exec: bool = False,
                 opened: Optional[OpenedEvents] = None, wake_every: float = 0.0):
        check_sampling(10**9 / period_ns, window_samples)
        if ring_pages < 1 or ring_pages & (ring_pages - 1):
            raise InputError(f"ring pages must be a power of two, got {ring_pages}")
        self.pid = pid
        self.period_ns = period_ns
        self.window_samples = window_samples
        self.ring_pages = ring_pages
        self.kernel = kernel
        self.modules = modules
        self.children = children
        self.stacks = stacks
        self.wake_every = wake_every
        self._names = ElfSymbols()
        #: pid -> {stable key -> (module, function)} of frames named so far (per process: two
        #: programs' modules, or JIT functions, can share a name and so a key)
        self._frames: Dict[int, dict] = {}
        self._perf_maps: Dict[int, PerfMap] = {}
        self._hotspot = HotSpotCode(pid)
        #: followed child processes (``children``): pid -> [comm, module map, pages looked up]
        self._kids: Dict[int, list] = {}
        self.target_comm = ""  # the target's name once its exec (or a child's fork) was seen
        self._ended_kids: List[int] = []
        self._own_modules = modules is None
        #: the process is held before its exec: its maps are still its parent's (phasescope's own
        #: image, dozens of libraries), so the program's are read from its first samples instead
        self._before_exec = before_exec
        self._looked_up: Set[int] = set()  # code pages already looked for in /proc/PID/maps
        self._known, self._known_of = {}, None  # keys of addresses in the target's modules (SampleCode)
        self._before: List[tuple] = []  # (time, the target's module map until then): SampleCode.eras
        self._then: Optional[ModuleMap] = None  # the earlier map a window's samples are keyed with now
        self.samples = self.lost = self.duplicates = self.foreign = self.kernel_samples = self.leaf_only = 0
        self.threads: Set[int] = set()
        self._t: Dict[int, _Thread] = {}
        self._rings: Dict[int, Ring] = opened.rings if opened is not None else {}
        self._opened: Dict[int, List[int]] = opened.fds if opened is not None else {}  # tid -> its events
        self._cpus: List[int] = opened.cpus if opened is not None else []
        self._id_tid: Dict[int, int] = {}  # event id -> tid that owns it
        self._id_tid_sorted: list = [None, 0, None, None]  # its keys sorted (sample_records._sorted's cache)
        self._own: Set[int] = set()  # tids with their own events
        self._held = np.zeros(0, dtype=SAMPLE_DTYPE if stacks else LEAF_DTYPE)
        self._held_exits: List[tuple] = []  # (tid, time) of EXIT records newer than the watermark
        self._last_scan = 0
        self._poller = select.poll()
        self._polled: Set[int] = set()  # ring descriptors polled (until their owner thread exits)
        self._watched: Set[int] = set()
        self._started = self._stopped = False
        self._clock = CLOCK_REALTIME

    # -- setup ----------------------------------------------------------------------------
    def _attr(self) -> PerfEventAttr:
        return sampling_attr(self.period_ns, self.stacks, self.children, self.kernel,
                             wakeup_samples(self.window_samples, self.period_ns, self.wake_every, self.stacks,
                                            self.ring_pages), self._clock)

    def start(self) -> "Sampler":
        """Open one event per (existing thread, CPU), a ring per CPU; threads created later inherit.
        Events ``opened`` before (on a process held before its exec: one thread) are taken over
        as they are, even if the process has exited since: its samples wait in the rings."""
        if self._started:
            return self
        if not self._opened and not os.path.isdir(f"/proc/{self.pid}/task"):
            raise InputError(f"cannot sample process {self.pid}: no such process")
        self._started = True
        self._cpus = self._cpus or online_cpus()
        try:
            taken_over = bool(self._opened)  # the threads created since inherit those events
            for tid in list(self._opened):
                self._open_thread(tid)
            seen: Set[int] = set()
            while not taken_over:  # rescan until stable: catches threads created while opening events
                new = thread_ids(self.pid) - seen
                if not new:
                    break
                for tid in sorted(new):
                    seen.add(tid)
                    self._open_thread(tid)
            if not self._own:
                raise InputError(f"process {self.pid} exited before sampling started")
        except BaseException:
            self._close_all()
            raise
        if self._own_modules and self._before_exec:
            self.modules = ModuleMap()
        elif self._own_modules:
            try:
                self.modules = module_map_from_proc(self.pid)
            except PermissionError as e:  # e.g. init, as root in a container: ptrace access is refused
                self._close_all()
                raise InputError(f"permission denied reading the code map of pid {self.pid} ({e.filename}): "
                                 "the kernel refuses to let phasescope inspect this process") from None
        return self

    def _open_thread(self, tid: int) -> None:
        fds = self._opened.pop(tid, None)  # opened before the sampler existed (:func:`open_events`)
        if fds is None:
            fds = open_on_cpus(self._attr(), tid, self._cpus, self._rings, self.ring_pages, self.pid, self.kernel)
        if fds is None:  # the thread exited meanwhile
            return
        for fd in fds:
            self._id_tid[event_id(fd)] = tid
        for ring in self._rings.values():
            if ring.fd in fds:
                self._poller.register(ring.fd, select.POLLIN)
                self._polled.add(ring.fd)
        th = self._t.get(tid) or self._thread(tid, tid)
        th.owner = tid
        th.own_fds = fds
        self._own.add(tid)

    def _thread(self, tid: int, owner: int, pid: Optional[int] = None) -> _Thread:
        th = self._t[tid] = _Thread(tid, owner, self.pid if pid is None else pid)
        self.threads.add(tid)
        if owner != tid and owner in self._t:
            self._t[owner].heirs += 1
        return th

    # -- reading --------------------------------------------------------------------------
    def watch(self, fd: int) -> None:
        """End :meth:`poll`'s wait also when ``fd`` is readable (the caller's wake-up pipe)."""
        self._poller.register(fd, select.POLLIN)
        self._watched.add(fd)

    def poll(self, timeout: float = 0.1) -> List[Interval]:
        """Wait up to ``timeout`` s (``inf``: no bound) for a ring to take its batch of samples (or a
        descriptor given to :meth:`watch` to be readable), read them all and return the completed windows."""
        if not self._started or self._stopped:
            return []
        if timeout and timeout > 0:
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if not self._polled and not self._watched:  # every ring owner exited: nothing can wake us
                    time.sleep(min(left, 1.0))
                    break
                ready = self._poller.poll(None if math.isinf(left) else max(1, math.ceil(left * 1000)))
                hung = [fd for fd, ev in ready if ev & (select.POLLHUP | select.POLLERR) and fd in self._polled]
                for fd in hung:  # the owner thread exited (its ring still receives inherited samples)
                    self._poller.unregister(fd)
                    self._polled.discard(fd)
                if len(hung) < len(ready):
                    break
        return self._drain(final=False)

    def run_out(self, poll: float = 0.05) -> List[Interval]:
        """Every window until the target's threads have all exited, then :meth:`stop`'s."""
        windows = []
        while self.alive:
            windows += self.poll(poll)
        return windows + self.stop()

    def stop(self) -> List[Interval]:
        """Read what is left, close every descriptor and return the remaining (partial) windows."""
        if not self._started or self._stopped:
            return []
        out = self._drain(final=True)
        for th in self._t.values():
            out.extend(self._cut(th, final=True))
        self._stopped = True
        self._close_all()
        return out

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _drain(self, final: bool) -> List[Interval]:
        watermark = time.time_ns()
        exits: list = []
        chunks = [ring.read() for ring in self._rings.values()]  # complete records from each ring
        self._unsure_from = (1 << 64) - 1 if final else watermark  # see SampleRecords._unsure
        batch = self._parse(chunks, exits) if any(chunks) or self._unsure else self._held[:0]
        if len(self._held):
            batch = np.concatenate([self._held, batch])
        if final:
            self._held = self._held[:0]
        else:
            newer = batch["time"] >= watermark
            self._held, batch = (batch[newer], batch[~newer]) if newer.any() else (batch[:0], batch)
        out: List[Interval] = []
        if len(batch):
            batch = batch[np.argsort(batch["time"], kind="stable")]
            tid = batch["tid"]
            if tid.min() == tid.max():  # one thread (the usual case)
                groups = [(int(tid[0]), batch)]
            else:
                grouped = batch[np.argsort(tid, kind="stable")]
                cuts = np.flatnonzero(np.diff(grouped["tid"])) + 1
                groups = [(int(g["tid"][0]), g) for g in np.split(grouped, cuts)]
            for tid, recs in groups:
                th = self._t.get(tid) or self._thread(tid, tid)
                th.recs.append(recs)
                th.pending += len(recs)
                out.extend(self._cut(th, final=False))
        exits = self._held_exits + exits
        if not final:
            self._held_exits = [(tid, t) for tid, t in exits if t >= watermark]
            exits = [(tid, t) for tid, t in exits if t < watermark]
            if watermark - self._last_scan > 1_000_000_000:  # fallback: EXIT records lost
                self._last_scan = watermark
                exits += [(tid, watermark) for tid in self._vanished()]
        for tid, _ in exits:
            th = self._t.get(tid)
            if th is not None and not th.exited:
                th.exited = True
                if not final:
                    out.extend(self._cut(th, final=True))
                self._retire(th)
        if self._before:  # the samples still to be keyed: those held back, and those of unfinished windows
            pending = [int(th.recs[0]["time"][0]) for th in self._t.values() if th.recs and len(th.recs[0])]
            held = [int(self._held["time"].min())] if len(self._held) else []
            self.forget_eras(min(pending + held + [watermark]))
        return out

    def _vanished(self) -> List[int]:
        """Live threads that have left /proc (their EXIT records were lost)."""
        present = {pid: thread_ids(pid) for pid in {th.pid for th in self._t.values() if not th.exited}}
        return [tid for tid, th in self._t.items() if not th.exited and tid not in present[th.pid]]

    # -- windows --------------------------------------------------------------------------
    def _cut(self, th: _Thread, final: bool) -> List[Interval]:
        w = self.window_samples
        if th.pending < w and not (final and th.pending):
            return []
        recs = th.recs[0] if len(th.recs) == 1 else np.concatenate(th.recs)
        together = self._keyed_together(th, recs, len(recs) // w)
        out = []
        start = 0
        while len(recs) - start >= w or (final and start < len(recs)):
            stop = min(start + w, len(recs))
            keyed = together[len(out)] if together is not None and len(out) < len(together) else None
            out.append(self._window(th, recs[start:stop], partial=stop - start < w, keyed=keyed))
            start = stop
        th.recs = [recs[start:]] if start < len(recs) else []
        th.pending = len(recs) - start
        return out

    def _keyed_together(self, th: _Thread, recs: np.ndarray, n: int) -> Optional[List[tuple]]:
        """``(keys, counts, pcs)`` of the first ``n`` whole windows of ``recs`` at once (a wake-up
        brings several: one sort and one key look-up for all, docs/performance.md stop 46), or None
        where each takes :meth:`_keyed`: call chains, a child's samples, samples under an earlier
        module map (with none, every window is keyed under the current one either way)."""
        if n < 2 or self.stacks or th.pid != self.pid or self._before:
            return None
        values, counts, starts = unique_counts_rows(recs["ip"][: n * self.window_samples].reshape(n, -1))
        keys = self.keys_for(values, th.pid)
        return [(keys[a:b], counts[a:b], values[a:b]) for a, b in zip(starts[:-1].tolist(), starts[1:].tolist())]

    def _window(self, th: _Thread, recs: np.ndarray, partial: bool, keyed: Optional[tuple] = None) -> Interval:
        ips, times = recs["ip"], recs["time"]
        parts = [keyed] if keyed is not None else [
            self._keyed(th.pid, recs[a:b], then) for a, b, then in self.eras(th.pid, times)]
        keys, counts, uniq = parts[0][:3]
        if len(parts) > 1:  # a library replaced mid-window: one entry per key
            keys, first, which = np.unique(np.concatenate([p[0] for p in parts]), return_index=True,
                                           return_inverse=True)
            counts = np.bincount(which, weights=np.concatenate([p[1] for p in parts])).astype(np.int64)
            uniq = np.concatenate([p[2] for p in parts])[first]
        begin = th.last_end or int(times[0]) - self.period_ns
        end = int(times[-1])
        th.last_end = end
        iv = Interval(thread=th.tid, seq=th.seq, instructions=None, keys=keys, counts=counts.astype(np.uint64),
                      pcs=uniq, start_ns=begin, end_ns=end, partial=partial, mode="sampled", samples=len(ips),
                      period_ns=self.period_ns)
        kid = self._kids.get(th.pid)
        if kid is not None:  # a child's window says whose it is; the target's carry no pid
            iv.pid, iv.comm = th.pid, kid[0]
        if self.stacks:
            iv.stacks, iv.frames = [s for p in parts for s in p[3]], {k: v for p in parts for k, v in p[4].items()}
        th.seq += 1
        return iv

    def _keyed(self, pid: int, recs: np.ndarray, then: Optional[ModuleMap]) -> tuple:
        """``(keys, counts, pcs, stacks, frames)`` of samples of process ``pid`` taken under one
        module map (``then``: an earlier one of the target's, :meth:`SampleCode.eras`)."""
        self._then = then
        try:
            ips = recs["ip"]
            uniq, counts = unique_counts(ips)
            keys = self.keys_for(uniq, pid)
            stacks, frames = None, {}
            if self.stacks:
                stacks, frames, leaf_only = window_stacks(
                    ips, recs["chain"], self.modules_of(pid), lambda a: self.keys_for(a, pid),
                    lambda pcs: self.names(pcs, pid), self.perf_map(pid), self._frames.setdefault(pid, {}))
                self.leaf_only += leaf_only
            return keys, counts, uniq, stacks, frames
        finally:
            self._then = None

    # -- thread lifetimes and teardown ----------------------------------------------------
    def _retire(self, th: _Thread) -> None:
        """Close the events of exited threads nothing inherits from any more; a followed child
        whose threads have all exited has ended (:meth:`take_ended_children`)."""
        if th.owner != th.tid and th.owner in self._t:
            owner = self._t[th.owner]
            owner.heirs -= 1
            self._maybe_close(owner)
        self._maybe_close(th)
        if th.pid in self._kids and not any(t.pid == th.pid and not t.exited for t in self._t.values()):
            del self._kids[th.pid]
            self._ended_kids.append(th.pid)

    def take_ended_children(self) -> List[int]:
        """Followed children that ended since the last call (their windows have all been returned)."""
        ended, self._ended_kids = self._ended_kids, []
        return ended

    def _maybe_close(self, th: _Thread) -> None:
        if not (th.exited and th.heirs <= 0 and th.own_fds):
            return
        ring_fds = {r.fd for r in self._rings.values()}
        keep = [fd for fd in th.own_fds if fd in ring_fds]  # ring owners stay open until stop()
        for fd in th.own_fds:
            if fd not in ring_fds:
                os.close(fd)
        th.own_fds = keep

    @property
    def live(self) -> Set[int]:
        return {t for t, th in self._t.items() if not th.exited}

    @property
    def alive(self) -> bool:
        """Whether some thread of the target is still running (as far as the records tell)."""
        return bool(self.live)

    @property
    def open_fds(self) -> int:
        return sum(len(th.own_fds) for th in self._t.values())

    def _close_all(self) -> None:
        self._hotspot.close()
        ring_fds = set()
        for ring in self._rings.values():
            ring_fds.add(ring.fd)
            ring.close()
        for th in self._t.values():
            for fd in th.own_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            th.own_fds = []
        self._rings = {}
