"""Host op metrics DB and host-side input op analysis: rules on captures built in
code, then parity with XProf's input_pipeline_analyzer.json on every shared run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reportgen.core.input_host_ops import (
    IDLE,
    combine_host_op_metrics,
    host_op_metrics_db,
    sorted_op_metrics,
)
from reportgen.core.input_ops import (
    ADVANCED_FILE_READ,
    DEMANDED_FILE_READ,
    ENQUEUE,
    PREPROCESSING,
    UNKNOWN,
    enqueue_ratio,
    input_op_analysis,
    input_op_category,
    input_time_breakdown,
)
from reportgen.core.tf_op_names import parse_tf_op_fullname
from tests.conftest import ORACLE, RUNS, needs_shared
from tests.decoded import decoded_hosts
from tests.xspace_maker import Ref, XSpaceMaker


def ops_by_name(db) -> pd.DataFrame:
    return db.ops.set_index("name")


def parse(name: str) -> tuple[str, str, str]:
    op = parse_tf_op_fullname(name)
    return op.category, op.name, op.type


def test_parse_tf_op_fullname():
    assert parse("model/dense/MatMul:MatMul") == ("TensorFlow", "model/dense/MatMul", "MatMul")
    assert parse("Iterator::Root::Map") == ("TfData", "Iterator::Root::Map", "Dataset")
    assert parse("MemcpyHToD_x") == ("MemcpyHToD", "MemcpyHToD_x", "MemcpyHToD")
    assert parse("jit_f/dot_general:") == ("Jax", "jit_f/dot_general", "dot_general")
    assert parse("a/transpose[perm=(1, 0)]:")[2] == "transpose"
    assert parse("scope/MyOp_12:") == ("TensorFlow", "scope/MyOp_12", "MyOp")
    assert parse("train")[0] == "Unknown"
    assert parse("a b:c d")[0] == "Unknown"


def test_self_time_nesting_and_idle_per_thread():
    space = XSpaceMaker()
    one = space.line("thread one")
    one.event("train", 0, 200)  # a user annotation: not an op
    one.event("model/MatMul:MatMul", 0, 100)
    one.event("model/Relu:Relu", 10, 20)
    one.event("Iterator::Root", 150, 30)
    space.line("thread two").event("model/Relu:Relu", 1000, 5)
    db = host_op_metrics_db(space.decode())
    ops = ops_by_name(db)
    assert ops.loc["model/MatMul", ["occurrences", "time_ps", "self_time_ps"]].tolist() == [1, 100, 80]
    assert ops.loc["model/Relu", ["occurrences", "time_ps", "self_time_ps"]].tolist() == [2, 25, 25]
    assert ops.loc["model/Relu", "category"] == "Relu"
    assert ops.loc["Iterator::Root", "category"] == "Dataset"
    # Thread one is active from 0 to 180 with 130 of self time; thread two has no idle time.
    assert ops.loc[IDLE, ["occurrences", "self_time_ps"]].tolist() == [0, 50]
    assert (db.total_time_ps, db.total_op_time_ps) == (185, 135)


def test_overlapping_events_follow_xprofs_stack():
    space = XSpaceMaker()
    line = space.line("t")
    line.event("a:Foo", 0, 50)
    line.event("b:Bar", 0, 50)  # same span: closed together with a, so dropped
    line.event("c:Baz", 60, 40)
    line.event("d:Qux", 70, 40)  # crosses c's end: dropped when c closes
    ops = ops_by_name(host_op_metrics_db(space.decode()))
    assert sorted(set(ops.index) - {IDLE}) == ["a", "c"]
    assert ops.loc["a", "self_time_ps"] == 50 and ops.loc["c", "self_time_ps"] == 40


def test_tf_op_stat_opens_a_second_op():
    space = XSpaceMaker()
    space.line("t").event("SomeRegion", 0, 40, tf_op=Ref("scope/conv:Conv2D"))
    ops = ops_by_name(host_op_metrics_db(space.decode()))
    assert ops.loc["scope/conv", ["category", "time_ps", "self_time_ps"]].tolist() == ["Conv2D", 40, 40]


def test_derived_lines_are_skipped():
    space = XSpaceMaker()
    space.line("Steps", line_id=-559038737).event("x:Foo", 0, 10)
    assert set(host_op_metrics_db(space.decode()).ops["name"]) == {IDLE}


def test_input_categories_and_order():
    space = XSpaceMaker()
    line = space.line("t")
    line.event("Iterator::Root::Prefetch::TFRecord", 0, 10)
    line.event("Iterator::Root::TFRecord", 20, 30)
    line.event("Iterator::Root::Map", 60, 20)
    line.event("MemcpyHToD", 90, 5)
    line.event("in/q:InfeedEnqueueTuple", 100, 5)
    # Stage ids share XProf's op map with metadata ids; keep them apart here.
    line.event("Stage", 110, 4, _ipl_stage_id=1007, _ipl_stage_cat="read")
    line.event("Other", 120, 3, _ipl_stage_id=1008, _ipl_stage_cat="Unknown")
    line.event("model/MatMul:MatMul", 200, 100)
    analysis = input_op_analysis(host_op_metrics_db(space.decode()))
    rows = analysis.ops.set_index("op_name")
    assert analysis.ops["op_name"].tolist() == [
        "Iterator::Root::TFRecord", "Iterator::Root::Map", "Iterator::Root::Prefetch::TFRecord", "MemcpyHToD",
        "in/q", "Stage", "Other"]
    assert rows["category"].to_dict() == {
        "Iterator::Root::TFRecord": DEMANDED_FILE_READ, "Iterator::Root::Map": PREPROCESSING,
        "Iterator::Root::Prefetch::TFRecord": ADVANCED_FILE_READ, "MemcpyHToD": ENQUEUE, "in/q": ENQUEUE,
        "Stage": DEMANDED_FILE_READ, "Other": UNKNOWN}
    assert analysis.input_op_time_ps == 77
    assert rows.loc["Iterator::Root::TFRecord", "self_time_percent"] == pytest.approx(100 * 30 / 77)
    # A single infeed enqueue gives no ratio, so the non-enqueue time is what the ops measured.
    assert analysis.breakdown_us == pytest.approx({
        "demanded_file_read": 34e-6, "advanced_file_read": 10e-6, "preprocessing": 20e-6, "enqueue": 10e-6,
        "unclassified": 0.0})


def test_enqueue_ratio_splits_the_input_time():
    space = XSpaceMaker()
    line = space.line("t")
    for start, duration in ((0, 10), (100, 10), (200, 20)):
        line.event("in/q:InfeedEnqueueTuple", start, duration)
    db = host_op_metrics_db(space.decode())
    assert (db.infeed_enqueue_duration_ps, db.infeed_enqueue_start_diff_ps) == (20, 200)
    assert enqueue_ratio(db) == pytest.approx(0.1)
    split = input_time_breakdown({ENQUEUE: 100.0, DEMANDED_FILE_READ: 10.0, ADVANCED_FILE_READ: 0.0,
                                  PREPROCESSING: 30.0}, 0.25)
    assert split == pytest.approx({"demanded_file_read": 75.0, "advanced_file_read": 0.0, "preprocessing": 225.0,
                                   "enqueue": 100.0, "unclassified": 0.0})
    assert input_op_category("x", "preprocessing") == PREPROCESSING


def test_combining_hosts_adds_records():
    space = XSpaceMaker()
    space.line("t").event("Iterator::Root", 0, 10)
    db = host_op_metrics_db(space.decode())
    both = combine_host_op_metrics([db, db])
    root = ops_by_name(both).loc["Iterator::Root"]
    assert root[["occurrences", "time_ps", "self_time_ps", "category"]].tolist() == [2, 20, 20, "Dataset"]
    assert sorted_op_metrics(both.ops)["name"].iloc[0] == "Iterator::Root"


# --- parity with XProf ---------------------------------------------------------------------------


def close(ours: float, theirs: float, abs_tol: float) -> bool:
    return abs(ours - theirs) <= max(abs_tol, 0.01 * abs(theirs))


def check_host_table(analysis, table: dict) -> None:
    expected = [[c.get("v") for c in row["c"]] for row in table["rows"]]
    ours = analysis.ops
    assert ours["op_name"].tolist() == [r[0] for r in expected]
    for (_, row), (name, count, time_ms, time_frac, self_ms, self_frac, category) in zip(ours.iterrows(), expected):
        assert row["count"] == count, name
        assert close(row["time_ms"], time_ms, 1e-3), name
        assert close(row["self_time_ms"], self_ms, 1e-3), name
        assert close(row["time_percent"], 100 * time_frac, 1e-4), name
        assert close(row["self_time_percent"], 100 * self_frac, 1e-4), name
        assert row["category"] == category, name
    properties = table["p"]
    for ours_key, theirs_key in (("enqueue", "enqueue_us"), ("demanded_file_read", "demanded_file_read_us"),
                                 ("advanced_file_read", "advanced_file_read_us"),
                                 ("preprocessing", "preprocessing_us"),
                                 ("unclassified", "unclassified_nonequeue_us")):
        assert close(analysis.breakdown_us[ours_key], float(properties[theirs_key]), 1.0), theirs_key


def oracle_host_table(folder) -> dict:
    return json.loads((folder / "input_pipeline_analyzer.json").read_text())[2]


@needs_shared
@pytest.mark.parametrize("run", RUNS)
def test_host_side_matches_xprof(run):
    dbs = [host_op_metrics_db(capture) for capture in decoded_hosts(run)]
    check_host_table(input_op_analysis(combine_host_op_metrics(dbs)), oracle_host_table(ORACLE / run))


PER_HOST = [(run, host.name) for run in RUNS for host in sorted((ORACLE / run / "per_host").glob("*"))
            if host.is_dir()] if ORACLE.exists() else []


@needs_shared
@pytest.mark.parametrize(("run", "host"), PER_HOST)
def test_each_host_matches_xprof(run, host):
    capture = next(c for c in decoded_hosts(run) if c.host == host)
    analysis = input_op_analysis(host_op_metrics_db(capture))
    check_host_table(analysis, oracle_host_table(ORACLE / run / "per_host" / host))


@needs_shared
@pytest.mark.parametrize("run", RUNS)
def test_host_op_db_matches_xprof_tf_stats(run):
    """The host DB behind the input op table: every host row XProf's TF stats shows."""
    dbs = [host_op_metrics_db(capture) for capture in decoded_hosts(run)]
    ops = combine_host_op_metrics(dbs).ops.set_index(["category", "name"])
    table = json.loads((ORACLE / run / "framework_op_stats.json").read_text())[0]
    ids = [c["id"] for c in table["cols"]]
    rows = [dict(zip(ids, [c.get("v") for c in r["c"]])) for r in table["rows"]]
    host_rows = [r for r in rows if r["host_or_device"] == "Host"]
    assert host_rows
    for r in host_rows:
        ours = ops.loc[(r["type"], r["operation"])]
        assert ours["occurrences"] == r["occurrences"], r["operation"]
        assert close(ours["time_ps"] / 1e6, r["total_time"], 1.0), r["operation"]
        assert close(ours["self_time_ps"] / 1e6, r["total_self_time"], 1.0), r["operation"]


def test_stage_ids_share_the_op_map_with_metadata_ids():
    """XProf keys named ops by metadata id and stages by stage id in one map, first sight
    winning: an event whose metadata id equals an earlier stage id is taken for that stage."""
    space = XSpaceMaker()
    line = space.line("t")
    line.event("Stage", 0, 4, _ipl_stage_id=2, _ipl_stage_cat="preprocessing")  # metadata id 1
    line.event("model/MatMul:MatMul", 10, 100)  # metadata id 2
    ops = ops_by_name(host_op_metrics_db(space.decode()))
    assert "model/MatMul" not in ops.index
    assert ops.loc["Stage", ["occurrences", "time_ps", "category"]].tolist() == [2, 104, "preprocessing"]
