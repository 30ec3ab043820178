"""The event → trace mapping on captures built in code: ids, names, args, times, flows, counters."""

from __future__ import annotations

import math

import orjson
import pandas as pd
import pytest

from reportgen.export.host_export import export_host
from tests.chrome_json import named_events, read_chunk
from tests.xspace import Ref, Space, U

NS = 1000


def _export(space: Space, tmp_path, **kwargs) -> tuple[dict, list[dict]]:
    result = export_host(space.capture(), "run", tmp_path / "testhost", **kwargs)
    docs = [read_chunk(tmp_path / c.file) for c in result.chunks if c.format == "json.gz"]
    assert len(docs) == 1
    return docs[0], named_events(docs[0])


def test_processes_threads_and_ids(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    host.line(-559038737, "neg").event("a", 0, NS)  # tid = uint32 of the id
    host.line(5, "raw", display_id=77).event("b", 0, NS)  # display id wins
    host.line(6, "first", display_id=77, display_name="shown").event("c", 0, NS)  # same tid: one thread
    host.line(8, "empty")  # no events: left out
    host.line(9, "counters_x").event("d", 0, NS)  # counters_ lines: left out
    space.plane("/device:GPU:3", plane_id=3).line(1, "Stream #1").event("k", 0, NS)
    space.plane("/device:TPU:0", plane_id=0).line(1, "XLA Ops").event("t", 0, NS)  # GPU planes win
    space.plane("/device:CUSTOM:2", plane_id=2).line(1, "custom").event("x", 0, NS)
    doc, events = _export(space, tmp_path)
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert processes == {1004: "testhost /device:GPU:3", 1701: "testhost /host:CPU",
                         1503: "testhost /device:CUSTOM:2"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads == {(1701, 3735928559): "neg", (1701, 77): "shown", (1004, 1): "Stream #1", (1503, 1): "custom"}
    sort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in meta if e["name"] == "thread_sort_index"}
    assert sort == {k: k[1] for k in threads}
    assert sorted(e["name"] for e in events) == ["a", "b", "c", "k", "x"]


def test_names_times_and_args(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    host.metadata("op_with_md", "", hlo_category="conv", flops=5, shared=1)
    line = host.line(1, "python", timestamp_ns=2)
    line.event("op_with_md", 2 * NS + 1, 0, shared=2)  # zero duration; event stat overrides metadata stat
    line.event("%fusion = f32[8] fusion(x)", 3 * NS, 1_500_000, display_name="fusion")
    line.event("x" * 10_050, 4 * NS, NS, display_name="long")
    line.event("big", 5 * NS, NS, big=U(2**60), small=U(7), neg=-3, d=1.25, nan=float("nan"),
               text='quote " and \\ and é\n', ref=Ref("referenced name"), blob=b"\x00\x01",
               _p=1, _pt=2, program_id=3, kernel_details="hidden", flops=1)
    line.event("renamed", 6 * NS, NS, step_name="train 7")
    line.event("MemoryAllocation", 7 * NS, 0)  # internal: dropped
    _, events = _export(space, tmp_path)
    by_name = {e["name"]: e for e in events}
    assert set(by_name) == {"op_with_md", "fusion", "long", "big", "train 7"}
    first = by_name["op_with_md"]
    assert first["ts"] == 0.002001 and first["dur"] == 1e-06 and first["ph"] == "X"
    assert first["args"] == {"hlo_category": "conv", "shared": 2}
    assert by_name["fusion"]["args"] == {"long_name": "%fusion = f32[8] fusion(x)"}
    assert by_name["fusion"]["ts"] == 0.003 and by_name["fusion"]["dur"] == 1.5
    assert by_name["long"]["args"]["long_name"] == "x" * 10_000 + "...<truncated>"
    big = by_name["big"]["args"]
    assert big["big"] == str(2**60) and big["small"] == 7 and big["neg"] == -3 and big["d"] == 1.25
    assert big["nan"] == "NaN" and big["text"] == 'quote " and \\ and é\n' and big["ref"] == "referenced name"
    assert set(big) == {"big", "small", "neg", "d", "nan", "text", "ref"}
    assert by_name["train 7"]["args"] == {"step_name": "train 7"}


def test_flows_follow_xprof(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    launches = host.line(1, "python")
    launches.event("cudaLaunchKernel", 0, NS, correlation_id=U(41))
    launches.event("producer", 2 * NS, NS, _pt=15, _p=9)
    host.line(2, "pool").event("consumer", 3 * NS, NS, _ct=15, _c=9)
    host.line(3, "other").event("consumer2", 4 * NS, NS, _ct=15, _c=9)
    gpu = space.plane("/device:GPU:0", plane_id=0)
    gpu.line(5, "Stream #5").event("kernel", 10 * NS, NS, correlation_id=U(41))
    _, events = _export(space, tmp_path)
    by_name = {e["name"]: e for e in events}
    launch, kernel = by_name["cudaLaunchKernel"], by_name["kernel"]
    assert launch["flow_out"] and kernel["flow_in"] and launch["bind_id"] == kernel["bind_id"]
    assert launch["cat"] == kernel["cat"] == "gpu_launch"
    assert "flow_in" not in launch and "flow_out" not in kernel
    ids = {by_name[n]["bind_id"] for n in ("producer", "consumer", "consumer2")}
    assert len(ids) == 1 and by_name["producer"]["cat"] == "threadpool_event"
    assert all(0 < e["bind_id"] < 2**53 for e in events if "bind_id" in e)
    assert ids.isdisjoint({launch["bind_id"]})


def test_grouped_capture_gets_no_new_flows(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    host.line(1, "python").event("producer", 0, NS, _pt=15, _p=9, group_id=3)
    host.line(2, "pool").event("consumer", NS, NS, _ct=15, _c=9)
    _, events = _export(space, tmp_path)
    assert not any("bind_id" in e for e in events)
    assert {e["name"]: e.get("args", {}).get("group_id") for e in events} == {"producer": 3, "consumer": None}


def test_async_events_and_counters(tmp_path):
    space = Space()
    tpu = space.plane("/device:TPU:0", plane_id=0)
    flow = (5 << 2) | 3  # flow id 5, in-out, generic category
    tpu.line(4, "Async XLA Ops").event("async-copy", 10 * NS, 5 * NS, _a=1, flow=U(flow))
    counters = tpu.line(9, "_counters_")
    counters.event("HBM", 0, 0, value=0.5)
    counters.event("HBM", 2 * NS, 0, value=0.75, label="not numeric")
    _, events = _export(space, tmp_path)
    copy = [e for e in events if e["name"] == "async-copy"]
    assert [(e["ph"], e["ts"]) for e in copy] == [("b", 0.01), ("e", 0.015)]
    assert copy[0]["id"] == copy[1]["id"] and "tid" not in copy[0]
    samples = [e for e in events if e["ph"] == "C"]
    assert [(e["name"], e["ts"], e["args"]) for e in samples] == [("HBM", 0.0, {"value": 0.5}),
                                                                   ("HBM", 0.002, {"value": 0.75})]


def test_threadpool_regions(tmp_path):
    space = Space()
    line = space.plane("/host:CPU").line(1, "tf_pool/1")
    line.event("ThreadpoolListener::StartRegion", 10 * NS, 0, _ct=15, _c=4)
    line.event("work", 11 * NS, NS)
    line.event("ThreadpoolListener::StopRegion", 20 * NS, 0)
    line.event("ThreadpoolListener::StartRegion", 30 * NS, 0)  # no consumer id: no region
    line.event("ThreadpoolListener::StopRegion", 40 * NS, 0)
    _, events = _export(space, tmp_path)
    regions = sorted((e["ts"], e["dur"]) for e in events if e["name"] == "ThreadpoolListener::Region")
    # The second stop closes a region from the last start that had a consumer id, as in XProf.
    assert regions == [(0.01, 0.01), (0.01, 0.03)]


def test_every_chunk_is_plain_json(tmp_path):
    space = Space()
    line = space.plane("/host:CPU").line(1, "t")
    for k in range(300):
        line.event(f"ev{k % 5}", k * NS, NS, text="\u2028\u0000\x1f", v=k)
    result = export_host(space.capture(), "run", tmp_path / "testhost", max_events=50)
    for chunk in result.chunks:
        doc = read_chunk(tmp_path / chunk.file)
        orjson.dumps(doc)
        assert math.isclose(chunk.first_us, min(e["ts"] for e in named_events(doc)))


def test_bad_format_is_refused(tmp_path):
    with pytest.raises(ValueError):
        export_host(Space().capture(), "run", tmp_path / "h", trace_format="xml")


def test_overview_activity_counts_nested_events_once(tmp_path):
    space = Space()
    host = space.plane("/host:CPU")
    busy = host.line(1, "busy")
    busy.event("outer", 0, 50 * NS)
    busy.event("inner", 10 * NS, 20 * NS)  # inside outer: not counted twice
    busy.event("late", 75 * NS, 25 * NS)
    pool = host.line(2, "pool")  # only instants in the capture: the added region makes it busy
    pool.event("ThreadpoolListener::StartRegion", NS, 0, _ct=15, _c=1)
    pool.event("ThreadpoolListener::StopRegion", 100 * NS, 0)
    result = export_host(space.capture(), "run", tmp_path / "testhost", activity_bins=4)
    activity = pd.DataFrame(result.activity)
    assert result.row_labels == ["testhost /host:CPU · busy", "testhost /host:CPU · pool"]
    busy_row = activity[activity["label"] == result.row_labels[0]]
    assert busy_row["busy_percent"].round(6).tolist() == [100.0, 100.0, 0.0, 100.0]
    assert busy_row["bin_end_ms"].iloc[-1] == pytest.approx(100 * NS / 1e9)
    pool_row = activity[activity["label"] == result.row_labels[1]]
    assert pool_row["busy_percent"].round(6).tolist() == [96.0, 100.0, 100.0, 100.0]
