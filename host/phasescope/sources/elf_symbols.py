"""Function names of code addresses from the ELF files on disk: zero-touch sampled mode's symbols,
where no agent can ask the process.

A module's load bias is its base (its lowest mapping, file offset 0) minus the lowest ``PT_LOAD``
virtual address; an address's symbol is the ``STT_FUNC`` of ``.symtab`` (else ``.dynsym``) whose
``[value, value + size)`` holds it (of several at one address, the longest, then the greatest
name). Each file is read once, into a :class:`FunctionTable`.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

import numpy as np

from phasescope.engine.arrays import unique

from phasescope.sources.modules import ModuleMap


class FunctionTable:
    """One ELF file's functions as sorted arrays: ``starts``/``ends`` (virtual addresses) and each
    name's offset in ``strings`` (NUL-terminated). Names are decoded when an address asks for one:
    node's 86,000 functions cost one numpy sort, not 86,000 Python strings (issue 27)."""

    def __init__(self, low: int, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, strings: bytes):
        self.low = low  # the lowest PT_LOAD virtual address
        self.starts, self.ends, self.offsets, self.strings = starts, ends, offsets, strings
        self._decoded: Dict[int, str] = {}

    @classmethod
    def build(cls, loads: List[int], starts, ends, offsets, strings: bytes) -> "FunctionTable":
        """The table of ``loads`` (PT_LOAD addresses) and functions in any order: one entry per
        start, the one a sorted ``(start, end, name)`` list's bisection would find."""
        starts, ends = np.asarray(starts, dtype=np.uint64), np.asarray(ends, dtype=np.uint64)
        offsets = np.asarray(offsets, dtype=np.int64)
        order = np.lexsort((ends, starts))
        starts, ends, offsets = starts[order], ends[order], offsets[order]
        last = np.ones(len(starts), dtype=bool)  # the last of each start: its greatest end
        last[:-1] = starts[1:] != starts[:-1]
        keep = np.flatnonzero(last)
        slot = np.searchsorted(keep, np.arange(len(starts)))  # each entry's start's kept entry
        alias = np.flatnonzero((ends == ends[keep[slot]]) & ~last) if len(starts) else keep
        best: Dict[int, Tuple[bytes, int]] = {}  # aliases (one start, one end): the greatest name
        for i in alias.tolist():
            k = int(keep[slot[i]])
            best[k] = max(best.get(k) or _raw_name(strings, int(offsets[k])), _raw_name(strings, int(offsets[i])))
        for k, (_, off) in best.items():
            offsets[k] = off
        return cls(min(loads), starts[keep], ends[keep], offsets[keep], strings)

    def names(self, vaddrs: np.ndarray) -> List[Optional[str]]:
        """The function holding each virtual address (uint64 array), None where none does."""
        j = np.searchsorted(self.starts, vaddrs, side="right").astype(np.int64) - 1
        safe = np.maximum(j, 0)
        hit = (j >= 0) & (vaddrs < self.ends[safe]) if len(self.starts) else np.zeros(len(vaddrs), dtype=bool)
        out: List[Optional[str]] = [None] * len(vaddrs)
        for k, off in zip(np.flatnonzero(hit).tolist(), self.offsets[safe[hit]].tolist()):
            if off not in self._decoded:
                self._decoded[off] = _name_at(self.strings, off)
            out[k] = self._decoded[off]
        return out

    def rows(self) -> List[Tuple[int, int, str]]:
        """Every ``(start, end, name)``, by start (for tests)."""
        return [(s, e, _name_at(self.strings, o)) for s, e, o in
                zip(self.starts.tolist(), self.ends.tolist(), self.offsets.tolist())]


def _raw_name(strings: bytes, offset: int) -> Tuple[bytes, int]:
    return strings[offset:strings.index(b"\0", offset)], offset


def _name_at(strings: bytes, offset: int) -> str:
    return _raw_name(strings, offset)[0].decode("utf-8", "replace")


class ElfSymbols:
    """``names(modules, pcs)``: ``(module, function)`` (or None) per address, as the agent's
    symbol lookup gives them, given the process's module map."""

    def __init__(self):
        self._tables: Dict[str, Optional[FunctionTable]] = {}

    def _table(self, path: str) -> Optional[FunctionTable]:
        if path not in self._tables:
            self._tables[path] = _read(path)
        return self._tables[path]

    def names(self, modules: ModuleMap, pcs) -> List[Optional[tuple]]:
        pcs = modules.canonical(np.array([int(pc) for pc in pcs], dtype=np.uint64))
        index = modules._index(pcs)
        out: List[Optional[tuple]] = [None] * len(pcs)
        for i in unique(index[index >= 0]).tolist():  # one lookup per module
            m = modules.modules[i]
            table = self._table(m.path or m.name)
            if table is None:
                continue
            at = np.flatnonzero(index == i)
            for k, name in zip(at.tolist(), table.names(pcs[at] - np.uint64(m.base) + np.uint64(table.low))):
                if name is not None:
                    out[k] = (m.name, name)
        return out


#: an ELF64 symbol (``Elf64_Sym``), little-endian
_SYM64 = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"),
                   ("size", "<u8")])
_PT_LOAD, _SHT_SYMTAB, _SHT_DYNSYM, _STT_FUNC = 1, 2, 11, 2


def _read(path: str) -> Optional[FunctionTable]:
    """The function table of the ELF file at ``path``, None when it has none or is unreadable.
    ELF64 little-endian (x86-64, arm64) is read directly, its headers, symbol table and string
    table only, as numpy arrays: a fixed cost of each sampled run (issues 31, 27)."""
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x7fELF\x02\x01":
                return _read_any(path)
            return _read_elf64le(f)
    except (OSError, struct.error, ValueError, IndexError):
        return None


def _at(f, offset: int, size: int) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated ELF file")
    return data


def _layout(f) -> Tuple[List[int], list]:
    """``(PT_LOAD addresses, section headers)`` of an ELF64 little-endian file."""
    header = _at(f, 0, 64)
    phoff, shoff = struct.unpack_from("<QQ", header, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 0x36)
    phdrs = _at(f, phoff, phentsize * phnum)
    loads = [struct.unpack_from("<Q", phdrs, i * phentsize + 16)[0] for i in range(phnum)
             if struct.unpack_from("<I", phdrs, i * phentsize)[0] == _PT_LOAD]
    shdrs = _at(f, shoff, shentsize * shnum)
    return loads, [struct.unpack_from("<IIQQQQIIQQ", shdrs, i * shentsize) for i in range(shnum)]


def _symbols(f, sections: list, sh) -> Tuple[np.ndarray, bytes]:
    """The symbols of symbol table section ``sh`` and its string table."""
    syms = np.frombuffer(_at(f, sh[4], sh[5] - sh[5] % _SYM64.itemsize), _SYM64)
    strtab = sections[sh[6]]
    return syms, _at(f, strtab[4], strtab[5])


def _read_elf64le(f) -> Optional[FunctionTable]:
    loads, sections = _layout(f)
    if not loads:
        return None
    for kind in (_SHT_SYMTAB, _SHT_DYNSYM):
        for sh in sections:
            if sh[1] != kind or sh[9] != _SYM64.itemsize:
                continue
            syms, strings = _symbols(f, sections, sh)
            keep = syms[((syms["info"] & 0xF) == _STT_FUNC) & (syms["value"] != 0) & (syms["name"] != 0)]
            if len(keep) == 0:
                continue
            text = np.frombuffer(strings, np.uint8)
            if int(keep["name"].max()) >= len(text) or text[-1:].tolist() != [0]:
                raise ValueError("symbol name outside its string table")
            keep = keep[text[keep["name"]] != 0]  # an empty name names nothing
            if len(keep):
                sizes = np.maximum(keep["size"], 1)
                return FunctionTable.build(loads, keep["value"], keep["value"] + sizes, keep["name"], strings)
    return FunctionTable.build(loads, [], [], [], b"")


def symbol_values(path: str, names) -> Optional[Tuple[int, Dict[str, int]]]:
    """``(lowest PT_LOAD address, {name: value})`` of the symbols called ``names`` (any kind: data
    too) in the ELF64 little-endian file at ``path``'s ``.dynsym`` and ``.symtab``; None when
    unreadable. Each name is found in the string table by bytes (as a whole string or another's
    tail), not by decoding every symbol."""
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x7fELF\x02\x01":
                return None
            loads, sections = _layout(f)
            found: Dict[str, int] = {}
            for sh in sections:
                if sh[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or sh[9] != _SYM64.itemsize:
                    continue
                syms, strings = _symbols(f, sections, sh)
                for name in set(names) - set(found):
                    text, at = name.encode() + b"\0", -1
                    while (at := strings.find(text, at + 1)) >= 0:  # the linker may keep it as another's tail
                        hit = syms["value"][(syms["name"] == at) & (syms["value"] != 0)]
                        if len(hit):
                            found[name] = int(hit[0])
                            break
    except (OSError, struct.error, ValueError, IndexError):
        return None
    return (min(loads), found) if loads else None


def _read_any(path: str) -> Optional[FunctionTable]:
    """Any other ELF file, through pyelftools."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            loads = [s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            funcs = []
            for name in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(name)
                if sec is None:
                    continue
                funcs = [(s["st_value"], s["st_value"] + max(1, s["st_size"]), s.name) for s in sec.iter_symbols()
                         if s["st_info"]["type"] == "STT_FUNC" and s["st_value"] and s.name]
                if funcs:
                    break
    except (OSError, ELFError, ValueError):
        return None
    if not loads:
        return None
    strings, offsets = bytearray(), []
    for _, _, name in funcs:
        offsets.append(len(strings))
        strings += name.encode("utf-8", "surrogateescape") + b"\0"
    return FunctionTable.build(loads, [a for a, _, _ in funcs], [b for _, b, _ in funcs], offsets, bytes(strings))
