"""How an end phasescope did not ask for is reported: only a terminated process is a killed one."""

from __future__ import annotations

import struct

from phasescope.sources.events import Ended, ended_of_status, unasked_end
from phasescope.sources.exit_status import exit_events, process_status


def test_a_terminated_process_is_killed_and_a_crash_report_is_a_crash():
    assert unasked_end("process-terminated", None, True).describe() == "terminated without exiting normally (killed)"
    crashed = unasked_end("process-terminated", "SIGSEGV at 0x0\nbacktrace...", True)
    assert (crashed.how, crashed.signal) == ("crashed", "SIGSEGV at 0x0")


def test_a_lost_connection_says_why_and_never_claims_a_kill():
    local = unasked_end("connection-terminated", None, False)
    assert local.how == "lost" and "killed" not in local.describe()
    assert "frida: connection-terminated; its pid still ran" in local.describe()
    assert unasked_end("connection-terminated", None, True).signal.endswith("its pid was gone")
    remote = unasked_end("device-lost", None, None)
    assert remote.signal == "frida: device-lost" and "not known" in remote.describe()


def test_a_known_wait_status_names_the_signal_or_the_code():
    """Wait statuses built by hand: 2 (SIGINT), 11|0x80 (SIGSEGV, core dumped), 7 << 8 (exit 7)."""
    killed = unasked_end("process-terminated", None, True, status=2)
    assert (killed.how, killed.signal, killed.describe()) == ("killed", "SIGINT", "killed by SIGINT")
    assert ended_of_status(11 | 0x80) == Ended("crashed", signal="SIGSEGV")
    assert ended_of_status(7 << 8) == Ended("exited", code=7)
    assert unasked_end("connection-terminated", None, True, status=2).how == "lost"  # only Frida's process end


def test_exit_events_are_read_from_a_connector_datagram():
    """A datagram as the kernel's process connector sends it: a fork event (ignored), then the exit
    of thread 101 of process 100 with wait status 2, each in its own 4-byte aligned message."""
    def message(what: int, data: bytes) -> bytes:
        body = struct.pack("=IIIIHH", 1, 1, 0, 0, 16 + len(data), 0) + struct.pack("=IIQ", what, 0, 0) + data
        return struct.pack("=IHHII", 16 + len(body), 3, 0, 0, 0) + body + b"\0" * (-len(body) % 4)
    datagram = message(1, struct.pack("=IIII", 100, 100, 101, 101)) + message(0x80000000, struct.pack("=IIII", 101, 100, 2, 17))
    assert list(exit_events(datagram)) == [(101, 100, 2)]
    assert list(exit_events(datagram[:-4])) == []  # a cut one yields nothing


def test_only_the_main_thread_or_threads_after_it_tell_the_process_status():
    """Frida's helper threads in the target end with status 0 long before it dies of SIGINT (2):
    a status taken from them said "exited with code 0" when the main thread's event came late."""
    helpers = [(105, 100, 0), (106, 100, 0), (7, 7, 0)]  # and another process's
    assert process_status(100, helpers, None, False) == (None, False)
    assert process_status(100, helpers + [(100, 100, 2), (101, 100, 2)], None, False) == (2, True)
    # a main thread that ended first (pthread_exit: 0): the threads after it carry the group's code
    assert process_status(100, [(100, 100, 0), (101, 100, 2 << 8)], None, False) == (2 << 8, True)
    # a thread that ends with 0 after the group died of SIGINT (seen: 1 run in 30 of a spawned target
    # killed by SIGINT said "exited with code 0"), in one batch of events or in the next
    killed = [(100, 100, 2), (130, 100, 2), (151, 100, 0)]
    assert process_status(100, killed, None, False) == (2, True)
    assert process_status(100, killed[2:], *process_status(100, killed[:2], None, False)) == (2, True)
