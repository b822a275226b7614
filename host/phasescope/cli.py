"""Command-line entry point: ``phasescope [SUBCOMMAND] ...``.

Each subcommand is a :class:`~phasescope.commands.runner.Command` subclass, loaded only when it
runs; without one, phasescope runs the live monitor (:mod:`phasescope.commands.monitor`), whose
``--help`` lists the subcommands given to it from here. ``phasescope help TOPIC`` prints the
options ``--help`` leaves out.
"""

from __future__ import annotations

import os
import sys

try:
    import argparse
    import atexit
    import importlib

    from phasescope import startup
    from phasescope.blas import one_blas_thread
except KeyboardInterrupt:  # Ctrl-C this early (argparse's imports take 0.3 s on a loaded machine)
    sys.stderr.write("phasescope: interrupted\n")
    sys.exit(130)

#: name: (module, class, what it does)
SUBCOMMANDS = {
    "demo": ("phasescope.commands.demo", "DemoCommand", "trace the bundled phased workload"),
    "replay": ("phasescope.commands.replay", "ReplayCommand", "re-track a log or .bb file"),
    "export-bbv": ("phasescope.commands.export_bbv", "ExportBbvCommand", "log -> SimPoint .bb"),
    "bench": ("phasescope.commands.bench", "BenchCommand", "overhead vs native"),
    "score": ("phasescope.commands.score", "ScoreCommand", "ISCA 2003 Fig. 6 scores"),
    "reference": ("phasescope.commands.reference", "ReferenceCommand", "SimPoint-style labels of a log"),
    "plot": ("phasescope.commands.plot", "PlotCommand", "figures of a log"),
    "profile": ("phasescope.commands.profile", "ProfileCommand", "phase-labelled profiles of a log"),
    "locality-model": ("phasescope.commands.locality_model", "LocalityModelCommand",
                       "miss rates of unseen inputs"),
}
DEFAULT = ("phasescope.commands.monitor", "MonitorCommand")
HELP_TOPICS = ("tracker", "all")
#: what ``phasescope --help`` says of each subcommand, ``help`` included
SUMMARIES = {**{name: what for name, (_, _, what) in SUBCOMMANDS.items()},
             "help": f"{', '.join(HELP_TOPICS)}, or a subcommand"}


def _command(name, prog: str):
    """The Command object of subcommand ``name`` (None: the live monitor)."""
    if name is None:
        module, cls = DEFAULT
        return getattr(importlib.import_module(module), cls)(prog, subcommands=SUMMARIES,
                                                             dispatch=(tuple(SUBCOMMANDS), main))
    module, cls, _ = SUBCOMMANDS[name]
    return getattr(importlib.import_module(module), cls)(prog)


def help_topic(argv) -> int:
    """``phasescope help [tracker|all|SUBCOMMAND]`` (default all)."""
    from phasescope.commands.runner import usage_error
    topic = argv[0] if argv else "all"
    if topic in ("-h", "--help"):
        print("usage: phasescope help [tracker|all|SUBCOMMAND]\n\ntracker: the tracker's, segments' and "
              "predictors' options; all (the default): every option of the live monitor; SUBCOMMAND: its --help")
        return 0
    if len(argv) > 1 or (topic not in HELP_TOPICS and topic not in SUBCOMMANDS):
        usage_error("phasescope help", f"no help on {' '.join(argv)!r}: give {', '.join(HELP_TOPICS)} or a "
                                       f"subcommand ({', '.join(SUBCOMMANDS)})")
    if topic == "tracker":
        from phasescope.commands.options import add_engine_options
        from phasescope.commands.runner import _Parser
        p = _Parser(
            prog="phasescope", add_help=False,
            usage="phasescope [options] ... (live runs, demo), phasescope {replay,plot} [options] ...",
            description="The phase tracker's, segments' and predictors' options. Defaults: --tracker default "
                        "(confirmed: ISCA 2003's table with an ID budget; --tracker paper is ISCA 2003 exactly); in "
                        "sampled mode the default is --tracker sampled.")
        add_engine_options(p)
    elif topic == "all":
        p = _command(None, "phasescope").parser(full=True)
    else:
        p = _command(topic, f"phasescope {topic}").parser()
    p.print_help()
    return 0


def main(argv=None) -> int:
    startup.hold()  # until the command has set up: phasescope/startup.py
    one_blas_thread()
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv and (argv[0] in SUBCOMMANDS or argv[0] == "help") else None
    prog = "phasescope" if name is None else f"phasescope {name}"
    try:
        if name == "help":
            return help_topic(argv[1:])
        return _command(name, prog).main(argv if name is None else argv[1:])
    except KeyboardInterrupt:  # Ctrl-C before the run installed its handlers (imports, parsing)
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        startup.release()


def exit_now(code) -> None:
    """End the process with ``code`` as ``sys.exit`` would, without the interpreter's teardown:
    freeing every module's objects (numpy, rich, the engine) cost 30-70 ms of CPU after a sampled
    run was over (issue 31; docs/performance.md, stop 43). The command has closed its files by the
    time it returns; stdout and stderr are flushed here. The normal exit where something relies on
    it: exit handlers registered (Frida registers one), a thread that is not a daemon, a profiler or
    tracer (``python3 -m cProfile -o prof.out -m phasescope.cli ...`` writes its file once the
    SystemExit reaches it), a stream that cannot be flushed (the normal exit reports it), a code
    that is not an int. Stop signals are ignored from here on: with the outputs written, one would
    only end the process in the interpreter's (or Frida's) teardown, killed by the signal rather
    than with the run's exit code."""
    import signal
    import threading
    from phasescope.commands.runner import STOP_SIGNALS
    for sig in STOP_SIGNALS:  # the run has written everything: a signal now would only cut the exit short
        signal.signal(sig, signal.SIG_IGN)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if (isinstance(code, int) and not others and getattr(atexit, "_ncallbacks", lambda: 1)() == 0
            and not _observed()):
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _observed() -> bool:
    """Whether a profiler, tracer or debugger watches the process (cProfile, trace, pdb; from
    Python 3.12 also through sys.monitoring): it acts after the command, so it needs the SystemExit."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def run() -> None:
    """The ``phasescope`` console script."""
    exit_now(main())


if __name__ == "__main__":
    run()
