"""XProf's rules on small XSpaces built in code: nesting and self time, the
op-stack quirk, IDLE per thread, grouping, step breakdown, summaries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reportgen.capture import NO_STRING, search_owners
from reportgen.core.events.grouping import group_events
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import JAX, TENSORFLOW, TF_DATA, UNKNOWN, parse_tf_op_fullname
from reportgen.core.ops.host_db import host_op_metrics_db
from reportgen.core.ops.op_stats import combine_op_stats, compute_host_op_stats, step_intersection
from reportgen.core.steps.step_db import StepDb
from reportgen.core.tools.input_pipeline import StepSummary, analyze_steps, classify_input
from reportgen.loaders.hlo import hlo_modules
from reportgen.loaders.proto import hlo_pb2
from tests.xspace import Ref, Space, U

US = 1_000_000  # ps


def _host_db(space: Space):
    table = EventTable(space.capture(sort_lines=True))
    grouping = group_events(table)
    return host_op_metrics_db(table, grouping.is_eager)


def _op(db, name: str):
    rows = db.metrics[db.metrics["name"] == name]
    assert len(rows) == 1, f"{name}: {len(rows)} rows"
    return rows.iloc[0]


@pytest.mark.parametrize("fullname,expected", [
    ("model/dense/MatMul:MatMul", (TENSORFLOW, "model/dense/MatMul", "MatMul")),
    ("Iterator::Root::Map", (TF_DATA, "Iterator::Root::Map", "Dataset")),
    ("jit(f)/jit(main)/dot_general:dot_general", (JAX, "jit(f)/jit(main)/dot_general", "dot_general")),
    ("jit(f)/transpose:transpose[permutation=(1, 0)]", (JAX, "jit(f)/transpose", "transpose")),
    ("my/scope/MatMul_3:", (TENSORFLOW, "my/scope/MatMul_3", "MatMul")),
    ("MemcpyHToD", ("MemcpyHToD", "MemcpyHToD", "MemcpyHToD")),
    ("user trace", (UNKNOWN, "user trace", "")),
    ("name with space:Type", (UNKNOWN, "name with space:Type", "")),
])
def test_tf_op_names_parse_like_xprof(fullname, expected):
    op = parse_tf_op_fullname(fullname)
    assert (op.category, op.name, op.type) == expected


def test_self_time_excludes_nested_ops_and_idle_is_per_thread():
    space = Space()
    host = space.plane("/host:CPU")
    host.line(1).event("outer:MatMul", 0, 100 * US).event("inner:Relu", 10 * US, 30 * US) \
        .event("later:Relu", 50 * US, 10 * US).event("user annotation", 60 * US, 5 * US)
    host.line(2).event("a:Add", 0, 10 * US).event("b:Add", 50 * US, 10 * US)
    db = _host_db(space)
    outer = _op(db, "outer")
    assert outer["time_ps"] == 100 * US and outer["self_time_ps"] == 60 * US
    relu = db.metrics[db.metrics["category"] == "Relu"]
    assert relu["occurrences"].sum() == 2
    # Thread 1 is busy its whole span; thread 2 spans 60 µs with 20 µs of ops.
    idle = _op(db, "IDLE")
    assert idle["self_time_ps"] == 40 * US and idle["occurrences"] == 0
    assert db.total_time_ps == 160 * US
    assert db.total_op_time_ps == 120 * US
    assert "user annotation" not in set(db.metrics["name"])


def test_an_end_pops_the_op_stack_down_to_its_own_begin():
    """A [0,10] and C [2,10] overlap without nesting in B's favour: A's end
    discards C, whose end then finds nothing (XProf's OpStack)."""
    space = Space()
    space.plane("/host:CPU").line(1).event("a:MatMul", 0, 10 * US).event("c:Relu", 2 * US, 8 * US) \
        .event("b:Add", 10 * US, 2 * US)
    db = _host_db(space)
    names = set(db.metrics["name"])
    assert {"a", "b"} <= names and "c" not in names
    assert _op(db, "a")["self_time_ps"] == 10 * US


def test_tf_op_stat_adds_an_op_on_the_same_span():
    space = Space()
    space.plane("/host:CPU").line(1).event("MemoryAllocation", 5 * US, 0, tf_op="scope/conv:Conv2D") \
        .event("scope/conv:Conv2D", 0, 10 * US)
    db = _host_db(space)
    assert _op(db, "scope/conv")["occurrences"] == 2


def _two_step_capture():
    space = Space()
    host = space.plane("/host:CPU")
    py = host.line(1, "python")
    worker = host.line(2, "tf_Compute")
    for k, start in enumerate((0, 200 * US)):
        py.event("train", start, 100 * US, _r=1, step_num=3 + k, _pt=1, _p=10 + k)
        py.event("IteratorGetNextOp::DoCompute", start + 5 * US, 20 * US)
        # The worker's op belongs to the step through the producer/consumer link.
        worker.event("FunctionRun", start + 30 * US, 60 * US, _r=1, _ct=1, _c=10 + k)
        worker.event("dense/MatMul:MatMul", start + 40 * US, 40 * US)
    worker.event("stray:Add", 150 * US, 10 * US)
    return space.capture(sort_lines=True)


def test_grouping_follows_roots_nesting_and_context_links():
    table = EventTable(_two_step_capture())
    g = group_events(table)
    names = table.names_of(slice(None))
    assert g.group_names == {0: "train 3", 1: "train 4"}
    matmul = np.flatnonzero(names == "dense/MatMul:MatMul")
    assert list(g.group_id[matmul]) == [0, 1]
    # A FunctionRun reached from a same-level root does not open its own group.
    assert list(g.group_id[names == "FunctionRun"]) == [0, 1]
    assert g.group_id[np.flatnonzero(names == "stray:Add")[0]] == -1
    assert [g.step_names.get(int(r)) for r in np.flatnonzero(names == "train")] == ["train 3", "train 4"]


def _groups(space: Space, name: str) -> list[int]:
    table = EventTable(space.capture(sort_lines=True))
    return list(group_events(table).group_id[table.names_of(slice(None)) == name])


def test_context_links_carry_the_step_to_other_threads():
    space = Space()
    host = space.plane("/host:CPU")
    host.line(1, "python").event("train", 0, 1000, _r=1, step_num=1).event("FunctionRun", 10, 500, _pt=1, _p=42)
    worker = host.line(2, "tf_Compute")
    worker.event("ExecutorState::Process", 20, 100, _ct=1, _c=42)
    worker.event("MemoryAllocation", 30, 1).event("MemoryAllocation", 700, 1)  # the second is outside
    assert _groups(space, "MemoryAllocation") == [0, -1]
    assert _groups(space, "ExecutorState::Process") == [0]


def test_a_root_nested_in_a_root_of_its_level_opens_no_group():
    space = Space()
    space.plane("/host:CPU").line(1, "python").event("train", 0, 1000, _r=1).event("FunctionRun", 10, 100, _r=1) \
        .event("train", 2000, 1000, _r=1)
    assert _groups(space, "train") == [0, 1] and _groups(space, "FunctionRun") == [0]


def test_captures_grouped_by_the_profiler_keep_their_group_ids():
    space = Space()
    host = space.plane("/host:CPU")
    host.stat_id("group_id")
    host.line(1).event("train", 0, 1000, _r=1).event("MemoryAllocation", 5, 1, group_id=41)
    assert _groups(space, "MemoryAllocation") == [41]
    assert _groups(space, "train") == [-1]


def test_tf_loop_ops_disable_grouping():
    space = Space()
    space.plane("/host:CPU").line(1, "python").event("train", 0, 1000, _r=1).event("WhileOp-EvalCond", 10, 10)
    assert _groups(space, "train") == [-1]


def test_batching_events_are_roots_at_the_level_preprocessing_gives_them():
    """`ProcessBatch` is a level-2 root (its stored `_r` overridden), so it
    groups the level-1 `BatchingSessionRun` events it encloses."""
    space = Space()
    line = space.plane("/host:CPU").line(1, "batch")
    line.event("ProcessBatch", 0, 1000, _r=1).event("BatchingSessionRun", 10, 100)
    line.event("BatchingSessionRun", 2000, 100)
    assert _groups(space, "ProcessBatch") == [0]
    assert _groups(space, "BatchingSessionRun") == [0, 1]


def test_stat_columns_read_the_first_or_the_last_of_duplicates():
    """XProf's GetStat sees an event's first copy of a stat; converters that walk
    every stat keep the last. Metadata stats are never an event's."""
    space = Space()
    plane = space.plane("/host:CPU")
    plane.line(1).event("op", 0, 10, group_id=1).event("other", 20, 10)
    event = plane.proto.lines[0].events[0]
    plane.add_stats(event, {"group_id": 2, "tf_op": "a:A"})
    plane.add_stats(event, {"tf_op": "b:B"})
    plane.add_stats(plane.proto.event_metadata[plane.metadata("other")], {"group_id": 7})
    table = EventTable(space.capture(sort_lines=True))
    assert list(table.int_stat("group_id")[0]) == [1, 0] and list(table.int_stat("group_id", last=True)[0]) == [2, 0]
    assert list(table.int_stat("group_id")[1]) == [True, False]
    assert list(table.strings(table.str_stat("tf_op"))) == ["a:A", ""]
    assert list(table.strings(table.str_stat("tf_op", last=True))) == ["b:B", ""]


def test_stats_read_at_some_events_are_the_columns_at_those_events():
    """`int_stat_at` and friends (a stat read on a few events, no column for every event) give what
    the full columns give there: first or last of duplicates, IntValue against IntOrUint, strings and
    refs, doubles, absent stats, events in any order and repeated."""
    space = Space()
    plane = space.plane("/host:CPU")
    line = plane.line(1)
    line.event("a", 0, 10, stats=[("v", 1), ("v", U(2**63 + 5)), ("s", "x"), ("d", 1.5), ("s", Ref("y"))])
    line.event("b", 20, 10, stats=[("v", U(7)), ("d", 2), ("d", 0.25), ("s", 3)])
    line.event("c", 40, 10)
    line.event("d", 60, 10, stats=[("v", -4), ("s", "z"), ("d", "not a double")])
    table = EventTable(space.capture(sort_lines=True))
    rows = np.array([3, 0, 2, 1, 3, 0])
    for last in (False, True):
        for uint_ok in (False, True):
            values, present = table.int_stat("v", uint_ok=uint_ok, last=last)
            at_values, at_present = table.int_stat_at("v", rows, uint_ok=uint_ok, last=last)
            assert list(at_values) == list(values[rows]) and list(at_present) == list(present[rows])
        assert list(table.str_stat_at("s", rows, last=last)) == list(table.str_stat("s", last=last)[rows])
        values, present = table.double_stat("d", last=last)
        at_values, at_present = table.double_stat_at("d", rows, last=last)
        assert list(at_values) == list(values[rows]) and list(at_present) == list(present[rows])
        assert list(table.int_stat_at("absent", rows, last=last)[1]) == [False] * len(rows)
        assert list(table.str_stat_at("absent", rows, last=last)) == [NO_STRING] * len(rows)
    assert list(table.int_stat_at("v", np.zeros(0, np.int64))[0]) == []
    table.forget_stats()  # the columns are extracted again, the same
    assert list(table.int_stat("v", last=True)[0]) == list(table.int_stat_at("v", np.arange(4), last=True)[0])


def test_a_stat_every_read_event_carries_once_is_read_at_its_positions():
    """Where each event read carries the stat exactly once (a memory event's stats), `int_stat_at` takes
    the stat's positions as they are; as many stats as events, but one event with two and another with
    none, is still searched."""
    space = Space()
    line = space.plane("/host:CPU").line(1)
    line.event("a", 0, 10, stats=[("once", 1), ("twice", 5), ("twice", 6)])
    line.event("b", 20, 10, stats=[("once", U(2**63 + 1)), ("twice", 7)])
    line.event("c", 40, 10, stats=[("once", -3)])
    table = EventTable(space.capture(sort_lines=True))
    rows = np.arange(3)
    for last in (False, True):
        for name in ("once", "twice"):
            for uint_ok in (False, True):
                values, present = table.int_stat(name, uint_ok=uint_ok, last=last)
                at_values, at_present = table.int_stat_at(name, rows, uint_ok=uint_ok, last=last)
                assert list(at_values) == list(values) and list(at_present) == list(present)
    assert list(table.int_stat_at("once", rows, uint_ok=False)[0]) == [1, 0, -3]
    assert list(table.int_stat_at("twice", rows, last=True)[0]) == [6, 7, 0]
    assert list(table.int_stat_at("twice", rows)[1]) == [True, True, False]
    assert list(table.int_stat_at("once", rows[::-1])[0]) == [-3, 2**63 + 1 - 2**64, 1]  # not in stored order


def test_step_breakdown_with_priorities_and_unknown_time():
    stats = compute_host_op_stats(_two_step_capture(), {})
    steps = stats.step_db.steps
    assert list(steps["name"]) == ["train 3", "train 4"]
    assert list(steps["duration_ps"]) == [100 * US] * 2
    a = analyze_steps(stats.step_db, "CPU_ONLY")
    first = a.steps.iloc[0]
    # Input: IteratorGetNext 20 µs; host compute: MatMul 40 µs (FunctionRun is not compute); rest unknown.
    assert first["input"] == pytest.approx(0.020)
    assert first["host_compute"] == pytest.approx(0.040)
    assert first["other"] == pytest.approx(0.040)
    assert a.bottleneck.input_bound == "HIGHLY"


def test_overlapping_spans_go_to_the_higher_priority_type():
    space = Space()
    py = space.plane("/host:CPU").line(1, "python")
    py.event("train", 0, 100 * US, _r=1, step_num=1)
    py.event("work:MatMul", 10 * US, 50 * US)
    py.event("IteratorGetNextAsOptional", 30 * US, 50 * US)  # overlaps the MatMul
    a = analyze_steps(compute_host_op_stats(space.capture(sort_lines=True), {}).step_db, "CPU_ONLY")
    step = a.steps.iloc[0]
    assert step["input"] == pytest.approx(0.050)
    assert step["host_compute"] == pytest.approx(0.020)


def test_step_summary_follows_xprof_stat():
    assert StepSummary.of([]).average == 0.0
    assert StepSummary.of([5.0]).standard_deviation == 0.0
    assert math.isnan(StepSummary.of([0.0]).standard_deviation)  # XProf prints -nan here
    s = StepSummary.of([1.0, 2.0, 3.0])
    assert (s.average, s.minimum, s.maximum) == (2.0, 1.0, 3.0)
    assert s.standard_deviation == pytest.approx(1.0)


def test_input_classification_thresholds():
    assert classify_input(20.0, 0)[2] == "HIGHLY"
    assert classify_input(5.0, 0)[2] == "MODERATELY"
    assert classify_input(4.9, 3.0)[2] == "POTENTIALLY"
    assert classify_input(4.9, 2.9)[2] == "NOT"


def _step_db(spans: list[tuple[int, int]]) -> StepDb:
    db = StepDb()
    rows = db.steps.iloc[0:0].copy()
    for i, (b, e) in enumerate(spans):
        rows.loc[i] = {**{c: 0 for c in rows.columns}, "step_num": i, "core": 1, "name": "",
                       "begin_ps": b, "duration_ps": e - b}
    return StepDb(steps=rows.astype({c: "int64" for c in rows.columns if c != "name"}))


def test_step_intersection_aligns_hosts_by_overlap():
    chief = _step_db([(0, 10), (10, 20), (20, 30)])
    other = _step_db([(-10, 0), (0, 10), (10, 20), (20, 30), (30, 40)])
    inter = step_intersection({0: chief, 1: other})
    assert inter.num_steps == 3 and not inter.empty_intersect
    assert inter.first_index == {0: 0, 1: 1}


def test_combined_hosts_sum_cores_and_renumber_steps():
    a = compute_host_op_stats(_two_step_capture(), {})
    b = compute_host_op_stats(_two_step_capture(), {})
    run = combine_op_stats([a, b])
    assert run.step_db.step_numbers == [0, 1]
    assert sorted(set(run.step_db.steps["core"])) == [1, 1001]
    assert run.environment.host_count == 1 and run.environment.task_count == 2
    assert run.host_db.total_time_ps == 2 * a.host_db.total_time_ps


def test_gpu_kernels_join_the_launching_step_and_derive_the_steps_line():
    """A GPU capture saved without grouping: kernels take the step of the host
    thread that launched them (correlation id) and form the device step."""
    space = Space()
    host = space.plane("/host:CPU")
    py = host.line(1, "python")
    gpu = space.plane("/device:GPU:0", plane_id=1).line(7, "Stream #7(Compute)")
    for k, start in enumerate((0, 1000 * US)):
        py.event("train", start, 500 * US, _r=1, step_num=k)
        py.event("cudaLaunchKernel", start + 10 * US, 5 * US, correlation_id=100 + k)
        gpu.event("volta_sgemm", start + 100 * US, 300 * US, correlation_id=100 + k)
    stats = compute_host_op_stats(space.capture(sort_lines=True), {})
    steps = stats.step_db.steps
    assert list(steps["name"]) == ["", ""]  # device steps: XProf does not name them
    # With a device, only device step events count: the step is the kernels' span.
    assert list(steps["duration_ps"]) == [300 * US] * 2
    a = analyze_steps(stats.step_db, "GPU")
    assert list(a.steps["step_name"]) == ["0", "1"]
    assert a.steps.iloc[0]["device_compute"] == pytest.approx(0.300)
    assert a.steps.iloc[0]["other"] == 0
    assert stats.device_db.compute_32bit_ps == 600 * US


def _hlo_proto(module: str, instructions: list[tuple[str, str, str, str]]) -> bytes:
    """HloProto bytes: (name, opcode, fusion kind, op_name) per instruction."""
    proto = hlo_pb2.HloProto()
    proto.hlo_module.name = module
    computation = proto.hlo_module.computations.add()
    for name, opcode, kind, op_name in instructions:
        instruction = computation.instructions.add()
        instruction.name, instruction.opcode, instruction.fusion_kind = name, opcode, kind
        instruction.metadata.op_name = op_name
    return proto.SerializeToString()


def test_gpu_xla_kernels_need_their_hlo_instruction_and_merge_consecutive_launches():
    space = Space()
    meta = space.plane("/host:metadata")
    md = meta.proto.event_metadata[meta.metadata("jit_f(7)")]
    meta.add_stats(md, {"Hlo Proto": _hlo_proto("jit_f", [("fusion.1", "fusion", "kLoop", "jit(f)/mul"),
                                                          ("dot.2", "dot", "", "jit(f)/dot_general")]),
                        "program_id": 7})
    space.plane("/host:CPU").line(1).event("train", 0, 100 * US, _r=1, step_num=0)
    stream = space.plane("/device:GPU:0", plane_id=1).line(7, "Stream #7(Compute)")
    stream.event("loop_fusion_kernel", 0, 10 * US, hlo_op="fusion.1", program_id=7, correlation_id=1)
    stream.event("loop_fusion_kernel", 10 * US, 5 * US, hlo_op="fusion.1", program_id=7, correlation_id=2)
    stream.event("gemm", 20 * US, 30 * US, hlo_op="while::dot.2", program_id=7, correlation_id=3)
    stream.event("other_kernel", 60 * US, 5 * US, hlo_op="not_in_module", program_id=7, correlation_id=4)
    stream.event("fusion_again", 70 * US, 5 * US, hlo_op="fusion.1", program_id=7, correlation_id=5)
    capture = space.capture(sort_lines=True)
    db = compute_host_op_stats(capture, hlo_modules(capture)).device_db
    fusion = _op(db, "fusion.1")
    # Every kernel is an occurrence, as XProf 2.24.2 counts them on a real capture (a cuDNN convolution's three
    # kernels are three: tests/test_xla_gpu_parity.py); consecutive launches are one execution for FLOPs and bytes.
    assert fusion["occurrences"] == 3 and fusion["time_ps"] == 20 * US
    assert fusion["category"] == "loop fusion" and fusion["provenance"] == "jit(f)/mul:"
    assert _op(db, "dot.2")["category"] == "dot"
    assert "not_in_module" not in set(db.metrics["name"])
    # The unknown kernel still counts towards the device's span (IDLE).
    assert db.total_time_ps == 75 * US


@pytest.mark.parametrize("planes", [["/host:CPU"], ["Task Environment"], ["/host:CPU", "/device:GPU:0"],
                                    ["/device:TPU:0"]])
def test_captures_without_events_give_empty_results(planes):
    space = Space()
    for i, name in enumerate(planes):
        space.plane(name, plane_id=i)
    stats = compute_host_op_stats(space.capture(sort_lines=True), {})
    assert len(stats.step_db) == 0
    assert stats.host_db.total_op_time_ps == 0 and stats.device_db.total_op_time_ps == 0
    a = analyze_steps(stats.step_db, stats.environment.hardware_type, stats.host_db)
    assert a.bottleneck.input_bound is None and a.step_time.average == 0.0


def test_host_result_pickles():
    import pickle

    stats = compute_host_op_stats(_two_step_capture(), {})
    copy = pickle.loads(pickle.dumps(stats))
    assert copy.step_db.step_numbers == stats.step_db.step_numbers
    assert copy.host_db.metrics.equals(stats.host_db.metrics)


def test_tf_stats_tensorcore_utilization_is_the_share_of_an_ops_kernel_time_on_tensor_cores():
    from reportgen.core.tools.overview import overview_view
    from reportgen.core.tools.tf_stats import framework_op_stats_table

    space = Space()
    space.plane("/host:CPU").line(1, "python").event("train", 0, 1000 * US, _r=1, step_num=0)
    gpu = space.plane("/device:GPU:0", plane_id=1)
    gpu.add_stats(gpu.proto, {"device_vendor": "Nvidia"})
    stream = gpu.line(7, "Stream #7(Compute)")
    stream.event("volta_h884gemm", 0, 300 * US, tf_op="d/MatMul:MatMul", kernel_details="regs:8")
    stream.event("sgemm", 400 * US, 100 * US, tf_op="d/MatMul:MatMul", kernel_details="regs:8")
    stream.event("relu_kernel", 600 * US, 50 * US, tf_op="d/Relu:Relu", kernel_details="regs:8")
    run = combine_op_stats([compute_host_op_stats(space.capture(sort_lines=True), {})])
    table = framework_op_stats_table(run, exclude_idle=True).set_index("operation")
    assert table.loc["d/MatMul", "gpu_tensorcore_utilization"] == pytest.approx(0.75)
    assert table.loc["d/Relu", "gpu_tensorcore_utilization"] == 0.0
    # The overview's top device ops read the same per-op kernel view.
    top = {op["name"]: op for op in overview_view("host", run).top_ops}
    assert (top["d/MatMul"]["tensor_core_eligible"], top["d/MatMul"]["tensor_core_used"]) == (True, True)
    assert (top["d/Relu"]["tensor_core_eligible"], top["d/Relu"]["tensor_core_used"]) == (False, False)


def test_per_thread_op_totals_equal_a_groupby_and_sum_exactly():
    """The host db's (thread, op) totals are numpy aggregations: the same groups in the same order as
    a pandas groupby (first appearance), and int64 sums exact beyond 2^53 ps."""
    import pandas as pd

    from reportgen.core.ops.host_db import _line_op_totals

    rng = np.random.default_rng(7)
    n = 2_000
    completed = pd.DataFrame({
        "line": rng.integers(3, 9, n), "op": rng.integers(0, 40, n), "eager": rng.random(n) < 0.1,
        "time": rng.integers(2**50, 2**52, n), "self": rng.integers(0, 2**50, n), "begin": np.arange(n)})
    expected = completed.groupby(["line", "op"], sort=False).agg(
        occurrences=("time", "size"), time_ps=("time", "sum"), self_time_ps=("self", "sum"),
        is_eager=("eager", "any"), min_time_ps=("time", "min")).reset_index()
    totals = _line_op_totals(completed)
    for column in expected.columns:
        assert totals[column].tolist() == expected[column].tolist(), column
    assert int(totals["time_ps"].max()) > 2**53
    assert all(len(v) == 0 for v in _line_op_totals(completed.iloc[:0]).values())


def test_one_database_with_a_repeated_key_is_still_merged():
    """Combining one database returns it as it is only when its keys are distinct."""
    from reportgen.core.ops.op_metrics import combine_metrics, metrics_frame

    frame = metrics_frame(hlo_module_id=np.zeros(3, np.int64), name=np.array(["a", "b", "a"], object),
                          category=np.array(["MatMul", "Add", "MatMul"], object),
                          occurrences=np.array([1, 2, 3]), time_ps=np.array([10, 20, 30]),
                          self_time_ps=np.array([5, 20, 30]), min_time_ps=np.array([10, 7, 4]))
    merged = combine_metrics([frame], update_num_cores=False)
    assert merged["name"].tolist() == ["a", "b"]
    assert merged["occurrences"].tolist() == [4, 2] and merged["time_ps"].tolist() == [40, 20]
    assert merged["min_time_ps"].tolist() == [4, 7]
    distinct = frame.iloc[:2]
    assert combine_metrics([distinct], update_num_cores=False).equals(distinct.reset_index(drop=True))


def test_self_times_are_exact_int64_and_quiet_on_absurd_durations():
    """Self time subtracts the direct children's durations in int64: exact past 2^53 ps (a float sum is not),
    and absurd durations (a fuzzed capture) wrap as XProf's int64 arithmetic does, without a warning."""
    import warnings

    from reportgen.core.events.nesting import self_times

    parent = np.array([-1, 0, 0, -1, 3, 3], np.int64)
    duration = np.array([2**54 + 7, 2**53 + 1, 2, 2**62, 2**62, 2**62], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        own = self_times(parent, duration)
    assert own[0] == 2**54 + 7 - (2**53 + 1) - 2
    assert own[3] == -(2**62)  # the children's 2^62 + 2^62 wrap to -2^63, and 2^62 - (-2^63) wraps to -2^62
    assert own[1:3].tolist() == [2**53 + 1, 2]


def test_a_compute_capability_given_as_a_double_reads_as_zero():
    """XProf reads compute_cap_major/minor as IntValue: a double (here infinity, from a fuzzed capture) is 0,
    not an internal error."""
    from reportgen.core.ops.perf_env import perf_env

    def env(minor):
        space = Space(("host",))
        space.plane("/host:CPU", plane_id=0)
        space.plane("/device:GPU:0", plane_id=1, device_vendor="Nvidia", core_count=80, clock_rate=1_530_000,
                    compute_cap_major=7, compute_cap_minor=minor, memory_bandwidth=900_000_000_000)
        capture = space.capture()
        return perf_env(capture, [list(capture.planes["name"]).index("/device:GPU:0")])

    odd = env(float("inf"))
    assert odd == env(0) and odd.peak_tera_flops_per_second > 0


@pytest.mark.parametrize("side", ["left", "right"])
def test_rows_are_found_among_stat_owners_as_numpy_finds_them(side):
    owners = np.array([1, 3, 3, 7, 2**31 - 1], np.int32)  # a stat table's owner column
    for rows in (np.array([0, 3, 7, 8, 2**31 - 1], np.int64), np.array([-(2**40), 3, 2**40], np.int64),
                 np.array([3, 9], np.uint64), np.array([], np.int64), np.array([1, 3], np.int32)):
        assert search_owners(owners, rows, side).tolist() == np.searchsorted(owners, rows, side=side).tolist()
