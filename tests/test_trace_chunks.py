"""Chunk cutting: every event exactly once, cuts on step starts, caps, self-contained chunks."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from reportgen.export.chunks import plan_chunks
from reportgen.export.host_export import export_host
from tests.chrome_json import named_events, read_chunk
from tests.xspace import Space

NS = 1000  # ps


def _stepped_capture(steps: int = 10, children: int = 40):
    """Steps of 1 µs on the python thread, children inside them, and a worker thread whose
    events start exactly at each step start and end exactly at the next one."""
    space = Space()
    host = space.plane("/host:CPU")
    main = host.line(1, "python")
    worker = host.line(2, "worker")
    for k in range(steps):
        t0 = k * 1000 * NS
        main.event("train", t0, 900 * NS, _r=1, step_num=100 + k)
        gap = 880 * NS // children
        for c in range(children):
            main.event("op", t0 + 10 * NS + c * gap, gap // 2, index=c)
        worker.event("boundary", t0, 1000 * NS)
    return space.capture()


def _union(records, folder) -> list[dict]:
    events = []
    for rec in records:
        if rec.format == "json.gz":
            events.extend(named_events(read_chunk(folder.parent / rec.file)))
    return events


def _keys(events) -> Counter:
    return Counter((e["thread"], e["name"], e["ts"], e["dur"]) for e in events)


def test_step_cuts_keep_every_event_once(tmp_path):
    capture = _stepped_capture()
    out = tmp_path / "testhost"
    full = export_host(capture, "run", tmp_path / "one" / "testhost")
    assert len(full.chunks) == 1
    everything = _keys(_union(full.chunks, tmp_path / "one" / "testhost"))
    assert sum(everything.values()) == full.events == 10 * (1 + 40 + 1)

    result = export_host(capture, "run", out, max_events=100)
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert len(chunks) == 5  # 42 events per step, two whole steps per chunk
    assert _keys(_union(chunks, out)) == everything
    for k, chunk in enumerate(chunks):
        assert chunk.events <= 100
        # Each chunk starts on a step start, and the boundary event that starts there is in it.
        assert chunk.first_us == pytest.approx(2 * k * 1.0)
        assert (chunk.first_step, chunk.last_step) == (100 + 2 * k, 101 + 2 * k)
        doc = read_chunk(out.parent / chunk.file)
        starts = [e for e in named_events(doc) if e["name"] == "boundary"]
        assert sorted(e["ts"] for e in starts) == [2 * k * 1.0, (2 * k + 1) * 1.0]
    assert result.cuts_us == [2.0, 4.0, 6.0, 8.0]


def test_counter_samples_go_to_the_chunk_of_their_time(tmp_path):
    """Counter samples are not in the timeline's windows (it draws them as counter tracks), whose events the
    chunks are written from: they are written into their chunk apart, each once, in the chunk whose time range
    holds them."""
    space = Space()
    main = space.plane("/host:CPU").line(1, "python")
    tpu = space.plane("/device:TPU:0", plane_id=0)
    counters = tpu.line(9, "_counters_")
    for k in range(10):
        t0 = k * 1000 * NS
        main.event("train", t0, 900 * NS, _r=1, step_num=100 + k)
        for c in range(40):
            main.event("op", t0 + 10 * NS + c * 20 * NS, 10 * NS, index=c)
        counters.event("HBM", t0 + 500 * NS, 0, value=float(k))
    out = tmp_path / "testhost"
    result = export_host(space.capture(), "run", out, max_events=100)
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert len(chunks) == 5 and result.timeline is not None
    seen = []
    for chunk in chunks:
        samples = [e for e in read_chunk(out.parent / chunk.file)["traceEvents"] if e.get("ph") == "C"]
        assert all(chunk.first_us <= e["ts"] <= chunk.last_us for e in samples)
        assert sum(1 for e in named_events(read_chunk(out.parent / chunk.file))) == chunk.events
        seen += [e["args"]["value"] for e in samples]
    assert sorted(seen) == [float(k) for k in range(10)]


def test_step_names_follow_xprof_groups(tmp_path):
    result = export_host(_stepped_capture(steps=3, children=1), "run", tmp_path / "testhost")
    names = [e["name"] for e in _union(result.chunks, tmp_path / "testhost") if e["thread"] == "python"]
    assert [n for n in names if n.startswith("train")] == ["train 100", "train 101", "train 102"]
    assert result.steps == [(100, 0.0, 0.9), (101, 1.0, 1.9), (102, 2.0, 2.9)]


def test_a_step_larger_than_a_chunk_is_cut_on_time(tmp_path):
    capture = _stepped_capture(steps=2, children=250)
    out = tmp_path / "testhost"
    result = export_host(capture, "run", out, max_events=100)
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert all(c.events <= 100 for c in chunks)
    assert sum(c.events for c in chunks) == 2 * 252
    assert len(chunks) == 6
    # Cuts inside step 100 report the step they lie in.
    assert [(c.first_step, c.last_step) for c in chunks[:3]] == [(100, 100)] * 3
    assert _keys(_union(chunks, out)) == _keys(_union(export_host(capture, "run", tmp_path / "x" / "testhost").chunks,
                                                      tmp_path / "x" / "testhost"))


def test_time_cuts_without_steps_and_ties_stay_together(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    line = host.line(7, "thread")
    for k in range(500):
        line.event("tick", k * NS, NS // 2)
    for k in range(30):  # 30 events starting at the same instant
        line.event("burst", 600 * NS, NS // 3 + k)
    out = tmp_path / "testhost"
    result = export_host(space.capture(), "run", out, max_events=64)
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert all(c.first_step is None and c.last_step is None for c in chunks)
    events = _union(chunks, out)
    assert len(events) == 530 and len(_keys(events)) == 530
    bursts = [sum(e["name"] == "burst" for e in named_events(read_chunk(out.parent / c.file))) for c in chunks]
    assert sorted(bursts)[-1] == 30 and sum(bursts) == 30
    assert all(c.events <= 64 for c in chunks)


def test_byte_cap(tmp_path):
    space = Space()
    line = space.plane("/host:CPU").line(1, "t")
    for k in range(2000):
        line.event("same-size-name", k * NS, NS, value=k % 7)
    out = tmp_path / "testhost"
    result = export_host(space.capture(), "run", out, max_bytes=40_000)
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert len(chunks) >= 4
    for chunk in chunks:  # sizes are estimated from measured samples: within 10%, plus the header
        assert chunk.json_bytes <= 40_000 * 1.1 + 1_000
    assert sum(c.events for c in chunks) == 2000


def test_chunks_are_self_contained(tmp_path):
    out = tmp_path / "testhost"
    result = export_host(_stepped_capture(), "myrun", out, max_events=100)
    for chunk in result.chunks:
        doc = read_chunk(out.parent / chunk.file)
        assert doc["displayTimeUnit"] == "ns"
        meta = doc["metadata"]
        assert (meta["host"], meta["run"]) == ("testhost", "myrun")
        names = {(e["name"], e.get("tid")) for e in doc["traceEvents"] if e.get("ph") == "M"}
        assert ("process_name", None) in names and ("process_sort_index", None) in names
        assert {t for n, t in names if n == "thread_name"} == {1, 2}
        assert {t for n, t in names if n == "thread_sort_index"} == {1, 2}


def test_plan_rules():
    rows = np.arange(10)
    ts = np.array([0, 1, 2, 2, 2, 2, 3, 4, 5, 6]) * 10
    size = np.full(10, 10)
    plan = plan_chunks(rows, ts, size, np.zeros(0, np.int64), max_events=3)
    # The four events at t=20 never split: the chunk holding them exceeds the cap.
    assert [hi - lo for lo, hi in plan.bounds] == [2, 4, 3, 1]
    assert plan.cuts_ps == [20, 30, 60]
    assert sorted(np.concatenate([plan.rows(k) for k in range(len(plan))]).tolist()) == rows.tolist()
    # A cut at a step start puts the events starting exactly there in the later chunk.
    plan = plan_chunks(rows, ts, size, np.array([30]), max_events=8)
    assert plan.bounds == [(0, 6), (6, 10)] and plan.cuts_ps == [30]
    with pytest.raises(ValueError):
        plan_chunks(rows, ts, size, np.zeros(0, np.int64), max_events=0)
