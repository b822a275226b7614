"""examples/nice_by_phase.py end to end: a real target traced with --events, the policy renicing
its thread when it enters the flagged phase (and back when it leaves)."""

from __future__ import annotations

import pytest
import re
import subprocess
import sys
from pathlib import Path

from conftest import cli_command

EXAMPLE = Path(__file__).parent.parent / "examples" / "nice_by_phase.py"


@pytest.mark.slow  # starts a real process
def test_nice_by_phase(build, tmp_path):
    prog = build("phased.c")
    sock = str(tmp_path / "ev.sock")
    tracer = subprocess.Popen(cli_command("-f", prog, "3", "6", "--no-dashboard", "--events", f"unix:{sock}"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # P2 is phased.c's pointer chase (IDs are deterministic for this program: hash P0, float P1;
        # before stop 39 boundary intervals took IDs too, and the chase was P4)
        policy = subprocess.run([sys.executable, str(EXAMPLE), f"unix:{sock}", "--background", "2", "--nice", "7"],
                                capture_output=True, text=True, timeout=60)
        _, err = tracer.communicate(timeout=60)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert tracer.returncode == 0, err
    out = policy.stdout
    assert policy.returncode == 0, policy.stderr
    assert out.startswith("nice_by_phase: connected to ")
    pid = re.search(r"\(pid (\d+)\)", out).group(1)
    assert re.search(rf"thread {pid}: entered background phase P2: nice 7 \(now 7\)", out), out
    assert re.search(rf"thread {pid}: left for P\d+: nice 0", out), out
    assert "nice_by_phase: target exited" in out



def test_nice_by_phase_stops_at_a_line_cut_off_mid_way(capsys):
    """phasescope cuts off, at its end, a client that reads too slowly (one second to read what is
    queued, docs/events-and-policies.md); what its socket still holds may end mid-line (seen with a
    reader at 1% of a CPU: json.loads raised on it, a traceback and exit 1). The example's reader
    stops at that line and says so."""
    import importlib.util
    import io
    spec = importlib.util.spec_from_file_location("nice_by_phase", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    stream = io.StringIO('{"event":"hello","pid":1}\n{"event":"interval","thread":1,"phase":0}\n{"event":"inter')
    assert [e["event"] for e in example.events(stream)] == ["hello", "interval"]
    assert capsys.readouterr().out == "nice_by_phase: the stream was cut off (phasescope ended)\n"
