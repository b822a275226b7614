"""Start-up of a sampled run (issue 31): a spawned target is released once the whole command line
is checked, and before the engine, the pipeline and the view (rich) load; a lone process's run
never loads OpenSSL; a bad command line still never runs the program."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process

#: the modules that load only once the target runs
HEAVY = ("rich", "phasescope.engine.phase_engine", "phasescope.pipeline.live", "phasescope.view.dashboard")

#: runs the CLI with an audit hook that, when phasescope.pipeline.live starts to load, records which
#: heavy modules are already loaded and whether the run's session has released its target
#: (``resumed_at``, set when the held child is let through to its exec)
PROBE = r"""
import json, sys
HEAVY = %r
seen = {}
def hook(event, args):
    if event == "import" and args[0] == "phasescope.pipeline.live" and not seen:
        f = sys._getframe()
        while f is not None and "session" not in f.f_locals:
            f = f.f_back
        session = None if f is None else f.f_locals["session"]
        seen.update(loaded=[m for m in HEAVY if m in sys.modules],
                    released=getattr(session, "resumed_at", None) is not None)
sys.addaudithook(hook)
from phasescope.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, **seen, "at_end": [m for m in ("_hashlib",) if m in sys.modules]}),
      file=sys.stderr)
"""


def test_a_spawned_sampled_target_runs_before_the_engine_and_rich_load(tmp_path):
    log = tmp_path / "log.jsonl"
    r = subprocess.run([sys.executable, "-c", PROBE % (HEAVY,), "--mode", "sampled", "--no-dashboard",
                        "-o", "/dev/null", "--log", str(log), "-f", "/bin/sh", "--", "-c", "echo out"],
                       capture_output=True, text=True, timeout=120)
    probe = json.loads(r.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0 and r.stdout == "out\n", r.stderr
    assert probe["released"] is True, probe
    assert probe["loaded"] == [], probe
    assert probe["at_end"] == [], probe  # a lone process needs no OpenSSL (hashlib: -a's phase databases)
    assert log.exists(), "the log the user asked for was opened before the target ran"


def test_a_bad_option_after_the_target_still_never_runs_it(tmp_path):
    marker = tmp_path / "ran"
    r = run_cli("--mode", "sampled", "--no-dashboard", "-f", "/bin/sh", "--rate", "0", "--", "-c",
                f"touch {marker}")
    assert r.returncode == 2 and "--rate" in r.stderr and not marker.exists(), r.stderr
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(tmp_path / "no" / "dir" / "l.jsonl"),
                "-f", "/bin/sh", "--", "-c", f"touch {marker}")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and not marker.exists(), r.stderr
