"""Rules of the op profile tree, HLO text, roofline bound and pod bottleneck, on data built in code."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reportgen.core.hlo.ops import HloOp
from reportgen.core.hlo.text import instruction_text, literal_text, physical_dims, shape_text
from reportgen.core.ops.device_details import READ, WRITE, DeviceOpDetails
from reportgen.core.ops.device_records import hlo_op_records
from reportgen.core.ops.op_metrics import OpMetricsDb, metrics_frame
from reportgen.core.ops.perf_env import PerfEnv
from reportgen.core.tools.op_profile import (
    ProfileTotals,
    build_op_profile,
    by_wasted_time,
    framework_op_type,
    hbm_fraction,
    walk,
    wasted_time_fraction,
)
from reportgen.core.tools.pod_viewer import BREAKDOWN_NAMES, bottleneck
from reportgen.core.tools.roofline import roofline_metrics
from reportgen.loaders.hlo import to_plain
from reportgen.loaders.proto import hlo_pb2

PERF = PerfEnv(peak_tera_flops_per_second=100.0, peak_bws_giga_bytes_per_second=[1000.0, 2000.0, 2000.0])


def _db(rows: list[dict], total_time_ps: int) -> OpMetricsDb:
    cols = {k: [r.get(k, 0 if k not in ("name", "category", "provenance", "long_name") else "") for r in rows]
            for k in ("hlo_module_id", "name", "category", "provenance", "long_name", "occurrences", "time_ps",
                      "self_time_ps", "flops", "model_flops", "bytes_accessed")}
    frame = metrics_frame(**{k: np.array(v, dtype=object if isinstance(v[0], str) else np.int64)
                             for k, v in cols.items()})
    op_time = int(frame.loc[frame["category"] != "IDLE", "self_time_ps"].sum())
    return OpMetricsDb(metrics=frame, total_time_ps=total_time_ps, total_op_time_ps=op_time)


def _tree(rows, total=2000, group_by="program", exclude_idle=False, details=None, hlo=None, limit=100):
    db = _db(rows, total)
    records = hlo_op_records(db, details or DeviceOpDetails())
    return build_op_profile(records, hlo or {}, {7: "jit_f"}, PERF, ProfileTotals(db.total_time_ps,
                                                                                   db.total_op_time_ps),
                            group_by, exclude_idle, limit)


def _names(node) -> dict:
    return {node.name: [_names(c) for c in node.children]}


def op(name, category, time, self_time=None, pid=7, occ=1, flops=0, **extra):
    return {"hlo_module_id": pid, "name": name, "category": category, "occurrences": occ, "time_ps": time,
            "self_time_ps": time if self_time is None else self_time, "flops": flops, "model_flops": flops, **extra}


def test_program_tree_groups_dedups_and_nests():
    rows = [
        op("while.1", "while", 900, self_time=100),  # nested parent: counted in totals only
        op("fusion.1", "loop fusion", 500, flops=5_000),
        op("fusion.2", "loop fusion", 300, flops=1_000),
        op("region_3.4", "add", 50),  # names starting with "region" are skipped
        op("copy", "data formatting", 100, pid=9),
        op("IDLE", "IDLE", 1000, pid=0, occ=0),
    ]
    tree = _tree(rows, total=3000)
    assert _names(tree) == {"by_program": [
        {"IDLE": []},
        {"jit_f(7)": [{"loop fusion": [{"fusion.1": []}, {"fusion.2": []}]}]},
        {"main": [{"data formatting": [{"copy": []}]}]},  # program 9 has no HLO module name
    ]}
    program = next(c for c in tree.children if c.name == "jit_f(7)")
    # A program sums self times (the while's 100 included), its categories the ops under them.
    assert program.metrics.raw_time == 100 + 500 + 300
    assert program.children[0].metrics.raw_time == 800
    assert tree.metrics.raw_time == 3000  # the root's time is the device total
    fusion = program.children[0].children[0]
    assert fusion.name == "fusion.1"
    # 5000 flops in 500 ps = 10,000 GFLOP/s of a 100,000 GFLOP/s peak, over 1/6 of the time.
    assert fusion.metrics.flops_utilization == pytest.approx(0.1)
    assert fusion.metrics.flops == pytest.approx(0.1 * 500 / 3000)


def test_duplicates_are_named_after_the_largest():
    rows = [op("fusion.1", "loop fusion", 500, deduplicated_name="fusion"),
            op("fusion.2", "loop fusion", 700, deduplicated_name="fusion"),
            op("single", "loop fusion", 100)]
    details = DeviceOpDetails(ops=pd.DataFrame({
        "hlo_module_id": [7, 7, 7], "name": ["fusion.1", "fusion.2", "single"], "normalized_time_ps": [0.0] * 3,
        "dma_stall_ps": [0] * 3, "deduplicated_name": ["fusion", "fusion", ""], "source_file": [""] * 3,
        "source_line": [0] * 3, "source_stack": [""] * 3, "core_type": [""] * 3}))
    tree = _tree([{k: v for k, v in r.items() if k != "deduplicated_name"} for r in rows], details=details,
                 group_by="category", exclude_idle=True)
    category = tree.children[0]
    assert [c.name for c in category.children] == ["fusion.2 and its duplicate(s)", "single"]
    group = category.children[0]
    assert [c.name for c in group.children] == ["fusion.2", "fusion.1"]
    assert group.num_children == 2 and group.metrics.raw_time == 1200
    assert group.symbol.category == "loop fusion" and group.symbol.provenance == ""  # fusions drop provenance
    assert category.children[1].symbol is not None and category.children[1].children == []  # group of one replaced


def test_children_are_pruned_to_the_limit_below_the_grouping_levels():
    rows = [op(f"add.{i}", "add", 10 + i) for i in range(7)]
    tree = _tree(rows, group_by="category", exclude_idle=True, limit=3)
    category = tree.children[0]
    assert [c.name for c in category.children] == ["add.6", "add.5", "add.4"]
    assert category.num_children == 3  # counted after pruning, as XProf's second pass leaves it


def test_idle_is_left_out_on_request_and_total_is_op_time():
    rows = [op("copy", "copy", 100), op("IDLE", "IDLE", 900, pid=0, occ=0)]
    with_idle = _tree(rows, total=1000)
    without = _tree(rows, total=1000, exclude_idle=True)
    assert "IDLE" in [c.name for c in with_idle.children]
    assert "IDLE" not in [n.name for _, n in walk(without)]
    assert without.metrics.raw_time == 100 and with_idle.metrics.raw_time == 1000


def test_fusion_children_and_bandwidth():
    inner = HloOp("add.1", "add", "non-fusion elementwise", "%add.1 = f32[] add()", ":", "", "", 0, "f32[]")
    fusion = HloOp("fusion.1", "fusion", "loop fusion", "%fusion.1 = …", "a:b", "", "", 0, "f32[]", fused=[inner])
    memory = pd.DataFrame({"hlo_module_id": [7, 7], "name": ["fusion.1", "fusion.1"], "memory_space": [1, 1],
                           "operation_type": [READ, WRITE], "bytes": [1_000_000, 1_000_000]})
    details = DeviceOpDetails(memory=memory)
    tree = _tree([op("fusion.1", "loop fusion", 1_000_000)], details=details, hlo={(7, "fusion.1"): fusion},
                 group_by="category", exclude_idle=True)
    leaf = tree.children[0].children[0]
    assert [c.name for c in leaf.children] == ["add.1"] and leaf.children[0].is_fused
    assert leaf.children[0].metrics.occurrences == 1 and leaf.children[0].metrics.raw_time == 0
    # 2e6 bytes in 1 µs = 2000 GB/s of HBM traffic against a 1000 GB/s peak: capped at 1.
    assert leaf.metrics.bandwidth_utils[0] == 1.0
    assert leaf.metrics.raw_bytes_accessed[0] == pytest.approx(2e6)


def test_wasted_time_is_the_time_below_both_peaks_and_orders_siblings():
    memory = pd.DataFrame({"hlo_module_id": [7, 7, 7, 7], "name": ["busy", "busy", "slow", "slow"],
                           "memory_space": [1] * 4, "operation_type": [READ, WRITE] * 2,
                           "bytes": [250_000, 250_000, 50_000, 50_000]})
    rows = [op("busy", "convolution", 1_000_000, flops=80_000_000),  # 80% of the FLOP peak, 50% HBM
            op("slow", "convolution", 1_000_000, flops=10_000_000),  # 10% FLOPS, 10% HBM
            op("nohbm", "convolution", 2_000_000)]  # no HBM traffic: XProf shows "-"
    tree = _tree(rows, total=4_000_000, group_by="category", exclude_idle=True,
                 details=DeviceOpDetails(memory=memory))
    ops = {c.name: c for c in tree.children[0].children}
    assert wasted_time_fraction(ops["busy"], tree) == pytest.approx(0.25 * (1 - 0.8))
    assert wasted_time_fraction(ops["slow"], tree) == pytest.approx(0.25 * (1 - 0.1))
    assert wasted_time_fraction(ops["nohbm"], tree) is None
    assert hbm_fraction(ops["busy"], tree) == pytest.approx(500_000 / 600_000)
    # In time order nohbm comes first; by wasted time the most wasted first, the one without last.
    assert [c.name for c in tree.children[0].children] == ["nohbm", "busy", "slow"]
    assert [c.name for c in by_wasted_time(tree.children[0].children, tree)] == ["slow", "busy", "nohbm"]


@pytest.mark.parametrize("provenance,shown", [
    ("jit(f)/jit(main)/dot_general:DotGeneral", "DotGeneral"),  # name:type → the type
    ("model/dense/MatMul:tf.linalg/MatMul", "MatMul"),  # the type's last path element
    ("jit(f)/jit(main)/add:", "add"),  # no type: the name's last path element
    (":", "-"), ("", "-"),
])
def test_framework_op_type_is_the_op_type_of_the_provenance(provenance, shown):
    assert framework_op_type(provenance) == shown


def test_empty_db_gives_an_empty_root():
    records = hlo_op_records(OpMetricsDb(), DeviceOpDetails())
    tree = build_op_profile(records, {}, {}, PERF, ProfileTotals(0, 0))
    assert tree.name == "" and tree.children == [] and tree.metrics is None


def _shape(element: str, dims: list[int], minor_to_major=None, tiles=(), memory_space=0) -> hlo_pb2.ShapeProto:
    shape = hlo_pb2.ShapeProto(element_type=hlo_pb2.PrimitiveType.Value(element), dimensions=dims)
    if minor_to_major is not None or tiles or memory_space:
        shape.layout.minor_to_major.extend(minor_to_major or [])
        for tile in tiles:
            shape.layout.tiles.add(dimensions=list(tile))
        shape.layout.memory_space = memory_space
    return shape


def test_shapes_and_layouts_print_as_xla():
    assert shape_text(to_plain(_shape("F32", [2, 3], [1, 0], [(8, 128)], 5))) == "f32[2,3]{1,0:T(8,128)S(5)}"
    assert shape_text(to_plain(_shape("BF16", [], [], [(128,)]))) == "bf16[]{:T(128)}"
    assert shape_text(to_plain(_shape("S32", [4]))) == "s32[4]"
    tup = hlo_pb2.ShapeProto(element_type=hlo_pb2.PrimitiveType.Value("TUPLE"))
    tup.tuple_shapes.extend([_shape("F32", [1], [0]), _shape("PRED", [])])
    assert shape_text(to_plain(tup)) == "(f32[1]{0}, pred[])"
    dims = physical_dims(to_plain(_shape("F32", [5, 3, 100], [2, 1, 0], [(8, 128)])))
    assert [(d.dimension, d.size, d.padded) for d in dims] == [(0, 5, 5), (1, 3, 8), (2, 100, 128)]


def test_constants_and_convolutions_print_as_xla():
    lit = hlo_pb2.LiteralProto(shape=_shape("F32", [3]), f32s=[1.0, 0.5, -2.25])
    assert literal_text(to_plain(lit)) == "{1, 0.5, -2.25}"
    # XLA's one-line literal (literal.cc DenseArrayPrintHelper) pads the innermost lists of a 2-D+ array.
    square = hlo_pb2.LiteralProto(shape=_shape("S32", [2, 2]), s32s=[1, 2, 3, 4])
    assert literal_text(to_plain(square)) == "{ { 1, 2 }, { 3, 4 } }"
    assert literal_text(to_plain(hlo_pb2.LiteralProto(shape=_shape("F32", [11]), f32s=[0.0] * 11))) == "{...}"
    lhs = hlo_pb2.HloInstructionProto(name="x", opcode="parameter", id=1, shape=_shape("F32", [1, 8, 8, 3]))
    rhs = hlo_pb2.HloInstructionProto(name="w", opcode="parameter", id=2, shape=_shape("F32", [3, 3, 3, 16]))
    conv = hlo_pb2.HloInstructionProto(name="conv", opcode="convolution", id=3, operand_ids=[1, 2],
                                       shape=_shape("F32", [1, 8, 8, 16]))
    for _ in range(2):
        conv.window.dimensions.add(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1,
                                   base_dilation=1)
    dn = conv.convolution_dimension_numbers
    dn.input_batch_dimension, dn.input_feature_dimension = 0, 3
    dn.input_spatial_dimensions.extend([1, 2])
    dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension = 2, 3
    dn.kernel_spatial_dimensions.extend([0, 1])
    dn.output_batch_dimension, dn.output_feature_dimension = 0, 3
    dn.output_spatial_dimensions.extend([1, 2])
    text = instruction_text(to_plain(conv), {1: to_plain(lhs), 2: to_plain(rhs)}, {})
    assert text == ("%conv = f32[1,8,8,16] convolution(f32[1,8,8,3] %x, f32[3,3,3,16] %w), "
                    "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")


def test_roofline_bound_by_takes_the_most_used_resource():
    ops = pd.DataFrame({"time_ps": [1000.0, 1000.0, 1000.0], "flops": [90_000.0, 1000.0, 0.0],
                        "model_flops": [90_000.0, 1000.0, 0.0], "bytes_accessed": [10.0, 900.0, 0.0],
                        "has_breakdown": [False, False, False], "hbm_any": [0, 0, 0], "cmem_read": [0, 0, 0],
                        "cmem_write": [0, 0, 0], "vmem_read": [0, 0, 0], "vmem_write": [0, 0, 0]})
    out = roofline_metrics(ops, PERF, "TPU")
    assert list(out["bound_by"]) == ["Compute", "HBM", "Unknown"]
    assert out["measured_flop_rate"].iloc[0] == pytest.approx(90_000.0)  # GFLOP/s
    assert out["operational_intensity"].iloc[1] == pytest.approx(1000 / 900)
    gpu = roofline_metrics(ops, PerfEnv(100.0, [1000.0, 500.0, 500.0]), "GPU")
    assert gpu["bound_by"].iloc[1] == "Shm/L1"  # the same bytes against a slower shared-memory roof


def test_pod_bottleneck_ties_go_to_the_greatest_name():
    values = np.zeros((3, len(BREAKDOWN_NAMES)))
    values[1, BREAKDOWN_NAMES.index("Host compute")] = 5
    values[2, BREAKDOWN_NAMES.index("Input")] = 5
    values[2, BREAKDOWN_NAMES.index("Device compute")] = 5
    assert list(bottleneck(values)) == ["Output", "Host compute", "Input"]


def _gpu_hlo_module() -> bytes:
    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name = "jit_g"
    fused = module.computations.add(name="fused_computation", id=2, is_fusion_computation=True)
    fused.instructions.add(name="param_0", opcode="parameter", id=10, shape=_shape("F32", [4], [0]))
    fused.instructions.add(name="constant.2", opcode="constant", id=11, shape=_shape("F32", []),
                           literal=hlo_pb2.LiteralProto(shape=_shape("F32", []), f32s=[2.0]))
    fused.instructions.add(name="multiply.1", opcode="multiply", id=12, operand_ids=[10, 11],
                           shape=_shape("F32", [4], [0]))
    main = module.computations.add(name="main", id=1)
    main.instructions.add(name="p0", opcode="parameter", id=1, shape=_shape("F32", [4], [0]))
    fusion = main.instructions.add(name="fusion.1", opcode="fusion", fusion_kind="kLoop", id=2, operand_ids=[1],
                                   called_computation_ids=[2], shape=_shape("F32", [4], [0]))
    fusion.metadata.op_name, fusion.metadata.deduplicated_name = "jit(g)/mul", "fusion"
    fusion.metadata.source_file, fusion.metadata.source_line = "/src/model.py", 12
    return proto.SerializeToString()


def test_gpu_xla_ops_take_text_source_and_contents_from_their_hlo_module():
    from reportgen.core.ops.device_details import device_op_details
    from reportgen.core.ops.op_stats import compute_host_op_stats
    from reportgen.core.tools.hlo_stats import hlo_stats_table
    from reportgen.loaders.hlo import hlo_modules
    from reportgen.loaders.xspace import decode_xspace
    from tests.xspace import gpu_space

    space = gpu_space()
    space.plane("/host:metadata", plane_id=99).metadata("jit_g(7)", stats={"Hlo Proto": _gpu_hlo_module(),
                                                                        "program_id": 7})
    line = space.gpu(0).line(1, "Stream #1")
    for i in range(2):
        line.event("loop_multiply_kernel", i * 10_000, 4000, stats={"kernel_details": "regs:2",
                                                                   "hlo_op": "fusion.1", "program_id": 7})
    capture = decode_xspace("host.xplane.pb", space.serialize(), host="host")
    modules = hlo_modules(capture)
    op_stats = compute_host_op_stats(capture, modules)
    details = device_op_details(capture, op_stats.device_db, is_tpu=False, modules=modules)
    records = hlo_op_records(op_stats.device_db, details)
    fusion = records[records["name"] == "fusion.1"].iloc[0]
    expression = "%fusion.1 = f32[4]{0} fusion(f32[4]{0} %p0), kind=kLoop, calls=%fused_computation"
    assert fusion["long_name"] == expression
    assert (fusion["deduplicated_name"], fusion["source_file"], fusion["source_line"]) == ("fusion", "model.py", 12)
    table = hlo_stats_table(records, op_stats.perf_env, "GPU", op_stats.device_db.total_time_ps)
    assert list(table["hlo_op_expression"]) == [expression] and list(table["source_info"]) == ["model.py:12"]
    db = op_stats.device_db
    tree = build_op_profile(records, details.hlo, details.program_names, op_stats.perf_env,
                            ProfileTotals(db.total_time_ps, db.total_op_time_ps), "program", True)
    program = tree.children[0]
    assert program.name == "jit_g(7)"
    leaf = program.children[0].children[0]
    assert leaf.name == "fusion.1" and leaf.symbol.expression == expression
    assert [(c.name, c.symbol.expression) for c in leaf.children] == [
        ("constant.2", "%constant.2 = f32[] constant(2)"),
        ("multiply.1", "%multiply.1 = f32[4]{0} multiply(f32[4]{0} %param_0, f32[] %constant.2)")]
