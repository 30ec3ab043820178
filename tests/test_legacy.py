"""Older captures: per-tool files (TF 2.2 protobuf, Cloud TPU JSON) and
ProfilerHook timelines build into pages holding the files' own numbers."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from reportgen.errors import CaptureError
from reportgen.legacy.tool_files import decode_legacy_host
from reportgen.loaders.logdir import discover
from reportgen.loaders.proto import legacy_tools_pb2 as pb
from reportgen.pipeline.build import EXIT_OK, EXIT_PARTIAL, BuildOptions, build_site
from tests.clirun import reportgen
from tests.conftest import CAPTURES, REPO
from tests.sitecheck import assert_links_resolve

LEGACY = CAPTURES / "legacy"
LEGACY_RUNS = LEGACY / "plugins" / "profile"
SAMPLE = REPO / "reportgen" / "sample"
needs_legacy = pytest.mark.skipif(not LEGACY.exists(), reason=f"legacy captures not present at {LEGACY}")


@pytest.fixture(scope="module")
def legacy_site(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("legacy") / "site"
    report = build_site([str(LEGACY)], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_OK
    return out, json.loads((out / "summary.json").read_text())


@needs_legacy
def test_every_legacy_run_is_found_without_an_xspace():
    runs = {r.name: r for r in discover(str(LEGACY))}
    assert set(runs) == {"Cloud-TPU", "GPU-compute-bound", "GPU-input-bound", "profile_demo"}
    for run in runs.values():
        assert all(h.legacy and not h.path.endswith(".xplane.pb") for h in run.hosts)


@needs_legacy
def test_richest_source_per_tool_in_a_mixed_folder():
    (demo,) = discover(str(LEGACY_RUNS / "profile_demo"))
    names = sorted(p.rsplit("/", 1)[-1] for p in demo.hosts[0].legacy)
    # profile_demo holds both .pb and .json for the overview and the input pipeline.
    assert names == ["profile_demo.input_pipeline.pb", "profile_demo.memory_viewer.json",
                     "profile_demo.op_profile.json", "profile_demo.overview_page.pb", "profile_demo.pod_viewer.json",
                     "profile_demo.tensorflow_stats.pb"]


@needs_legacy
def test_an_xspace_wins_over_older_files_of_the_same_host(tmp_path):
    run = tmp_path / "plugins" / "profile" / "mixed"
    run.mkdir(parents=True)
    xspace = next((SAMPLE / "plugins" / "profile").glob("*/*.xplane.pb"))
    shutil.copy(xspace, run / "worker.xplane.pb")
    (run / "worker.overview_page.json").write_text("[]")
    shutil.copy(LEGACY_RUNS / "Cloud-TPU" / "10.240.1.50.overview_page.json", run / "other.overview_page.json")
    (run_source,) = discover(str(tmp_path))
    hosts = {h.host: h for h in run_source.hosts}
    assert hosts["worker"].legacy == () and hosts["worker"].path.endswith("worker.xplane.pb")
    assert hosts["other"].legacy and hosts["other"].path.endswith("other.overview_page.json")
    out = tmp_path / "site"
    assert build_site([str(tmp_path)], BuildOptions(output=str(out), jobs=1)).exit_code == EXIT_OK
    block = json.loads((out / "summary.json").read_text())["runs"]["mixed"]
    assert {"overview", "legacy_overview"} <= set(block["tools"])
    assert "source" not in block["overview"]  # the XSpace host's block, not merged with the older file's
    # One run with both kinds of host keeps the XSpace inventory as its inventory page.
    assert "Planes and lines" in (out / "mixed" / "inventory.html").read_text()


@needs_legacy
def test_gpu_input_bound_overview_holds_the_files_numbers(legacy_site):
    out, summary = legacy_site
    page = pb.OverviewPage.FromString((LEGACY_RUNS / "GPU-input-bound" / "localhost.overview_page.pb").read_bytes())
    expected = page.input_analysis.step_time_summary
    block = summary["runs"]["GPU-input-bound"]["overview"]
    assert block["step_time_ms"]["average"] == pytest.approx(expected.average)
    assert block["step_time_ms"]["average"] == pytest.approx(1114.4989, abs=1e-3)
    assert block["steps"] == 11
    assert block["input_bound"] == "HIGHLY"
    assert block["input_percent"] == pytest.approx(81.401, abs=1e-3)  # the statement's 81.4%
    assert f"{block['input_percent']:.1f}%" in page.recommendation.statement
    assert block["breakdown_ms"]["input"] == pytest.approx(907.2137, abs=1e-3)
    html = (out / "GPU-input-bound" / "legacy_overview.html").read_text()
    assert "1,114.5" in html or "1114.5" in html
    assert page.recommendation.statement in html
    assert "HIGHLY input-bound because 81.4%" in html


@needs_legacy
def test_every_run_gets_the_pages_its_files_allow(legacy_site):
    out, summary = legacy_site
    runs = summary["runs"]
    assert set(runs["GPU-compute-bound"]["tools"]) == {"legacy_overview", "legacy_input_pipeline"}
    assert set(runs["GPU-input-bound"]["tools"]) == {"legacy_overview", "legacy_input_pipeline", "legacy_tf_stats"}
    pages = {"legacy_overview", "legacy_input_pipeline", "legacy_tf_stats", "legacy_pod_viewer"}
    assert set(runs["Cloud-TPU"]["tools"]) == pages
    assert set(runs["profile_demo"]["tools"]) == pages | {"legacy_op_profile", "memory_viewer"}
    assert runs["profile_demo"]["op_profile"] == {
        "flops_utilization_percent": 40.0,
        "categories": [{"name": "Good ops", "time_percent": 60.0}, {"name": "Overhead", "time_percent": 40.0}],
    }
    assert runs["Cloud-TPU"]["legacy_pod_viewer"] == {"steps": 3, "cores": 8, "all_reduce_ops": 37}
    pod = (out / "Cloud-TPU" / "legacy_pod_viewer.html").read_text()
    assert "AllReduce Compute" in pod and "fusion.35" in pod
    assert runs["GPU-compute-bound"]["overview"]["input_bound"] == "NOT"
    tpu = runs["Cloud-TPU"]["overview"]
    assert tpu["device_type"] == "TPU v2" and tpu["step_time_ms"]["average"] == 313.8
    assert tpu["host_idle_percent"] == 87.7 and tpu["device_core_count"] == 8
    assert runs["Cloud-TPU"]["input_pipeline"]["host_ms"]["preprocessing"] == pytest.approx(3720.194088)
    assert runs["GPU-input-bound"]["tf_stats"]["ops"] == 9747
    # The conclusion's percent, not the mean of per-step percents (43.4).
    demo = runs["profile_demo"]
    assert demo["overview"]["input_percent"] == pytest.approx(68.930, abs=1e-3)
    assert demo["input_pipeline"]["input_percent"] == pytest.approx(68.930, abs=1e-3)
    assert "68.9%" in (out / "profile_demo" / "legacy_overview.html").read_text()
    for name in runs:
        index = (out / name / "index.html").read_text()
        assert "legacy_overview.html" in index and "inventory.html" in index
    # The inventory page names the files read: the richest per tool.
    demo_index = (out / "profile_demo" / "inventory.html").read_text()
    assert "profile_demo.overview_page.pb" in demo_index and "profile_demo.overview_page.json" not in demo_index
    # A page says what the format cannot provide rather than drawing empty charts.
    assert "no memory timeline" in (out / "Cloud-TPU" / "legacy_overview.html").read_text()
    assert_links_resolve(out)
    tfstats = (out / "Cloud-TPU" / "legacy_tf_stats.html").read_text()
    assert "while/body/_1/gradient_tape/resnet50/res2b_branch2a/Conv2DBackpropInput" in tfstats


def _chrome_trace(step: int, ops: list[tuple[str, str, str, float, float]]) -> dict:
    """A ProfilerHook-style step-stats trace: ops as (device, name, type, ts_us, dur_us)."""
    devices = sorted({d for d, *_ in ops})
    events = [{"ph": "M", "name": "process_name", "pid": i, "args": {"name": d}} for i, d in enumerate(devices)]
    for device, name, op_type, ts, dur in ops:
        events.append({"ph": "X", "cat": "Op", "name": op_type, "pid": devices.index(device), "tid": 0,
                       "ts": ts + 1000 * step, "dur": dur, "args": {"name": name, "op": op_type}})
    return {"traceEvents": events}


GPU = "/job:localhost/replica:0/task:0/device:GPU:0 Compute"
CPU = "/job:localhost/replica:0/task:0/device:CPU:0 Compute"


def test_profiler_hook_timelines_build_an_op_table_and_step_chart(tmp_path):
    run = tmp_path / "plugins" / "profile" / "hook"
    run.mkdir(parents=True)
    for step, scale in ((100, 1.0), (200, 2.0), (300, 1.5)):
        ops = [(GPU, "dense/MatMul", "MatMul", 0, 40 * scale), (GPU, "dense_1/MatMul", "MatMul", 50, 10 * scale),
               (GPU, "Relu", "Relu", 70, 5), (CPU, "IteratorGetNext", "IteratorGetNext", 0, 20)]
        (run / f"timeline-{step}.json").write_text(json.dumps(_chrome_trace(step, ops)))
    out = tmp_path / "site"
    report = build_site([str(tmp_path)], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_OK
    summary = json.loads((out / "summary.json").read_text())["runs"]["hook"]
    assert summary["hosts"] == ["timeline"]
    assert summary["legacy_timeline"] == {"steps": 3, "ops": 4, "step_time_ms_average": pytest.approx(0.230 / 3)}
    import pandas as pd

    ops = pd.read_csv(out / "hook" / "data" / "legacy_timeline" / "op_stats.csv")
    matmul = ops[(ops["device"] == GPU) & (ops["op"] == "dense/MatMul")].iloc[0]
    assert matmul["occurrences"] == 3 and matmul["total_us"] == pytest.approx(40 * 4.5)
    types = pd.read_csv(out / "hook" / "data" / "legacy_timeline" / "op_type_stats.csv")
    gpu_matmul = types[(types["device"] == GPU) & (types["op_type"] == "MatMul")].iloc[0]
    assert gpu_matmul["total_us"] == pytest.approx(50 * 4.5) and gpu_matmul["occurrences"] == 6
    steps = pd.read_csv(out / "hook" / "data" / "legacy_timeline" / "steps.csv")
    assert steps["step"].tolist() == [100, 200, 300]
    assert steps["step_time_ms"].tolist() == pytest.approx([0.075, 0.080, 0.075])
    html = (out / "hook" / "legacy_timeline.html").read_text()
    assert 'data-vega-spec="timeline-steps-spec"' in html and "dense/MatMul" in html
    assert "no memory timeline" in html
    assert_links_resolve(out)
    # ProfilerHook writes its timelines straight into the model folder: that folder is the run.
    (direct,) = discover(str(run))
    assert direct.name == "hook" and [h.host for h in direct.hosts] == ["timeline"]
    assert len(direct.hosts[0].legacy) == 3


def test_a_step_number_beyond_64_bits_is_that_files_input_error(tmp_path):
    run = tmp_path / "plugins" / "profile" / "hook"
    run.mkdir(parents=True)
    huge = "99999999999999999999"  # > 2^64: no int64 global step, and no JSON writer here holds it
    for step in ("0", huge):
        (run / f"timeline-{step}.json").write_text(json.dumps(_chrome_trace(0, [(GPU, "a/MatMul", "MatMul", 0, 4)])))
    out = tmp_path / "site"
    report = build_site([str(tmp_path)], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_PARTIAL
    doc = json.loads((out / "summary.json").read_text())
    (error,) = doc["errors"]
    assert error["path"] == f"hook/timeline-{huge}.json" and "beyond the 64-bit step numbers" in error["message"]
    assert "internal error" not in error["message"]
    assert doc["runs"]["hook"]["legacy_timeline"]["steps"] == 1  # timeline-0.json still builds


def _one_op_tf_stats() -> bytes:
    """A `.tensorflow_stats.pb` holding one host op: a/MatMul, 2 occurrences, 10 µs."""
    return pb.TfStatsDatabase(without_idle=pb.TfStatsTable(tf_stats_record=[
        pb.TfStatsRecord(rank=1, host_or_device="Host", op_type="MatMul", op_name="a/MatMul", occurrences=2,
                         total_self_time_in_us=10.0)])).SerializeToString()


def test_a_broken_tool_file_is_reported_not_fatal(tmp_path):
    with pytest.raises(CaptureError) as info:
        decode_legacy_host("h", [("h.overview_page.json", b"{not json")])
    assert "is not JSON" in info.value.problem
    run = tmp_path / "logs" / "plugins" / "profile" / "broken"
    run.mkdir(parents=True)
    (run / "bad.overview_page.pb").write_bytes(b"\xff\xff\xff\xff")
    (run / "good.tensorflow_stats.pb").write_bytes(
        _one_op_tf_stats())
    out = tmp_path / "site"
    report = build_site([str(tmp_path / "logs")], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_PARTIAL
    doc = json.loads((out / "summary.json").read_text())
    (error,) = doc["errors"]
    assert error["path"] == "broken/bad.overview_page.pb"
    assert "cannot be decoded as .overview_page.pb" in error["message"] and str(tmp_path) not in error["message"]
    block = doc["runs"]["broken"]["tf_stats"]
    assert {k: block[k] for k in ("ops", "host_self_us", "device_self_us")} == {"ops": 1, "host_self_us": 10.0,
                                                                               "device_self_us": 0.0}


def test_a_broken_tool_file_keeps_the_same_hosts_other_files(tmp_path):
    run = tmp_path / "logs" / "plugins" / "profile" / "partly"
    run.mkdir(parents=True)
    (run / "h.overview_page.pb").write_bytes(b"\xff\xff\xff\xff")
    (run / "h.input_pipeline.json").write_text("[{")
    (run / "h.tensorflow_stats.pb").write_bytes(
        _one_op_tf_stats())
    out = tmp_path / "site"
    report = build_site([str(tmp_path / "logs")], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_PARTIAL and report.hosts == 1
    doc = json.loads((out / "summary.json").read_text())
    assert {e["path"]: e["message"].split(": ", 1)[1].split(" (")[0] for e in doc["errors"]} == {
        "partly/h.overview_page.pb": "cannot be decoded as .overview_page.pb",
        "partly/h.input_pipeline.json": "is not JSON"}
    assert {e["local_message"].split(": ")[0] for e in report.errors} == {
        str(run / "h.overview_page.pb"), str(run / "h.input_pipeline.json")}
    assert doc["runs"]["partly"]["hosts"] == ["h"]
    block = doc["runs"]["partly"]["tf_stats"]
    assert {k: block[k] for k in ("ops", "host_self_us", "device_self_us")} == {"ops": 1, "host_self_us": 10.0,
                                                                               "device_self_us": 0.0}
    assert [op["name"] for op in block["top_ops"]] == ["a/MatMul"]
    page = (out / "partly" / "index.html").read_text()
    assert "<code>partly/h.overview_page.pb</code>: cannot be decoded" in page
    inventory = (out / "partly" / "inventory.html").read_text()
    assert "<td><code>h.tensorflow_stats.pb</code></td>" in inventory  # the only file read


@needs_legacy
def test_a_legacy_run_and_an_xspace_run_share_the_overview_keys(tmp_path):
    out = tmp_path / "site"
    report = build_site([str(LEGACY_RUNS / "GPU-input-bound"), str(SAMPLE)],
                        BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == EXIT_OK
    runs = json.loads((out / "summary.json").read_text())["runs"]
    legacy = runs["GPU-input-bound"]["overview"]
    xspace = next(r["overview"] for name, r in runs.items() if name != "GPU-input-bound" and "overview" in r)
    shared = {"steps", "step_time_ms", "breakdown_ms", "input_percent", "input_bound", "device_type"}
    assert shared <= set(legacy) and shared <= set(xspace)
    assert set(legacy["breakdown_ms"]) == set(xspace["breakdown_ms"])
    assert set(legacy["step_time_ms"]) == set(xspace["step_time_ms"])


@needs_legacy
def test_a_mixed_folder_uses_the_richest_file_per_tool(tmp_path):
    run = tmp_path / "plugins" / "profile" / "mixed"
    run.mkdir(parents=True)
    source = LEGACY_RUNS / "GPU-compute-bound"
    shutil.copy(source / "localhost.overview_page.pb", run)
    # A Cloud TPU JSON overview of the same host: the protobuf one is richer and wins.
    shutil.copy(LEGACY_RUNS / "Cloud-TPU" / "10.240.1.50.overview_page.json", run / "localhost.overview_page.json")
    # Only JSON for the input pipeline: that is the source used.
    shutil.copy(LEGACY_RUNS / "Cloud-TPU" / "10.240.1.50.input_pipeline.json", run / "localhost.input_pipeline.json")
    kernels = pb.KernelStatsDb(reports=[
        pb.KernelReport(name="volta_sgemm_128x64_nn", op_name="dense/MatMul", total_duration_ns=3_000_000,
                        min_duration_ns=900_000, max_duration_ns=1_100_000, occurrences=3,
                        is_kernel_using_tensor_core=False, block_dim=[128, 1, 1], grid_dim=[64, 2, 1]),
        pb.KernelReport(name="volta_h884gemm", op_name="conv/Conv2D", total_duration_ns=1_000_000, occurrences=2,
                        is_kernel_using_tensor_core=True, is_op_tensor_core_eligible=True),
    ])
    (run / "localhost.kernel_stats.pb").write_bytes(kernels.SerializeToString())
    # TF 2.3's memory_profile.json.gz: proto3 JSON, int64 values as strings.
    snapshots = [
        {"timeOffsetPs": str(t * 10**9), "aggregationStats": {"heapAllocatedBytes": str(heap),
                                                              "stackReservedBytes": "1024"},
         "activityMetadata": {"memoryActivity": activity, "allocationBytes": "512"}}
        for t, heap, activity in ((0, 4096, "ALLOCATION"), (2, 8192, "ALLOCATION"), (5, 2048, "DEALLOCATION"))
    ]
    memory = {"memoryProfilePerAllocator": {"GPU_0_bfc": {
        "memoryProfileSnapshots": snapshots,
        "profileSummary": {"peakBytesUsageLifetime": "10000", "memoryCapacity": "16000",
                           "peakStatsTimePs": "2000000000",
                           "peakStats": {"peakBytesInUse": "9216", "fragmentation": 0.25}}}}}
    (run / "localhost.memory_profile.json.gz").write_bytes(gzip.compress(json.dumps(memory).encode()))
    out = tmp_path / "site"
    assert build_site([str(tmp_path)], BuildOptions(output=str(out), jobs=1)).exit_code == EXIT_OK
    block = json.loads((out / "summary.json").read_text())["runs"]["mixed"]
    assert block["overview"]["source"] == "localhost.overview_page.pb"
    assert block["overview"]["device_type"] == "GPU" and block["overview"]["input_bound"] == "NOT"
    assert block["input_pipeline"]["host_ms"]["preprocessing"] == pytest.approx(3720.194088)
    assert block["kernel_stats"] == {"kernels": 2, "total_us": 4000.0, "tensor_core_percent": 25.0}
    assert block["memory"] == {"profiles": {"localhost/GPU_0_bfc": {
        "peak_bytes": 9216, "peak_time_ms": 2.0, "capacity_bytes": 16000, "fragmentation_percent": 25.0,
        "allocations": 2, "deallocations": 1}}}
    memory_page = (out / "mixed" / "legacy_memory_profile.html").read_text()
    assert 'data-vega-spec="mem-localhost-0-spec"' in memory_page
    timeline = (out / "mixed" / "data" / "legacy_memory_profile" / "localhost__GPU_0_bfc__timeline.csv").read_text()
    assert timeline.splitlines()[1:] == ["0.0,4096,1024,0", "2.0,8192,1024,0", "5.0,2048,1024,0"]
    html = (out / "mixed" / "legacy_kernel_stats.html").read_text()
    assert "volta_sgemm_128x64_nn" in html and "128,1,1" in html


@needs_legacy
def test_reportgen_compare_reads_a_legacy_run_against_an_xspace_run(tmp_path):
    proc = reportgen("compare", str(LEGACY_RUNS / "GPU-input-bound"),
                     str(SAMPLE / "plugins" / "profile" / "tf_keras_input_bound"), "-o", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    (page,) = (tmp_path / "cmp" / "compare").glob("*.html")
    text = page.read_text()
    assert "1,114.50 ms" in text and "81.4%" in text  # the legacy run's step time and input share
