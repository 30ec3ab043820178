"""Older captures' timelines in the trace export: `<host>.trace.json.gz`, ProfilerHook
`timeline-<step>.json` steps and Cloud TPU `.trace` (Trace proto) files become the same
`<run>/trace/` chunks, manifest entries, summary block and page as an XSpace host's, and so
does a `.tracetable` (tests/test_tracetable.py reads its table); broken files are errors naming the file."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import weakref
from collections import Counter
from html import unescape
from pathlib import Path

import numpy as np
import pytest

import reportgen.legacy.trace_export as legacy_trace
from reportgen.errors import CaptureError
from reportgen.legacy.chrome_trace import parse_chrome_trace, parse_trace_proto
from reportgen.legacy.timeline_chunks import ChromeTraceExport, plan_time_chunks
from reportgen.loaders.proto import legacy_tools_pb2 as pb
from reportgen.loaders.proto import trace_events_pb2 as tpb
from reportgen.pipeline.build import EXIT_OK, EXIT_PARTIAL, BuildOptions, build_site
from tests.browser import chromium, console_errors, needs_browser
from tests.clirun import reportgen
from tests.conftest import CAPTURES, LOGDIR
from tests.sitecheck import assert_links_resolve
from tests.sstable_writer import tracetable
from tests.tftrace import chrome_events_of

REAL_TRACE = LOGDIR / "plugins" / "profile" / "jax_mlp" / "vm.trace.json.gz"  # written by the profiler
LEGACY_RUNS = CAPTURES / "legacy" / "plugins" / "profile"
needs_real_trace = pytest.mark.skipif(not REAL_TRACE.exists(), reason=f"shared captures not found at {REAL_TRACE}")
needs_legacy = pytest.mark.skipif(not LEGACY_RUNS.exists(), reason=f"legacy captures not present at {LEGACY_RUNS}")
MANIFEST_KEYS = {"host", "file", "format", "first_us", "last_us", "first_step", "last_step", "events", "bytes"}
GPU = "/job:localhost/replica:0/task:0/device:GPU:0 Compute"
CPU = "/job:localhost/replica:0/task:0/device:CPU:0 Compute"
STEPS = (100, 200, 300)
GOOD_STEPS = (1, 5)
BAD_STEPS = {  # file name → content, for the ProfilerHook folder with broken steps
    "timeline-2.json": json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "ts": 1}] * 50})[:-90].encode(),
    "timeline-3.json": b"",
    "timeline-4.json": b"step 4 was never written",
    "timeline-6.json": b'{"traceEvents": []}',
}
BAD_STEP_PROBLEMS = {"timeline-2.json": "is not JSON", "timeline-3.json": "is empty",
                     "timeline-4.json": "is not JSON", "timeline-6.json": "holds no trace events"}


def _key(event: dict) -> str:
    return json.dumps(event, sort_keys=True)


def _chunk(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _timeline(step: int) -> dict:
    """A ProfilerHook step: op spans on two devices, a data-flow arrow and a memory counter."""
    t0 = 1_600_000_000_000_000 + 1_000_000 * step  # TF1 timelines count µs since the epoch
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": GPU}},
              {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": CPU}}]
    for k in range(4):
        events.append({"ph": "X", "cat": "Op", "name": "MatMul", "pid": 0, "tid": k % 2, "ts": t0 + 10 * k,
                       "dur": 5 + step / 100, "args": {"name": f"dense_{k}/MatMul", "op": "MatMul", "input0": "x"}})
    events.append({"ph": "X", "cat": "Op", "name": "IteratorGetNext", "pid": 1, "tid": 0, "ts": t0, "dur": 3,
                   "args": {"name": "IteratorGetNext", "op": "IteratorGetNext"}})
    events.append({"ph": "s", "cat": "DataFlow", "name": "dense_0/MatMul", "pid": 1, "tid": 0, "ts": t0, "id": step})
    events.append({"ph": "t", "cat": "DataFlow", "name": "dense_0/MatMul", "pid": 0, "tid": 0, "ts": t0, "id": step})
    events.append({"ph": "C", "name": "Allocated", "pid": 0, "ts": t0 + 1, "args": {"GPU_0_bfc": 1024 * step}})
    return {"traceEvents": events}


def _trace_proto() -> tpb.Trace:
    """A Cloud TPU capture's Trace: two devices with two resources each, spans, instants and args."""
    trace = tpb.Trace()
    for did, name in ((1, "/host:CPU"), (3, "TPU:0")):
        device = trace.devices[did]
        device.name, device.device_id = name, did
        for rid in (2, 5):
            device.resources[rid].name = f"{name} resource {rid}"
            device.resources[rid].resource_id = rid
    for i in range(40):
        event = trace.trace_events.add(device_id=(1, 3)[i % 2], resource_id=(2, 5)[(i // 2) % 2],
                                       name=f"op.{i % 7}", timestamp_ps=1_000_000 * i + 250_000,
                                       duration_ps=(i % 4) * 125_000)
        if i % 5 == 0:
            event.args["long_name"] = f"fusion.{i} = f32[8] fusion()"
    return trace


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, dict, object]:
    """One build of every timeline kind, good and bad, with `--trace-format both`."""
    root = tmp_path_factory.mktemp("legacy-trace")
    profile = root / "logs" / "plugins" / "profile"
    hook = profile / "hook"
    hook.mkdir(parents=True)
    for step in STEPS:
        (hook / f"timeline-{step}.json").write_text(json.dumps(_timeline(step)))
    tpu = profile / "tpu"
    tpu.mkdir()
    (tpu / "10.0.0.2.trace").write_bytes(_trace_proto().SerializeToString())
    table = profile / "tracetable"
    table.mkdir()
    (table / "10.0.0.3.tracetable").write_bytes(tracetable(_trace_proto(), block_size=512))
    if REAL_TRACE.exists():
        tf22 = profile / "tf22"
        tf22.mkdir()
        shutil.copy(REAL_TRACE, tf22 / "localhost.trace.json.gz")
        overview = pb.OverviewPage(run_environment=pb.OverviewPageRunEnvironment(device_type="CPU"))
        (tf22 / "localhost.overview_page.pb").write_bytes(overview.SerializeToString())
    bad = {
        "truncated": ("w.trace.json.gz", gzip.compress(json.dumps(_timeline(1)).encode())[:-20]),
        "not_chrome": ("w.trace.json.gz", gzip.compress(b'{"displayTimeUnit": "ns", "events": []}')),
        "corrupt_proto": ("w.trace", b"\x0a\xff\xff\xff\xff\x0f garbage"),
        "corrupt_table": ("w.tracetable", b"\x00sstable bytes, cut before the footer"),
    }
    for run, (name, data) in bad.items():
        (profile / run).mkdir()
        (profile / run / name).write_bytes(data)
    # A host whose tool files are fine but whose trace is not: the trace file is named, the overview builds.
    (profile / "mixed_bad").mkdir()
    overview = pb.OverviewPage(run_environment=pb.OverviewPageRunEnvironment(device_type="GPU"))
    (profile / "mixed_bad" / "h.overview_page.pb").write_bytes(overview.SerializeToString())
    (profile / "mixed_bad" / "h.trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00 cut")
    # ProfilerHook steps, some broken: each broken file is named, the good steps build.
    hook_bad = profile / "hook_bad"
    hook_bad.mkdir()
    for step in GOOD_STEPS:
        (hook_bad / f"timeline-{step}.json").write_text(json.dumps(_timeline(step)))
    for name, data in BAD_STEPS.items():
        (hook_bad / name).write_bytes(data)
    # Every step file broken: the host fails, and each file is still named.
    hook_all_bad = profile / "hook_all_bad"
    hook_all_bad.mkdir()
    (hook_all_bad / "timeline-1.json").write_bytes(b"")
    (hook_all_bad / "timeline-2.json").write_text("not a trace")
    out = root / "site"
    report = build_site([str(root / "logs")], BuildOptions(output=str(out), jobs=1, trace_format="both"))
    return profile, out, json.loads((out / "summary.json").read_text()), report


def _manifest(out: Path, run: str) -> dict:
    return json.loads((out / run / "trace" / "manifest.json").read_text())


def test_bad_files_are_errors_naming_the_file_while_the_rest_builds(built):
    _profile, out, summary, report = built
    assert report.exit_code == EXIT_PARTIAL
    errors = {e["path"]: e["message"] for e in summary["errors"]}
    bad_steps = {f"hook_bad/{name}" for name in BAD_STEPS}
    assert set(errors) == {"truncated/w.trace.json.gz", "not_chrome/w.trace.json.gz", "corrupt_proto/w.trace",
                           "corrupt_table/w.tracetable", "mixed_bad/h.trace.json.gz", "hook_all_bad/timeline-1.json",
                           "hook_all_bad/timeline-2.json", *bad_steps}
    assert "gzip data is corrupt or truncated" in errors["truncated/w.trace.json.gz"]
    assert "is not a Chrome trace" in errors["not_chrome/w.trace.json.gz"]
    assert "cannot be decoded as a Trace protobuf" in errors["corrupt_proto/w.trace"]
    assert errors["corrupt_table/w.tracetable"] == (
        "corrupt_table/w.tracetable: cannot be read as a LevelDB table: the file is 37 bytes, shorter than a table's "
        "48-byte footer (truncated?)")
    assert "gzip data is corrupt or truncated" in errors["mixed_bad/h.trace.json.gz"]
    for path, message in errors.items():
        assert message.startswith(path + ":") and str(out.parent) not in message
    for run in ("hook", "tpu", "tracetable"):
        assert "trace" in summary["runs"][run]["tools"]
    # The terminal names each file by its full local path.
    local = {e["path"]: e["local_message"] for e in report.errors}
    for path in errors:
        assert local[path].startswith(f"{_profile / path}: ")


def test_a_bad_trace_file_keeps_the_hosts_tool_pages(built):
    _profile, out, summary, _ = built
    run = summary["runs"]["mixed_bad"]
    assert run["hosts"] == ["h"] and run["overview"]["device_type"] == "GPU"
    assert "legacy_overview" in run["tools"] and "trace" not in run["tools"]
    assert [e["path"] for e in run["errors"]] == ["mixed_bad/h.trace.json.gz"]
    page = unescape((out / "mixed_bad" / "index.html").read_text())
    assert "<code>mixed_bad/h.trace.json.gz</code>: gzip data is corrupt or truncated" in page
    inventory = unescape((out / "mixed_bad" / "inventory.html").read_text())  # the files read
    assert "<code>h.overview_page.pb</code>" in inventory and "<code>h.trace.json.gz</code>" not in inventory


def test_bad_profiler_hook_steps_are_named_while_the_good_steps_build(built):
    _profile, out, summary, _ = built
    run = summary["runs"]["hook_bad"]
    assert run["hosts"] == ["timeline"]
    messages = {e["path"]: e["message"] for e in run["errors"]}
    assert set(messages) == {f"hook_bad/{name}" for name in BAD_STEPS}
    for name, problem in BAD_STEP_PROBLEMS.items():
        assert problem in messages[f"hook_bad/{name}"]
    assert [c["file"] for c in _manifest(out, "hook_bad")["chunks"]] == [
        f"timeline/timeline-{s}.json.gz" for s in GOOD_STEPS]
    assert run["legacy_timeline"]["steps"] == len(GOOD_STEPS)
    for page in ("index.html", "trace.html"):  # the run's pages that list input errors
        text = unescape((out / "hook_bad" / page).read_text())
        assert all(f"hook_bad/{name}</code>: " in text for name in BAD_STEPS), page
    site_index = unescape((out / "index.html").read_text())
    assert all(f"hook_bad/{name}" in site_index for name in BAD_STEPS)


def test_a_host_whose_every_file_is_bad_fails_with_each_file_named(built):
    _profile, _out, summary, _ = built
    run = summary["runs"]["hook_all_bad"]
    assert run["hosts"] == [] and "trace" not in run["tools"]
    messages = {e["path"]: e["message"] for e in run["errors"]}
    assert "is empty" in messages["hook_all_bad/timeline-1.json"]
    assert "is not JSON" in messages["hook_all_bad/timeline-2.json"]


def test_the_terminal_names_bad_step_files_by_their_local_path(tmp_path):
    run = tmp_path / "logs" / "plugins" / "profile" / "steps"
    run.mkdir(parents=True)
    (run / "timeline-1.json").write_text(json.dumps(_timeline(1)))
    (run / "timeline-2.json").write_bytes(b"")
    for _build in ("first", "again, with the rebuild cache"):  # the bad file is named every time until fixed
        proc = reportgen("build", str(tmp_path / "logs"), "-o", str(tmp_path / "site"), "--jobs", "1")
        assert proc.returncode == EXIT_PARTIAL, proc.stderr
        assert f"reportgen: error: {run / 'timeline-2.json'}: is empty" in proc.stderr
    summary = json.loads((tmp_path / "site" / "summary.json").read_text())
    assert [e["message"].split(":")[0] for e in summary["errors"]] == ["steps/timeline-2.json"]
    assert summary["runs"]["steps"]["legacy_timeline"]["steps"] == 1


def test_profiler_hook_steps_are_one_chunk_each_with_exactly_their_events(built):
    profile, out, summary, _ = built
    manifest = _manifest(out, "hook")
    chunks = [c for c in manifest["chunks"]]
    assert [c["file"] for c in chunks] == [f"timeline/timeline-{s}.json.gz" for s in STEPS]
    for step, c in zip(STEPS, chunks):
        assert MANIFEST_KEYS <= set(c) <= MANIFEST_KEYS | {"uncompressed_bytes"}
        assert (c["format"], c["first_step"], c["last_step"]) == ("json.gz", step, step)
        path = out / "hook" / "trace" / c["file"]
        assert path.stat().st_size == c["bytes"]
        doc = _chunk(path)
        source = _timeline(step)["traceEvents"]
        # Exactly the file's events (name, ts, dur, pid/tid, args), metadata repeated, nothing added.
        assert Counter(map(_key, doc["traceEvents"])) == Counter(map(_key, source))
        assert c["events"] == sum(1 for e in source if e["ph"] != "M")
        assert c["uncompressed_bytes"] == len(gzip.decompress(path.read_bytes()))
        assert doc["displayTimeUnit"] == "ns"
        meta = doc["metadata"]
        assert (meta["host"], meta["run"], meta["source"], meta["first_step"]) == (
            "timeline", "hook", f"timeline-{step}.json", step)
        times = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in source if e["ph"] != "M"]
        assert c["first_us"] == min(t for t, _ in times) and c["last_us"] == max(e for _, e in times)
    block = summary["runs"]["hook"]["trace"]
    assert {k: block[k] for k in ("chunks", "events", "bytes")} == {
        "chunks": 3, "events": sum(c["events"] for c in chunks), "bytes": sum(c["bytes"] for c in chunks)}
    # The step-stats page still comes from the same files.
    assert summary["runs"]["hook"]["legacy_timeline"]["steps"] == 3


def _overview_data(page: Path) -> dict:
    html = page.read_text()
    spec = re.search(r'<script type="application/json" id="trace-overview-1-spec">(.*?)</script>', html, re.S)
    return json.loads(spec.group(1))["datasets"]


def test_profiler_hook_overview_counts_from_the_hosts_first_event(built):
    _profile, out, _summary, _ = built
    data = _overview_data(out / "hook" / "trace.html")
    steps_ms = [(s - STEPS[0]) * 1e3 for s in STEPS]  # the step files start 1 s apart
    assert [d["start_ms"] for d in data["steps"]] == pytest.approx(steps_ms)
    assert [d["cut_ms"] for d in data["cuts"]] == pytest.approx(steps_ms[1:])  # a cut where each file starts
    assert min(d["bin_start_ms"] for d in data["busy"]) == 0.0
    assert max(d["bin_end_ms"] for d in data["busy"]) == pytest.approx(steps_ms[-1] + 0.038)  # last MatMul's end
    # The files keep the times they had (µs since the epoch); their table counts from the overview's origin.
    first = min(e["ts"] for e in _timeline(STEPS[0])["traceEvents"] if "ts" in e)
    assert _manifest(out, "hook")["chunks"][0]["first_us"] == first
    rows = re.findall(r'<td class="num" data-sort="([^"]+)">', (out / "hook" / "trace.html").read_text())
    assert [float(v) for v in rows[0::3]] == pytest.approx(steps_ms)  # From (ms), To (ms), Size per file


def test_cloud_tpu_overview_counts_from_its_first_event(built):
    _profile, out, _summary, _ = built
    data = _overview_data(out / "tpu" / "trace.html")
    # The Trace proto's first event starts at 0.25 µs, its first span (event 1) at 1.25 µs.
    assert min(d["bin_start_ms"] for d in data["busy"]) == pytest.approx(0.001)
    assert "steps" not in data and "cuts" not in data


def test_perfetto_is_not_produced_for_chrome_timelines_and_says_so(built):
    _profile, out, summary, _ = built
    for run, host in (("hook", "timeline"), ("tpu", "10.0.0.2")):
        expected = [{"host": host, "format": "pftrace",
                     "reason": "timeline from an older profiler's Chrome trace events: JSON chunks only"}]
        assert _manifest(out, run)["not_produced"] == expected
        assert summary["runs"][run]["trace"]["not_produced"] == expected
        assert not list((out / run / "trace").rglob("*.pftrace"))
        assert "No .pftrace for this host" in unescape((out / run / "trace.html").read_text())


def test_trace_proto_becomes_chrome_events_as_tensorboard_converted_them(built):
    _profile, out, _summary, _ = built
    (c,) = _manifest(out, "tpu")["chunks"]
    assert c["file"] == "10.0.0.2/10.0.0.2-000.json.gz" and c["first_step"] is None
    doc = _chunk(out / "tpu" / "trace" / c["file"])
    proto = _trace_proto()
    events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert Counter(map(_key, events)) == Counter(map(_key, chrome_events_of(proto)))
    names = {(e.get("pid"), e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] in ("process_name", "thread_name")}
    assert names == {(1, None): "/host:CPU", (3, None): "TPU:0", (1, 2): "/host:CPU resource 2",
                     (1, 5): "/host:CPU resource 5", (3, 2): "TPU:0 resource 2", (3, 5): "TPU:0 resource 5"}
    assert c["first_us"] == 0.25 and c["last_us"] == pytest.approx(39.25 + 0.375)
    assert sum(1 for e in events if e["ph"] == "i") == 10


def test_a_tracetable_is_exported_as_the_same_trace_file_would_be(built):
    _profile, out, summary, _ = built
    (table,) = _manifest(out, "tracetable")["chunks"]
    (proto,) = _manifest(out, "tpu")["chunks"]
    assert table["file"] == "10.0.0.3/10.0.0.3-000.json.gz"
    events = [e for e in _chunk(out / "tracetable" / "trace" / table["file"])["traceEvents"] if e["ph"] != "M"]
    assert Counter(map(_key, events)) == Counter(map(_key, chrome_events_of(_trace_proto())))
    assert {k: table[k] for k in ("first_us", "last_us", "events")} == {
        k: proto[k] for k in ("first_us", "last_us", "events")}
    assert summary["runs"]["tracetable"]["trace"]["events"] == 40
    html = unescape((out / "tracetable" / "trace.html").read_text())
    assert "Cloud TPU streaming trace table" in html and "does not read" not in html


@needs_real_trace
def test_a_real_trace_json_gz_is_exported_whole(built):
    _profile, out, summary, _ = built
    source = json.loads(gzip.decompress(REAL_TRACE.read_bytes()))
    expected = [e for e in source["traceEvents"] if e]  # TensorFlow's writer closes its list with `{}`
    (c,) = _manifest(out, "tf22")["chunks"]
    doc = _chunk(out / "tf22" / "trace" / c["file"])
    assert Counter(map(_key, doc["traceEvents"])) == Counter(map(_key, expected))
    assert doc["metadata"]["highres-ticks"] is True and doc["metadata"]["host"] == "localhost"
    assert summary["runs"]["tf22"]["trace"]["events"] == c["events"] == sum(1 for e in expected if e["ph"] != "M")
    html = unescape((out / "tf22" / "trace.html").read_text())
    assert f'href="trace/{c["file"]}" download' in html and "data-vega-spec" in html
    assert "Chrome trace JSON" in html
    assert summary["runs"]["tf22"]["overview"]["device_type"] == "CPU"  # the host's tool file, beside its trace
    assert_links_resolve(out)


@needs_real_trace
def test_a_large_file_is_cut_on_time_without_losing_events(tmp_path):
    trace = parse_chrome_trace(str(REAL_TRACE), REAL_TRACE.read_bytes())
    export = ChromeTraceExport("h", "r", tmp_path, max_events=5000)
    export.add(trace)
    result = export.finish()
    assert len(result.chunks) >= len(trace.events) / 5000
    seen: Counter = Counter()
    previous_last_start = -np.inf
    for c in result.chunks:
        doc = _chunk(tmp_path / c.file.split("/", 1)[1])
        meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
        events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
        assert Counter(map(_key, meta)) == Counter(map(_key, trace.meta))  # self-contained
        assert len(events) == c.events <= 5000
        starts = [e["ts"] for e in events]
        assert min(starts) > previous_last_start  # cut on time, events starting together kept together
        assert min(starts) == c.first_us and max(e["ts"] + e.get("dur", 0) for e in events) == c.last_us
        previous_last_start = max(starts)
        seen.update(map(_key, events))
    assert seen == Counter(map(_key, trace.events))
    # The page's cuts count from the first event; the chunks keep the file's times.
    assert result.origin_us == trace.ts_us[~np.isnan(trace.ts_us)].min() == result.chunks[0].first_us
    assert result.cuts_us == pytest.approx([c.first_us - result.origin_us for c in result.chunks[1:]], abs=1e-6)
    assert result.activity is not None and set(result.row_labels) <= set(result.activity["label"])


def test_chunk_caps_never_split_events_starting_together():
    ts = np.array([5.0, 1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0])
    order, bounds = plan_time_chunks(ts, 10.0, max_events=2)
    starts = [sorted(ts[order[lo:hi]].tolist()) for lo, hi in bounds]
    assert starts == [[1.0, 1.0, 1.0], [2.0], [3.0, 3.0], [4.0, 5.0]]
    _order, by_bytes = plan_time_chunks(np.arange(10.0), 100.0, max_bytes=250)
    assert [hi - lo for lo, hi in by_bytes] == [2, 2, 2, 2, 2]


def test_one_input_file_in_memory_at_a_time(tmp_path, monkeypatch):
    """Each timeline file's events are gone before the next file is read."""
    paths = []
    for step in STEPS:
        path = tmp_path / f"timeline-{step}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(_timeline(step)).encode()))
        paths.append(str(path))
    alive: list[weakref.ref] = []
    read = legacy_trace.read_trace

    def tracked(path, data):
        assert all(ref() is None for ref in alive), "a previous file's events are still held"
        trace = read(path, data)
        alive.append(weakref.ref(trace))
        return trace

    monkeypatch.setattr(legacy_trace, "read_trace", tracked)
    part, timeline = legacy_trace.export_legacy_trace("timeline", "run", paths, str(tmp_path / "site"))
    assert len(alive) == 3 and len(part.export.chunks) == 3 and timeline is not None
    assert [s for s, _a, _b in part.export.steps] == list(STEPS)
    assert part.not_produced == []  # JSON was asked for and written


def test_bad_inputs_raise_errors_naming_the_file():
    with pytest.raises(CaptureError, match="is not JSON") as info:
        parse_chrome_trace("/logs/run/h.trace.json", b"[{]")
    assert info.value.path == "/logs/run/h.trace.json"
    with pytest.raises(CaptureError, match="an entry of traceEvents is not an object"):
        parse_chrome_trace("t.json", b'{"traceEvents": [1, 2]}')
    with pytest.raises(CaptureError, match="ts or dur is not a number"):
        parse_chrome_trace("t.json", b'[{"ph": "X", "ts": {"a": 1}}]')
    with pytest.raises(CaptureError, match="no devices and no trace events"):
        parse_trace_proto("h.trace", b"")
    assert parse_chrome_trace("t.json", b'[{"ph": "X", "ts": 1, "dur": 2}, {}]').events == [
        {"ph": "X", "ts": 1, "dur": 2}]


@needs_legacy
def test_cloud_tpu_memory_viewer_json_on_the_memory_viewer_page(tmp_path):
    run = tmp_path / "plugins" / "profile" / "profile_demo"
    run.mkdir(parents=True)
    shutil.copy(LEGACY_RUNS / "profile_demo" / "profile_demo.memory_viewer.json", run)
    out = tmp_path / "site"
    assert build_site([str(tmp_path)], BuildOptions(output=str(out), jobs=1)).exit_code == EXIT_OK
    summary = json.loads((out / "summary.json").read_text())["runs"]["profile_demo"]
    # Buffers `foo` (1 MiB, f32[]) and `bar` (2 MiB, f32[32,16,16,32] = 1 MiB unpadded) both live at the peak.
    assert summary["memory"] == {"modules": {"Good Module": {"peak_bytes": 3 << 20,
                                                             "peak_unpadded_bytes": (1 << 20) + 4}}}
    import pandas as pd

    from reportgen.core.pages import memory_viewer_csv

    # A module name with a space: its CSV name says so by a hash of the name (reportgen/names.py).
    assert memory_viewer_csv("Good Module") == "data/memory_viewer/Good_Module~11e7750810545c6d__buffers.csv"
    buffers = pd.read_csv(out / "profile_demo" / memory_viewer_csv("Good Module"))
    assert buffers["Instruction"].tolist() == ["foo", "bar"]
    assert buffers["Size (bytes)"].tolist() == [1 << 20, 2 << 20]
    assert buffers["Size rank"].tolist() == [2, 1] and set(buffers["Category"]) == {"Thread-local"}
    html = unescape((out / "profile_demo" / "memory_viewer.html").read_text())
    assert "What this format cannot provide" in html and "single buffer allocation" in html
    assert "3.0 MiB" in html  # the peak, in the unit its size reads best in


@needs_real_trace
@needs_browser
def test_the_legacy_trace_page_renders_in_a_browser(built, tmp_path):
    from selenium.webdriver.common.by import By

    _profile, out, _summary, _ = built
    with chromium(tmp_path) as driver:
        driver.implicitly_wait(10)
        driver.get((out / "tf22" / "trace.html").as_uri())
        assert driver.find_elements(By.CSS_SELECTOR, ".chart svg")  # the activity overview drew
        rows = driver.find_elements(By.CSS_SELECTOR, "#trace-files-1 tbody tr")
        assert len(rows) == 1 and "localhost-000.json.gz" in rows[0].text
        assert console_errors(driver) == []
