"""The kernel's perf_event interface, as sampled mode uses it: ``perf_event_open`` through ctypes
(``perf_event_attr`` laid out as in include/uapi/linux/perf_event.h), the mmap ring of sample
records, event ids and output redirection, and one-line refusals."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional

from phasescope.errors import InputError


# -- kernel ABI (include/uapi/linux/perf_event.h) ---------------------------------------------
NR_PERF_EVENT_OPEN = 298  # x86-64
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_TIME = 1 << 2
PERF_SAMPLE_CALLCHAIN = 1 << 5
PERF_SAMPLE_IDENTIFIER = 1 << 16
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_EVENT_IOC_SET_OUTPUT = 0x2405  # _IO('$', 5)
PERF_RECORD_MMAP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_COMM = 3
PERF_RECORD_EXIT = 4
PERF_RECORD_FORK = 7
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MISC_CPUMODE_MASK = 7
PERF_RECORD_MISC_USER = 2
PERF_RECORD_MISC_COMM_EXEC = 1 << 13
CLOCK_REALTIME = 0
#: data pages of a ring (a power of two): the unprivileged ``perf_event_mlock_kb`` default of 516 KiB
DEFAULT_RING_PAGES = 128

SAMPLE_TYPE = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME
SAMPLE_RECORD = struct.Struct("<IHHQQIIQ")  # header, identifier, ip, pid, tid, time: 40 bytes
#: ``--stacks``: SAMPLE_TYPE with the call chain after the time (``u64 nr, u64 ips[nr]``).
SAMPLE_TYPE_STACKS = SAMPLE_TYPE | PERF_SAMPLE_CALLCHAIN
#: Where the call chain starts in a sample record (kept as raw bytes per sample: decoding it,
#: :func:`user_callers`, is done once per distinct chain of a window).
CHAIN_AT = SAMPLE_RECORD.size
#: Deepest user call chain asked for (``sample_max_stack``; the kernel's own limit is 127).
MAX_STACK = 64
#: Call-chain entries at or above this are context markers (PERF_CONTEXT_USER = -512, ...).
PERF_CONTEXT_MAX = 0xFFFF_FFFF_FFFF_F001
RECORD_HEADER = struct.Struct("<IHH")
LOST_RECORD = struct.Struct("<QQ")  # id, lost
TASK_RECORD = struct.Struct("<IIIIQ")  # pid, ppid, tid, ptid, time
COMM_IDS = struct.Struct("<II")  # pid, tid of a COMM record (the name follows)
MMAP_RECORD = struct.Struct("<IIQQQ")  # pid, tid, addr, len, pgoff of an MMAP record (the file name follows)
#: With ``sample_id_all``, a record other than a sample ends with SAMPLE_TYPE's fields but the IP.
SAMPLE_ID = struct.Struct("<IIQQ")  # pid, tid, time, identifier
_U64 = struct.Struct("<Q")


def records(data: bytes):
    """``(type, misc, offset, size)`` of each complete record in a chunk read from a ring."""
    off, n = 0, len(data)
    while off + 8 <= n:
        rtype, misc, size = RECORD_HEADER.unpack_from(data, off)
        if size < 8 or off + size > n:
            return
        yield rtype, misc, off, size
        off += size


def user_callers(raw: bytes, ip: int) -> tuple:
    """The user return addresses of a raw chain (the bytes of a sample record from
    :data:`CHAIN_AT` on: ``u64 nr, u64 ips[nr]``), innermost first, without
    context markers and without the sampled ``ip`` itself at the top (a user-mode sample's chain
    starts with it; a kernel-mode one's with where it entered the kernel, which is kept)."""
    if len(raw) < 8:
        return ()
    nr = _U64.unpack_from(raw)[0]
    if not nr or 8 + 8 * nr > len(raw):
        return ()
    chain = struct.unpack_from(f"<{nr}Q", raw, 8)
    if chain[0] >= PERF_CONTEXT_MAX and max(chain[1:], default=0) < PERF_CONTEXT_MAX:
        chain = chain[1:]  # the usual chain: PERF_CONTEXT_USER, then the user IPs
    elif max(chain) >= PERF_CONTEXT_MAX:
        chain = tuple(a for a in chain if a < PERF_CONTEXT_MAX)
    return chain[1:] if chain[:1] == (ip,) else chain


def comm_record(data: bytes, off: int, size: int):
    """``(pid, name)`` of the PERF_RECORD_COMM at ``off``."""
    pid, _ = COMM_IDS.unpack_from(data, off + 8)
    return pid, data[off + 16: off + size].split(b"\0", 1)[0].decode("utf-8", "replace")


def mmap_record(data: bytes, off: int, size: int):
    """``(pid, addr, length, pgoff, path, time)`` of the PERF_RECORD_MMAP at ``off`` (an executable
    mapping; ``sample_id_all`` gives it its time)."""
    pid, _, addr, length, pgoff = MMAP_RECORD.unpack_from(data, off + 8)
    end = off + size - SAMPLE_ID.size
    path = data[off + 8 + MMAP_RECORD.size: end].split(b"\0", 1)[0].decode("utf-8", "replace")
    return pid, addr, length, pgoff, path, SAMPLE_ID.unpack_from(data, end)[2]


class PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` (PERF_ATTR_SIZE_VER8, 136 bytes)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),  # union with sample_freq
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("disabled", ctypes.c_uint64, 1),
        ("inherit", ctypes.c_uint64, 1),
        ("pinned", ctypes.c_uint64, 1),
        ("exclusive", ctypes.c_uint64, 1),
        ("exclude_user", ctypes.c_uint64, 1),
        ("exclude_kernel", ctypes.c_uint64, 1),
        ("exclude_hv", ctypes.c_uint64, 1),
        ("exclude_idle", ctypes.c_uint64, 1),
        ("mmap", ctypes.c_uint64, 1),
        ("comm", ctypes.c_uint64, 1),
        ("freq", ctypes.c_uint64, 1),
        ("inherit_stat", ctypes.c_uint64, 1),
        ("enable_on_exec", ctypes.c_uint64, 1),
        ("task", ctypes.c_uint64, 1),
        ("watermark", ctypes.c_uint64, 1),
        ("precise_ip", ctypes.c_uint64, 2),
        ("mmap_data", ctypes.c_uint64, 1),
        ("sample_id_all", ctypes.c_uint64, 1),
        ("exclude_host", ctypes.c_uint64, 1),
        ("exclude_guest", ctypes.c_uint64, 1),
        ("exclude_callchain_kernel", ctypes.c_uint64, 1),
        ("exclude_callchain_user", ctypes.c_uint64, 1),
        ("mmap2", ctypes.c_uint64, 1),
        ("comm_exec", ctypes.c_uint64, 1),
        ("use_clockid", ctypes.c_uint64, 1),
        ("context_switch", ctypes.c_uint64, 1),
        ("write_backward", ctypes.c_uint64, 1),
        ("namespaces", ctypes.c_uint64, 1),
        ("ksymbol", ctypes.c_uint64, 1),
        ("bpf_event", ctypes.c_uint64, 1),
        ("aux_output", ctypes.c_uint64, 1),
        ("cgroup", ctypes.c_uint64, 1),
        ("text_poke", ctypes.c_uint64, 1),
        ("build_id", ctypes.c_uint64, 1),
        ("inherit_thread", ctypes.c_uint64, 1),
        ("remove_on_exec", ctypes.c_uint64, 1),
        ("sigtrap", ctypes.c_uint64, 1),
        ("reserved_1", ctypes.c_uint64, 26),
        ("wakeup_watermark", ctypes.c_uint32),  # union with wakeup_events
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    ]


assert ctypes.sizeof(PerfEventAttr) == 136

# perf_event_mmap_page: data_head at 1024, data_tail at 1032, data_offset 1040, data_size 1048.
_DATA_HEAD, _DATA_TAIL = 1024, 1032

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.restype = ctypes.c_int


def perf_event_open(attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> int:
    """The raw syscall; returns a descriptor or raises OSError."""
    fd = _libc.syscall(ctypes.c_long(NR_PERF_EVENT_OPEN), ctypes.byref(attr), ctypes.c_int(pid),
                       ctypes.c_int(cpu), ctypes.c_int(group_fd), ctypes.c_ulong(flags))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(fd)


def set_output(fd: int, target_fd: int) -> None:
    if _libc.ioctl(ctypes.c_int(fd), ctypes.c_ulong(PERF_EVENT_IOC_SET_OUTPUT), ctypes.c_int(target_fd)) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def online_cpus() -> List[int]:
    """Online CPU numbers, from /sys (all CPUs the scheduler may run a thread on)."""
    try:
        with open("/sys/devices/system/cpu/online") as f:
            text = f.read().strip()
    except OSError:
        return list(range(os.cpu_count() or 1))
    cpus = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


@dataclass
class Ring:
    """One mmapped perf ring (1 metadata page + 2**n data pages)."""

    def __init__(self, fd: int, pages: int):
        self.page = mmap.PAGESIZE
        self.fd = fd
        self.map = mmap.mmap(fd, (1 + pages) * self.page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = pages * self.page
        self.lost = 0

    def read(self) -> bytes:
        """All complete records since the last read (raw bytes), and release them to the kernel."""
        m, page, size = self.map, self.page, self.size
        head = _U64.unpack_from(m, _DATA_HEAD)[0]  # load data_head first (acquire on x86 TSO)
        tail = _U64.unpack_from(m, _DATA_TAIL)[0]
        n = head - tail
        if not n:
            return b""
        start = tail % size
        if start + n <= size:
            data = m[page + start: page + start + n]
        else:
            data = m[page + start: page + size] + m[page: page + (start + n - size)]
        _U64.pack_into(m, _DATA_TAIL, head)  # then release the space (store after the loads)
        return data

    def close(self) -> None:
        self.map.close()




def wakeup_samples(window_samples: int, period_ns: int, wake_every: float = 0.0, stacks: bool = False,
                   ring_pages: int = DEFAULT_RING_PAGES) -> int:
    """Samples a ring takes before it wakes the host: whole windows, as many as a thread fills in
    ``wake_every`` seconds of its CPU time (at least one), and no more than a quarter of the ring
    holds at the largest record (the host may be late; what does not fit, the kernel drops).
    A thread that stays on its CPU is read as its last window of the batch completes; one that
    moved between CPUs has samples in two rings, each short of a wake-up, and is read within
    the live loop's quiet bound. Each wake-up costs the host about as much again as the window
    it brings (a cold loop, drain and engine): at 1000 Hz, reading two windows a wake-up instead
    of one cut the observer's CPU by a fifth, eight by a third (docs/performance.md, stop 42)."""
    windows = int(wake_every * 1e9) // (window_samples * period_ns)
    record = CHAIN_AT + 8 * (MAX_STACK + 2) if stacks else SAMPLE_RECORD.size  # chain: nr, marker, frames
    fit = (ring_pages * mmap.PAGESIZE // 4) // (record * window_samples)
    return window_samples * max(1, min(windows, fit))


def sampling_attr(period_ns: int, stacks: bool, children: bool, kernel: bool, wakeup: int,
                  clock: int = CLOCK_REALTIME) -> PerfEventAttr:
    """The CPU-clock sampling event of one process's threads (see :mod:`phasescope.sources.sampler`):
    inherited by new threads (and by forked children with ``children``), FORK/EXIT and executable
    MMAP records, a wake-up every ``wakeup`` samples into a ring (:func:`wakeup_samples`)."""
    a = PerfEventAttr()
    a.type = PERF_TYPE_SOFTWARE
    a.size = ctypes.sizeof(PerfEventAttr)
    a.config = PERF_COUNT_SW_CPU_CLOCK
    a.sample_period = period_ns
    a.sample_type = SAMPLE_TYPE_STACKS if stacks else SAMPLE_TYPE
    a.exclude_callchain_kernel = 1
    a.sample_max_stack = MAX_STACK
    a.disabled = 0
    a.inherit = 1
    a.inherit_thread = 0 if children else 1  # 0: forked children inherit the events too
    a.comm = a.comm_exec = 1 if children else 0  # their exec renames them
    a.exclude_kernel = 0 if kernel else 1
    a.exclude_hv = 1
    a.task = 1
    a.mmap = 1  # executable mappings: a library mapped where another was (sample_code.py)
    a.sample_id_all = 1  # ... and when, to key each sample with the modules of its time
    a.watermark = 0
    a.wakeup_watermark = wakeup  # the union's wakeup_events: samples, since watermark is 0
    a.use_clockid = 1
    a.clockid = clock
    return a


def open_on_cpus(attr: PerfEventAttr, tid: int, cpus: List[int], rings: Dict[int, "Ring"], ring_pages: int,
                 pid: int, kernel: bool) -> Optional[List[int]]:
    """Open ``attr`` on thread ``tid`` on each of ``cpus``: the first event on a CPU gets that CPU's
    ring (mmapped, added to ``rings``), later ones write into it. The descriptors, or None if the
    thread exited meanwhile; a refusal is InputError, one line about process ``pid``. Needs
    nothing heavier than ctypes, so a spawned target can be released before numpy loads."""
    fds: List[int] = []
    try:
        for cpu in cpus:
            try:
                fd = perf_event_open(attr, tid, cpu)
            except OSError as e:
                if e.errno == errno.ESRCH:  # the thread exited meanwhile
                    return None
                raise InputError(refusal(e, pid, kernel)) from None
            fds.append(fd)
            try:
                if cpu in rings:
                    set_output(fd, rings[cpu].fd)
                else:
                    rings[cpu] = Ring(fd, ring_pages)
            except OSError as e:
                raise InputError(f"cannot map the perf ring buffer of process {pid}: {e.strerror} "
                                 "(raise ulimit -l or /proc/sys/kernel/perf_event_mlock_kb)") from None
        done, fds = fds, []
        return done
    finally:
        for fd in fds:  # not handed over: refused or exited half-way
            for cpu, ring in list(rings.items()):
                if ring.fd == fd:
                    ring.close()
                    del rings[cpu]
            os.close(fd)


@dataclass
class OpenedEvents:
    """Sampling events opened before the :class:`~phasescope.sources.sampler.Sampler` that reads
    them (whose module loads numpy) exists: the Sampler takes them over."""

    cpus: List[int]
    rings: Dict[int, Ring]
    fds: Dict[int, List[int]]  # tid -> its events, one per CPU

    def close(self) -> None:
        """Close them (when no Sampler took them over)."""
        for ring in self.rings.values():
            ring.close()
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)


def open_events(pid: int, *, period_ns: int, kernel: bool, children: bool, stacks: bool, window_samples: int,
                wake_every: float = 0.0, ring_pages: int = DEFAULT_RING_PAGES) -> OpenedEvents:
    """The sampling events of process ``pid``'s one thread (a spawned target held before its
    ``exec``), as ``Sampler(pid, opened=..., **the same keywords)`` would open them."""
    cpus, rings = online_cpus(), {}
    attr = sampling_attr(period_ns, stacks, children, kernel,
                         wakeup_samples(window_samples, period_ns, wake_every, stacks, ring_pages))
    fds = open_on_cpus(attr, pid, cpus, rings,
                       ring_pages, pid, kernel)
    if fds is None:
        raise InputError(f"process {pid} exited before sampling started")
    return OpenedEvents(cpus, rings, {pid: fds})


def event_id(fd: int) -> int:
    """The kernel's id of an event (PERF_EVENT_IOC_ID), as PERF_SAMPLE_IDENTIFIER reports it."""
    buf = ctypes.c_uint64(0)
    # _IOR('$', 7, __u64) = 0x80082407
    if _libc.ioctl(ctypes.c_int(fd), ctypes.c_ulong(0x80082407), ctypes.byref(buf)) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(buf.value)


def paranoid_level() -> Optional[int]:
    """/proc/sys/kernel/perf_event_paranoid, None when unreadable."""
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def refusal(e: OSError, pid: int, kernel: bool = False) -> str:
    """One line: why the kernel refused to sample ``pid`` and what to do."""
    if e.errno in (errno.EACCES, errno.EPERM):
        level = paranoid_level()
        need = 1 if kernel else 2
        if level is not None and level > need:
            fix = f"run as root, grant CAP_PERFMON, or set /proc/sys/kernel/perf_event_paranoid to {need} or lower"
        else:
            fix = ("run as root, grant CAP_PERFMON, or run as the user who owns the process (ptrace access to "
                   "it is required)")
        return (f"cannot sample process {pid}: perf_event_open denied ({e.strerror}, perf_event_paranoid "
                f"is {level}); {fix}, or use --mode exact")
    if e.errno == errno.ESRCH:
        return f"cannot sample process {pid}: it exited"
    if e.errno in (errno.ENOENT, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENODEV):
        return (f"cannot sample process {pid}: this kernel has no perf software cpu-clock event "
                f"({e.strerror}); use --mode exact")
    if e.errno == errno.EMFILE:
        return f"cannot sample process {pid}: too many open files (raise ulimit -n)"
    return f"cannot sample process {pid}: perf_event_open failed ({e.strerror}); use --mode exact"
