"""The interval record has one definition (phasescope.sources.wire.RECORD): the C hot path, the
JavaScript agent and the host decoder all follow it."""

import re
import numpy as np

from phasescope.engine.interval import OS_FIELDS
from phasescope.resources import joined
from phasescope.sources import wire

COUNTER_C = joined("agent")
AGENT_JS = joined("js")


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
    used = set(re.findall(r"\bPS_(?:REC_|STAT_|HEADER_|PAIR_|FLAG_|LOC_)\w+", COUNTER_C))
    assert used, "the C source writes no record?"
    assert used <= set(_defines()), used - set(_defines())
    assert not re.search(r"#define PS_(REC|STAT|HEADER|PAIR|FLAG|LOC)_", COUNTER_C), "layout defined twice"
    # No literal offsets into a record: every write goes through a PS_REC_* name.
    assert not re.search(r"\bout \+ \d", COUNTER_C)
    assert not re.search(r"\(p \+ (?!8\b)\d", COUNTER_C)


def test_agent_js_asks_stats_by_name_from_the_table():
    names = set(re.findall(r"stat\('(\w+)'\)", AGENT_JS))
    assert names and names <= set(wire.STATS)
    assert not re.search(r"api\.stats\(\d", AGENT_JS)


def test_a_record_built_from_the_table_decodes():
    from phasescope.sources.modules import ModuleMap
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


def test_a_jit_method_key_is_its_own_key_beside_modules_and_c_gets_its_bit():
    # agent/jit_keys.c names a branch in HotSpot's compiled code by its method (METHOD_KEY set):
    # the host keeps that value as the key, whatever modules are mapped, and two branches of one
    # method (one key twice in a record) add up in the footprint.
    from phasescope.engine.config import TrackerConfig
    from phasescope.engine.footprint import footprints
    from phasescope.sources.modules import Module, ModuleMap
    defined = re.search(r"#define PS_PC_METHOD_KEY (0x[0-9a-f]+)ULL", wire.c_defines())
    assert defined and int(defined.group(1), 16) == wire.METHOD_KEY == 1 << 63
    method = wire.METHOD_KEY | 0x7f00_1234_5678 >> 3
    modules = ModuleMap([Module("libjvm.so", 0x7f00_0000_0000, 0x100_0000), Module("huge", 0, 1 << 62)])
    header = np.zeros(1, wire.HEADER)
    header["kind"], header["npairs"], header["instructions"] = wire.KIND_INTERVAL, 3, 60
    pairs = np.array([(method, 10), (0x7f00_0000_1000, 20), (method, 30)], wire.PAIR)
    (iv,) = wire.decode(header.tobytes() + pairs.tobytes(), modules)
    assert iv.keys[0] == iv.keys[2] == method and iv.keys[1] == fnv_key("libjvm.so", 0x1000)
    assert modules.describe(method) == "java method 0x7f0012345678" and modules.describe(0x1000) == "huge+0x1000"
    config = TrackerConfig()
    once, _ = footprints(config, [np.array([method, iv.keys[1]], np.uint64)], [np.array([40, 20])])
    assert np.allclose(footprints(config, [iv.keys], [iv.counts])[0], once)
    # the same method's code at bytecode 9 (bits 44-59: 9 + 1): a key of its own, named by its method
    from phasescope.sources.modules import METHOD_KEY_END, method_of
    loop = method | 10 << 44
    assert loop < METHOD_KEY_END and method_of(loop) == method_of(method) == 0x7f00_1234_5678
    assert modules.describe(loop) == "java method 0x7f0012345678"


def fnv_key(name, offset):
    from phasescope.sources.modules import fnv1a32
    return fnv1a32(name) << 32 | offset


def test_locality_record_defines_and_shared_prefix():
    d = _defines()
    for name, _ in wire.LOCALITY:
        assert int(d[f"PS_LOC_{name.upper()}"]) == wire.LOC_HEADER.fields[name][1]
    assert int(d["PS_LOC_HEADER_SIZE"]) == wire.LOC_HEADER.itemsize
    assert int(d["PS_REC_LOCALITY"]) == wire.KIND_LOCALITY != wire.KIND_INTERVAL
    # kind, flags, thread and seq sit at the same offsets in both records
    for name in ("kind", "flags", "thread", "seq"):
        assert wire.LOC_HEADER.fields[name][1] == wire.HEADER.fields[name][1]
    assert "PS_REC_LOCALITY" in COUNTER_C and "PS_LOC_NACCESSES" in COUNTER_C


def _interval(thread, seq):
    header = np.zeros(1, wire.HEADER)
    header["kind"], header["thread"], header["seq"], header["instructions"], header["npairs"] = \
        wire.KIND_INTERVAL, thread, seq, 10, 1
    return header.tobytes() + np.array([(0x1000, 10)], wire.PAIR).tobytes()


def _window(thread, seq, addresses, skipped=0, opened=None):
    header = np.zeros(1, wire.LOC_HEADER)
    header["kind"], header["thread"], header["seq"], header["naccesses"], header["skipped"] = \
        wire.KIND_LOCALITY, thread, seq, len(addresses), skipped
    header["opened"] = seq if opened is None else opened
    return header.tobytes() + np.array(addresses, "<u8").tobytes()


def test_locality_windows_attach_to_the_interval_they_ended_in():
    from phasescope.sources.modules import ModuleMap
    pending = {}
    data = _interval(7, 0) + _window(7, 1, [0x40, 0x80, 0x40], skipped=2) + _window(8, 0, [1])
    ivs = wire.decode(data, ModuleMap(), pending)
    assert [(iv.thread, iv.seq, iv.locality) for iv in ivs] == [(7, 0, None)]
    # the interval arrives in a later buffer
    ivs = wire.decode(_interval(8, 0) + _interval(7, 1) + _interval(7, 2), ModuleMap(), pending)
    assert ivs[0].locality.tolist() == [1]
    assert ivs[1].locality.tolist() == [0x40, 0x80, 0x40] and ivs[1].locality_skipped == 2
    assert ivs[2].locality is None and pending == {}
    # a window whose interval was dropped is not attached to a later one
    ivs = wire.decode(_window(7, 3, [5]) + _interval(7, 4), ModuleMap(), pending)
    assert ivs[0].locality is None and pending == {}
    # how far back the window began: 0 when it opened in its own interval
    assert ivs[0].locality_reach == 0 and [iv.locality_reach for iv in ivs] == [0]
    ivs = wire.decode(_window(7, 9, [5], opened=7) + _interval(7, 9), ModuleMap(), pending)
    assert ivs[0].locality_reach == 2


def test_agent_calls_into_c_through_signatures_read_from_counter_c():
    from phasescope.sources.agent import c_exports
    exports = c_exports(COUNTER_C)
    defined = set(re.findall(r"^(?!static)[a-z]\w*(?: \*)?\n(ps_\w+) \(", COUNTER_C, re.M))
    assert defined and set(exports) == defined
    called = set(re.findall(r"\bapi\.(\w+)\(", AGENT_JS)) - {"getpid"}
    assert called and {f"ps_{name}" for name in called} <= set(exports), called
    # no signature or region size written by hand in the agent
    assert "new NativeFunction(cm." not in AGENT_JS
    assert not re.search(r"\b4096\b|cap \* \d", AGENT_JS)


def test_c_exports_reads_gnu_style_definitions_and_refuses_types_it_cannot_pass():
    import pytest
    from phasescope.sources.agent import c_exports
    source = ("static void\nps_hidden (PsThread * t)\n{\n}\n\nguint8 *\nps_buffer (guint64 * len, int which)\n{\n}\n\n"
              "void\nps_none (void)\n{\n}\n")
    assert c_exports(source) == {"ps_buffer": ["pointer", ["pointer", "int"]], "ps_none": ["void", []]}
    with pytest.raises(ValueError, match="double"):
        c_exports("void\nps_bad (double x)\n{\n}\n")
