"""The sink protocol: where classified intervals go, and the file helpers every file sink shares.

A sink is told, in order: :meth:`Sink.on_start` once the target runs (what is traced, how),
:meth:`Sink.on_interval` for every classified interval, :meth:`Sink.on_checkpoint` with the
run's summary every few seconds, :meth:`Sink.on_end` with the final summary on every exit path,
then :meth:`Sink.close`. Sinks read the summary and write only their own outputs: what a sink has
to say in the final summary it returns from :meth:`Sink.summary_sections`, which the run adds
before any sink's ``on_end`` (:meth:`phasescope.pipeline.flow.Flow.end`), so the sinks' order
does not matter. Each method may be left as the base's no-op. A file sink opens its file
in its constructor, so an unwritable path fails (InputError, exit 2) before the target is touched;
a write that fails later raises PhasescopeError (exit 1).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, TypedDict

from phasescope import waits
from phasescope.errors import InputError, PhasescopeError

class Dash(str):
    """The path an argument ``-`` stands for (``/dev/stdout``, ``/dev/stdin``): opened as that path, but
    named in messages (f-strings) as the user typed it, ``-``, since they never wrote /dev/stdout."""

    def __new__(cls, path: str, stream: str) -> "Dash":
        dash = super().__new__(cls, path)
        dash.shown = f"- ({stream})"
        return dash

    def __format__(self, spec: str) -> str:
        return format(self.shown, spec)


def as_typed(path: str) -> str:
    """``path`` as the user typed it, for data that records it (a summary's input): ``-`` for a
    :class:`Dash`, which ``json`` would write as its ``/dev`` path."""
    return "-" if isinstance(path, Dash) else path


#: an output ``-`` where a command sends it to standard output (:func:`phasescope.commands.files.check_files`)
STDOUT = Dash("/dev/stdout", "standard output")

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class Summary(TypedDict, total=False):
    """A run's summary (the ``--summary`` file; docs/reference.md describes each field), and who
    writes each key: the engine (:meth:`phasescope.engine.PhaseEngine.summary`), the run (live,
    replay or ``-a``), or one sink (its :meth:`Sink.summary_sections`)."""

    # the engine
    version: int
    config: Dict[str, Any]
    whole: Dict[str, Any]
    phases: List[Dict[str, Any]]
    threads: List[Dict[str, Any]]
    predictors: Dict[str, Any]
    primary_predictor: str
    table: Dict[str, Any]
    skipped_empty: int
    # the run
    phasescope: str  # live runs, -a: the version
    target: Dict[str, Any]  # live runs
    session: Dict[str, Any]  # live runs, -a
    children: List[Dict[str, Any]]  # live runs: forked children followed (sampled mode)
    input: Dict[str, Any]  # replay
    mode: str  # -a: "system"
    processes: List[Dict[str, Any]]  # -a
    end: Dict[str, Any]  # how the run ended
    # one sink each
    events: Dict[str, Any]  # --events: the stream's address, clients, events dropped
    phase_db: Dict[str, Any]  # --phase-db: its path, whether this run saved to it


class Sink:
    """Base of every sink: no-op defaults."""

    def prepare(self, engine) -> None:
        """Once, with the :class:`~phasescope.engine.PhaseEngine` before its first interval: a sink may
        preload engine state (the phase database preloads representatives)."""

    def on_start(self, info: dict) -> None:
        """The run began: ``info`` holds ``target``, ``mode`` and ``config``."""

    def on_interval(self, result: IntervalResult, interval: Interval) -> None:
        """One classified interval."""

    def on_checkpoint(self, summary: Summary) -> None:
        """The summary so far (every few seconds of a live run); read only."""

    def summary_sections(self) -> Summary:
        """This sink's own keys of the final summary (asked once, before any sink's ``on_end``)."""
        return {}

    def before_end(self, name: Callable[[List[int]], List[str]]) -> None:
        """A live target is about to end or be detached: ``name`` names addresses and keys as its
        hot code is named (``[jit]!java Holder.name``) while the target can still be read."""

    def on_end(self, summary: Summary) -> None:
        """The final summary, with ``summary["end"]`` saying how the target ended; read only."""

    def abandon(self) -> None:
        """The run was cut short before its end (a stop signal ends an offline replay at once):
        what is written only at the end is not written, since part of the input would look whole."""

    def close(self) -> None:
        """Release files and sockets; called once, on every exit path."""


class Sinks(Sink):
    """Several sinks as one, called in order. ``close`` closes every sink even if one fails."""

    def __init__(self, sinks: Iterable[Sink] = ()):
        self.sinks: List[Sink] = [s for s in sinks if s is not None]

    def prepare(self, engine) -> None:
        for s in self.sinks:
            s.prepare(engine)

    def on_start(self, info: dict) -> None:
        for s in self.sinks:
            s.on_start(info)

    def on_interval(self, result: IntervalResult, interval: Interval) -> None:
        for s in self.sinks:
            s.on_interval(result, interval)

    def on_checkpoint(self, summary: Summary) -> None:
        for s in self.sinks:
            s.on_checkpoint(summary)

    @property
    def read_checkpoints(self) -> bool:
        """Whether any sink reads checkpoints (overrides :meth:`Sink.on_checkpoint`): a run builds
        its summary every few seconds only then (issue 31: ~30% of a 97 Hz loop's CPU otherwise)."""
        return any(type(s).on_checkpoint is not Sink.on_checkpoint for s in self.sinks)

    def summary_sections(self) -> Summary:
        sections: Summary = {}
        for s in self.sinks:
            sections.update(s.summary_sections())
        return sections

    def before_end(self, name: Callable[[List[int]], List[str]]) -> None:
        for s in self.sinks:
            s.before_end(name)

    def on_end(self, summary: Summary) -> None:
        self._each(lambda s: s.on_end(summary))

    def abandon(self) -> None:
        for s in self.sinks:
            s.abandon()

    def close(self) -> None:
        self._each(lambda s: s.close())

    def _each(self, call) -> None:
        """``call`` on every sink, even after one fails (a phase database that cannot be written
        must not cost the summary); then the first failure."""
        error = None
        for s in self.sinks:
            try:
                call(s)
            except PhasescopeError as e:
                error = error or e
        if error is not None:
            raise error


def open_write(path: str):
    """Open ``path`` for writing; InputError (exit 2) if it cannot be. A FIFO's open waits for a
    reader; a stop signal ends that wait (KeyboardInterrupt)."""
    try:
        with waits.interruptible():
            return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


def write_failed(path: str, e: OSError) -> Exception:
    """A write that failed after the start (disk full, file size limit, I/O error): exit code 1.
    Standard output (``-``) whose reader has gone (``export-bbv LOG - | head -1``) stays a
    BrokenPipeError: the reader has all it wanted, a quiet end (exit 0), as for every report."""
    if path == STDOUT and e.errno == errno.EPIPE:
        return e
    return PhasescopeError(f"{path}: cannot write: {e.strerror or e}")


def close_file(f, path: str) -> None:
    """Close; a failure to flush the rest is reported once, like a failed write."""
    try:
        f.close()
    except OSError as e:
        raise write_failed(path, e) from None


def written_in_place(path: str) -> bool:
    """Whether ``path`` (through any link) is an existing file that is not a regular one: a FIFO or
    a device, written in place and once, at the end (a FIFO's open waits for a reader)."""
    if path == STDOUT:  # ``-``: what the shell opened (a `>` file too) is written, never replaced
        return True
    try:
        st = os.stat(path)  # /dev/stdout's link to a pipe resolves here, not by its path (pipe:[N])
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode)


def not_read(path: str) -> PhasescopeError:
    """A FIFO whose reader never came before a stop signal ended the wait: exit code 1."""
    return PhasescopeError(f"{path}: not written: no reader opened it before the stop signal")


def cut_off(path: str) -> PhasescopeError:
    """A pipe whose reader stopped reading, until a stop signal ended the write: exit code 1."""
    return PhasescopeError(f"{path}: cut off: its reader stopped reading before the stop signal")


def write_to_pipe(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (a pipe, a FIFO, a device). A reader that stopped reading would
    block the write for good: while the run finishes a stop signal ends it
    (:class:`phasescope.waits.WriteEnded`); unbuffered, so nothing is left to flush after."""
    view = memoryview(data)
    with waits.writing_to_a_pipe():
        while view:
            view = view[os.write(fd, view):]


class LineFile:
    """An output written as it goes and flushed each time (the log, ``.bb`` files). To a pipe (a
    FIFO, ``>(consumer)``) straight to it (:func:`write_to_pipe`): if a stop signal while the run
    finishes ends a write whose reader stopped reading, the rest is dropped and :meth:`close`
    says so (exit 1) once the other outputs are written."""

    def __init__(self, path: str):
        self.path = path
        # standard output as the shell opened it (a reopening of /dev/stdout would truncate `>> FILE`)
        self._f = os.fdopen(os.dup(1), "w", encoding="utf-8") if path == STDOUT else open_write(path)
        self._pipe = stat.S_ISFIFO(os.fstat(self._f.fileno()).st_mode)
        self._cut: Optional[PhasescopeError] = None

    def write(self, text: str) -> None:
        try:
            if not self._pipe:
                self._f.write(text)
                self._f.flush()
            elif self._cut is None:
                write_to_pipe(self._f.fileno(), text.encode("utf-8"))
        except OSError as e:
            raise write_failed(self.path, e) from None
        except waits.WriteEnded:  # not a second signal during the run: that one stops the run's wait
            self._cut = cut_off(self.path)

    def close(self) -> None:
        close_file(self._f, self.path)
        if self._cut is not None:
            raise self._cut


def replace_atomically(path: str, write: Callable[[str], None], prefix: str) -> None:
    """``write(tmp)`` to a temporary file in ``path``'s directory, then ``os.replace`` it over
    ``path``: a stop signal or a failure midway leaves the old file whole (or none), never half of
    one; an existing file keeps its mode; a symbolic link's file is replaced, not the link (a phase
    database shared through a link stays shared). OSError as the steps raise it."""
    import tempfile
    real = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(real))
    os.close(fd)
    try:
        write(tmp)
        try:
            mode = os.stat(real).st_mode & 0o7777  # a file replaced keeps its mode
        except OSError:
            mask = os.umask(0o022)
            os.umask(mask)
            mode = 0o666 & ~mask  # mkstemp makes it 0600; these are ordinary files
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_whole(path: str, write: Callable[[str], None], prefix: str) -> None:
    """``write(p)`` for an output written once, whole: a regular file (or a new one) is replaced
    atomically (:func:`replace_atomically`, ``p`` a temporary file: a stop signal or a failure
    midway leaves the old file), a FIFO, a device or standard output is written in place (``p`` is
    ``path``). A failed write is :func:`write_failed` (exit 1, one line)."""
    try:
        if path == STDOUT:
            _through_stdout(write, prefix)
        elif written_in_place(path):
            write(path)
        else:
            replace_atomically(path, write, prefix)
    except OSError as e:
        raise write_failed(path, e) from None


def _through_stdout(write: Callable[[str], None], prefix: str) -> None:
    """``write(tmp)``, then the temporary file's bytes to file descriptor 1 as the shell opened it:
    a reopening of /dev/stdout would truncate ``>> FILE`` or what a ``{ ...; } > FILE`` wrote first."""
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                write_to_pipe(1, chunk)
    finally:
        os.unlink(tmp)


def check_replaceable(path: str, prefix: str) -> None:
    """InputError (exit 2) now, before the work, unless :func:`replace_atomically` can replace
    ``path`` at the end (a temporary file can be made beside it); ``path`` itself is untouched.
    A FIFO or a device (``/dev/stdout`` to a pipe) is written in place, not replaced."""
    import tempfile
    if os.path.isdir(path):
        raise InputError(f"{path}: cannot write: is a directory")
    if written_in_place(path):
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(os.path.realpath(path)))
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None
    os.close(fd)
    os.unlink(tmp)


def write_json_atomically(path: str, obj, prefix: str) -> None:
    """Replace ``path`` with ``obj`` as JSON (:func:`replace_atomically`), so readers never see
    half a file and a crash keeps the old one. Anything but a regular file (``/dev/null``, a FIFO)
    is written in place: replaced, as root, ``/dev/null`` became a regular file for the whole
    machine."""
    import json  # here: a run without --summary or a phase database needs neither (~7 ms)
    def dump(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")

    if written_in_place(path):
        try:
            with waits.interruptible():  # a FIFO's open waits for a reader: a stop signal ends it
                fd = os.open(path, os.O_WRONLY)  # /dev/stdout's link resolves here, not as a path
        except OSError as e:
            raise write_failed(path, e) from None
        except KeyboardInterrupt:
            raise not_read(path) from None
        try:
            write_to_pipe(fd, (json.dumps(obj, indent=1) + "\n").encode("utf-8"))
        except OSError as e:
            raise write_failed(path, e) from None
        except waits.WriteEnded:
            raise cut_off(path) from None
        finally:
            os.close(fd)
        return
    try:
        replace_atomically(path, dump, prefix)
    except OSError as e:
        raise write_failed(path, e) from None
