"""HLO modules from the metadata plane (docs/xprof/xspace.md §8)."""

from __future__ import annotations

from reportgen.core.hlo.model import instruction_provenance, module_display_name, program_key, sorted_module_names
from reportgen.loaders.hlo import hlo_modules
from tests.hlo_builder import sample_module
from tests.xspace import Space


def _capture(entries, stat_name="Hlo Proto"):
    b = Space(("host",))
    b.plane("/host:CPU").line(name="t").event("op", 1, 1)
    meta = b.plane("/host:metadata")
    for md_id, name, stats in entries:
        meta.metadata(name, md_id=md_id, **{stat_name if k == "hlo" else k: v for k, v in stats.items()})
    return b.capture()


def proto_bytes(name: str) -> bytes:
    return sample_module(name).SerializeToString()


def test_modules_are_keyed_by_the_program_id_in_their_name():
    modules = hlo_modules(_capture([(5, "jit_a(77)", {"hlo": proto_bytes("jit_a")})]))
    assert list(modules) == [77]
    module = modules[77]
    assert module.name == "jit_a" and module.display_name == "jit_a(77)"
    assert module.hlo.buffer_assignment.heap_simulator_traces[0].events[0].buffer_id == 11


def test_legacy_stat_name_is_accepted():
    modules = hlo_modules(_capture([(1, "jit_b(4)", {"hlo": proto_bytes("jit_b")})], stat_name="HLO Proto"))
    assert [m.display_name for m in modules.values()] == ["jit_b(4)"]


def test_program_id_stat_wins_and_ids_are_unsigned():
    modules = hlo_modules(_capture([
        (6, "jit_c(3)", {"hlo": proto_bytes("jit_c"), "program_id": 9}),
        (7, "jit_d(18446744073709551615)", {"hlo": proto_bytes("jit_d")}),
        (8, "no_number", {"hlo": proto_bytes("jit_e")}),
    ]))
    assert sorted(m.display_name for m in modules.values()) == [
        "jit_c(9)", "jit_d(18446744073709551615)", "jit_e(8)"]


def test_undecodable_and_non_bytes_stats_are_skipped():
    modules = hlo_modules(_capture([
        (1, "bad(1)", {"hlo": b"\xff\xff\xff"}),
        (2, "text(2)", {"hlo": "not bytes"}),
        (3, "ok(3)", {"hlo": proto_bytes("ok")}),
    ]))
    assert [m.display_name for m in modules.values()] == ["ok(3)"]


def test_first_module_of_a_program_id_wins():
    modules = hlo_modules(_capture([
        (1, "first", {"hlo": proto_bytes("first"), "program_id": 5}),
        (2, "second", {"hlo": proto_bytes("second"), "program_id": 5}),
    ]))
    assert [m.name for m in modules.values()] == ["first"]


def test_no_metadata_plane_no_modules():
    b = Space(("host",))
    b.plane("/host:CPU").line(name="t").event("op", 1, 1)
    assert hlo_modules(b.capture()) == {}


def test_module_list_is_a_plain_string_sort():
    modules = hlo_modules(_capture([
        (1, "jit_x(8)", {"hlo": proto_bytes("jit_x")}),
        (2, "jit_x(18)", {"hlo": proto_bytes("jit_x")}),
        (3, "jit_a(30)", {"hlo": proto_bytes("jit_a")}),
    ]))
    assert sorted_module_names(modules) == ["jit_a(30)", "jit_x(18)", "jit_x(8)"]
    assert module_display_name("m", -1) == "m(18446744073709551615)"


def test_instructions_by_name_and_their_framework_op():
    proto = sample_module("jit_i")
    second = proto.hlo_module.computations.add()
    shadow = second.instructions.add()
    shadow.name, shadow.opcode = "fusion.1", "copy"  # a name seen again in a later computation
    modules = hlo_modules(_capture([(5, "jit_i(5)", {"hlo": proto.SerializeToString()})]))
    module = modules[program_key(5)]
    fusion = module.instructions["fusion.1"]
    assert fusion.opcode == "fusion"  # the first instruction of a name wins
    assert instruction_provenance(fusion) == "jit(f)/add:"
    assert instruction_provenance(shadow) == ""
    assert program_key(-1) == 2**64 - 1  # an int64 stat holding a uint64 id
