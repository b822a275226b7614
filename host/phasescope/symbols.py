"""Names for code addresses: ``module!symbol`` from the agent's debug symbols, else ``module+0xoffset``."""

from __future__ import annotations

from typing import Dict


class Symbolizer:
    """Cached address -> name lookups for a live session."""

    def __init__(self, session):
        self.session = session
        self._cache: Dict[int, str] = {}

    def describe(self, pc: int) -> str:
        name = self._cache.get(pc)
        if name is None:
            name = self._cache[pc] = self.session.modules.describe(pc)
        return name

    def invalidate(self) -> None:
        """Forget names after the module map changed (a library was unloaded or loaded)."""
        self._cache.clear()
