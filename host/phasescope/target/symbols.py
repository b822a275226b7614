"""Names and disassembly for hot code of a live session.

Names are ``module!symbol`` from the target's debug symbols (asked of the agent in batches), else
``module+0xoffset``. Lookups happen while the session is attached (dashboard refreshes, periodic
summaries); what was resolved stays cached for the final summary after the target is gone.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List

from phasescope.target.disassembly import Instruction, block_ending_at


class Symbolizer:
    """Cached address -> name and address -> hot block lookups for a live session."""

    def __init__(self, session, arch: str = "x64"):
        self.session = session
        self.arch = arch
        self._names: Dict[int, str] = {}
        self._blocks: Dict[int, List[Instruction]] = {}

    def resolve(self, pcs: Iterable[int]) -> None:
        """Look up the names of every address not resolved yet, in one round trip."""
        todo = sorted({pc for pc in pcs if pc not in self._names})
        if not todo:
            return
        for pc, found in zip(todo, self.session.symbolize(todo)):
            if found is None or not found[1] or found[1].startswith("0x"):  # stripped: Frida gives the address
                self._names[pc] = self.session.modules.describe(pc)
            else:
                module, symbol = found
                self._names[pc] = f"{os.path.basename(module or '?')}!{symbol}"

    def describe(self, pc: int) -> str:
        """``module!symbol`` (or ``module+0xoffset``) of a code address."""
        if pc not in self._names:
            self.resolve([pc])
        return self._names[pc]

    def block(self, pc: int) -> List[Instruction]:
        """The disassembled block ending at branch PC ``pc`` (empty if it cannot be read)."""
        if pc not in self._blocks:
            block = block_ending_at(self.session.read_code, pc, self.arch)
            if not block:
                return []  # not cached: the code may be readable later (or never, once detached)
            self._blocks[pc] = block
        return self._blocks[pc]

    def invalidate(self) -> None:
        """Forget everything after the module map changed (code may have moved)."""
        self._names.clear()
        self._blocks.clear()
