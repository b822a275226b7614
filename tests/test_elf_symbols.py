"""The direct ELF64 readers (function tables, sources/elf_symbols.py; sonames, sources/modules.py)
give what pyelftools gives, on the shared libraries this interpreter has mapped (libc, libpython,
numpy's extensions)."""

from __future__ import annotations

from phasescope.sources.elf_symbols import _read, _read_any
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
        table = _read(path)
        assert table == _read_any(path), path
        checked += table is not None and len(table[1]) > 0
    assert checked >= 2, files


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
