"""Exact mode on runtimes that fault on purpose or toggle EFLAGS.AC, as the JVM does, and on node
(issue 32). Real processes: a cc-built program making HotSpot's planned faults, node, java."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from agent_support import trace_spawn
from conftest import cli_command, end_process, run_cli, wait_for
from phasescope.sources.wire import METHOD_KEY

pytestmark = pytest.mark.slow


def _native(argv) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, timeout=60)


def _as_native(argv, **kw) -> tuple:
    """(native run, trace) of argv, the trace's exit and stdout checked to be the native run's."""
    native = _native(argv)
    trace = trace_spawn(argv, **kw)
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    assert trace.output.get(1, b"") == native.stdout
    return native, trace


def test_planned_faults_and_alignment_flag_run_as_native(build):
    # AC set across a branch used to make Stalker's own code fault (SIGBUS loop, then a kill); a
    # handler resuming only faults at a PC it knows used to see Stalker's PC and abort.
    native, trace = _as_native([build("planned_faults.c"), "3000000"])
    assert b"ac 1\nhandled 100 sum 100\n" in native.stdout
    # counting went on after the faults: the final loop alone is ~6 instructions x 3e6
    assert sum(int(i.counts.sum()) for i in trace.intervals) > 15_000_000


def test_planned_faults_inside_register_loops_run_as_native(build):
    # HotSpot's safepoint polls fault inside compiled loops, which exact mode runs as register loops
    # (rsp 144 bytes lower, the count in a free register, the body copied twice more past the
    # block): a fault in a copy was in no range of the fault map, and the handler, shown Stalker's
    # PC, aborted (the long JavaWork run, 11 of 20). loop_faults' handler also checks rsp and r11.
    exe = build("loop_faults.c")
    native, trace = _as_native([exe, "300000"])
    assert native.stdout.startswith(b"handled 606 ")  # 303 armed polls in each of the two loops
    # what a loop's register counted before each fault is kept: the count is the unarmed run's (the
    # same code, no fault), give or take the rest of an iteration pair per fault
    unarmed = trace_spawn([exe, "300000", "unarmed"])
    assert unarmed.output.get(1, b"").startswith(b"handled 0 ")
    total, expected = (sum(int(i.counts.sum()) for i in t.intervals) for t in (trace, unarmed))
    assert expected > 3_600_000 and abs(total - expected) <= 12 * 606, (total, expected)


def test_bare_stalker_with_the_same_handling_runs_it_counting_nothing(build):
    # The JVM's cost baseline (bench/jvm_cost.py): plain bare Stalker never gets past the AC probe
    # and the planned faults (a SIGBUS loop); bare="handled" is the agent with exact mode's handling
    # of them and no counters.
    _, handled = _as_native([build("planned_faults.c"), "300000"], bare="handled")
    assert sum(int(i.counts.sum()) for i in handled.intervals) == 0


def test_stalker_code_stays_in_reach_of_the_libraries(build):
    # A JVM fills the address space below the libraries before its later threads start; their
    # Stalker code and agent regions used to land more than 2 GB from libc (Stalker's far forms for
    # every rip-relative access and branch back), and those threads computed wrong values. far_maps
    # fills every gap within 2.25 GB below libc, then starts a thread and counts the anonymous
    # executable mappings (a tracer's) out of reach of libc and of its own code.
    exe = build("far_maps.c")
    native = _native([exe])
    assert native.stdout.endswith(b"far 0\n")
    trace = trace_spawn([exe])
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    assert trace.output.get(1, b"") == native.stdout
    assert int(trace.output.get(2, b"near 0").split()[-1]) > 0  # it saw the tracer's code


def _attached_far_maps(exe: str, *mode: str, tmp_path) -> tuple:
    """far_maps MODE... wait, attached with -p once filled, let go once phasescope is in (or gone):
    (phasescope's exit code, its stderr, the program's stdout, whether it ran when phasescope was in)."""
    program = subprocess.Popen([exe, *mode, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    lines = tmp_path / "lines"
    try:
        assert program.stdout.readline() == b"ready\n"
        tracer = subprocess.Popen(cli_command("--no-dashboard", "-o", str(lines), "-p", str(program.pid)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: tracer.poll() is not None or (lines.exists() and "tracing:" in lines.read_text()),
                     timeout=60, what="phasescope to follow the program")
            running = program.poll() is None
            try:
                program.stdin.write(b"go\n")
                program.stdin.close()
            except BrokenPipeError:  # it ended before phasescope let go: said below, with how it ended
                pass
            out = program.stdout.read()
            program.wait(timeout=60)
            tracer.wait(timeout=60)
            err = tracer.stderr.read() + ("" if running else f"\n(the program had ended: status {program.returncode})")
            return tracer.returncode, err, out, running
        finally:
            end_process(tracer)
    finally:
        end_process(program)


def test_attached_program_with_the_space_below_its_libraries_filled_runs_right(build, tmp_path):
    # Attached (-p) to a program that filled the space below the libraries, as a running JVM has:
    # the reserve goes in the free space above them. The thread far_maps starts after the attach is
    # followed inside Frida's hook on its start, where an Interceptor replacement of mmap did not see
    # its context's mapping ("far 2" in 2 of 8 runs); near_mmap, a plain jump since stop 47, does
    # (0 of 8). Either way it computes right. (A JVM's threads are followed from the agent's thread.)
    exe = build("far_maps.c")
    native = _native([exe])
    code, err, out, running = _attached_far_maps(exe, tmp_path=tmp_path)
    assert code == 0 and running, err
    assert out.split(b"\nfar ")[0] == native.stdout.split(b"\nfar ")[0]  # the sum


def test_attaching_with_no_room_near_the_libraries_is_refused_before_any_thread_is_followed(build, tmp_path):
    # Nothing free within 2 GB of the libraries, above or below: Stalker's code would lie out of
    # their reach, where it goes wrong. One line naming sampled mode, exit 2, the program untouched.
    exe = build("far_maps.c")
    code, err, out, running = _attached_far_maps(exe, "all", tmp_path=tmp_path)
    assert code == 2 and running, err
    line = err.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "within 2 GB of its libraries" in line and "--mode sampled" in line and "--bursts" in line, line
    assert out == _native([exe, "all"]).stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_runs_to_its_end_under_exact_mode():
    script = "let s = 0; for (let i = 0; i < 3e6; i++) s += i % 7; console.log(s)"
    argv = [shutil.which("node"), "-e", script]
    native = _native(argv)
    trace = trace_spawn(argv)
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    assert trace.output.get(1, b"") == native.stdout == b"8999994\n"
    assert trace.intervals
    pcs, _ = trace.pairs()
    assert not (pcs & np.uint64(METHOD_KEY)).any()  # V8's code keeps its addresses (only HotSpot's is keyed)


@pytest.mark.skipif(shutil.which("javac") is None, reason="java is not installed")
def test_code_hotspot_rewrites_in_place_is_not_run_stale(tmp_path):
    # Inline caches patched and young collections moving the objects compiled code names: Stalker
    # kept running its copies of the old code (a freed CompiledICHolder, a moved byte.class: wrong
    # Java results or a crash, 2 runs of 3 before the JIT's writes were hooked, js/jit.js).
    source = os.path.join(os.path.dirname(__file__), "programs", "JitPatches.java")
    subprocess.run(["javac", "-d", str(tmp_path), source], check=True, timeout=120)
    argv = [shutil.which("java"), "-XX:+UseSerialGC", "-Xmn4m", f"-XX:ErrorFile={tmp_path}/hs_err_%p.log",
            "-cp", str(tmp_path), "JitPatches", "3"]
    native = _native(argv)
    trace = trace_spawn(argv)
    assert trace.ended.how == "exited" and trace.ended.code == 0, (trace.ended, trace.output.get(2, b"")[-2000:])
    assert trace.output.get(1, b"") == native.stdout and native.stdout.startswith(b"checksum ")
    # Its compiled code is counted under its Java methods (agent/jit_keys.c), not its addresses,
    # which the JIT changes with each recompilation.
    pcs, counts = trace.pairs()
    keyed = (pcs & np.uint64(METHOD_KEY)) != 0
    assert counts[keyed].sum() > 0, (len(pcs), keyed.sum(), trace.diagnosis())


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
def test_java_version_runs_to_its_end_and_exact_mode_names_what_it_misses(tmp_path):
    # The JVM used to die at start (EFLAGS.AC, planned faults, threads followed from their first
    # instruction). It runs now; exact mode still says in one line what it cannot count, naming
    # sampled mode, before the JVM's threads start, and the summary and the report say it again.
    java = shutil.which("java")
    native = _native([java, "-version"])
    summary = tmp_path / "s.json"
    done = run_cli("--no-dashboard", "--summary", str(summary), "-f", java, "--", "-version", timeout=180)
    assert "exited with code 0" in done.stderr, done.stderr[-2000:]
    # java's lines in their order; phasescope's own lines share the stream and may fall between them
    theirs = iter(done.stderr.splitlines())
    assert all(line in theirs for line in native.stderr.decode().splitlines()), done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "exact mode cannot follow the JVM" in line]
    assert len(lines) == 1 and "--mode sampled" in lines[0] and "--bursts" in lines[0], done.stderr[-2000:]
    assert done.stderr.index(lines[0]) < done.stderr.index("openjdk version")
    not_followed = json.loads(summary.read_text())["session"]["not_followed"]
    assert len(not_followed) == 1 and not_followed[0].startswith("the JVM (libjvm.so) exactly"), not_followed
    assert f"exact mode could not follow {not_followed[0]}" in done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("javac") is None, reason="java is not installed")
def test_hotspots_compiler_threads_are_not_followed(tmp_path):
    # Under Stalker C1 and C2 compiled 12-20x slower than natively, so each Java activity ran
    # interpreted and C1 code for far longer than natively and recurred on other tiers' code (exact
    # mode's phases split where sampled mode's did not): the compiler threads now run unfollowed.
    source = os.path.join(os.path.dirname(__file__), "programs", "TaskNames.java")
    subprocess.run(["javac", "-d", str(tmp_path), source], check=True, timeout=120)
    trace = trace_spawn([shutil.which("java"), "-XX:+UseSerialGC", "-cp", str(tmp_path), "TaskNames", "2000"])
    assert trace.ended.how == "exited" and trace.ended.code == 0, (trace.ended, trace.output.get(2, b"")[-2000:])
    lines = trace.output.get(1, b"").decode().splitlines()
    assert lines[0].startswith("checksum ")
    names = dict(line.split(" ", 1) for line in lines[1:])
    compilers = {int(tid) for tid, name in names.items() if "CompilerThre" in name}
    followed = {i.thread for i in trace.intervals}
    assert len(compilers) >= 2 and not compilers & followed, (names, trace.diagnosis())
    assert int(next(tid for tid, name in names.items() if name == "VM Thread")) in followed, trace.diagnosis()
