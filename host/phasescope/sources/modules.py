"""Module map: raw code addresses -> ASLR-stable keys and module!offset names.

A stable key is ``fnv1a32(module basename) << 32 | offset`` for addresses inside a known module
(offsets below 4 GiB), and the raw address otherwise (JIT code, anonymous mappings). User-space
x86-64/arm64 addresses are below 2**48, so the two kinds practically never collide. A module's
name is the one both modes agree on (:func:`library_name`): its soname, else its file's basename.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

_MASK32 = 0xFFFFFFFF

#: Key and PC of every kernel-mode sample (sampled mode, ``--kernel-samples``): above every user
#: address and module key; named :data:`KERNEL_NAME`.
KERNEL_KEY = 0xFFFF_FFFF_FFFF_FFFF
KERNEL_NAME = "[kernel]"
#: A branch in code HotSpot compiled, in exact mode: this bit, the ``Method*`` >> 3 of the Java
#: method it runs (bits 0-43, :func:`method_of`) and, in that method's own (not inlined) code, its
#: debug point's bytecode index + 1 (bits 44-59), as sampled mode keys it (issue 32,
#: agent/jit_keys.c; the record's ``pc``, :data:`phasescope.sources.wire.METHOD_KEY`). No module
#: holds it, so :meth:`ModuleMap.keys` keeps it as its key.
METHOD_KEY = 1 << 63
#: Method keys lie below this; a module key whose tag has its top bit set lies above METHOD_KEY
#: too, 7 in 8 above this (one below is asked for a method's name, and the JVM's tables name none).
METHOD_KEY_END = METHOD_KEY + (1 << 60)
#: The module name of JIT code named from a perf map or HotSpot's own tables (both modes).
JIT_MODULE = "[jit]"


def method_of(key: int) -> int:
    """The ``Method*`` of a method key (:data:`METHOD_KEY`)."""
    return (key & ((1 << 44) - 1)) << 3


def jit_function(symbol: str) -> Optional[str]:
    """The function of a hot-code name of JIT code (``[jit]!NAME``: NAME), None for any other name."""
    return symbol[len(JIT_MODULE) + 1:] if symbol.startswith(JIT_MODULE + "!") else None


def fnv1a32(text: str) -> int:
    """32-bit FNV-1a of a UTF-8 string."""
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & _MASK32
    return h


@functools.lru_cache(maxsize=4096)
def library_name(path: str, fallback: str) -> str:
    """A module's name in both modes: the ELF soname (``DT_SONAME``) of the file at ``path`` when it
    has one, else ``fallback``'s basename. Exact mode hears ``libz.so.1`` (the name the loader
    used), sampled mode sees ``/usr/lib/.../libz.so.1.2.13`` (the file mapped): both are the soname
    ``libz.so.1``, so one library has one key."""
    try:
        with open(path, "rb") as f:
            soname = _soname_elf64le(f) if f.read(6) == b"\x7fELF\x02\x01" else _soname_any(f)
    except (OSError, struct.error, ValueError, IndexError, OverflowError):  # not an ELF file as it claims
        soname = None
    return soname or os.path.basename(fallback)


_PT_LOAD, _PT_DYNAMIC, _DT_STRTAB, _DT_SONAME = 1, 2, 5, 14


def _soname_elf64le(f) -> Optional[str]:
    """DT_SONAME of an ELF64 little-endian file, read from its program headers and dynamic segment
    directly (pyelftools' import alone cost a sampled run ~0.08 s of CPU before its first window)."""
    f.seek(0)
    header = f.read(64)
    phoff, = struct.unpack_from("<Q", header, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
    f.seek(phoff)
    phdrs = [struct.unpack_from("<IIQQQQ", f.read(phentsize)) for _ in range(phnum)]
    dynamic = [(off, size) for kind, _, off, _, _, size in phdrs if kind == _PT_DYNAMIC]
    if not dynamic:
        return None
    f.seek(dynamic[0][0])
    data = f.read(dynamic[0][1])
    tags = dict(reversed(list(struct.iter_unpack("<qQ", data[:len(data) - len(data) % 16]))))  # each tag's first
    if _DT_SONAME not in tags or _DT_STRTAB not in tags:
        return None
    strtab = tags[_DT_STRTAB]  # an address: its file offset is found through the PT_LOAD holding it
    for kind, _, off, vaddr, _, size in phdrs:
        if kind == _PT_LOAD and vaddr <= strtab < vaddr + size:
            f.seek(off + strtab - vaddr + tags[_DT_SONAME])
            return f.read(256).split(b"\0", 1)[0].decode("utf-8", "replace") or None
    return None


def _soname_any(f) -> Optional[str]:
    """DT_SONAME of any other ELF file, through pyelftools."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    f.seek(0)
    try:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags("DT_SONAME"):
                    return tag.soname
    except (ELFError, AttributeError):
        pass
    return None


@dataclass(frozen=True)
class Module:
    name: str
    base: int
    size: int
    path: str = ""


class ModuleMap:
    """Sorted, non-overlapping modules of one process; vectorized address lookup."""

    def __init__(self, modules=(), copies=()):
        """``copies``: ``(start, end, original)`` of code the process mapped a second time from a
        module's file, elsewhere (node's embedded builtins, remapped next to its JIT code for short
        calls): an address there is keyed and named as the same byte of the original."""
        self._by_base: dict[int, Module] = {m.base: m for m in modules}
        self.copies = sorted(copies)
        self._copies = np.array(self.copies, dtype=np.uint64).reshape(-1, 3).T
        self._rebuild()

    def canonical(self, pcs: np.ndarray) -> np.ndarray:
        """``pcs`` with each address in a copy replaced by the original's address."""
        pcs = np.asarray(pcs, dtype=np.uint64)
        if not self.copies:
            return pcs
        starts, ends, originals = self._copies
        i = np.searchsorted(starts, pcs, side="right").astype(np.int64) - 1
        safe = np.maximum(i, 0)
        inside = (i >= 0) & (pcs < ends[safe])
        return np.where(inside, pcs - starts[safe] + originals[safe], pcs)

    def add(self, module: Module) -> None:
        """Add or replace the module loaded at ``module.base``."""
        self._by_base[module.base] = module
        self._rebuild()

    def remove(self, base: int) -> None:
        self._by_base.pop(base, None)
        self._rebuild()

    def _rebuild(self) -> None:
        mods = sorted(self._by_base.values(), key=lambda m: m.base)
        self.modules = mods
        self._bases = np.array([m.base for m in mods], dtype=np.uint64)
        self._ends = np.array([m.base + m.size for m in mods], dtype=np.uint64)
        self._tags = np.array([fnv1a32(os.path.basename(m.name)) << 32 for m in mods], dtype=np.uint64)

    def __len__(self) -> int:
        return len(self.modules)

    def _index(self, pcs: np.ndarray) -> np.ndarray:
        """Module index of each address, -1 where no module contains it."""
        pcs = np.asarray(pcs, dtype=np.uint64)
        if not len(self.modules):
            return np.full(pcs.shape, -1, dtype=np.int64)
        idx = np.searchsorted(self._bases, pcs, side="right").astype(np.int64) - 1
        safe = np.maximum(idx, 0)
        inside = (idx >= 0) & (pcs < self._ends[safe]) & (pcs - self._bases[safe] <= _MASK32)
        return np.where(inside, idx, -1)

    def holds(self, pcs: np.ndarray) -> np.ndarray:
        """Whether some module holds each address (an address in a copy counts as its original)."""
        return self._index(self.canonical(pcs)) >= 0

    def keys(self, pcs: np.ndarray) -> np.ndarray:
        """ASLR-stable keys for raw addresses (vectorized)."""
        pcs = self.canonical(pcs)
        idx = self._index(pcs)
        if not len(self.modules):
            return pcs.copy()
        safe = np.maximum(idx, 0)
        stable = self._tags[safe] | (pcs - self._bases[safe])
        return np.where(idx >= 0, stable, pcs)

    def locate(self, pc: int):
        """(module name, offset) for an address, or (None, pc) outside every module."""
        at = int(self.canonical(np.array([pc], dtype=np.uint64))[0])
        i = int(self._index(np.array([at], dtype=np.uint64))[0])
        if i < 0:
            return None, pc
        m = self.modules[i]
        return m.name, at - m.base

    def module_names(self, pcs: List[int]) -> List[Optional[str]]:
        """The name of the module holding each address (None outside every module), in one lookup."""
        if not pcs:
            return []
        return [self.modules[i].name if i >= 0 else None
                for i in self._index(self.canonical(pcs)).tolist()]

    def describe(self, pc: int) -> str:
        """``module+0xoffset`` or ``0xaddress``; a JIT method key (exact mode on HotSpot,
        :data:`~phasescope.sources.wire.METHOD_KEY`): ``java method 0xMETHOD``, its ``Method*``."""
        if METHOD_KEY <= pc < KERNEL_KEY:
            return f"java method {method_of(pc):#x}"
        name, off = self.locate(pc)
        return f"{name}+{off:#x}" if name else f"{pc:#x}"
