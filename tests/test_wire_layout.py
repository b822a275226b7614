"""The interval record has one definition (phasescope.target.wire.RECORD): the C hot path, the
JavaScript agent and the host decoder all follow it."""

import re
from pathlib import Path

import numpy as np

from phasescope.engine.interval import OS_FIELDS
from phasescope.target import wire

ROOT = Path(__file__).resolve().parent.parent
COUNTER_C = (ROOT / "agent" / "counter.c").read_text()
AGENT_JS = (ROOT / "js" / "agent.js").read_text()


def _defines():
    return dict(re.findall(r"#define (PS_\w+) (\d+)", wire.c_defines()))


def test_header_has_no_padding_and_matches_the_table():
    offset = 0
    for name, dtype in wire.RECORD:
        assert wire.HEADER.fields[name][1] == offset, name
        offset += np.dtype(dtype).itemsize
    assert wire.HEADER.itemsize == offset
    os_offsets = [wire.HEADER.fields[f][1] for f in OS_FIELDS]
    assert os_offsets == list(range(os_offsets[0], os_offsets[0] + 8 * len(OS_FIELDS), 8))


def test_generated_defines_give_every_offset():
    d = _defines()
    for name, _ in wire.RECORD:
        assert int(d[f"PS_REC_{name.upper()}"]) == wire.HEADER.fields[name][1]
    assert int(d["PS_HEADER_SIZE"]) == wire.HEADER.itemsize
    assert int(d["PS_PAIR_SIZE"]) == wire.PAIR.itemsize


def test_counter_c_uses_only_generated_layout_names():
    used = set(re.findall(r"\bPS_(?:REC_|STAT_|HEADER_|PAIR_|FLAG_)\w+", COUNTER_C))
    assert used, "counter.c writes no record?"
    assert used <= set(_defines()), used - set(_defines())
    assert not re.search(r"#define PS_(REC|STAT|HEADER|PAIR|FLAG)_", COUNTER_C), "layout defined twice"
    # No literal offsets into a record: every write goes through a PS_REC_* name.
    assert not re.search(r"\bout \+ \d", COUNTER_C)
    assert not re.search(r"\(p \+ (?!8\b)\d", COUNTER_C)


def test_agent_js_asks_stats_by_name_from_the_table():
    names = set(re.findall(r"stat\('(\w+)'\)", AGENT_JS))
    assert names and names <= set(wire.STATS)
    assert not re.search(r"api\.stats\(\d", AGENT_JS)


def test_a_record_built_from_the_table_decodes():
    from phasescope.target.modules import ModuleMap
    header = np.zeros(1, wire.HEADER)
    header["kind"], header["thread"], header["seq"], header["instructions"], header["npairs"] = \
        wire.KIND_INTERVAL, 42, 3, 30, 2
    header["flags"] = wire.FLAG_PARTIAL
    header["cpu_ns"], header["nivcsw"] = 7, 9
    pairs = np.array([(0x1000, 10), (0x2000, 20)], wire.PAIR)
    (iv,) = wire.decode(header.tobytes() + pairs.tobytes(), ModuleMap())
    assert (iv.thread, iv.seq, iv.instructions, iv.partial) == (42, 3, 30, True)
    assert iv.os["cpu_ns"] == 7 and iv.os["nivcsw"] == 9
    assert iv.pcs.tolist() == [0x1000, 0x2000] and iv.counts.tolist() == [10, 20]
