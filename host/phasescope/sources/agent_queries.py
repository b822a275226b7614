"""What the host asks of a loaded agent while it runs: names of code, the code itself, an exact
burst, a locality window. Each call is bounded (``_query``: :class:`~phasescope.sources.calls.BoundedRpc`)
and answers "nothing" once the session is gone. Mixed into
:class:`~phasescope.sources.session.TraceSession`, whose ``_script``, ``_query`` and ``_options`` it uses."""

from __future__ import annotations

from typing import Optional

import frida

from phasescope.sources.device import is_local
from phasescope.sources.hotspot import HotSpotCode
from phasescope.sources.modules import JIT_MODULE, KERNEL_KEY, METHOD_KEY


class AgentQueries:
    """The agent's queries (see the module docstring)."""

    _hotspot: Optional[HotSpotCode] = None  # the JVM's own tables, read once a method key is named

    def symbolize(self, pcs) -> list:
        """``(module, symbol)`` or None per address, from the target's debug symbols; a Java
        method key (:data:`~phasescope.sources.modules.METHOD_KEY`) as ``("[jit]", "java
        Holder.name")``, read from the JVM's memory as sampled mode names it (local targets only);
        all None once the session is gone."""
        pcs = list(pcs)
        out: list = [None] * len(pcs)
        java = [i for i, pc in enumerate(pcs) if METHOD_KEY <= pc < KERNEL_KEY]
        if java and self.pid is not None and is_local(self.device):
            if self._hotspot is None:
                self._hotspot = HotSpotCode(self.pid)
            methods = [(pcs[i] - METHOD_KEY) << 3 for i in java]
            for i, name in zip(java, self._hotspot.method_names(methods, self.modules)):
                out[i] = (JIT_MODULE, name) if name else None
        native = [i for i, pc in enumerate(pcs) if not METHOD_KEY <= pc < KERNEL_KEY]
        script = self._script
        if script is None or not native:
            return out
        try:
            found = self._query(script.exports_sync.symbolize, [hex(pcs[i]) for i in native])
        except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException, TimeoutError):
            return out
        for i, s in zip(native, found):
            out[i] = None if s is None else tuple(s)
        return out

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
