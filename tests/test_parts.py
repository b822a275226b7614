"""The agent's sources are kept in parts (resources.PARTS) and joined into the one C source CModule
compiles and the one script Frida loads. Pure: no process is started."""

from __future__ import annotations

import os
import re
import signal

import pytest

from phasescope.resources import PARTS, data_dir, joined, js_place, read_text, with_js_places
from phasescope.sources.agent import c_exports, ignored_signals


@pytest.mark.parametrize("name, suffix", [("agent", ".c"), ("js", ".js")])
def test_every_part_on_disk_is_listed_once(name, suffix):
    # a part left out of PARTS would silently not be loaded
    on_disk = sorted(p.name for p in data_dir(name).iterdir() if p.suffix == suffix)
    assert sorted(PARTS[name]) == on_disk and len(set(PARTS[name])) == len(PARTS[name])


def test_c_parts_are_joined_in_order_each_after_its_line_directive():
    source = joined("agent")
    lines = source.splitlines()
    directives = [(i, m.group(1)) for i, line in enumerate(lines) if (m := re.fullmatch(r'#line 1 "agent/(.+)"', line))]
    assert [part for _, part in directives] == list(PARTS["agent"])
    ends = [i for i, _ in directives[1:]] + [len(lines)]
    for (start, part), end in zip(directives, ends):  # each part's text, whole, after its directive
        assert lines[start + 1:end] == read_text("agent", part).splitlines(), part


def test_the_exported_c_functions_of_every_part_are_found():
    defined = set()
    for part in PARTS["agent"]:
        defined |= set(re.findall(r"^[a-z]\w*(?: \*)?\n(ps_\w+) \(", read_text("agent", part), re.M))
    assert defined and set(c_exports(joined("agent"))) == defined


def test_a_line_of_the_joined_script_is_named_by_its_part():
    assert joined("js") == "".join(read_text("js", part) for part in PARTS["js"])
    offset = 0
    for part in PARTS["js"]:
        n = read_text("js", part).count("\n")
        assert js_place(offset + 1) == f"js/{part}:1" and js_place(offset + n) == f"js/{part}:{n}"
        offset += n
    third = PARTS["js"][2]
    first_two = sum(read_text("js", p).count("\n") for p in PARTS["js"][:2])
    assert with_js_places(f"script(line {first_two + 5}): SyntaxError") == f"script(js/{third}:5): SyntaxError"


def test_the_ignored_exception_signals_are_read_from_the_kernel():
    """This process ignores SIGTRAP and SIGUSR2 for the test: only SIGTRAP is one Frida takes over."""
    old = [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTRAP, signal.SIGUSR2)]
    try:
        assert ignored_signals(os.getpid()) == [signal.SIGTRAP]
    finally:
        for s, h in zip((signal.SIGTRAP, signal.SIGUSR2), old):
            signal.signal(s, h)
    assert signal.SIGTRAP not in ignored_signals(os.getpid()) and ignored_signals(-1) == []
