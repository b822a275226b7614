"""Sizes with units on the command line (``--input-size 4MiB``, ``locality-model --predict 64MB``)."""

from __future__ import annotations

import argparse

from phasescope.errors import InputError

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 10**3, "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
          "g": 1 << 30, "gib": 1 << 30, "gb": 10**9, "t": 1 << 40, "tib": 1 << 40, "tb": 10**12}


def parse_size(text: str, what: str) -> int:
    """Bytes of a size with an optional unit: 4096, 64KiB, 1.5MiB, 100MB, 2G (K/M/G: powers of 1024)."""
    t = str(text).strip().lower().replace(" ", "")
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    try:
        value = float(num) * _UNITS[unit]
    except (ValueError, KeyError):
        raise InputError(f"{what}: {text!r} is not a size (a number and a unit: 4096, 64KiB, 1.5MiB, 100MB)") from None
    if not 1 <= value < float(1 << 60):
        raise InputError(f"{what}: {text!r} is out of range (1 byte to 1 EiB)")
    return int(value)


def size_option(what: str):
    """An argparse ``type`` for a size option: bytes, with or without a unit (a bad one is argparse's
    one-line usage error)."""
    def convert(text: str) -> int:
        try:
            return parse_size(text, what)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None
    return convert
