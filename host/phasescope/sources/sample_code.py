"""What a sampler's samples hit, keyed and named: stable keys of raw IPs in the process's modules
(its maps re-read when an IP falls outside every known one), JIT code by the process's perf map
or, in a HotSpot JVM, by its Java method (:mod:`~phasescope.sources.hotspot`), names from the ELF
files on disk. :class:`SampleCode` is mixed into
:class:`~phasescope.sources.sampler.Sampler`, whose target and followed children it reads."""

from __future__ import annotations

import os
from typing import List, Optional, Set, Tuple

import numpy as np

from phasescope.sources.modules import JIT_MODULE, KERNEL_KEY, Module, ModuleMap, library_name
from phasescope.sources.perf_map import PerfMap
from phasescope.sources.procfs import module_map_from_proc

#: Addresses whose keys :meth:`SampleCode.keys_for` remembers at most (then it starts again).
KNOWN_KEYS = 1 << 16


def refreshed_modules(pid: int, ips, modules: Optional[ModuleMap], looked_up: Set[int]):
    """``(modules, looked_up)``: ``modules`` re-read from /proc/PID/maps when some user IP falls
    outside every module and its page was not looked for before (once per page: the vDSO never
    maps). An exited process's maps are empty: then what was seen is kept."""
    ips = np.asarray(ips, dtype=np.uint64)
    user = ips[ips != np.uint64(KERNEL_KEY)]
    mm = modules if modules is not None else ModuleMap()
    pages = set((user[~mm.holds(user)] >> np.uint64(12)).tolist()) - looked_up
    if pages:
        looked_up = looked_up | pages
        try:
            fresh = module_map_from_proc(pid)
        except OSError:
            fresh = ModuleMap()
        if len(fresh):
            mm = fresh
    return mm, looked_up


def stable_keys(modules: Optional[ModuleMap], ips) -> np.ndarray:
    """Stable keys of raw IPs in ``modules``; kernel samples keep :data:`KERNEL_KEY`."""
    ips = np.asarray(ips, dtype=np.uint64)
    keys = (modules if modules is not None else ModuleMap()).keys(ips)
    keys[ips == np.uint64(KERNEL_KEY)] = np.uint64(KERNEL_KEY)
    return keys


class SampleCode:
    """Keys and names of sampled code, for a sampler with ``pid``, ``modules`` (None: read from
    /proc), ``_own_modules``, ``_looked_up``, ``_kids`` (followed children: pid -> [comm, module
    map, pages looked up]), ``_perf_maps``, ``_hotspot`` (the target's :class:`HotSpotCode`) and
    ``_names`` (an ElfSymbols), ``_known``/``_known_of`` (remembered keys, and whose), and
    ``_before``/``_then`` (the target's earlier module maps, and the one a window's samples are
    keyed with meanwhile, see :meth:`_mapped`)."""

    def _mapped(self, pid: int, t: int, addr: int, length: int, pgoff: int, path: str) -> None:
        """A PERF_RECORD_MMAP: file ``path`` mapped executable at ``addr`` at time ``t``. The
        target's map gets it at once (a module not yet known is then not looked for in
        /proc/PID/maps later, when /proc may show what replaced it, or nothing: an exited target's
        samples are keyed from these records alone). A later code segment of a known module (a
        non-PIE node's .text after its .init and .plt) extends its span. Where it covers a module the
        map holds (a library unloaded and another loaded at the same address), the new one holds
        from ``t`` on: samples taken before ``t`` are keyed with the map before (:meth:`eras`). A
        followed child's maps are read again instead."""
        old = self.modules_of(pid)
        base = addr - pgoff  # the ELF header's mapping, as in /proc/PID/maps (a module's base)
        known = next((m for m in old.modules if m.base == base and m.path == path), None)
        if base < 0 or not os.path.isfile(path) or known is not None and addr + length <= base + known.size:
            return  # no file (an injected agent's memfd), or known (loaded as the events started)
        others = [m for m in old.modules if m is not known]  # a known module's next segment extends it
        gone = [m for m in others if m.base < addr + length and addr < m.base + m.size]
        if any(m.base < addr + length and base < m.base + m.size for m in others if m not in gone):
            return  # not laid out as a library image: left to /proc/PID/maps
        kid = self._kids.get(pid)
        if kid is not None:
            if gone:
                kid[1], kid[2] = None, set()
            return
        new = Module(library_name(path, path), base, addr + length - base, path)
        copies = [c for c in old.copies if not (c[0] < addr + length and addr < c[1])]
        if gone:
            self._before.append((t, old))
        self.modules = ModuleMap([m for m in others if m not in gone] + [new], copies)

    def eras(self, pid: int, times: np.ndarray) -> List[Tuple[int, int, Optional[ModuleMap]]]:
        """``(start, stop, map)`` of runs of a window's samples (``times`` ascending) by the module
        map of their time: an earlier map of the target, or None for the current one."""
        if pid != self.pid or not self._before:
            return [(0, len(times), None)]
        era = np.searchsorted(np.array([t for t, _ in self._before], dtype=np.uint64), times, side="right")
        cuts = [0] + (np.flatnonzero(np.diff(era)) + 1).tolist() + [len(times)]
        return [(a, b, self._before[era[a]][1] if era[a] < len(self._before) else None)
                for a, b in zip(cuts, cuts[1:])]

    def forget_eras(self, oldest: int) -> None:
        """Forget the maps of before ``oldest``, the time of the oldest sample still to be keyed."""
        while self._before and self._before[0][0] <= oldest:
            self._before.pop(0)

    def perf_map(self, pid: int) -> PerfMap:
        """Process ``pid``'s perf map (JIT code's names), read when first needed."""
        pm = self._perf_maps.get(pid)
        if pm is None:
            pm = self._perf_maps[pid] = PerfMap(pid)
        return pm

    def names(self, pcs, pid: Optional[int] = None) -> List[Optional[tuple]]:
        """``(module, function)`` or None of each address of process ``pid`` (default the
        target): from its ELF files on disk, and for code outside them from its perf map, as
        ``("[jit]", name)`` (a HotSpot JVM's: ``java Class.method``)."""
        pid = self.pid if pid is None else pid
        pcs = list(pcs)
        out = self._names.names(self.modules_of(pid), pcs)
        for jit in [self.perf_map(pid)] + ([self._hotspot] if pid == self.pid else []):
            unnamed = [i for i, named in enumerate(out) if named is None]
            for i, name in zip(unnamed, jit.names([pcs[i] for i in unnamed])):
                if name is not None:
                    out[i] = (JIT_MODULE, name)
        return out

    def modules_of(self, pid: int) -> ModuleMap:
        """The module map of process ``pid`` (a followed child's own, else the target's)."""
        kid = self._kids.get(pid)
        mm = kid[1] if kid is not None else self.modules if self._then is None else self._then
        return mm if mm is not None else ModuleMap()

    def keys_for(self, ips: np.ndarray, pid: Optional[int] = None) -> np.ndarray:
        """Stable keys of raw IPs (kernel samples keep :data:`KERNEL_KEY`), in ``pid``'s modules
        (a followed child's own, else the target's; the target's JIT code by its perf map, if any,
        else by its Java method in a HotSpot JVM). The target's addresses inside its modules are
        remembered until its module map changes: a window's addresses mostly repeat earlier ones',
        and the lookup is some fifteen numpy calls a window."""
        kid = self._kids.get(pid)
        if kid is not None:
            kid[1], kid[2] = refreshed_modules(pid, ips, kid[1], kid[2])
            return stable_keys(kid[1], ips)
        ips = np.asarray(ips, dtype=np.uint64)
        known = self._known_keys()
        got = [known.get(pc) for pc in ips.tolist()]
        if None not in got:
            return np.array(got, dtype=np.uint64)
        miss = np.array([i for i, key in enumerate(got) if key is None], dtype=np.int64)
        keys = np.array([0 if key is None else key for key in got], dtype=np.uint64)
        keys[miss] = self._target_keys(ips[miss])
        if self._known_of is not self.modules_of(self.pid).modules:  # re-read: the hits were the old map's
            keys, miss = self._target_keys(ips), np.arange(len(ips))
        inside = miss[self.modules_of(self.pid).holds(ips[miss])]
        known = self._known_keys()  # anew if the map was re-read
        if len(known) + len(inside) > KNOWN_KEYS:
            known.clear()
        known.update(zip(ips[inside].tolist(), keys[inside].tolist()))
        return keys

    def _known_keys(self) -> dict:
        """The remembered keys of the target's current module map (emptied when it changes)."""
        modules = self.modules_of(self.pid)
        if self._known_of is not modules.modules:  # a map's list of modules is new at every change
            self._known_of, self._known = modules.modules, {}
        return self._known

    def _target_keys(self, ips: np.ndarray) -> np.ndarray:
        if self._own_modules and self._then is None:  # an earlier map (:meth:`eras`) is as it was
            self.modules, self._looked_up = refreshed_modules(self.pid, ips, self.modules, self._looked_up)
        keys = self.perf_map(self.pid).keys(ips, stable_keys(self.modules_of(self.pid), ips))
        return self._hotspot.keys(ips, keys, self.modules_of(self.pid))
