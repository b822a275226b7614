"""Code a process maps twice from one file: node 20 remaps its embedded builtins next to its JIT
code ("short builtin calls"). A sample in the copy is keyed and named as the same byte of the
binary, so node with its defaults keys builtins as ``--no-short-builtin-calls`` does (issue 27):
maps known by construction here; a real node run in test_perf_map.py."""

from __future__ import annotations

import numpy as np

from phasescope.sources.procfs import module_map_of

# node's layout: its image from 0x400000 (text at file offset 0x772000), libc, and the builtins
# (file offset 0x14c4000, inside the text) mapped again far away.
MAPS = """\
00400000-00b6f000 r--p 00000000 fe:00 260689 /usr/bin/node
00b72000-025fe000 r-xp 00772000 fe:00 260689 /usr/bin/node
025fe000-05600000 r--p 021fe000 fe:00 260689 /usr/bin/node
7fe6a37c3000-7fe6a37ff000 rwxp 00000000 00:00 0
7fe6c3600000-7fe6c3792000 r-xp 014c4000 fe:00 260689 /usr/bin/node
7fe6ca53e000-7fe6ca564000 r--p 00000000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6
7fe6ca564000-7fe6ca6ba000 r-xp 00026000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6
"""


def test_an_address_in_a_copy_is_keyed_and_located_as_the_original():
    mm = module_map_of(MAPS.splitlines(True))
    assert [(m.name, m.base, m.size) for m in mm.modules] == [("node", 0x400000, 0x5200000),
                                                              ("libc.so.6", 0x7FE6CA53E000, 0x17C000)]
    assert mm.copies == [(0x7FE6C3600000, 0x7FE6C3792000, 0x18C4000)]
    copy = np.array([0x7FE6C3600000, 0x7FE6C3600123, 0x7FE6C3791FFF], dtype=np.uint64)
    original = np.array([0x18C4000, 0x18C4123, 0x1A55FFF], dtype=np.uint64)
    assert mm.keys(copy).tolist() == mm.keys(original).tolist()
    assert mm.locate(0x7FE6C3600123) == ("node", 0x14C4123)
    outside = np.array([0x7FE6C3792000, 0x7FE6A37C3010], dtype=np.uint64)  # past the copy; JIT code
    assert mm.keys(outside).tolist() == outside.tolist()


def test_a_module_mapped_once_has_no_copies():
    mm = module_map_of([l for l in MAPS.splitlines(True) if "7fe6c36" not in l])
    assert mm.copies == [] and len(mm.modules) == 2


def test_a_file_mapped_again_to_be_read_is_not_the_image():
    """Frida maps libc once more, read-only, below the loaded image: the image is the mapping
    that the executable ones lie near, and the extra view is neither its base nor a copy."""
    maps = ("7f7044211000-7f70443e8000 r--p 00000000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            "7f704f69c000-7f704f6c2000 r--p 00000000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            "7f704f6c2000-7f704f818000 r-xp 00026000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            "7f704f86f000-7f704f871000 rw-p 001d3000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    mm = module_map_of(maps.splitlines(True))
    assert mm.copies == [] and [(m.base, m.size) for m in mm.modules] == [(0x7F704F69C000, 0x1D5000)]
    assert mm.locate(0x7F704F6C2010)[1] == 0x26010
