"""How an end phasescope did not ask for is reported: only a terminated process is a killed one."""

from __future__ import annotations

from phasescope.sources.events import unasked_end


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
