"""What exact mode can trace, told from the file before Frida touches it: a dynamically linked
native ELF executable. Frida's spawn fails on a script, a text or an empty file with a traceback-
shaped error, its loader crashes on a static binary, and attaching to a running static binary
aborts it (Frida finds no libc). Sampled mode needs none of this: it traces all of them.
"""

from __future__ import annotations

import struct
from typing import Optional

_PT_INTERP = 3
#: the end of every refusal of exact mode
SAMPLED_WORKS = "--mode sampled traces it (the kernel samples any program)"


def exact_mode_refusal(path: str, shown: str) -> Optional[str]:
    """Why exact mode cannot trace the program file ``path`` (``shown`` as the user named it), or
    None when it can (or the file cannot be read: spawning or attaching then says why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                what = ("an empty file" if not head else "a script" if head[:2] == b"#!"
                        else "not an ELF executable")
                return f"{shown} is {what}: exact mode needs a native ELF executable; {SAMPLED_WORKS}"
            if not _has_interpreter(f, head):
                return (f"{shown} is statically linked: Frida's exact mode needs the dynamic loader and libc to "
                        f"inject its agent (attaching would abort the process); {SAMPLED_WORKS}")
    except (OSError, struct.error):
        return None
    return None


def _has_interpreter(f, head: bytes) -> bool:
    """Whether the ELF file has a ``PT_INTERP`` program header (it is dynamically linked)."""
    wide, little = head[4] == 2, head[5] == 1
    end = "<" if little else ">"
    if wide:
        phoff, = struct.unpack_from(end + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
    else:
        phoff, = struct.unpack_from(end + "I", head, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    return any(struct.unpack_from(end + "I", table, i * phentsize)[0] == _PT_INTERP for i in range(phnum))
