"""Names and disassembly of a live session's hot code, looked up off the view's path.

Names are ``module!symbol`` from the target's debug symbols (asked of the agent in batches), else
``module+0xoffset``. :meth:`Symbolizer.describe` and :meth:`Symbolizer.block` never wait on the
target: they answer from the cache (a name falls back to ``module+0xoffset``), and
:meth:`Symbolizer.request` queues what is missing for a background thread. :meth:`resolve`
looks up at once, for the moments that may wait (a new phase, the end of the run); what was
resolved stays cached for the final summary after the target is gone.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Dict, Iterable, List

from phasescope.sources.disassembly import Instruction, block_ending_at
from phasescope.sources.modules import KERNEL_KEY, KERNEL_NAME


class Symbolizer:
    """Cached address -> name and address -> hot block lookups for a live session."""

    def __init__(self, session, arch: str = "x64"):
        self.session = session
        self.arch = arch
        self._names: Dict[int, str] = {}
        self._blocks: Dict[int, List[Instruction]] = {}
        self._forget()
        self._lock = threading.Lock()  # one lookup at a time: the worker's and resolve()'s
        self._todo: "queue.Queue" = queue.Queue()
        self._worker = threading.Thread(target=self._work, name="phasescope-symbols", daemon=True)
        self._worker.start()

    def request(self, pcs: Iterable[int], blocks: Iterable[int] = ()) -> None:
        """Queue names of ``pcs`` and disassembly of the blocks ending at ``blocks``; returns at once."""
        names = [pc for pc in pcs if pc not in self._names]
        code = [pc for pc in blocks if pc not in self._blocks]
        if names or code:
            self._todo.put((names, code))

    def resolve(self, pcs: Iterable[int], blocks: Iterable[int] = ()) -> None:
        """Look up names (one round trip) and blocks now; waits for the target (bounded)."""
        with self._lock:
            todo = sorted({pc for pc in pcs if pc not in self._names})
            if todo:
                for pc, found in zip(todo, self.session.symbolize(todo)):
                    if found is None or not found[1] or found[1].startswith("0x"):  # stripped: Frida gives the address
                        self._names[pc] = self.session.modules.describe(pc)
                    else:
                        module, symbol = found
                        self._names[pc] = f"{os.path.basename(module or '?')}!{symbol}"
            for pc in blocks:
                if pc not in self._blocks:
                    block = block_ending_at(self.session.read_code, pc, self.arch)
                    if block:  # not cached when unreadable: it may be readable later
                        self._blocks[pc] = block

    def describe(self, pc: int) -> str:
        """``module!symbol`` once resolved, ``module+0xoffset`` until then; never waits."""
        name = self._names.get(pc)
        if name is None:
            self.request([pc])
            return self.session.modules.describe(pc)
        return name

    def block(self, pc: int) -> List[Instruction]:
        """The disassembled block ending at branch PC ``pc``, empty until resolved; never waits."""
        return self._blocks.get(pc, [])

    def invalidate(self) -> None:
        """Forget everything after the module map changed (code may have moved)."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._names.clear()
        self._blocks.clear()
        self._names[KERNEL_KEY], self._blocks[KERNEL_KEY] = KERNEL_NAME, []  # kernel samples: one key, no code

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the queued lookups (the end of a run, before the summary)."""
        deadline = time.monotonic() + timeout
        while self._todo.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        """Stop the background lookups."""
        self._todo.put(None)

    def _work(self) -> None:
        while True:
            item = self._todo.get()
            try:
                if item is None:
                    return
                self.resolve(*item)
            finally:
                self._todo.task_done()
