"""What /proc tells of a process: its threads, its main thread's CPU time and its file-backed modules."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Optional, Set

if TYPE_CHECKING:
    from phasescope.sources.modules import ModuleMap


def thread_ids(pid: int) -> Set[int]:
    """Thread ids of a process now (empty set if it is gone)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def main_thread_cpu(pid: int) -> Optional[float]:
    """CPU seconds the main thread of ``pid`` has run so far (``/proc/PID/schedstat``), None when gone."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_exe(pid: int) -> Optional[str]:
    """The path of ``pid``'s executable, None when unreadable (gone, or a kernel thread)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def is_kernel_thread(pid: int) -> bool:
    """Whether ``pid`` is a kernel thread (``PF_KTHREAD`` in /proc/PID/stat): no user code to trace."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return bool(int(fields[6]) & 0x00200000)  # field 9, flags
    except (OSError, ValueError, IndexError):
        return False


def process_comm(pid: int) -> str:
    """The command name of ``pid`` (``/proc/PID/comm``), "" when gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


def module_map_from_proc(pid: int) -> "ModuleMap":
    """A :class:`ModuleMap` of the file-backed executable modules of ``pid``, from /proc/PID/maps.

    Same convention as the Frida module list: a module's base is its lowest mapping (the ELF
    header, file offset 0), its size spans all its mappings, its name is its soname, else the file's basename.
    Used by tests and as the fallback for addresses outside every module Frida reported.
    """
    spans: Dict[str, List[int]] = {}
    execs: Set[str] = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            path = parts[5].rstrip("\n")
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if path in spans:
                spans[path][0] = min(spans[path][0], lo)
                spans[path][1] = max(spans[path][1], hi)
            else:
                spans[path] = [lo, hi]
            if "x" in parts[1]:
                execs.add(path)
    from phasescope.sources.modules import Module, ModuleMap, library_name  # numpy: not before a target starts
    return ModuleMap(Module(library_name(p, p), lo, hi - lo, p) for p, (lo, hi) in spans.items() if p in execs)
