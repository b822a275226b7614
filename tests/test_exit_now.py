"""The command line ends without the interpreter's teardown (cli.exit_now, issue 31), and with
it wherever something relies on it: what was printed is flushed and the exit code kept either way."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = {
    # (code run before exit_now, exit code given) -> what must be on stdout
    # an object freed at teardown says so: the fast exit frees nothing
    "fast": ("class Freed:\n    def __del__(self): print(' torn down', end='')\nkept = Freed()\nprint('printed', end='')",
             3, "printed"),
    "an exit handler": ("import atexit; atexit.register(print, 'handler ran', end=''); print('printed ', end='')",
                        4, "printed handler ran"),
    "a thread that is not a daemon": ("import threading, time; threading.Thread(target=lambda: (time.sleep(0.2), "
                                      "print('thread done', end=''))).start()", 5, "thread done"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_exit_now_flushes_keeps_the_code_and_runs_what_the_normal_exit_would(case):
    before, code, out = CASES[case]
    r = subprocess.run([sys.executable, "-c", f"{before}\nfrom phasescope.cli import exit_now\nexit_now({code})"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (code, out, "")


@pytest.mark.slow
def test_a_profiler_running_the_command_writes_its_results(tmp_path):
    """cProfile (docs/performance.md's `python3 -m cProfile -o prof.out -m phasescope.cli ...`)
    writes its file once the command's SystemExit reaches it: the fast exit would lose it."""
    out = tmp_path / "prof.out"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "phasescope.cli", "help", "tracker"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--tracker" in r.stdout, r.stderr
    assert out.exists() and out.stat().st_size > 0
