"""A run's profile, read from its interval log: weights by (phase, predicted phase, thread,
process, call stack), the frames' names and the intervals' timeline.

Sampled logs with stacks give each sample's whole user stack; sampled logs without them (older
logs, ``frames`` absent) and exact-mode logs give leaf-only stacks from ``blocks`` (a block's
stable key standing for its code: exact weights are instructions). The *predicted* phase of an
interval is what its thread's predictor said after the thread's previous interval (-1 for a
thread's first interval). Keys no frame names are named from ELF files given on the command line
(``--binary``, :meth:`Profile.name_from`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from phasescope.engine.interval import Interval
from phasescope.errors import InputError
from phasescope.formats.log import interval_of, log_records
from phasescope.sources.elf_symbols import ElfSymbols
from phasescope.sources.modules import (JIT_MODULE, KERNEL_KEY, KERNEL_NAME, Module, ModuleMap, fnv1a32, jit_function,
                                        library_name)

#: (phase, predicted phase, thread, pid, comm): the labels of a row
Labels = Tuple[int, int, int, int, str]


@dataclass
class Span:
    """One interval on the timeline (Perfetto)."""
    thread: int
    pid: int
    comm: str
    start_ns: int
    end_ns: int
    phase: int
    prediction: Optional[int]
    confidence: Optional[float]


@dataclass
class Profile:
    """``weights[labels][stack]``: samples (``unit == "samples"``, each ``period_ns`` of CPU) or
    instructions (``unit == "instructions"``); a stack is a tuple of stable keys, innermost first.
    ``frames``: key -> (module, function), either None when unknown."""
    unit: str = "samples"
    period_ns: int = 0
    weights: Dict[Labels, Dict[tuple, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    frames: Dict[int, Tuple[Optional[str], Optional[str]]] = field(default_factory=dict)
    spans: List[Span] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    with_stacks: int = 0  # intervals that carried stacks
    modes: set = field(default_factory=set)  # the intervals' modes (exact, sampled)
    _predicted: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (pid, thread) -> last prediction

    def name(self, key: int) -> str:
        """A frame's function name: ``function``, else ``module+0xoffset``, else ``0xkey``."""
        module, function = self.frames.get(key, (None, None))
        if function:
            return function
        if key == KERNEL_KEY:
            return KERNEL_NAME
        return f"{module}+{key & 0xFFFFFFFF:#x}" if module else f"{key:#x}"

    def name_from(self, binaries: List[str]) -> None:
        """Name the keys no frame names (exact logs, logs without stacks) from these ELF files on
        disk: a key whose module tag is a binary's name (its soname, else its basename, as both modes
        key it: :func:`~phasescope.sources.modules.library_name`) is named by that binary's symbols."""
        for b in binaries:
            if not os.path.isfile(b):
                raise InputError(f"--binary {b}: no such file")
        by_tag = {fnv1a32(library_name(b, b)): b for b in binaries}
        keys = [k for k in self.unnamed() if (k >> 32) in by_tag]
        mods = [Module(library_name(b, b), (i + 1) << 36, 1 << 32, b) for i, b in enumerate(by_tag.values())]
        base = {fnv1a32(m.name): m.base for m in mods}
        names = ElfSymbols().names(ModuleMap(mods), [base[k >> 32] + (k & 0xFFFFFFFF) for k in keys])
        for k, named in zip(keys, names):
            self.frames[k] = named if named is not None else (library_name(by_tag[k >> 32], by_tag[k >> 32]), None)

    def unnamed(self) -> List[int]:
        """The keys of the profile's stacks that no frame names yet, sorted."""
        return sorted({k for stacks in self.weights.values() for stack in stacks for k in stack if k not in self.frames})

    def name_jit(self, key: int, symbol: str) -> None:
        """``key``'s frame from a hot-code name of JIT code (``[jit]!NAME``); other names are not frames."""
        function = jit_function(symbol)
        if function is not None:
            self.frames[key] = (JIT_MODULE, function)

    def add(self, iv: Interval, phase: int, prediction: Optional[int], confidence: Optional[float]) -> None:
        """One classified interval (its ``prediction``: of its thread's next phase)."""
        pid, comm = iv.pid or 0, iv.comm or ""
        guess = self._predicted.get((pid, iv.thread), -1)
        self._predicted[(pid, iv.thread)] = -1 if prediction is None else prediction
        self.modes.add(iv.mode)
        self.unit = "samples" if self.modes == {"sampled"} else "instructions"
        stacks = self.weights[(phase, guess, iv.thread, pid, comm)]
        if iv.stacks is not None:
            self.with_stacks += 1
            self.frames.update(iv.frames)
            for s in iv.stacks:
                stacks[tuple(s[1:])] += s[0]
        else:
            for k, c in zip(iv.keys.tolist(), iv.counts.tolist()):
                stacks[(k,)] += c
        if iv.mode == "sampled" and iv.period_ns:
            self.period_ns = iv.period_ns
        self.spans.append(Span(iv.thread, pid, comm, iv.start_ns, iv.end_ns, phase, prediction, confidence))
        if iv.start_ns and iv.end_ns:
            self.start_ns = min(self.start_ns or iv.start_ns, iv.start_ns)
            self.end_ns = max(self.end_ns, iv.end_ns)

    def module(self, key: int) -> Optional[str]:
        return self.frames.get(key, (None, None))[0]

    @property
    def phases(self) -> List[int]:
        return sorted({labels[0] for labels in self.weights})

    def total(self, phase: Optional[int] = None) -> int:
        return sum(sum(stacks.values()) for labels, stacks in self.weights.items()
                   if phase is None or labels[0] == phase)

    def by_function(self, phase: Optional[int] = None) -> Dict[str, int]:
        """Self weight of each leaf function name (in ``phase``, or the whole run)."""
        out: Dict[str, int] = defaultdict(int)
        for labels, stacks in self.weights.items():
            if phase is None or labels[0] == phase:
                for stack, w in stacks.items():
                    out[self.name(stack[0])] += w
        return dict(out)


def _phase(rec: dict, name: str, where: str, default=None):
    v = rec.get(name, default)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise InputError(f"{where}: field {name!r} must be an integer (got {v!r})")
    return v


def read_profile(path: str, binaries: List[str] = ()) -> Profile:
    """The profile of the log at ``path``, keys without names named from ``binaries`` (InputError,
    one line, on a bad log or an empty one)."""
    prof, names = Profile(), {}
    for where, rec in log_records(path, names):
        iv = interval_of(rec, where)
        phase = _phase(rec, "phase", where)
        if phase is None:
            raise InputError(f"{where}: missing field 'phase'")
        iv.pid, iv.comm = _phase(rec, "pid", where), rec.get("comm")
        conf = rec.get("confidence")
        prof.add(iv, phase, _phase(rec, "prediction", where),
                 conf if isinstance(conf, (int, float)) and not isinstance(conf, bool) else None)
    if not prof.spans:
        raise InputError(f"{path}: no intervals")
    if len(prof.modes) > 1:
        raise InputError(f"{path}: mixes exact and sampled intervals; profile one mode at a time")
    for k in prof.unnamed():  # compiled Java methods the live run named (exact mode)
        if k in names:
            prof.frames[k] = names[k]
    if binaries:
        prof.name_from(list(binaries))
    return prof
