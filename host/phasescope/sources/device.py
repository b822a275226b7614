"""Which Frida device and which process: frida-tools' -D/-U/-H and -p/-n/-f, checked up front with
one-line errors. The device ``None`` is this machine seen through /proc, with no Frida at all
(zero-touch sampled mode: frida is not even imported, so the target starts sooner)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Optional

from phasescope.errors import InputError
from phasescope.sources.procfs import is_kernel_thread, process_comm, process_exe, status_field


@dataclass(frozen=True)
class Target:
    """What to trace: exactly one of ``pid``, ``name`` (attach) or ``argv`` (spawn)."""

    pid: Optional[int] = None
    name: Optional[str] = None
    argv: Optional[list] = None
    shown: Optional[str] = None  # -p: the process's name, as reports show it

    @property
    def spawn(self) -> bool:
        return self.argv is not None

    def describe(self) -> str:
        if self.argv is not None:
            return " ".join(self.argv)
        return self.shown or (f"pid {self.pid}" if self.pid is not None else self.name)


def resolve_device(device_id: Optional[str] = None, usb: bool = False, host: Optional[str] = None):
    """The Frida device chosen by frida-tools-style options (-D ID, -U, -H HOST); local by default."""
    import frida  # here, not at the top: zero-touch sampled mode never needs it
    try:
        if device_id:
            return frida.get_device(device_id, timeout=5)
        if usb:
            return frida.get_usb_device(timeout=5)
        if host:
            device = frida.get_device_manager().add_remote_device(host)
            device.query_system_parameters()  # connects: a refusal or a service that is no frida-server
            return device
        return frida.get_local_device()
    except (frida.InvalidArgumentError, frida.TimedOutError) as e:
        raise InputError(f"no such device: {device_id or ('usb' if usb else host)} ({e})") from None
    except (frida.ServerNotRunningError, frida.ProtocolError, frida.TransportError) as e:
        raise InputError(f"cannot reach a frida-server at {host}: {e}") from None


def is_local(device) -> bool:
    """This machine: Frida's local device, or ``None`` (/proc, no Frida)."""
    return device is None or device.type == "local"


def require_local(device) -> None:
    """InputError unless ``device`` is this machine (the kernel samples its own processes only);
    ``device`` may be the -H host's name, remote whether or not it answers."""
    if isinstance(device, str) or not is_local(device):
        name = device if isinstance(device, str) else device.name
        raise InputError(f"--mode sampled needs the local device: the kernel samples processes of this machine "
                         f"only, and {name} is remote; use --mode exact")


def local_processes() -> list:
    """``(pid, name)`` of this machine's processes from /proc; the name is the executable's
    basename (Frida's local process name), else the command name."""
    out = []
    for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit()):
        exe = process_exe(pid)
        name = os.path.basename(exe) if exe else process_comm(pid)
        if name:
            out.append((pid, name))
    return out


def process_state(pid: int) -> Optional[str]:
    """The state letter of a local process (R, S, Z, ...), None when it cannot be read."""
    try:
        return status_field(f"/proc/{int(pid)}/status", "State")
    except ValueError:
        return None


def is_zombie(pid: int) -> bool:
    """Whether a local process has exited and waits to be reaped: its main thread is a zombie and
    so is every other thread (a main thread that left with pthread_exit is a zombie while the
    others run on)."""
    from phasescope.sources.procfs import stat_fields, thread_ids
    if process_state(pid) != "Z":
        return False
    states = (stat_fields(f"/proc/{int(pid)}/task/{tid}/stat") for tid in thread_ids(pid))
    return all(fields is None or fields[0] in ("Z", "X") for fields in states)


def has_ended(pid: int) -> bool:
    """Whether a local process is gone or :func:`is_zombie`."""
    return process_state(pid) is None or is_zombie(pid)


def resolve_target(device, pid=None, name=None, argv=None) -> Target:
    """Check a -p/-n/-f choice against the device; one-line errors for every bad case."""
    chosen = [x is not None and x != [] for x in (pid, name, argv)]
    if sum(chosen) != 1:
        raise InputError("give exactly one target: -p PID, -n NAME or -f PROGRAM [ARGS...]")
    if argv:
        program = argv[0]
        if is_local(device):
            path = program if os.sep in program else shutil.which(program)
            if path is None or not os.path.exists(path):
                raise InputError(f"no such program: {program}")
            if os.path.isdir(path) or not os.access(path, os.X_OK):
                raise InputError(f"not executable: {program}")
            argv = [path] + list(argv[1:])
        return Target(argv=list(argv))
    processes = local_processes() if device is None else _frida_processes(device)
    if pid is not None:
        if is_local(device) and is_zombie(pid):
            raise InputError(f"pid {pid} is a zombie: it has exited and waits for its parent to reap it; "
                             "nothing runs there to trace")
        if is_local(device) and pid == os.getpid():  # Stalker following its own host hung, deaf to SIGTERM
            raise InputError(f"pid {pid} is this phasescope itself: it cannot trace itself")
        if is_local(device) and is_kernel_thread(pid):
            raise InputError(f"pid {pid} is a kernel thread ({process_comm(pid)}): it runs no user code, "
                             "so there is nothing to trace in either mode")
        listed = any(p == pid for p, _ in processes)
        # Processes of other users may be missing from the list: attaching says why.
        if not listed and not (is_local(device) and os.path.exists(f"/proc/{int(pid)}")):
            raise InputError(f"no such process: pid {pid}")
        shown = next((n for p, n in processes if p == pid), None) or (process_comm(pid) if is_local(device) else None)
        return Target(pid=int(pid), shown=shown or None)
    matches = sorted(p for p, n in processes if n == name and not (is_local(device) and p == os.getpid()))
    if not matches:
        raise InputError(f"no process named {name!r}")
    if len(matches) > 1:
        pids = ", ".join(map(str, matches))
        raise InputError(f"{len(matches)} processes are named {name!r} (pids {pids}); choose one with -p")
    return Target(pid=matches[0])


def _frida_processes(device) -> list:
    """``(pid, name)`` of a Frida device's processes; one line if the device cannot be used."""
    import frida
    try:
        return [(p.pid, p.name) for p in device.enumerate_processes()]
    except (frida.TransportError, frida.ServerNotRunningError) as e:  # a remote device is connected here
        raise InputError(f"cannot use device {device.name}: {e}") from None
