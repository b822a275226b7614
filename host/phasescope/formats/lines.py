"""Reading the text files phasescope takes as input (logs, .bb files, pc maps) line by line."""

from __future__ import annotations

import os
import stat
from typing import Iterator, Tuple

from phasescope.errors import InputError


def refuse_pipe(path: str, why: str) -> None:
    """InputError if ``path`` is a pipe (``<(zcat run.jsonl.gz)``, ``/dev/stdin`` of a pipeline):
    ``why`` says what reads it more than once. A second open of a pipe starts where the first read
    stopped, and its records were refused as not JSON."""
    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return  # the reader says why it cannot be read
    if fifo:
        raise InputError(f"{path}: a pipe; {why}")


#: the longest line read (bytes): far above any record phasescope writes (a compiler's interval of
#: 20,000 blocks is under 1 MiB), so that a file of no lines (``/dev/zero``) is refused, not read
#: into memory until the machine kills phasescope
LONGEST_LINE = 64 << 20


def numbered_lines(path: str) -> Iterator[Tuple[int, str]]:
    """(line number, text) of every line; InputError naming the file (and line) if it cannot be
    read, a line is not UTF-8 or is longer than :data:`LONGEST_LINE`. Decoded line by line, so a
    bad byte is reported on its own line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    with f:
        lineno = 0
        while raw := f.readline(LONGEST_LINE + 1):
            lineno += 1
            if len(raw) > LONGEST_LINE:
                raise InputError(f"{path}:{lineno}: a line longer than {LONGEST_LINE >> 20} MiB: not a file "
                                 "phasescope wrote")
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}:{lineno}: not UTF-8 text") from None
