"""A traced program prints exactly what it prints untraced: real programs from the system."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_support import callgrind_functions, per_function, trace_spawn

pytestmark = pytest.mark.slow  # every test here starts a real process


def _payload() -> bytes:
    rng = random.Random(7)
    words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(500)]
    return b" ".join(rng.choice(words) for _ in range(60_000)) + bytes(rng.randrange(256) for _ in range(50_000))


@pytest.mark.parametrize("tool", ["gzip", "bzip2"])
def test_compress_round_trip_traced_equals_untraced(tool, tmp_path):
    exe = shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed")
    original = tmp_path / "data"
    original.write_bytes(_payload())

    native = subprocess.run([exe, "-c", str(original)], capture_output=True, check=True, timeout=300).stdout
    traced = trace_spawn([exe, "-c", str(original)])
    assert traced.ended.how == "exited" and traced.ended.code == 0
    assert traced.output.get(1, b"") == native
    assert sum(i.instructions for i in traced.intervals) > 10_000_000

    packed = tmp_path / ("data." + ("gz" if tool == "gzip" else "bz2"))
    packed.write_bytes(native)
    back = trace_spawn([exe, "-dc", str(packed)])
    assert back.ended.how == "exited" and back.ended.code == 0
    assert back.output.get(1, b"") == original.read_bytes()


def test_python_script_output_is_unchanged(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import hashlib, json, re\n"
        "d = {str(i): [i * i, hex(i)] for i in range(20000)}\n"
        "s = json.dumps(d, sort_keys=True)\n"
        "print(hashlib.sha256(s.encode()).hexdigest())\n"
        "print(len(re.findall(r'0x[0-9a-f]+', s)), sum(sorted(x[0] for x in d.values())) % 1000003)\n"
        "print(sorted(set(s))[:10])\n"
    )
    python = "/usr/bin/python3" if shutil.which("/usr/bin/python3") else sys.executable
    native = subprocess.run([python, str(script)], capture_output=True, check=True, timeout=300).stdout
    traced = trace_spawn([python, str(script)])
    assert traced.ended.how == "exited" and traced.ended.code == 0
    assert traced.output.get(1, b"") == native
    assert len(traced.intervals) >= 2


def compile_inline(tmp_path, name: str, source: str) -> Path:
    """Compile a small C program given as text; returns the executable."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, timeout=300)
    return exe


def test_exit_code_and_crash_are_reported(build, tmp_path):
    exe = compile_inline(tmp_path, "ends", (
        "#include <stdlib.h>\n#include <string.h>\n"
        "int main(int argc, char **argv) {\n"
        "  if (argc > 1 && strcmp(argv[1], \"crash\") == 0) { volatile int *p = 0; *p = 1; }\n"
        "  return argc > 1 ? atoi(argv[1]) : 0; }\n"))
    assert trace_spawn([str(exe), "3"]).ended.code == 3
    crashed = trace_spawn([str(exe), "crash"]).ended
    assert crashed.how == "crashed" and crashed.signal == "SIGSEGV"


def test_fork_child_runs_and_parent_keeps_being_counted(build, tmp_path):
    binary = build("forks.c")
    argv = [binary, "200000"]
    native = subprocess.run(argv, capture_output=True, check=True, timeout=300).stdout
    traced = trace_spawn(argv, interval=1_000_000)
    assert traced.ended.how == "exited" and traced.ended.code == 0
    assert sorted(traced.output.get(1, b"").splitlines()) == sorted(native.splitlines())
    assert b"child status 0" in native
    ours = per_function(traced, binary)
    if shutil.which("valgrind"):
        theirs = callgrind_functions(argv, tmp_path)
        for name in ("work_before", "work_after"):
            assert ours[name] == pytest.approx(theirs[name], rel=0.01), name
    assert ours["work_child"] == 0  # the child is not traced
    assert len(traced.forked) == 1


def test_exec_ships_the_last_intervals_and_says_so(tmp_path):
    exe = compile_inline(tmp_path, "execs", (
        "#include <stdio.h>\n#include <unistd.h>\n"
        "int main(void) { volatile long s = 0; for (long i = 0; i < 3000000; i++) s += i;\n"
        "  printf(\"before\\n\"); fflush(stdout);\n"
        "  execl(\"/bin/echo\", \"echo\", \"after\", (char *) 0); return 1; }\n"))
    traced = trace_spawn([str(exe)], interval=1_000_000)
    assert traced.ended.how == "exec" and traced.ended.program == "/bin/echo"
    assert traced.output.get(1, b"") == b"before\nafter\n"
    assert sum(i.instructions for i in traced.intervals) > 3_000_000 * 4
    assert traced.intervals[-1].partial


def test_register_loops_interrupted_by_signals_running_them_change_nothing(build):
    """The self-looping block of loop_signals.c is counted in a register saved below the red zone;
    a SIGPROF handler runs the same loop every 0.5 ms of CPU time, on top of the interrupted one."""
    exe = build("loop_signals.c")
    native = subprocess.run([exe], capture_output=True, check=True, timeout=300).stdout
    traced = trace_spawn([exe], interval=1_000_000)
    assert traced.ended.how == "exited" and traced.ended.code == 0
    assert traced.output.get(1, b"") == native
    assert native.endswith(b"handled many\n")
    assert len(traced.intervals) > 50
