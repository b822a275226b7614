"""The direct ELF64 readers (function tables, sources/elf_symbols.py; sonames, sources/modules.py)
give what pyelftools gives, on the shared libraries this interpreter has mapped (libc, libpython,
numpy's extensions)."""

from __future__ import annotations

import numpy as np

from phasescope.sources.elf_symbols import FunctionTable, _read, _read_any
from phasescope.sources.modules import _soname_any, _soname_elf64le, library_name


def _mapped_files() -> list:
    with open("/proc/self/maps") as f:
        paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


def test_the_direct_reader_agrees_with_pyelftools():
    files = _mapped_files()
    assert any("libc" in p for p in files), files
    checked = 0
    for path in files[:12]:
        table, reference = _read(path), _read_any(path)
        assert (table is None) == (reference is None), path
        if table is not None:
            assert table.low == reference.low and table.rows() == reference.rows(), path
            checked += len(table.rows()) > 0
    assert checked >= 2, files


def test_a_table_names_the_function_a_sorted_list_would():
    funcs = [(0x1300, 0x1400, "e"), (0x1000, 0x1100, "b"), (0x1000, 0x1100, "a"), (0x1000, 0x1080, "c"),
             (0x1200, 0x1201, "d"), (0x1350, 0x1360, "f")]
    strings = b"".join(name.encode() + b"\0" for _, _, name in funcs)
    offsets = np.cumsum([0] + [len(name) + 1 for _, _, name in funcs[:-1]])
    table = FunctionTable.build([0x400], [a for a, _, _ in funcs], [b for _, b, _ in funcs], offsets, strings)
    probes = {0xFFF: None, 0x1000: "b", 0x10FF: "b", 0x1100: None, 0x1200: "d", 0x1201: None,
              0x1300: "e", 0x1355: "f", 0x1365: None}  # an alias: the greatest name; a nested one hides the rest
    assert table.names(np.array(list(probes), dtype=np.uint64)) == list(probes.values())
    assert table.low == 0x400 and [r[2] for r in table.rows()] == ["b", "d", "e", "f"]


def test_not_an_elf_file_has_no_table(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 40)
    assert _read(str(junk)) is None
    assert _read(str(tmp_path / "missing")) is None


def test_the_direct_soname_reader_agrees_with_pyelftools():
    files = _mapped_files()
    named = 0
    for path in files:
        with open(path, "rb") as f:
            if f.read(6) != b"\x7fELF\x02\x01":
                continue
            soname = _soname_elf64le(f)
            assert soname == _soname_any(f), path
            named += soname is not None
    assert named >= 3, files  # libc.so.6, libpython, numpy's libraries...
    libc = next(p for p in files if "/libc.so" in p or "/libc-" in p)
    assert library_name(libc, "fallback") == "libc.so.6"


def test_a_file_without_a_soname_is_named_by_the_fallback(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 40)
    assert library_name(str(junk), "/usr/lib/libq.so.1.2") == "libq.so.1.2"
    assert library_name(str(tmp_path / "missing"), "/x/prog") == "prog"
