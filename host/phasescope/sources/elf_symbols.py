"""Function names of code addresses from the ELF files on disk (pyelftools): zero-touch sampled
mode's symbols, where no agent can ask the process.

A module's load bias is its base (its lowest mapping, file offset 0) minus the lowest ``PT_LOAD``
virtual address; an address's symbol is the ``STT_FUNC`` of ``.symtab`` (else ``.dynsym``) whose
``[value, value + size)`` holds it. Each file is read once.
"""

from __future__ import annotations

import bisect
from typing import Dict, List, Optional, Tuple

from phasescope.sources.modules import ModuleMap

_Table = Tuple[int, List[int], List[int], List[str]]  # (lowest PT_LOAD vaddr, starts, ends, names)


class ElfSymbols:
    """``names(modules, pcs)``: ``(module, function)`` (or None) per address, as the agent's
    symbol lookup gives them, given the process's module map."""

    def __init__(self):
        self._tables: Dict[str, Optional[_Table]] = {}

    def _table(self, path: str) -> Optional[_Table]:
        if path not in self._tables:
            self._tables[path] = _read(path)
        return self._tables[path]

    def names(self, modules: ModuleMap, pcs) -> List[Optional[str]]:
        out = []
        for pc in pcs:
            i = int(modules._index([pc])[0])
            if i < 0:
                out.append(None)
                continue
            m = modules.modules[i]
            table = self._table(m.path or m.name)
            if table is None:
                out.append(None)
                continue
            low, starts, ends, names = table
            vaddr = pc - m.base + low
            j = bisect.bisect_right(starts, vaddr) - 1
            out.append((m.name, names[j]) if j >= 0 and vaddr < ends[j] else None)
        return out


def _read(path: str) -> Optional[_Table]:
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
    funcs.sort()
    return min(loads), [a for a, _, _ in funcs], [b for _, b, _ in funcs], [n for _, _, n in funcs]
