"""The direct ELF64 reader of sources/elf_symbols.py gives the same function tables as pyelftools,
on the shared libraries this interpreter has mapped (libc, libpython, numpy's extensions)."""

from __future__ import annotations

from phasescope.sources.elf_symbols import _read, _read_any


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
