"""Host-side input analysis on the core's host op database: rules on captures
built in code (parity with XProf's oracle is in test_input_pipeline_parity.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from reportgen.core.input.advice import RECOMMENDATIONS, link_segments, plain_text, summary_next_step
from reportgen.core.input.input_ops import (
    ADVANCED_FILE_READ,
    DEMANDED_FILE_READ,
    ENQUEUE,
    PREPROCESSING,
    UNKNOWN,
    enqueue_ratio,
    input_op_analysis,
    input_op_category,
    split_input_time,
)
from reportgen.core.ops.op_metrics import IDLE, combine_dbs
from reportgen.core.ops.op_stats import compute_host_op_stats
from tests.xspace import Space, host_space


def host_db(space: Space):
    return compute_host_op_stats(space.capture(), {}).host_db


def ops_by_name(db) -> pd.DataFrame:
    return db.metrics.set_index("name")


def test_input_categories_and_order():
    space = host_space()
    line = space.host_plane().line(name="t")
    line.event("Iterator::Root::Prefetch::TFRecord", 0, 10)
    line.event("Iterator::Root::TFRecord", 20, 30)
    line.event("Iterator::Root::Map", 60, 20)
    line.event("MemcpyHToD", 90, 5)
    line.event("in/q:InfeedEnqueueTuple", 100, 5)
    # Stage ids share XProf's op map with metadata ids; keep them apart here.
    line.event("Stage", 110, 4, _ipl_stage_id=1007, _ipl_stage_cat="read")
    line.event("Other", 120, 3, _ipl_stage_id=1008, _ipl_stage_cat="Unknown")
    line.event("model/MatMul:MatMul", 200, 100)
    analysis = input_op_analysis(host_db(space))
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
    assert analysis.breakdown.by_key() == pytest.approx({
        "demanded_file_read": 34e-6, "advanced_file_read": 10e-6, "preprocessing": 20e-6, "enqueue": 10e-6,
        "unclassified": 0.0})
    assert analysis.breakdown.uses_tf_data


def test_enqueue_ratio_splits_the_input_time():
    space = host_space()
    line = space.host_plane().line(name="t")
    for start, duration in ((0, 10), (100, 10), (200, 20)):
        line.event("in/q:InfeedEnqueueTuple", start, duration)
    db = host_db(space)
    assert (db.host_infeed_enq_duration_ps, db.host_infeed_enq_start_diff_ps) == (20, 200)
    assert enqueue_ratio(db) == pytest.approx(0.1)
    # Without infeed enqueues, the generic path takes the steps' host-to-device share.
    assert enqueue_ratio(host_db(host_space()), 2.0, 8.0, generic=True) == pytest.approx(0.25)
    assert enqueue_ratio(host_db(host_space()), 2.0, 8.0, generic=False) == 0.0
    split = split_input_time({ENQUEUE: 100.0, DEMANDED_FILE_READ: 10.0, ADVANCED_FILE_READ: 0.0,
                              PREPROCESSING: 30.0}, 0.25)
    assert split.by_key() == pytest.approx({"demanded_file_read": 75.0, "advanced_file_read": 0.0,
                                            "preprocessing": 225.0, "enqueue": 100.0, "unclassified": 0.0})
    assert input_op_category("x", "preprocessing") == PREPROCESSING
    assert input_op_category("x", "MatMul") is None


def test_combining_hosts_adds_records():
    space = host_space()
    space.host_plane().line(name="t").event("Iterator::Root", 0, 10)
    db = host_db(space)
    both = combine_dbs([db, db], update_num_cores=False)
    root = ops_by_name(both).loc["Iterator::Root"]
    assert root[["occurrences", "time_ps", "self_time_ps", "category"]].tolist() == [2, 20, 20, "Dataset"]
    assert input_op_analysis(both).ops["op_name"].tolist() == ["Iterator::Root"]


def test_no_input_ops_gives_an_empty_table_and_zero_split():
    space = host_space()
    space.host_plane().line(name="t").event("model/MatMul:MatMul", 0, 10)
    analysis = input_op_analysis(host_db(space))
    assert analysis.ops.empty and list(analysis.ops.columns)[0] == "op_name"
    assert set(analysis.breakdown.by_key().values()) == {0.0}
    assert not analysis.breakdown.uses_tf_data


def test_stage_ids_share_the_op_map_with_metadata_ids():
    """XProf keys named ops by metadata id and stages by stage id in one map, first sight
    winning: an event whose metadata id equals an earlier stage id is taken for that stage."""
    space = host_space()
    line = space.host_plane().line(name="t")
    line.event("Stage", 0, 4, _ipl_stage_id=2, _ipl_stage_cat="preprocessing")  # metadata id 1
    line.event("model/MatMul:MatMul", 10, 100)  # metadata id 2
    ops = ops_by_name(host_db(space))
    assert "model/MatMul" not in ops.index
    assert ops.loc["Stage", ["occurrences", "time_ps", "category", "hlo_module_id"]].tolist() == [
        2, 104, "preprocessing", 2]


def test_a_stage_id_seen_first_as_a_metadata_id_takes_that_op():
    space = host_space()
    line = space.host_plane().line(name="t")
    line.event("model/MatMul:MatMul", 0, 10)  # metadata id 1
    line.event("Stage", 20, 4, _ipl_stage_id=1, _ipl_stage_cat="read")
    line.event("Uncategorised", 30, 2, _ipl_stage_id=7)  # a stage without a category is no op
    ops = ops_by_name(host_db(space))
    assert "Stage" not in ops.index and "Uncategorised" not in ops.index
    assert ops.loc["model/MatMul", ["occurrences", "time_ps"]].tolist() == [2, 14]
    assert set(ops.index) == {"model/MatMul", IDLE}


def test_xprof_wording_keeps_its_links_as_segments():
    assert summary_next_step("host", uses_tf_data=True) == (
        "Look at Section 3 for the breakdown of input time on the host.")
    assert summary_next_step("device", uses_tf_data=True) == "You may skip the rest of this page."
    html = summary_next_step("both", uses_tf_data=False)
    segments = link_segments(html)
    assert segments[1] == ("the tf.data API", "https://www.tensorflow.org/guide/data")
    assert plain_text(html).startswith("Consider using the tf.data API to enable")
    assert len(RECOMMENDATIONS) == 5
    assert [href for _, href in link_segments(RECOMMENDATIONS[3]) if href] == [
        "https://www.tensorflow.org/api_docs/python/tf/data/Dataset#prefetch",
        "https://www.tensorflow.org/api_docs/python/tf/data/Dataset#interleave",
        "https://www.tensorflow.org/api_docs/python/tf/data/TFRecordDataset#class_tfrecorddataset"]
