"""The runner every subcommand is built on, as frida-tools' ``ConsoleApplication``: it parses the
command line (options anywhere, one-line usage errors), turns SIGINT, SIGTERM, SIGHUP (the
terminal closed) and SIGQUIT into a stop request, and maps every way a run can end to an exit code.

Exit codes: 0 normal end (a traced target exited 0, or phasescope detached on request); 1 a
traced target exited non-zero, or a runtime failure; 2 bad input (options, pids, names, files,
sockets, databases); 3 the target was killed or crashed; 130 a second stop signal, or Ctrl-C
before the run started.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Dict, List, Optional, Tuple

from phasescope import waits
from phasescope.commands.files import check_files
from phasescope.startup import settled
from phasescope.sources.stdio import STOP_SIGNALS  # they ask a run to stop: it detaches, writes its outputs, exits
from phasescope.errors import (EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK,
                               PhasescopeError)




class StopRequest:
    """A stop signal sets :attr:`requested` (the signal's name); one during a wait with nothing to
    finish (:func:`phasescope.waits.interruptible`) raises KeyboardInterrupt, and so does a second
    one (kept in :attr:`again`: the command exits 130), unless the run is :meth:`finishing` (its
    detach and final writes): then it is said once and kept, not raised, since an output cut off
    there would be half a file or none (the summary, the phase database and ``--profile`` are
    written at the end). Installed for the whole run, on the stop signals not ignored when it starts."""

    def __init__(self):
        self.requested: Optional[str] = None
        self.again: Optional[str] = None  # a stop signal after the first
        self._finishing = self._said = False
        self._old = {}

    def __enter__(self) -> "StopRequest":
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) != signal.SIG_IGN:  # ignored (nohup, a script's `cmd &`): it stays so,
                self._old[sig] = signal.signal(sig, self._handle)  # for phasescope and its spawned program
        return self

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if waits.now():
            raise KeyboardInterrupt
        first = self.requested is None
        if first:
            self.requested = name
        else:
            self.again = name
        if self._finishing and waits.writing():
            raise waits.WriteEnded  # a pipe's reader stopped reading: that output is cut off (sinks/base.py)
        if first:
            return
        if not self._finishing:
            raise KeyboardInterrupt  # the run stops waiting (for a spawned target's end) and finishes
        if not self._said:  # os.write: a print here could land inside one the run is making
            self._said = True
            os.write(2, f"phasescope: {name}: finishing the outputs first (they are written whole)\n".encode())

    def finishing(self) -> None:
        """From now on the run finishes (detach, the summary, the phase database, the profile): a
        further stop signal no longer cuts it short; a wait for a FIFO's reader, or for a pipe's
        reader to read (:func:`phasescope.waits.writing_to_a_pipe`), still ends at one."""
        self._finishing = True

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def usage_error(prog: str, message: str):
    """Exit 2 with a usage error on one line (argparse's default prints the whole usage first)."""
    print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
    sys.exit(EXIT_INPUT)


class _Parser(argparse.ArgumentParser):
    unknown_hint: Optional[str] = None

    def error(self, message: str):
        if message.startswith("unrecognized arguments") and self.unknown_hint:
            message += f"; {self.unknown_hint}"
        usage_error(self.prog, message)

    def print_help(self, file=None):
        """As argparse's, but a help that cannot be written is said: argparse drops the error, and
        ``phasescope --help > /dev/full`` ended 0 with nothing written."""
        try:
            (file or sys.stdout).write(self.format_help())
            (file or sys.stdout).flush()
        except BrokenPipeError:  # `phasescope --help | head -1`: the reader has all it wanted
            _quiet_stdout()
        except OSError as e:
            e.filename = e.filename or "standard output"
            sys.exit(unwritten(self.prog, e))


class Command:
    """One subcommand. Subclasses set :attr:`description`, add their options in
    :meth:`add_options` and do the work in :meth:`run`, which returns the exit code;
    :attr:`stop` tells a long run that the user asked it to stop."""

    description = ""
    usage: Optional[str] = None
    epilog: Optional[str] = None
    #: options and positionals may be mixed (``phasescope -f prog arg --log x``)
    intermixed = False
    #: added to an "unrecognized arguments" error
    unknown_hint: Optional[str] = None
    #: the files this command reads and writes, ``{label: argparse dest}``: an output that is an
    #: input or another output is refused before anything runs (:mod:`phasescope.commands.files`)
    inputs: Dict[str, str] = {}
    outputs: Dict[str, str] = {}
    #: the outputs (dests) that ``-`` sends to standard output: only where the command writes
    #: nothing else there; ``-`` for another output is refused with :attr:`stdout_why`
    to_stdout: Tuple[str, ...] = ()
    stdout_why = "standard output carries this command's own lines"
    #: True: stop signals set :attr:`stop` for the run to end itself (the live monitor); False: any
    #: stop signal is a KeyboardInterrupt at once (exit 130), for a command with nothing to finish
    #: (bench, and the offline ones, which never look at :attr:`stop`: a first Ctrl-C or SIGTERM
    #: was only a flag, and a replay ran on to its end with exit 0)
    ends_itself = False
    #: True: :meth:`run` calls :func:`phasescope.startup.settled` itself, once it has loaded what
    #: it needs (the live monitor's target starts first); else the runner does, before :meth:`run`
    settles_itself = False

    def __init__(self, prog: str):
        self.prog = prog
        self.stop = StopRequest()

    def parser(self) -> argparse.ArgumentParser:
        p = _Parser(prog=self.prog, usage=self.usage, description=self.description, epilog=self.epilog)
        p.unknown_hint = self.unknown_hint
        self.add_options(p)
        return p

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's options."""

    def parse(self, argv: List[str]) -> argparse.Namespace:
        parser = self.parser()
        return parser.parse_intermixed_args(argv) if self.intermixed else parser.parse_args(argv)

    def more_inputs(self, args: argparse.Namespace) -> List[Tuple[str, str]]:
        """Files the command reads that are no option's value, ``(label, path)``: the live
        monitor's target executable. No output may name one."""
        return []

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

    def main(self, argv: List[str]) -> int:
        """Parse, run, and turn every error into one line and an exit code."""
        args = self.parse(argv)
        try:
            check_files(args, self.inputs, self.outputs, self.more_inputs(args), self.to_stdout, self.stdout_why)
            if not self.settles_itself:
                settled()
            with self.stop, contextlib.nullcontext() if self.ends_itself else waits.interruptible():
                code = int(self.run(args) or EXIT_OK)
            return EXIT_INTERRUPTED if self.stop.again else code
        except PhasescopeError as e:
            print(f"{self.prog}: error: {e}", file=sys.stderr)
            return e.exit_code
        except KeyboardInterrupt:
            print(f"{self.prog}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # `phasescope replay log | head -1`: the reader has all it wanted
            _quiet_stdout()
            return EXIT_OK
        except OSError as e:  # `phasescope replay log > /dev/full` was a traceback; one line, as cat says it
            return unwritten(self.prog, e)


def unwritten(prog: str, e: OSError) -> int:
    """One line, as cat says it, for an output that could not be written (``e``: a full disk under
    stdout); the exit code (EXIT_FAILED). Stdout goes to /dev/null if it cannot be flushed, else
    the interpreter's last flush fails again, on stderr."""
    try:
        sys.stdout.flush()
    except OSError:
        _quiet_stdout()
    where = f"{e.filename}: " if e.filename else ""
    print(f"{prog}: error: {where}{e.strerror or e}", file=sys.stderr)
    return EXIT_FAILED


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe does not
    complain on stderr."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
