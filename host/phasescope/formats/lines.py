"""Reading the text files phasescope takes as input (logs, .bb files, pc maps) line by line."""

from __future__ import annotations

from typing import Iterator, Tuple

from phasescope.errors import InputError


def numbered_lines(path: str) -> Iterator[Tuple[int, str]]:
    """(line number, text) of every line; InputError naming the file (and line) if it cannot be
    read or a line is not UTF-8. Decoded line by line, so a bad byte is reported on its own line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    with f:
        for lineno, raw in enumerate(f, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}:{lineno}: not UTF-8 text") from None
