"""The protocol-buffers wire format, as much as pprof and Perfetto files need: varints, length-
delimited fields (strings, bytes, nested messages, packed repeated integers) and fixed64 doubles.
A message is built as ``bytes`` from its fields; field order does not matter to readers."""

from __future__ import annotations

import struct
from typing import Iterable

_VARINT, _FIXED64, _LEN = 0, 1, 2


def varint(n: int) -> bytes:
    """Base-128 varint of ``n`` (negative numbers as their 64-bit two's complement, as int64)."""
    n &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def uint(field: int, n: int) -> bytes:
    """An integer field (int32/int64/uint64/bool/enum)."""
    return varint(field << 3 | _VARINT) + varint(n)


def blob(field: int, data: bytes) -> bytes:
    """A length-delimited field: bytes or an encoded nested message."""
    return varint(field << 3 | _LEN) + varint(len(data)) + data


def text(field: int, s: str) -> bytes:
    return blob(field, s.encode("utf-8"))


def packed(field: int, values: Iterable[int]) -> bytes:
    """A packed repeated integer field."""
    return blob(field, b"".join(varint(v) for v in values))


def double(field: int, x: float) -> bytes:
    return varint(field << 3 | _FIXED64) + struct.pack("<d", x)
