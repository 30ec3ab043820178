"""The graph viewer's module text: XProf's `graph_viewer` output (`type=short_txt`) byte for byte,
and the printer's rules on modules built here for what the shared captures do not carry."""

from __future__ import annotations

from functools import cache

import pytest

from reportgen.core.hlo.module_text import (
    ModuleText,
    c_escape,
    lexes_as_json_dict,
    module_text,
    sanitized_name,
    sharding_text,
)
from reportgen.core.hlo.text import literal_text
from reportgen.loaders.hlo import hlo_modules, to_plain
from reportgen.loaders.proto import hlo_pb2
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import ORACLE, REPO, RUNS, host_files, needs_shared
from tests.wirebytes import ld


def _oracle_cases():
    for run in RUNS:
        folder = ORACLE / run / "graph_viewer"
        if folder.exists():
            for path in sorted(folder.glob("*.short_txt.txt")):
                yield pytest.param(run, path.name[: -len(".short_txt.txt")], id=f"{run}/{path.name}")


@cache
def _modules(run: str) -> dict:
    found = {}
    for path in host_files(run):
        capture = decode_xspace(str(path), path.read_bytes())
        found.update({m.display_name: m for m in hlo_modules(capture).values()})
    return found


@needs_shared
def test_every_module_xprof_lists_has_an_oracle_file():
    """The parity test below covers every module of every run XProf offers the graph viewer for."""
    checked = 0
    for run in RUNS:
        names = (ORACLE / run / "tool_names.txt").read_text()
        if "graph_viewer" not in names.split("\n", 1)[0].split(","):
            continue
        modules = names.split("hlo_modules:", 1)[1].strip().split(",")
        files = {p.name for p in (ORACLE / run / "graph_viewer").glob("*.short_txt.txt")}
        assert {f"{m}.short_txt.txt" for m in modules} == files
        assert set(_modules(run)) == set(modules)
        checked += len(modules)
    assert checked == 24


@needs_shared
@pytest.mark.parametrize("run,module", list(_oracle_cases()))
def test_module_text_equals_xprof_byte_for_byte(run, module):
    expected = (ORACLE / run / "graph_viewer" / f"{module}.short_txt.txt").read_bytes()
    printed = module_text(_modules(run)[module].hlo.hlo_module)
    assert printed.text.encode("utf-8", "surrogateescape") == expected
    assert printed.unprinted == []


MESH_CPU = REPO / "tests" / "captures" / "jax_mesh_cpu"


@cache
def _mesh_cpu_modules() -> dict:
    path = MESH_CPU / "vm.xplane.pb"
    return {m.display_name: m for m in hlo_modules(decode_xspace(str(path), path.read_bytes())).values()}


@pytest.mark.parametrize("module", sorted(p.name[: -len(".short_txt.txt")]
                                          for p in (MESH_CPU / "oracle" / "graph_viewer").glob("*.short_txt.txt")))
def test_a_jax_0_12_capture_with_mesh_collectives_prints_as_xprof(module):
    """XLA 2026 writes a collective's groups over a mesh only in `mesh_axes_replica_group_list` (field 93), and
    fields 98 and 101 on dots that XProf does not print: the text is XProf's, with no difference listed."""
    expected = (MESH_CPU / "oracle" / "graph_viewer" / f"{module}.short_txt.txt").read_bytes()
    printed = module_text(_mesh_cpu_modules()[module].hlo.hlo_module)
    assert printed.text.encode("utf-8", "surrogateescape") == expected
    assert printed.unprinted == []


def test_the_mesh_capture_holds_what_it_is_for():
    texts = [p.read_text() for p in (MESH_CPU / "oracle" / "graph_viewer").glob("jit_local_step*.short_txt.txt")]
    assert texts and all(t.count("replica_groups=mesh['data'=4] {'data'}") == 2 for t in texts)
    dots = [i for m in _mesh_cpu_modules().values() for c in m.hlo.hlo_module.computations
            for i in c.instructions if i.opcode == "dot"]
    assert dots and all({98, 101} <= set(i.unknown_fields) for i in dots)


def test_mesh_replica_groups_follow_xlas_printer():
    """XLA's MeshAxesReplicaGroupList::ToString (xla/hlo/ir/replica_group.cc, mesh_and_axis.cc): the mesh's
    axes and their sizes, explicit device ids when the mesh has them, then the axes grouped over, a sub-axis
    as `name:(pre-size)size`; a mesh of no axes and one device is maximal."""
    module = hlo_pb2.HloModuleProto(name="m", entry_computation_name="main", entry_computation_id=1)
    computation = module.computations.add(name="main", id=1, root_id=2)
    parameter = computation.instructions.add(name="p", opcode="parameter", id=1, shape=_shape("F32", [8], [0]))
    reduce = computation.instructions.add(name="ar", opcode="all-reduce", id=2, operand_ids=[1],
                                          shape=_shape("F32", [8], [0]))
    groups = reduce.mesh_axes_replica_group_list
    groups.mesh.axes.add(name="x", size=2)
    groups.mesh.axes.add(name="y", size=4)
    groups.mesh.device_ids.extend([0, 2, 4, 6, 1, 3, 5, 7])
    groups.axes.add(mesh_axis_index=1).sub_axis_info.CopyFrom(hlo_pb2.AxisRefProto.SubAxis(pre_size=2, size=2))
    groups.axes.add(mesh_axis_index=0)
    assert parameter.name == "p"
    printed = _printed(module)
    assert "replica_groups=mesh['x'=2,'y'=4], device_ids=(0,2,4,6,1,3,5,7) {'y':(2)2,'x'}" in printed.lines["ar"]
    assert printed.unprinted == []
    del groups.mesh.axes[:]
    del groups.mesh.device_ids[1:]
    del groups.axes[:]
    assert "replica_groups=maximal_mesh[device_id=0] {}" in _printed(module).lines["ar"]


# --- rules, on modules built here -------------------------------------------------------------
# Built as protos and converted by the loader, as a capture's modules are.

def _printed(module: hlo_pb2.HloModuleProto) -> ModuleText:
    return module_text(to_plain(module))


def _shape(kind: str, dims=(), layout=None) -> hlo_pb2.ShapeProto:
    shape = hlo_pb2.ShapeProto(element_type=hlo_pb2.PrimitiveType.Value(kind), dimensions=list(dims))
    if layout is not None:
        shape.layout.minor_to_major.extend(layout)
    return shape


def _instr(comp, iid, name, opcode, shape, operands=(), **fields):
    instr = comp.instructions.add(id=iid, name=name, opcode=opcode, operand_ids=list(operands), **fields)
    instr.shape.CopyFrom(shape)
    return instr


def _module() -> hlo_pb2.HloModuleProto:
    """entry: p0, p1 → add → (tuple root); a fusion computation called twice, a reduction region."""
    module = hlo_pb2.HloModuleProto(name="m", entry_computation_id=1)
    region = module.computations.add(id=3, name="region", root_id=32)
    _instr(region, 30, "a", "parameter", _shape("F32"), parameter_number=0)
    _instr(region, 31, "b", "parameter", _shape("F32"), parameter_number=1)
    _instr(region, 32, "sum", "add", _shape("F32"), [30, 31])
    fused = module.computations.add(id=2, name="fused", root_id=22)
    _instr(fused, 20, "fp", "parameter", _shape("F32", [4], [0]), parameter_number=0)
    _instr(fused, 21, "zero", "constant", _shape("F32"), literal=hlo_pb2.LiteralProto(shape=_shape("F32"), f32s=[0]))
    _instr(fused, 22, "r", "reduce", _shape("F32"), [20, 21], dimensions=[0], called_computation_ids=[3])
    entry = module.computations.add(id=1, name="main", root_id=14)
    _instr(entry, 10, "p0", "parameter", _shape("F32", [4], [0]), parameter_number=0)
    _instr(entry, 11, "p1", "parameter", _shape("F32", [4], [0]), parameter_number=1)
    _instr(entry, 12, "f1", "fusion", _shape("F32"), [10], fusion_kind="kLoop", called_computation_ids=[2])
    _instr(entry, 13, "f2", "fusion", _shape("F32"), [11], fusion_kind="kLoop", called_computation_ids=[2])
    tup = _shape("TUPLE")
    tup.tuple_shapes.extend([_shape("F32"), _shape("F32")])
    _instr(entry, 14, "t", "tuple", tup, [12, 13])
    module.host_program_shape.parameters.extend([_shape("F32", [4], [0]), _shape("F32", [4], [0])])
    module.host_program_shape.result.CopyFrom(tup)
    return module


def test_a_small_module_prints_callees_first_and_operands_before_users():
    assert _printed(_module()).text == (
        "HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[], f32[])}\n\n"
        "region {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT sum = f32[] add(a, b)\n}\n\n"
        "fused {\n  fp = f32[4]{0} parameter(0)\n  zero = f32[] constant(0)\n"
        "  ROOT r = f32[] reduce(fp, zero), dimensions={0}, to_apply=region\n}\n\n"
        "ENTRY main {\n  p0 = f32[4]{0} parameter(0)\n  f1 = f32[] fusion(p0), kind=kLoop, calls=fused\n"
        "  p1 = f32[4]{0} parameter(1)\n  f2 = f32[] fusion(p1), kind=kLoop, calls=fused\n"
        "  ROOT t = (f32[], f32[]) tuple(f1, f2)\n}\n\n")


def test_a_schedule_orders_the_entry_and_aliases_and_attributes_print_in_the_header():
    module = _module()
    module.schedule.sequences[1].instruction_ids.extend([11, 10, 13, 12, 14])
    alias = module.input_output_alias.entries.add(output_shape_index=[1], parameter_number=1, kind=hlo_pb2.MUST_ALIAS)
    alias.parameter_shape_index.extend([])
    module.input_output_alias.entries.add(output_shape_index=[0], parameter_number=0, kind=hlo_pb2.MAY_ALIAS)
    module.frontend_attributes.map["b"] = 'say "hi"'
    module.frontend_attributes.map["a"] = "{x = 1}"
    text = _printed(module).text
    assert text.splitlines()[0] == (
        "HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, "
        "entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[], f32[])}, "
        'frontend_attributes={a={x = 1},b="say \\"hi\\""}')
    entry = text.split("ENTRY main {\n", 1)[1]
    assert [line.split(" = ")[0].strip() for line in entry.splitlines()[:5]] == ["p1", "p0", "f2", "f1", "ROOT t"]


def test_control_predecessors_come_before_operands_in_the_post_order():
    module = _module()
    entry = module.computations[2]
    entry.instructions[3].control_predecessor_ids.append(12)  # f2 after f1
    order = [line.split(" = ")[0].strip() for line in _printed(module).text.split("ENTRY main {\n")[1].splitlines()]
    assert order[:4] == ["p0", "f1", "p1", "f2"]


def test_backend_configs_print_raw_when_json_else_escaped():
    module = _module()
    module.computations[2].instructions[2].backend_config = b'{"a":"}"}'
    module.computations[2].instructions[3].backend_config = b"opaque\n\x01\xff"
    text = _printed(module).text
    assert 'calls=fused, backend_config={"a":"}"}\n' in text
    assert 'calls=fused, backend_config="opaque\\n\\001\\377"\n' in text
    assert lexes_as_json_dict(' {"k": {"n": "{"}} ') and not lexes_as_json_dict("{a} b")
    assert not lexes_as_json_dict("[1]") and not lexes_as_json_dict('{"unterminated}')


def test_names_are_sanitized_as_xla_loads_them():
    assert sanitized_name("1bad name") == "_bad_name"
    assert sanitized_name("f32") == "f32_"
    assert sanitized_name("__secret") == "a_secret" and sanitized_name("__xla_x") == "__xla_x"
    assert c_escape("tab\t'q'") == "tab\\t\\'q\\'"


def test_constants_print_as_xla_literals():
    def lit(kind, dims, **values):
        return literal_text(to_plain(hlo_pb2.LiteralProto(shape=_shape(kind, dims), **values)))

    assert lit("F32", [], f32s=[1.00000012]) == "1.00000012"  # 6 digits do not read back: 9
    assert lit("F32", [], f32s=[0.1]) == "0.1"
    assert lit("F64", [], f64s=[0.1]) == "0.1"
    assert lit("F32", [], f32s=[float("-inf")]) == "-inf"
    assert lit("PRED", [], preds=[True]) == "true" and lit("PRED", [2], preds=[True, False]) == "{1, 0}"
    assert lit("S32", [2, 1], s32s=[1, 2]) == "{ {1}, {2} }"
    assert lit("S32", [1, 1, 2, 1], s32s=[1, 2]) == "{ { /*i0=0*/ { /*i1=0*/ {1}, {2} } } }"
    assert lit("BF16", [], bf16s=bytes([0x80, 0x3F])) == "1"
    assert lit("F32", [12], f32s=[0.0] * 12) == "{...}"


def test_shardings_print_as_xla():
    replicated = hlo_pb2.OpSharding(type=hlo_pb2.OpSharding.REPLICATED)
    tiled = hlo_pb2.OpSharding(type=hlo_pb2.OpSharding.OTHER, tile_assignment_dimensions=[2, 1],
                               tile_assignment_devices=[1, 0])
    iota = hlo_pb2.OpSharding(type=hlo_pb2.OpSharding.OTHER, tile_assignment_dimensions=[2, 2],
                              iota_reshape_dims=[2, 2], iota_transpose_perm=[1, 0], replicate_on_last_tile_dim=True)
    tup = hlo_pb2.OpSharding(type=hlo_pb2.OpSharding.TUPLE, tuple_shardings=[replicated, tiled])
    assert sharding_text(to_plain(replicated)) == "{replicated}"
    assert sharding_text(to_plain(tiled)) == "{devices=[2,1]1,0}"
    assert sharding_text(to_plain(iota)) == "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"
    assert sharding_text(to_plain(tup)) == "{{replicated}, {devices=[2,1]1,0}}"


def test_fields_the_printer_does_not_read_are_listed():
    module = _module()
    instr = module.computations[2].instructions[4]
    wire = instr.SerializeToString() + ld(88, b"")  # original_value = {} (XLA prints it)
    instr.Clear()
    instr.ParseFromString(wire)
    assert _printed(module).unprinted == ["original_value of t"]
