"""The live monitor: ``phasescope [options] (-p PID | -n NAME | -f PROGRAM [ARGS...])``.

Options may come anywhere on the line, as in frida-tools; the spawned program's arguments are the
positionals, with ``--`` before any that start with a dash. An option phasescope does not know is
an error, never handed to the target.

A sampled run that spawns its program starts it (events open, nothing injected) as soon as the
whole command line has been checked and every output opened, and only then loads the engine,
the pipeline and the view (numpy, rich): their import time runs beside the program instead of
before it (issue 31). Everything those checks need is light (:mod:`phasescope.engine.config`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Callable, Collection, Dict, List, Optional, Tuple

from phasescope import __version__
from phasescope.commands.options import (add_device_options, add_run_options, add_target_options,
                                         engine_config_from_args, process_filter,
                                         validate_run_options)
from phasescope.commands.outputs import OUTPUT_FILES, open_sinks
from phasescope.commands.runner import Command, usage_error
from phasescope.commands.sources import SOURCES, mode_help, shows_dashboard, wants_stacks
from phasescope.errors import InputError
from phasescope.sinks.base import Sinks, close_file, open_write, write_failed
from phasescope.startup import settled
from phasescope.sources.device import Target, is_local, process_state, require_local, resolve_device, resolve_target
from phasescope.sources.executable import SAMPLED_WORKS, exact_mode_refusal
from phasescope.sources.procfs import process_exe


BRIEF = {
    "help": None, "version": None, "help_all": None,
    "device": None, "usb": None, "host": None,
    "pid": None, "name": None, "program": None, "args": None,
    "system_wide": "every process on every CPU, as perf -a (sampled mode; see phasescope help all for its filters)",
    "mode": mode_help(brief=True),
    "output": "phasescope's own lines (changes, status, report) to FILE, not stderr",
    "log": None,
    "summary": "JSON summary (per phase, per thread, predictors), replaced atomically every 5 s and at the end",
    "bbv": None,
    "events": "serve JSON Lines phase events on unix:PATH or tcp:HOST:PORT (no authentication)",
    "metrics": "serve Prometheus/OpenMetrics metrics on HOST:PORT (loopback by default)",
    "phase_db": "phase database: earlier runs' phases keep their IDs; this run's are saved at the end",
    "duration": None, "no_dashboard": "plain lines instead of the dashboard (so without a terminal)",
}
HELP_MORE = ("The tracker's, segments' and predictors' options: phasescope help tracker; every option "
             "(sampling, bursts, locality, -a filters, dashboard): phasescope help all.")


def brief_help(parser: argparse.ArgumentParser, brief: dict) -> None:
    """Hide from ``parser``'s help every option not in ``brief`` (they are still parsed), give those
    in it their shorter text, and drop the descriptions of groups left with nothing to show."""
    for action in parser._actions:
        if action.dest not in brief:
            action.help = argparse.SUPPRESS
        elif brief[action.dest]:
            action.help = brief[action.dest]
    for group in parser._action_groups:
        if all(a.help == argparse.SUPPRESS for a in group._group_actions):
            group.description = None
    parser.description = f"{parser.description} {HELP_MORE}"


class _HelpAll(argparse.Action):
    """``--help-all``: the help of every option, then exit."""

    def __init__(self, option_strings, dest, command, **kw):
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kw)
        self.command = command

    def __call__(self, parser, namespace, values, option_string=None):
        self.command.parser(full=True).print_help()
        parser.exit()


def split_dashdash(argv: List[str]):
    """(phasescope's arguments, the target's arguments after the first ``--``)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def short_title(target: Target, width: int = 40) -> str:
    """The target as the dashboard header shows it: paths cut to their basenames, at most ``width``."""
    if target.argv is None:
        return target.describe()
    text = " ".join(os.path.basename(a) if os.sep in a else a for a in target.argv)
    return text if len(text) <= width else text[: width - 1] + "…"


class MonitorCommand(Command):
    """Trace one process live."""

    ends_itself = True  # a stop signal detaches (or passes it on) and the run finishes its outputs

    description = ("Live program-phase monitor: follows every thread of a native process with Frida's Stalker "
                   "and tracks and predicts its phases (Sherwood, Sair & Calder, ISCA 2003).")
    #: the options ``--help`` shows, with a shorter help text where one is given; the others are in
    #: ``phasescope help all`` (and the tracker's in ``phasescope help tracker``)
    brief = BRIEF
    intermixed = True
    outputs = {"-o": "output", **OUTPUT_FILES}
    stdout_why = "standard output is the target's (and the dashboard's)"
    unknown_hint = "put -- before a spawned program's arguments that start with a dash"
    #: a spawned target that ends with the run (the demo's workload), never left running
    owns_target = False
    settles_itself = True  # once the target runs and the engine is loaded, before the loop

    def __init__(self, prog: str, subcommands: Optional[Dict[str, str]] = None,
                 dispatch: Optional[Tuple[Collection[str], Callable[[List[str]], int]]] = None):
        """``subcommands``: ``{name: what it does}``, for the usage and ``--help``; ``dispatch``:
        ``(names, main)``, the subcommands that may follow the monitor's options and the entry point
        that runs them (both from ``cli.py``, which no command imports)."""
        super().__init__(prog)
        self.dispatch = dispatch
        self._parser: Optional[argparse.ArgumentParser] = None  # the brief one, built once
        self.usage = f"{prog} [options] (-p PID | -n NAME | -f PROGRAM [ARGS...] [-- ARGS...] | -a)"
        if subcommands:
            self.usage += f"\n       {prog} {{{','.join(subcommands)}}} ..."
            self.epilog = ("subcommands: " + "; ".join(f"{name} ({what})" for name, what in subcommands.items())
                           + ". Exit codes: 0 ended or detached, 1 target failed, 2 bad input, 3 target killed, "
                           "130 interrupted.")

    def parser(self, full: bool = False) -> argparse.ArgumentParser:
        """Every option is parsed; ``--help`` describes only those in :attr:`brief` (``full``: all).
        The brief parser is built once (the subcommand check and the parse share it)."""
        if not full and self._parser is not None:
            return self._parser
        p = super().parser()
        p.add_argument("--help-all", action=_HelpAll, command=self,
                       help="show every option and exit (as phasescope help all)")
        if not full:
            brief_help(p, self.brief)
            self._parser = p
        return p

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--version", action="version", version=f"phasescope {__version__}")
        add_device_options(p)
        add_target_options(p)
        add_run_options(p)

    def main(self, argv: List[str]) -> int:
        """As any command, but a subcommand after options (``phasescope --no-dashboard demo``) runs
        that subcommand with those options."""
        sub = self._subcommand_at(split_dashdash(argv)[0]) if self.dispatch is not None else None
        if sub is not None:
            return self.dispatch[1]([argv[sub]] + argv[:sub] + argv[sub + 1:])
        return super().main(argv)

    def _subcommand_at(self, own: List[str]) -> Optional[int]:
        """Where the first positional of ``own`` is, if it names a subcommand and no -f came before."""
        takes_value = {opt for action in self.parser()._actions if action.nargs != 0
                       for opt in action.option_strings}
        i = 0
        while i < len(own):
            word = own[i]
            if not word.startswith("-") or word == "-":
                return i if word in self.dispatch[0] else None
            if word in ("-f", "--file"):
                return None
            i += 2 if word in takes_value else 1
        return None

    def parse(self, argv: List[str]) -> argparse.Namespace:
        own, target_args = split_dashdash(argv)
        args = self.parser().parse_intermixed_args(own)
        args.args = list(args.args) + target_args
        if args.args and args.program is None:
            usage_error(self.prog, f"unexpected arguments {' '.join(args.args)!r}: only a program spawned "
                                   "with -f takes arguments")
        args.argv = None if args.program is None else [args.program] + args.args
        return args

    def more_inputs(self, args) -> List[Tuple[str, str]]:
        """The executable to spawn and the files its arguments name (``--summary data -f sort
        data`` had replaced sort's input with the summary), or the attached process's executable:
        no output may write over the program being traced or what it reads."""
        argv = self.target_argv(args)
        if argv:
            return ([("-f PROGRAM", argv[0] if os.sep in argv[0] else shutil.which(argv[0]))]
                    + [(f"-f PROGRAM's argument {a}", a) for a in argv[1:] if os.path.isfile(a)])
        if args.pid is not None and args.pid > 0:
            return [("-p PID's executable", process_exe(args.pid))]
        return []

    def target_argv(self, args) -> Optional[List[str]]:
        """The program to spawn, None to attach."""
        return args.argv

    def run(self, args) -> int:
        validate_run_options(args)
        if getattr(args, "system_wide", False):
            return self.run_system(args)
        argv = self.target_argv(args)
        if argv is None and args.pid is None and args.name is None:
            raise InputError("give a target: -p PID, -n NAME or -f PROGRAM [ARGS...] (or try: phasescope demo)")
        kind = SOURCES[args.mode]
        config = engine_config_from_args(args, preset_default=kind.preset)
        # Open every output first: an unwritable path fails before we touch the target.
        out = _open_output(args.output)
        sinks = []
        started = None  # the session, once started here (zero-touch)
        try:
            try:
                sinks = open_sinks(args, config)
                dashboard = shows_dashboard(args)
                zero_touch = not kind.injects(args)
                # zero-touch on this machine: /proc, not Frida (never imported, so the target starts sooner)
                local = zero_touch and not (args.device or args.usb or args.host)
                if zero_touch and args.host:
                    require_local(args.host)  # before connecting: a -H host is remote, reachable or not
                device = None if local else resolve_device(args.device, args.usb, args.host)
                target = resolve_target(device, pid=args.pid, name=args.name, argv=argv)
                if not zero_touch and is_local(device):  # Frida injects an agent: only into what it can
                    _check_injectable(target)
                stdio = args.stdio or ("pipe" if dashboard else "inherit")
                if zero_touch and not local:
                    require_local(device)
                session = kind.build(args, device, target, stdio, config.tracker.interval)
                if zero_touch:  # nothing injected: the target starts now, the engine loads while it runs
                    _not_stopped_yet(self.stop)
                    started = session.start()
                from phasescope.pipeline.live import LiveRun
                run = LiveRun(session, config, sinks, dashboard=dashboard, out=out, title=short_title(target),
                              refresh=args.refresh, status_every=args.status_every, duration=args.duration,
                              locality_size=args.locality_size if args.locality else None,
                              owns_target=self.owns_target)
                if started is None:  # the run spawns or attaches
                    _not_stopped_yet(self.stop)
            except BaseException:
                if started is not None:  # a program spawned for a run that could not begin: not left behind
                    started.kill()
                Sinks(sinks).close()  # e.g. remove the event socket: the run never started
                raise
            settled()
            return run.run(self.stop)
        finally:
            _close_output(out, args.output)

    def run_system(self, args) -> int:
        """``-a``: every process on every CPU, one engine each (:mod:`phasescope.pipeline.system`)."""
        from phasescope.pipeline.system import SystemRun
        from phasescope.sources.system_sampler import SystemSampler
        from phasescope.view.plain import PlainView
        from phasescope.view.screen import DashboardScreen
        from phasescope.view.system_view import print_system_report, render as render_system
        config = engine_config_from_args(args, preset_default=SOURCES[args.mode].preset)
        db_dir = args.phase_db
        if db_dir is not None:
            if os.path.exists(db_dir) and not os.path.isdir(db_dir):
                raise InputError(f"--phase-db {db_dir}: with -a it is a directory of per-program databases, "
                                 "and this is a file")
            if not os.path.exists(db_dir) and db_dir.endswith(".json"):
                raise InputError(f"--phase-db {db_dir}: with -a it is a directory of per-program databases, "
                                 "and this names a file; give a directory")
            try:
                os.makedirs(db_dir, exist_ok=True)
            except OSError as e:
                raise InputError(f"--phase-db {db_dir}: cannot create the directory: {e.strerror}") from None
            if not os.access(db_dir, os.W_OK | os.X_OK):
                raise InputError(f"--phase-db {db_dir}: directory not writable")
            args.phase_db = None  # not one database: the run opens one per program
        out = _open_output(args.output)
        sinks = []
        try:
            try:
                sinks = open_sinks(args, config)
                sampler = SystemSampler(process_filter(args), period_ns=10**9 // args.rate,
                                        window_samples=args.window, kernel=args.kernel_samples,
                                        stacks=wants_stacks(args))
                run = SystemRun(sampler, config, sinks, dashboard=shows_dashboard(args),
                                out=out, refresh=args.refresh, status_every=args.status_every,
                                duration=args.duration, phase_db_dir=db_dir, max_processes=args.max_processes)
            except BaseException:
                Sinks(sinks).close()
                raise
            settled()
            return run.run(self.stop)
        finally:
            _close_output(out, args.output)


def _check_injectable(target: Target) -> None:
    """InputError when Frida cannot inject into the target's executable (exact mode, bursts)."""
    if target.spawn:
        why = exact_mode_refusal(target.argv[0], target.argv[0])
    elif process_state(target.pid) == "Z":  # and other threads run (a zombie was refused): Frida reads the main one's /proc
        why = (f"pid {target.pid}: its main thread has exited (pthread_exit) while its other threads run, and Frida "
               f"cannot inject into such a process; {SAMPLED_WORKS}")
    else:
        why = exact_mode_refusal(f"/proc/{target.pid}/exe", f"pid {target.pid} ({process_exe(target.pid)})")
    if why:
        raise InputError(why)


def _not_stopped_yet(stop) -> None:
    """A stop signal (Ctrl-C) before the target is spawned or attached: none is, exit 130, as under
    perf. A target spawned after it never saw the terminal's Ctrl-C, and phasescope, finding it in
    the terminal's foreground, did not send it again: it ran on until the SIGTERM 3 s later (stop 47)."""
    if stop.requested:
        raise KeyboardInterrupt


def _open_output(path: Optional[str]):
    """``-o``: the report's file (stderr without one); a FIFO's wait for a reader ends at a stop signal."""
    return sys.stderr if path is None else open_write(path)


def _close_output(out, path: Optional[str]) -> None:
    """Close ``-o``; a write to it that failed (a full disk: the run went on) is said as the other
    outputs' are, one line and exit 1 (it had been nothing and exit 0, or a traceback before)."""
    if out is not sys.stderr:
        from phasescope.view.plain import write_failure  # loads the engine: not before the target starts
        failed = write_failure(out)
        close_file(out, path)
        if failed is not None:
            raise write_failed(path, failed)
