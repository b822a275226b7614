"""What /proc tells of a process: its threads, its main thread's CPU time and its file-backed modules."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Dict, List, Optional, Set

if TYPE_CHECKING:
    from phasescope.sources.modules import ModuleMap


def thread_ids(pid: int) -> Set[int]:
    """Thread ids of a process now (empty set if it is gone)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def status_field(path: str, name: str) -> Optional[str]:
    """The first word of field ``name`` (``SigBlk``, ``TracerPid``, ...) of a ``/proc/PID[/task/TID]/status``
    file, None when it is unreadable (gone) or has no such field."""
    label = name + ":"
    try:
        with open(path) as f:
            return next((line.split()[1] for line in f if line.startswith(label)), None)
    except (OSError, IndexError):
        return None


def stat_fields(path: str) -> Optional[List[str]]:
    """The fields of a ``/proc/PID[/task/TID]/stat`` file after the command name (the state first:
    field 3 of proc(5) is index 0), None when unreadable (gone)."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def main_thread_cpu(pid: int) -> Optional[float]:
    """CPU seconds the main thread of ``pid`` has run so far (``/proc/PID/schedstat``), None when gone."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_cpu(pid: int) -> Optional[float]:
    """CPU seconds (user + system) of all of ``pid``'s threads so far, the exited ones included
    (``/proc/PID/stat``), None when gone."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (TypeError, ValueError, IndexError):
        return None


def process_start(pid: int) -> Optional[float]:
    """When ``pid`` started, in seconds since the epoch (``starttime`` of /proc/PID/stat, clock ticks
    since boot; the boot from CLOCK_BOOTTIME, to a tick), None when gone."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        ticks = int(fields[19])
    except (TypeError, ValueError, IndexError):
        return None
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME) + ticks / os.sysconf("SC_CLK_TCK")


def process_exe(pid: int) -> Optional[str]:
    """The path of ``pid``'s executable, None when unreadable (gone, or a kernel thread)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def is_kernel_thread(pid: int) -> bool:
    """Whether ``pid`` is a kernel thread (``PF_KTHREAD`` in /proc/PID/stat): no user code to trace."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        return bool(int(fields[6]) & 0x00200000)  # field 9, flags
    except (TypeError, ValueError, IndexError):
        return False


def process_comm(pid: int) -> str:
    """The command name of ``pid`` (``/proc/PID/comm``), "" when gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


#: A file's mapping further than this from where its image maps that offset is a second copy.
_COPY_DISTANCE = 16 << 20


def module_map_from_proc(pid: int) -> "ModuleMap":
    """A :class:`ModuleMap` of the file-backed executable modules of ``pid``, from /proc/PID/maps.

    Same convention as the Frida module list: a module's base is its lowest mapping (the ELF
    header, file offset 0), its size spans all its mappings, its name is its soname, else the file's basename.
    A mapping of a module's file far from where its image maps that offset is not part of its span;
    an executable one is a copy (:class:`ModuleMap` ``copies``: node 20 remaps its embedded
    builtins next to its JIT code).
    Used by tests and as the fallback for addresses outside every module Frida reported.
    """
    with open(f"/proc/{pid}/maps") as f:
        lines = f.readlines()
    if not lines:  # a main thread that left (pthread_exit) shows no maps; a thread that runs does
        for tid in sorted(thread_ids(pid) - {pid}):
            try:
                with open(f"/proc/{pid}/task/{tid}/maps") as f:
                    lines = f.readlines()
            except OSError:
                continue
            if lines:
                break
    return module_map_of(lines)


def module_map_of(maps_lines) -> "ModuleMap":
    """:func:`module_map_from_proc` of the lines of a maps file."""
    lines: Dict[str, List[tuple]] = {}
    for line in maps_lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].rstrip("\n")
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        lines.setdefault(path, []).append((lo, hi, int(parts[2], 16), "x" in parts[1]))
    from phasescope.sources.modules import Module, ModuleMap, library_name  # numpy: not before a target starts
    modules, copies = [], []
    for path, maps in lines.items():
        near = lambda base, m: abs(m[0] - base - m[2]) <= _COPY_DISTANCE  # noqa: E731
        # the image's header: the offset-0 mapping most executable mappings lie near (a file
        # mapped again to be read, as Frida maps libc, is not the image)
        base = max([lo for lo, _, off, _ in maps if off == 0] or [min(lo for lo, *_ in maps)],
                   key=lambda b: (sum(1 for m in maps if m[3] and near(b, m)), -b))
        image = [m for m in maps if near(base, m)]
        copy = [m for m in maps if m[3] and not near(base, m)]
        for lo, hi, off, _ in copy:
            source = [m for m in image if m[2] <= off and off + hi - lo <= m[2] + m[1] - m[0]]
            if source:  # the image's mapping of the same bytes
                copies.append((lo, hi, source[0][0] + off - source[0][2]))
        if any(x for *_, x in image):
            modules.append(Module(library_name(path, path), min(m[0] for m in image),
                                  max(m[1] for m in image) - min(m[0] for m in image), path))
    return ModuleMap(modules, copies)
