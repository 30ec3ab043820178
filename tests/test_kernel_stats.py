"""Kernel stats rules on small GPU XSpaces built in code.

Expected values are what XProf 2.24.2 returns for the same spaces (checked
by running its kernel_stats tool on them), including where the write-up in
docs/xprof/kernel_stats.md is silent (vendor-specific TensorCore names, JAX
op eligibility, number parsing corner cases).
"""

from __future__ import annotations

import math

import pytest

from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import parse_tf_op_fullname
from reportgen.core.hlo.model import HloModule
from reportgen.core.ops.kernel_reports import (
    LaunchParams,
    combine_host_reports,
    is_einsum_tensor_core_eligible,
    is_op_tensor_core_eligible,
    kernel_reports,
    kernel_stats_table,
    parse_kernel_details,
)
from reportgen.loaders.hlo import plain_hlo
from reportgen.loaders.proto import hlo_pb2
from reportgen.loaders.xspace import decode_xspace
from tests.xspace import Ref, Space, gpu_space


def decode(space: Space, host: str = "testhost") -> EventTable:
    return EventTable(decode_xspace(f"{host}.xplane.pb", space.serialize(), host=host))


def table_of(space: Space, **kwargs):
    return kernel_stats_table(kernel_reports(decode(space), **kwargs))


def rows_by_name(table) -> dict:
    return {row["kernel_name"]: row for row in table.to_dict("records")}


# --- kernel_details ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ("regs:16\nstatic_shared:0\ndynamic_shared:0\ngrid:1,1,1\nblock:1,1,1\nocc_pct:50.0",
         LaunchParams(16, 0, 0, (1, 1, 1), (1, 1, 1), 50.0)),
        # `occ_pct=13.0` is not key:value; shared memory is static + dynamic.
        ("regs:32 static_shared:8 dynamic_shared:16384 grid:2,1,1 block:32,1,1 occ_pct=13.0",
         LaunchParams(32, 8, 16384, (2, 1, 1), (32, 1, 1), 0.0)),
        # '+' and surrounding whitespace accepted; dims need exactly three numbers.
        ("regs:+5 static_shared:\t7 dynamic_shared:-0 grid:1,2 block:1,2,3,4",
         LaunchParams(5, 7, 0, (1, 1, 1), (1, 1, 1), 0.0)),
        # uint32 overflow is rejected; occupancy parses as a double.
        ("regs:4294967296 static_shared:4294967295 grid:3,4,5 block:6,7,8 occ_pct:1e3",
         LaunchParams(0, 4294967295, 0, (3, 4, 5), (6, 7, 8), 1000.0)),
        # The last valid value wins; a space splits `block: 4,5,6` into two tokens.
        ("regs:7 regs:x regs:9 occ_pct:.5 grid:1,,1 block: 4,5,6", LaunchParams(9, 0, 0, (1, 1, 1), (1, 1, 1), 0.5)),
        ("occ_pct:5.", LaunchParams(occupancy_pct=5.0)),
        ("occ_pct:1_0", LaunchParams()),
        ("occ_pct:+-1", LaunchParams()),
        ("occ_pct:0x10", LaunchParams(occupancy_pct=16.0)),
        ("occ_pct:31.25 occ_pct:bad", LaunchParams(occupancy_pct=31.25)),
        ("regs:0x10 grid:010,1,1", LaunchParams(grid=(10, 1, 1))),
        ("regs:5:6 shm:3 grid:2,2,2 ", LaunchParams(grid=(2, 2, 2))),
        ("block:1,2,3\tgrid:4,5,6", LaunchParams()),  # a tab does not separate tokens
        ("regs: 5", LaunchParams()),
        ("regs:\t12\t", LaunchParams(registers_per_thread=12)),
        ("occ_pct:-5", LaunchParams(occupancy_pct=-5.0)),
        ("occ_pct:1e-50", LaunchParams()),
        # Occupancy is a float32 in XProf's report.
        ("occ_pct:33.3333333333", LaunchParams(occupancy_pct=33.33333206176758)),
    ],
)
def test_parse_kernel_details(details, expected):
    assert parse_kernel_details(details) == expected


@pytest.mark.parametrize("value", ["inf", "INF", "nan", "1e400"])
def test_non_finite_occupancy(value):
    assert not math.isfinite(parse_kernel_details(f"occ_pct:{value}").occupancy_pct)


# --- op names and eligibility -------------------------------------------------------

@pytest.mark.parametrize(
    ("fullname", "name"),
    [
        ("model/dense/MatMul:MatMul", "model/dense/MatMul"),
        ("Iterator::Root:Foo", "Iterator::Root:Foo"),
        ("jit(f)/dot_general:", "jit(f)/dot_general"),
        ("a b:MatMul", "a b:MatMul"),
        ("x/y:dot_general[abc]", "x/y"),
        ("conv/Conv2D", "conv/Conv2D"),
        ("aten::mm:", "aten::mm:"),
    ],
)
def test_op_name_of_a_tf_op(fullname, name):
    assert parse_tf_op_fullname(fullname).name == name


@pytest.mark.parametrize(
    ("op_name", "eligible"),
    [
        ("a/Conv2D", True), ("a/FusedConv2D", True), ("a/Conv2D_1", False), ("a/Conv2DBackpropFilter", True),
        ("a/DepthwiseConv2dNativeBackpropInput", True), ("a/Conv3D", True), ("a/MatMul", True), ("MatMul", False),
        ("a/MatMul_1", False), ("a/FusedMatMul", True), ("a/BatchMatMulV3", True), ("a/CudnnRNN", True),
        ("a/CudnnRNNV3", True), ("a/CudnnRNNForward", True), ("a/XlaDot", True), ("a/XlaDotV2", True),
        ("a/Einsum", False), ("a/matmul", False),
        # JAX names (XProf 2.24.2): dot_general / conv_general_dilated anywhere in the name.
        ("jit(f)/dot_general", True), ("jit(train)/transpose(jvp(dot_general))", True),
        ("a/ragged_dot_general", True), ("a/conv_general_dilated", True), ("a/dot", False),
        ("a/convolution", False),
    ],
)
def test_op_tensor_core_eligibility(op_name, eligible):
    assert is_op_tensor_core_eligible(op_name) is eligible


@pytest.mark.parametrize(
    ("equation", "eligible"), [("ab,bc->ac", True), ("ab->ba", False), ("a,b,c->d", False), ("", False),
                               ("a,b->c->d", False)]
)
def test_einsum_eligibility(equation, eligible):
    assert is_einsum_tensor_core_eligible(equation) is eligible


# --- which events count ------------------------------------------------------------------

def test_only_kernel_events_of_gpu_streams_count():
    space = gpu_space()
    gpu = space.gpu(0)
    stream = gpu.line(10, "Stream #10(Compute)")
    stream.event("sub_ns", 0, 999, stats={"kernel_details": "regs:1"})  # counted, as 0 ns
    stream.event("one_ns", 10_000, 1500, stats={"kernel_details": "regs:1"})
    stream.event("zero", 20_000, 0, stats={"kernel_details": "regs:1"})
    stream.event("md_only", 30_000, 5000, metadata_stats={"kernel_details": "regs:3"})
    stream.event("ref_kd", 40_000, 6000, stats={"kernel_details": Ref("regs:4 grid:2,2,2")})
    stream.event("int_kd", 50_000, 7000, stats={"kernel_details": 5})
    stream.event("empty_kd", 60_000, 7000, stats={"kernel_details": ""})
    stream.event("bytes_kd", 65_000, 7000, stats={"kernel_details": b"regs:2"})
    stream.event("dup_kd", 70_000, 8000, stats=[("kernel_details", "regs:1"), ("kernel_details", "")])
    stream.event("dup_kd2", 80_000, 8000, stats=[("kernel_details", ""), ("kernel_details", "regs:2")])
    stream.event("memcpy", 90_000, 8000, stats={"memcpy_details": "num_bytes:4"})
    gpu.line(-559038734, "TensorFlow Ops").event("derived", 0, 5000, stats={"kernel_details": "regs:1"})
    gpu.line(0xDEADBEF0, "Derived id stored unsigned").event("derived_u32", 0, 5000,
                                                             stats={"kernel_details": "regs:1"})
    # Host events never count, even with kernel_details (CUPTI launch records carry one).
    space.host_plane().lines[0].event("host_launch", 10_000, 5000, stats={"kernel_details": "regs:1"})
    rows = rows_by_name(table_of(space))
    assert set(rows) == {"sub_ns", "one_ns", "ref_kd", "dup_kd2"}
    assert rows["sub_ns"]["total_duration_us"] == 0.0 and rows["sub_ns"]["occurrences"] == 1
    assert rows["one_ns"]["total_duration_us"] == 0.001
    assert rows["ref_kd"]["grid_dim"] == "2,2,2" and rows["ref_kd"]["registers_per_thread"] == 4


def test_no_gpu_plane_means_no_reports():
    space = gpu_space()
    space.plane("/device:TPU:0").line(1, "XLA Ops").event("fusion", 0, 5000, stats={"kernel_details": "regs:1"})
    assert kernel_reports(decode(space)).empty


# --- TensorCore flags -----------------------------------------------------------------------

def test_tensor_core_use_depends_on_vendor():
    space = gpu_space()
    kernels = ["volta_h884gemm", "sm90_xmma_gemm_bf16", "xmma_mfma", "some_mfma_kernel", "ck_gemm_xdl",
               "attn_fwd_kernel", "wmma_k"]
    for ordinal, vendor in enumerate(["Nvidia", "AMD", "", "amd"]):
        plane = space.gpu(ordinal, vendor=vendor) if vendor else space.plane(f"/device:GPU:{ordinal}")
        line = plane.line(1, "Stream #1")
        for i, kernel in enumerate(kernels):
            line.event(f"{vendor or 'none'}:{kernel}", i * 10_000, 5000, stats={"kernel_details": "regs:1"})
    using = {name for name, row in rows_by_name(table_of(space)).items() if row["is_kernel_using_tensor_core"]}
    assert using == {
        "Nvidia:volta_h884gemm", "Nvidia:sm90_xmma_gemm_bf16",
        "AMD:some_mfma_kernel", "AMD:xmma_mfma", "AMD:ck_gemm_xdl", "AMD:attn_fwd_kernel", "AMD:wmma_k",
    }


def test_op_eligibility_of_kernels():
    space = gpu_space()
    line = space.gpu(0).line(1, "Stream #1")
    cases = [
        ("k_matmul", {"tf_op": "model/dense/MatMul:MatMul"}, True, "model/dense/MatMul"),
        ("k_einsum2", {"tf_op": "e/Einsum:Einsum", "equation": "ab,bc->ac"}, True, "e/Einsum"),
        ("k_einsum1", {"tf_op": "e/Einsum:Einsum", "equation": "ab->ba"}, False, "e/Einsum"),
        # A TensorCore kernel makes its TF op eligible...
        ("turing_fp16_s1688cudnn", {"tf_op": "foo:Bar"}, True, "foo"),
        # ...but without a tf_op there is no op and nothing is eligible.
        ("volta_h884gemm", {}, False, ""),
        ("k_ref", {"tf_op": Ref("gradients/BatchMatMulV2:BatchMatMulV2")}, True, "gradients/BatchMatMulV2"),
    ]
    for i, (name, stats, _eligible, _op) in enumerate(cases):
        line.event(name, i * 10_000, 5000, stats={"kernel_details": "regs:2", **stats})
    rows = rows_by_name(table_of(space))
    for name, _stats, eligible, op in cases:
        assert (rows[name]["is_op_tensor_core_eligible"], rows[name]["op_name"]) == (eligible, op), name


def test_xla_kernels_take_their_op_from_hlo_metadata():
    space = gpu_space()
    line = space.gpu(0).line(1, "Stream #1")
    line.event("fusion_kernel", 0, 5000, stats={"kernel_details": "regs:2", "hlo_op": "fusion.1::dot.3",
                                                "program_id": 7})
    line.event("plain_xla", 10_000, 5000, stats={"kernel_details": "regs:2", "hlo_op": "add.2", "program_id": 7,
                                                 "tf_op": "a/MatMul:MatMul"})
    proto = hlo_pb2.HloProto()
    computation = proto.hlo_module.computations.add()
    for name, op_name in (("dot.3", "jit(f)/dot_general"), ("add.2", "jit(f)/add")):
        instruction = computation.instructions.add()
        instruction.name = name
        instruction.metadata.op_name = op_name
    rows = rows_by_name(table_of(space, modules={7: HloModule(7, "jit_f", plain_hlo(proto))}))
    # The framework op's name without its (empty) type, as XProf 2.24.2 lists a real capture's XLA kernels
    # (tests/test_xla_gpu_parity.py).
    assert rows["fusion_kernel"]["op_name"] == "jit(f)/dot_general"
    assert rows["fusion_kernel"]["is_op_tensor_core_eligible"]
    # The HLO op name replaces the tf_op one; eligibility from the tf_op stays.
    assert rows["plain_xla"]["op_name"] == "jit(f)/add" and rows["plain_xla"]["is_op_tensor_core_eligible"]
    # Without HLO metadata XProf keeps what the tf_op gives.
    rows = rows_by_name(table_of(space))
    assert rows["fusion_kernel"]["op_name"] == "" and rows["plain_xla"]["op_name"] == "a/MatMul"


# --- aggregation, order, totals -------------------------------------------------------------

def test_merging_across_planes_and_ordering():
    space = gpu_space()
    first = space.gpu(0).line(1, "Stream #1")
    first.event("kA", 0, 5000, stats={"kernel_details": "regs:8 occ_pct:25"})
    first.event("kA", 10_000, 3000, stats={"kernel_details": "regs:8 occ_pct:75"})
    first.event("kB", 20_000, 8000, stats={"kernel_details": "regs:8 grid:2,1,1"})
    first.event("kB", 30_000, 8000, stats={"kernel_details": "regs:8 grid:1,2,1"})
    first.event("kC", 40_000, 8000, stats={"kernel_details": "regs:8 grid:1,2,1", "tf_op": "b:B"})
    first.event("kC", 50_000, 8000, stats={"kernel_details": "regs:8 grid:1,2,1", "tf_op": "a:A"})
    second = space.gpu(1).line(1, "Stream #1")
    second.event("kA", 0, 7000, stats={"kernel_details": "regs:8 occ_pct:50"})
    second.event("Ka", 0, 16000, stats={"kernel_details": "regs:8"})
    table = table_of(space)
    assert list(zip(table["kernel_name"], table["grid_dim"], table["op_name"])) == [
        ("Ka", "1,1,1", ""), ("kA", "1,1,1", ""), ("kB", "1,2,1", ""), ("kB", "2,1,1", ""),
        ("kC", "1,2,1", "a"), ("kC", "1,2,1", "b"),
    ]
    ka = table.iloc[1]
    # Occupancy is not in the key: the first launch (plane 0, first event) supplies it.
    assert (ka["occurrences"], ka["total_duration_us"], ka["min_duration_us"], ka["max_duration_us"],
            ka["avg_duration_us"], ka["occupancy_pct"]) == (3, 0.015, 0.003, 0.007, 0.005, 25.0)
    assert list(table["rank"]) == [1, 2, 3, 4, 5, 6]


def test_totals_average_and_shared_memory_wrap():
    space = gpu_space()
    line = space.gpu(0).line(1, "Stream #1")
    line.event("avg", 0, 1000, stats={"kernel_details": "regs:1"})
    line.event("avg", 10_000, 2000, stats={"kernel_details": "regs:1"})
    line.event("avg", 20_000, 2999, stats={"kernel_details": "regs:1"})
    line.event("ov", 30_000, 5000, stats={"kernel_details": "static_shared:4294967295 dynamic_shared:2"})
    line.event("big", 40_000, 2**53 + 1001, stats={"kernel_details": "regs:1"})
    rows = rows_by_name(table_of(space))
    # 1 + 2 + 2 ns = 5 ns over 3 launches: integer division gives 1 ns.
    assert (rows["avg"]["total_duration_us"], rows["avg"]["avg_duration_us"]) == (0.005, 0.001)
    assert rows["ov"]["shmem_bytes"] == 1  # uint32 addition in XProf
    assert rows["big"]["total_duration_us"] == 9007199254.741


def test_equal_totals_break_ties_on_the_key():
    space = gpu_space()
    line = space.gpu(0).line(1, "Stream #1")
    launches = [
        ("tie", "regs:2 grid:1,1,2", None), ("tie", "regs:1 grid:1,1,2", None),
        ("tie", "regs:1 grid:1,1,1 block:3,1,1", None),
        ("tie", "regs:1 grid:1,1,1 block:2,1,1 static_shared:5", None),
        ("tie", "regs:1 grid:1,1,1 block:2,1,1 dynamic_shared:5", None),
        ("tie", "regs:1 grid:1,1,1 block:2,1,1 dynamic_shared:5", "z:MatMul"),
        ("tie", "regs:1 grid:1,1,1 block:2,1,1 dynamic_shared:5", "y/MatMul:MatMul"),
        ("tie", "regs:1 grid:1,1,1 block:2,1,1 dynamic_shared:5", "y/x:MatMul"),
        ("ti", "regs:9", None), ("tie\u00e9", "regs:9", None), ("tieZ", "regs:9", None),
        ("ti_h884", "regs:9", "y/x:MatMul"),
    ]
    for i, (name, details, tf_op) in enumerate(launches):
        stats = {"kernel_details": details, **({"tf_op": tf_op} if tf_op else {})}
        line.event(name, i * 10_000, 5000, stats=stats)
    table = table_of(space)
    got = list(zip(table["kernel_name"], table["registers_per_thread"], table["shmem_bytes"], table["block_dim"],
                   table["grid_dim"], table["is_op_tensor_core_eligible"], table["op_name"]))
    assert got == [
        ("ti", 9, 0, "1,1,1", "1,1,1", False, ""),
        ("ti_h884", 9, 0, "1,1,1", "1,1,1", True, "y/x"),
        ("tie", 1, 5, "2,1,1", "1,1,1", False, ""),
        ("tie", 1, 5, "2,1,1", "1,1,1", False, "y/x"),
        ("tie", 1, 5, "2,1,1", "1,1,1", False, "z"),
        ("tie", 1, 5, "2,1,1", "1,1,1", True, "y/MatMul"),
        ("tie", 1, 5, "2,1,1", "1,1,1", False, ""),  # static shared memory sorts after dynamic-only
        ("tie", 1, 0, "3,1,1", "1,1,1", False, ""),
        ("tie", 1, 0, "1,1,1", "1,1,2", False, ""),
        ("tie", 2, 0, "1,1,1", "1,1,2", False, ""),
        ("tieZ", 9, 0, "1,1,1", "1,1,1", False, ""),
        ("tie\u00e9", 9, 0, "1,1,1", "1,1,1", False, ""),
    ]


# --- hosts -------------------------------------------------------------------------------------

def many_kernels_host(host: str, offset: int) -> Space:
    space = gpu_space(host)
    line = space.gpu(0).line(1, "Stream #1")
    start = 0
    for i in range(1200):
        duration = 1000 * (5000 - 3 * i - offset)
        line.event(f"k{i:04d}", start, duration, stats={"kernel_details": f"regs:{i % 7} occ_pct:{offset * 10 + 1}"})
        start += duration + 1000
    for _ in range(1 if offset else 2):
        duration = 1000 * (9000 if offset else 4500)
        line.event("same", start, duration, stats={"kernel_details": f"regs:1 occ_pct:{offset + 5}"})
        start += duration + 1000
    return space


def test_hosts_are_concatenated_resorted_and_cut_to_1000():
    per_host = {host: kernel_reports(decode(many_kernels_host(host, i), host)) for i, host in
                enumerate(["hostA", "hostB"])}
    assert all(len(r) == 1000 for r in per_host.values())  # each host keeps its top 1000
    table = kernel_stats_table(combine_host_reports(per_host))
    assert len(table) == 1000
    # Equal reports of two hosts are not merged; equal totals keep host order.
    head = table.head(4)
    assert list(zip(head["kernel_name"], head["host"], head["occurrences"], head["occupancy_pct"])) == [
        ("same", "hostA", 2, 5.0), ("same", "hostB", 1, 6.0), ("k0000", "hostA", 1, 1.0), ("k0000", "hostB", 1, 11.0)
    ]
    last = table.iloc[-1]
    assert (last["kernel_name"], last["host"], last["total_duration_us"]) == ("k0498", "hostB", 3.505)
