"""What the host asks of a loaded agent while it runs: names of code, the code itself, an exact
burst, a locality window. Each call is bounded (``_query``: :class:`~phasescope.sources.calls.BoundedRpc`)
and answers "nothing" once the session is gone. Mixed into
:class:`~phasescope.sources.session.TraceSession`, whose ``_script``, ``_query`` and ``_options`` it uses."""

from __future__ import annotations

from typing import Optional

import frida


class AgentQueries:
    """The agent's queries (see the module docstring)."""

    def symbolize(self, pcs) -> list:
        """``(module, symbol)`` or None per address, from the target's debug symbols; all None once
        the session is gone."""
        script = self._script
        if script is None or not pcs:
            return [None] * len(pcs)
        try:
            found = self._query(script.exports_sync.symbolize, [hex(p) for p in pcs])
            return [None if s is None else tuple(s) for s in found]
        except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException, TimeoutError):
            return [None] * len(pcs)

    def burst(self, tid: int) -> bool:
        """Watch mode: have the agent follow thread ``tid`` for one exact interval (its record arrives
        as an :class:`IntervalEvent`). False when it cannot: not the program's thread, a burst already
        running, or the session gone."""
        script = self._script
        if script is None:
            return False
        try:
            return bool(self._query(script.exports_sync.burst, tid))
        except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException, TimeoutError):
            return False

    def request_window(self, tid: int) -> bool:
        """--locality: have thread ``tid`` open a locality window at its next interval (a phase the host
        saw with none yet; the agent opens them on a schedule and when new code runs). Never waits."""
        script = self._script
        if script is None or not self._options["locality"]:
            return False
        try:
            script.post({"type": "window", "tid": int(tid)})
            return True
        except (frida.InvalidOperationError, frida.TransportError):
            return False

    def read_code(self, address: int, size: int) -> Optional[bytes]:
        """``size`` bytes of the target's memory at ``address``, None if unreadable or detached."""
        script = self._script
        if script is None:
            return None
        try:
            return self._query(script.exports_sync.read_code, hex(address), size)
        except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException, TimeoutError):
            return None
