"""tf.data bottleneck analysis: rules on small captures built in code, then real captures."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.core.events.nesting import line_parents
from reportgen.core.events.table import EventTable
from reportgen.core.input.tf_data import (
    DEVICE,
    HOST,
    SUMMARY_FAST,
    SUMMARY_NONE,
    SUMMARY_SLOW,
    bottleneck_analysis,
)
from reportgen.core.input.tf_data import tf_data_stats as _tf_data_stats
from reportgen.core.input.tf_data_advice import (
    OTHER,
    PARALLEL_TRANSFORMATION,
    SEQUENTIAL_TRANSFORMATION,
    bottleneck_type,
    concrete_advice,
    explain_long_name,
)
from reportgen.core.input.tf_data_graph import iterator_tree, pipeline_iterators
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import needs_shared
from tests.decoded import decoded_hosts
from tests.xspace import Space, U, host_space

US = 1_000_000  # ps


def tf_data_stats(capture, host: str):
    return _tf_data_stats(EventTable(capture), host)


def nesting_parents(line, begin, end, skip):
    """Parent position of each event (events grouped by line, in stored order)."""
    line = np.asarray(line, np.int64)
    new_line = np.concatenate([[True], line[1:] != line[:-1]])
    return line_parents(np.arange(len(line), dtype=np.int64), new_line, np.asarray(begin, np.int64),
                        np.asarray(end, np.int64), np.asarray(skip, bool))


def synchronous_pipeline() -> Space:
    """Root → Map → TensorSlice on one thread, two executions."""
    space = host_space()
    line = space.host_plane().line(name="python")
    for base, (root, mapped, source) in ((0, (100, 80, 10)), (1000, (20, 18, 1))):
        line.event("IteratorGetNextOp::DoCompute", (base - 1) * US if base else 0, (root + 2) * US, id=99)
        line.event("Iterator::Root", (base + 1) * US, root * US, id=1)
        line.event("Iterator::Root::Map", (base + 2) * US, mapped * US, id=2, parent_id=1, name="MapDataset:1")
        line.event("Iterator::Root::Map::TensorSlice", (base + 3) * US, source * US, id=3, parent_id=2)
    return space


def test_nesting_and_self_time_on_one_thread():
    stats = tf_data_stats(synchronous_pipeline().capture(), "h")
    assert [p.name for p in stats.pipelines] == ["Host:0"]
    pipeline = stats.pipelines[0]
    assert pipeline.type == HOST and pipeline.id == 1
    slowest = pipeline.slowest.set_index("id")
    assert slowest.loc[1, "self_time_ps"] == 20 * US  # 100 − 80
    assert slowest.loc[2, "self_time_ps"] == 70 * US  # 80 − 10
    assert slowest.loc[3, "self_time_ps"] == 10 * US
    assert slowest["is_blocking"].all() and (slowest["num_calls"] == 1).all()
    assert pipeline.bottleneck_id == 2 and pipeline.bottleneck_latency_ps == 70 * US
    assert pipeline.executions["duration_ps"].tolist() == [100 * US, 20 * US]
    assert pipeline.avg_latency_ps == 60 * US
    assert (pipeline.min_latency_ps, pipeline.max_latency_ps) == (20 * US, 100 * US)
    assert pipeline.num_slow_calls == 1  # only the 100 µs call is over 50 µs
    assert stats.iterators[2].name == "Map" and stats.iterators[2].parent_id == 1
    assert stats.iterators[2].dataset == "MapDataset:1"
    totals = pipeline.iterator_totals.set_index("id")
    assert totals.loc[2, "self_time_ps"] == (70 + 17) * US and totals.loc[2, "bottleneck_count"] == 2


def prefetch_pipeline() -> Space:
    """Root → Prefetch on the consumer thread, Map → TensorSlice produced on another thread.

    Execution 1 (100 µs) waits for its element (the producer overlaps it);
    execution 2 (10 µs) finds its element ready (produced before it started).
    """
    space = host_space()
    consumer = space.host_plane().line(name="consumer")
    consumer.event("Iterator::Root", 0, 100 * US, id=1)
    consumer.event("Iterator::Root::Prefetch", 10 * US, 80 * US, id=2, parent_id=1)
    consumer.event("PrefetchConsume", 80 * US, 5 * US, element_id=7)
    consumer.event("Iterator::Root", 300 * US, 10 * US, id=1)
    consumer.event("Iterator::Root::Prefetch", 301 * US, 8 * US, id=2, parent_id=1)
    consumer.event("PrefetchConsume", 302 * US, 1 * US, element_id=8)
    producer = space.host_plane().line(name="producer")
    producer.event("PrefetchProduce", 20 * US, 50 * US, element_id=7)
    producer.event("Iterator::Root::Prefetch::Map", 22 * US, 46 * US, id=3, parent_id=2)
    producer.event("Iterator::Root::Prefetch::Map::TensorSlice", 30 * US, 10 * US, id=4, parent_id=3)
    producer.event("PrefetchProduce", 200 * US, 50 * US, element_id=8)
    producer.event("Iterator::Root::Prefetch::Map", 201 * US, 48 * US, id=3, parent_id=2)
    # A produce whose first iterator child has no parent_id is not linked.
    producer.event("PrefetchProduce", 400 * US, 50 * US, element_id=8)
    producer.event("Iterator::Root::Prefetch::Map", 401 * US, 48 * US, id=3)
    return space


def test_producer_links_critical_path_and_bottleneck():
    stats = tf_data_stats(prefetch_pipeline().capture(), "h")
    pipeline = stats.pipelines[0]
    slowest = pipeline.slowest.set_index("id")
    assert slowest.loc[2, "self_time_ps"] == (80 - 46) * US  # the produced Map overlaps the wait
    assert slowest.loc[3, "self_time_ps"] == (46 - 10) * US
    assert slowest.loc[[1, 2, 3, 4], "is_blocking"].all()
    assert pipeline.bottleneck_id == 3 and pipeline.bottleneck_latency_ps == 36 * US

    fast = pipeline.executions.iloc[1]
    assert fast["duration_ps"] == 10 * US
    # The element was ready: Map ran before the call, so it is off the critical
    # path even though its self time (48 µs) is the largest; Prefetch is the bottleneck.
    assert fast["bottleneck_id"] == 2 and fast["bottleneck_latency_ps"] == 8 * US
    totals = pipeline.iterator_totals.set_index("id")
    assert totals.loc[3, "num_calls"] == 2  # the unlinked third Map call belongs to no execution


def test_iterator_tree_marks_critical_path_and_bottleneck():
    stats = tf_data_stats(prefetch_pipeline().capture(), "h")
    pipeline = stats.pipelines[0]
    tree = iterator_tree(stats, pipeline)
    assert tree["name"].tolist() == ["Root", "Prefetch", "Map", "TensorSlice"]
    assert tree["depth"].tolist() == [0, 1, 2, 3]
    assert tree["is_bottleneck"].tolist() == [False, False, True, False]
    assert tree["is_blocking"].all()
    assert tree.loc[2, "self_percent"] == pytest.approx(36.0)
    assert [i.name for i in pipeline_iterators(stats, pipeline)] == ["Root", "Prefetch", "Map", "TensorSlice"]


def test_uint64_ids_stay_distinct():
    space = host_space()
    line = space.host_plane().line(name="python")
    big = 2**63
    line.event("Iterator::Root", 0, 100 * US, id=U(big + 1))
    line.event("Iterator::Root::Batch", 1 * US, 90 * US, id=U(big + 2), parent_id=U(big + 1))
    line.event("Iterator::Root::Batch::Range", 2 * US, 60 * US, id=U(big + 3), parent_id=U(big + 2))
    stats = tf_data_stats(space.capture(), "h")
    assert len(stats.iterators) == 3
    pipeline = stats.pipelines[0]
    assert stats.iterators[pipeline.bottleneck_id].name == "Range"
    assert iterator_tree(stats, pipeline)["depth"].tolist() == [0, 1, 2]


def test_device_pipelines_are_left_out_of_the_analysis():
    space = host_space()
    space.host_plane().line(name="consumer").event("Iterator::Prefetch", 0, 100 * US, id=10).event(
        "PrefetchConsume", 90 * US, 1 * US, element_id=1)
    space.host_plane().line(name="producer").event("PrefetchProduce", 5 * US, 80 * US, element_id=1).event(
        "Iterator::Prefetch::Generator", 6 * US, 70 * US, id=11, parent_id=10)
    stats = tf_data_stats(space.capture(), "h")
    assert [(p.name, p.type) for p in stats.pipelines] == [("Device:0", DEVICE)]
    assert stats.pipelines[0].bottleneck_id == 11  # the generator, reached through the produce link
    analysis = bottleneck_analysis([stats])
    assert analysis.candidates == [] and analysis.summary == SUMMARY_NONE and not analysis.is_input_bound


def test_summary_thresholds_and_host_order():
    slow = tf_data_stats(synchronous_pipeline().capture(), "slow-host")
    fast_space = host_space()
    fast_space.host_plane().line(name="python").event("Iterator::Root", 0, 30 * US, id=5).event(
        "Iterator::Root::Range", 1 * US, 20 * US, id=6, parent_id=5)
    fast = tf_data_stats(fast_space.capture(), "fast-host")
    both = bottleneck_analysis([fast, slow])
    assert [c.host for c in both.candidates] == ["slow-host", "fast-host"]
    assert both.is_input_bound and both.summary == SUMMARY_SLOW
    assert both.top.iterator_long_name == "Iterator::Root::Map"
    only_fast = bottleneck_analysis([fast])
    assert not only_fast.is_input_bound and only_fast.summary == SUMMARY_FAST
    assert bottleneck_analysis([tf_data_stats(host_space().capture(), "empty")]).summary == SUMMARY_NONE


def test_async_events_are_not_nested():
    line = np.zeros(3, np.int64)
    begin = np.array([0, 1, 2])
    end = np.array([10, 9, 3])
    assert nesting_parents(line, begin, end, np.array([False, False, False])).tolist() == [-1, 0, 1]
    assert nesting_parents(line, begin, end, np.array([False, True, False])).tolist() == [-1, -1, 0]
    # Inclusive containment; a new line starts a new stack.
    assert nesting_parents(np.array([0, 0, 1]), np.array([0, 0, 0]), np.array([5, 5, 5]),
                           np.zeros(3, bool)).tolist() == [-1, 0, -1]


def test_advice():
    assert bottleneck_type("Map") == PARALLEL_TRANSFORMATION
    assert bottleneck_type("Batch") == SEQUENTIAL_TRANSFORMATION
    assert bottleneck_type("MapAndBatch") == OTHER  # XProf matches exact names only
    stats = tf_data_stats(decode_xspace("x.xplane.pb", _map_and_batch_space().proto.SerializeToString()), "h")
    pipeline = stats.pipelines[0]
    bottleneck = stats.iterators[pipeline.bottleneck_id]
    members = pipeline_iterators(stats, pipeline)
    advice = concrete_advice(bottleneck, members)
    assert "parallelism=1" in advice[0].text and "num_parallel_calls" in advice[0].code
    assert any("prefetch" in a.code for a in advice)  # the pipeline has none
    rows = explain_long_name(bottleneck.long_name, {m.long_name: m for m in members})
    assert [r["component"] for r in rows] == ["Root", "MapAndBatch"]
    assert rows[1]["dataset"] == "fused(MapDataset:3,BatchDatasetV2:4)"
    assert rows[1]["api"] == "dataset.map(f).batch(n)"


def _map_and_batch_space() -> Space:
    space = host_space()
    space.host_plane().line(name="python").event("Iterator::Root", 0, 100 * US, id=1).event(
        "Iterator::Root::MapAndBatch", 1 * US, 98 * US, id=2, parent_id=1, parallelism=1, autotune="false",
        name="fused(MapDataset:3,BatchDatasetV2:4)")
    return space


@needs_shared
def test_input_bound_capture():
    stats = tf_data_stats(decoded_hosts("tf_keras_input_bound")[0], "vm")
    assert len(stats.pipelines) == 1
    pipeline = stats.pipelines[0]
    assert pipeline.count == 5 and pipeline.num_slow_calls == 5
    assert stats.iterators[pipeline.bottleneck_id].long_name == "Iterator::Root::MapAndBatch"
    # The slowest GetNext: 107.5 ms, nearly all of it in the sequential map.
    assert pipeline.max_latency_ps == 107_500_377_000
    assert 0.99 < pipeline.bottleneck_latency_ps / pipeline.max_latency_ps < 1
    tree = iterator_tree(stats, pipeline)
    assert tree["name"].tolist() == ["Root", "MapAndBatch", "ShuffleAndRepeat", "TensorSlice"]
    assert tree.loc[tree["name"] == "ShuffleAndRepeat", "num_calls"].item() == 32  # one batch of 32 elements
    analysis = bottleneck_analysis([stats])
    assert analysis.is_input_bound and analysis.summary == SUMMARY_SLOW


@needs_shared
def test_multi_worker_gpu_capture_has_only_device_pipelines():
    stats = [tf_data_stats(capture, capture.host) for capture in decoded_hosts("gpu_multi_worker")]
    assert all([p.type for p in s.pipelines] == [DEVICE, DEVICE] for s in stats)
    assert bottleneck_analysis(stats).summary == SUMMARY_NONE
