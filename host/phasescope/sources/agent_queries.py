"""What the host asks of a loaded agent while it runs: names of code, the code itself, an exact
burst, a locality window. Each call is bounded (``_query``: :class:`~phasescope.sources.calls.BoundedRpc`)
and answers "nothing" once the session is gone. Mixed into
:class:`~phasescope.sources.session.TraceSession`, whose ``_script``, ``_query`` and ``_options`` it uses."""

from __future__ import annotations

from typing import Optional

import frida

from phasescope.sources.device import is_local
from phasescope.sources.hotspot import HotSpotCode
from phasescope.sources.modules import JIT_MODULE, KERNEL_KEY, METHOD_KEY, method_of
from phasescope.sources.perf_map import PerfMap


class AgentQueries:
    """The agent's queries (see the module docstring)."""

    _hotspot: Optional[HotSpotCode] = None  # the JVM's own tables, read once JIT code is named
    _perf_map: Optional[PerfMap] = None  # the runtime's /tmp/perf-PID.map

    def symbolize(self, pcs) -> list:
        """``(module, symbol)`` or None per address, from the target's debug symbols; JIT code
        as sampled mode names it, ``("[jit]", name)`` (local targets only): a Java method key
        (:data:`~phasescope.sources.modules.METHOD_KEY`) from the JVM's tables (``java
        Holder.name``), code no symbol names from the runtime's perf map."""
        pcs = list(pcs)
        out: list = [None] * len(pcs)
        native = [i for i, pc in enumerate(pcs) if not METHOD_KEY <= pc < KERNEL_KEY]
        script = self._script
        if script is not None and native:
            try:
                found = self._query(script.exports_sync.symbolize, [hex(pcs[i]) for i in native])
            except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException, TimeoutError):
                found = [None] * len(native)
            for i, s in zip(native, found):
                out[i] = None if s is None else tuple(s)
        if self.pid is not None and is_local(self.device):
            self._name_jit(pcs, out)
        return out

    def _name_jit(self, pcs: list, out: list) -> None:
        """Fills ``out`` where the symbols named nothing: Java method keys, then the perf map."""
        if self._hotspot is None:
            self._hotspot, self._perf_map = HotSpotCode(self.pid), PerfMap(self.pid)
        java = [i for i, pc in enumerate(pcs) if METHOD_KEY <= pc < KERNEL_KEY]
        if java:
            methods = [method_of(pcs[i]) for i in java]
            for i, name in zip(java, self._hotspot.method_names(methods, self.modules)):
                out[i] = (JIT_MODULE, name) if name else None
        unnamed = [i for i, s in enumerate(out)
                   if pcs[i] < METHOD_KEY and (s is None or not s[1] or s[1].startswith("0x"))]
        for i, name in zip(unnamed, self._perf_map.names([pcs[i] for i in unnamed])):
            if name is not None:
                out[i] = (JIT_MODULE, name)

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
