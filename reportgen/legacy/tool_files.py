"""Per-tool files written by older profilers, decoded into plain tables (`decode_legacy_host`).

Two generations of tool files are read:

- TF 2.2-2.3 (`<host>.overview_page.pb`, `.input_pipeline.pb`,
  `.tensorflow_stats.pb`, `.kernel_stats.pb`): XProf's result protos, decoded
  with the subset in `proto/legacy_tools.proto`; `.memory_profile.json.gz`:
  the MemoryProfile proto in its JSON form;
- Cloud TPU 1.9 `capture_tpu_profile` (`<host>.overview_page.json`,
  `.input_pipeline.json`, `.op_profile.json`, `.pod_viewer.json`): Google-Charts DataTables whose
  `p` properties carry the summary numbers as strings;
- Cloud TPU's `<host>.memory_viewer.json`: decoded by `memory_viewer.py`.

Timelines (`timeline-<step>.json`, `<host>.trace.json.gz`, Cloud TPU
`<host>.trace`) are read by `chrome_trace.py`, one file at a time, in the host
stage that exports them (`trace_export.py`); the op table of ProfilerHook steps
is accumulated from them (`step_stats.py`). ProfilerHook steps given here (the
files of a host without a trace export) build the same table.

Each file becomes one picklable result holding only what the file holds;
`None` fields are what that format cannot provide.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pandas as pd

from reportgen.core.steps.categories import CATEGORY_KEYS
from reportgen.errors import CaptureError
from reportgen.legacy.chrome_trace import parse_chrome_trace
from reportgen.legacy.memory_viewer import LegacyMemoryViewer, memory_viewer_from_json
from reportgen.legacy.step_stats import LegacyTimeline, TimelineSteps
from reportgen.loaders import limits
from reportgen.loaders.logdir import file_name
from reportgen.loaders.older_formats import TIMELINE_PATTERN, is_trace_source
from reportgen.loaders.proto import legacy_tools_pb2 as pb

# Step-time categories of XProf's generic (GPU/CPU) breakdown, in ms.
STEP_COLUMNS = {
    "device_compute_ms": "device_compute",
    "device_to_device_ms": "device_to_device",
    "device_collectives_ms": "device_collectives",
    "host_compute_ms": "host_compute",
    "host_prepare_ms": "kernel_launch",
    "host_wait_input_ms": "input",
    "host_to_device_ms": "input",
    "output_ms": "output",
    "host_compile_ms": "compile",
    "unknown_time_ms": "other",
}


@dataclass
class StepTime:
    average: float
    minimum: float
    maximum: float
    standard_deviation: float


@dataclass
class LegacyOverview:
    source: str  # file name
    step_time: StepTime | None
    steps: pd.DataFrame  # step, step_time_ms, then one column per category (ms)
    breakdown_ms: dict[str, float] | None
    input_percent: float | None
    input_bound: str | None  # HIGHLY / MODERATELY / POTENTIALLY / NOT, from the statement
    bottleneck: str  # host / device / both
    statement: str
    device_idle_percent: float | None
    host_idle_percent: float | None
    device_type: str
    device_core_count: int | None
    host_count: int | None
    top_ops: pd.DataFrame  # operation, category, self_time_percent, cumulative_percent, gflops


@dataclass
class LegacyInputPipeline:
    source: str
    step_time: StepTime | None
    input_percent: float | None
    conclusion: str
    next_step: str
    host_us: dict[str, float]  # demanded_file_read … unclassified
    input_ops: pd.DataFrame  # op, count, time_ms, time_percent, self_time_ms, self_time_percent, category
    steps: pd.DataFrame


@dataclass
class LegacyTfStats:
    source: str
    device_type: str
    ops: pd.DataFrame  # without idle: XProf's table columns


@dataclass
class LegacyKernelStats:
    source: str
    kernels: pd.DataFrame  # XProf's kernel_stats table columns


@dataclass
class LegacyOpProfile:
    source: str
    flops_percent: float | None  # the root's FLOPS utilization
    nodes: pd.DataFrame  # depth, path, name, category, op, time_percent, flops_percent


@dataclass
class LegacyAllocator:
    memory_id: str
    peak_bytes: int  # peak in use within the window (XProf's peak_bytes_in_use)
    peak_time_ms: float
    capacity_bytes: int
    fragmentation_percent: float
    peak_bytes_usage_lifetime: int
    allocations: int
    deallocations: int
    timeline: pd.DataFrame  # time_ms, heap_bytes, stack_bytes, free_bytes


@dataclass
class LegacyMemoryProfile:
    source: str
    allocators: list[LegacyAllocator]


@dataclass
class LegacyPodViewer:
    source: str
    tpu_type: str
    cores: pd.DataFrame  # step, core, replica, host, bottleneck, then the file's *Us durations
    all_reduce_ops: pd.DataFrame  # step, name, occurrences, duration_us, data_size_bytes


@dataclass
class LegacyHost:
    """Everything the per-tool files of one host hold; None = no such file."""

    host: str
    overview: LegacyOverview | None = None
    input_pipeline: LegacyInputPipeline | None = None
    tf_stats: LegacyTfStats | None = None
    kernel_stats: LegacyKernelStats | None = None
    pod_viewer: LegacyPodViewer | None = None
    op_profile: LegacyOpProfile | None = None
    memory_profile: LegacyMemoryProfile | None = None
    memory_viewer: LegacyMemoryViewer | None = None
    timeline: LegacyTimeline | None = None
    files: list[str] = field(default_factory=list)

    @property
    def device_type(self) -> str:
        for source in (self.overview, self.tf_stats):
            if source is not None and source.device_type:
                return source.device_type
        return "CPU/GPU (step stats)" if self.timeline is not None else "unknown"


def _input_bound(statement: str) -> str | None:
    match = re.search(r"\b(HIGHLY|MODERATELY|POTENTIALLY|NOT)\b input-bound", statement)
    return match.group(1) if match else None


def _summary(s: pb.StepSummary) -> StepTime:
    return StepTime(s.average, s.minimum, s.maximum, s.standard_deviation)


# --- TF 2.2-era protobuf results -------------------------------------------


def _steps_from_details(result: pb.InputPipelineAnalysisResult) -> pd.DataFrame:
    rows = []
    for item in result.step_details:
        # Any payloads name XProf's package; the bytes are the same message.
        detail = pb.PerGenericStepDetails.FromString(item.value)
        row = {"step": detail.step_name or str(detail.step_number), "step_time_ms": detail.step_time_ms}
        for key in CATEGORY_KEYS:
            row[key] = 0.0
        for fname, key in STEP_COLUMNS.items():
            row[key] += getattr(detail, fname)
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", "step_time_ms", *CATEGORY_KEYS])


def _breakdown_from_proto(result: pb.InputPipelineAnalysisResult) -> dict[str, float] | None:
    if not result.step_time_breakdown.value:
        return None
    b = pb.GenericStepTimeBreakdown.FromString(result.step_time_breakdown.value)
    out = {k: 0.0 for k in CATEGORY_KEYS}
    summaries = {
        "device_compute_ms_summary": "device_compute", "device_to_device_ms_summary": "device_to_device",
        "device_collectives_ms_summary": "device_collectives", "host_compute_ms_summary": "host_compute",
        "host_prepare_ms_summary": "kernel_launch", "input_ms_summary": "input", "output_ms_summary": "output",
        "host_compile_ms_summary": "compile", "unknown_time_ms_summary": "other",
    }
    for fname, key in summaries.items():
        out[key] += getattr(b, fname).average
    return out


def _input_percent(result: pb.InputPipelineAnalysisResult) -> float | None:
    """XProf's input percent: average input time over average step time.

    TF 2.2 did not write the scalar yet; its conclusion quotes this same
    ratio, computed here from the breakdown. (`input_percent_summary` is the
    mean of per-step percentages, a different number: 43.4 against the 68.9
    quoted for profile_demo.)
    """
    if result.input_percent:
        return result.input_percent
    if not result.step_time_breakdown.value or not result.step_time_summary.average:
        return None
    breakdown = pb.GenericStepTimeBreakdown.FromString(result.step_time_breakdown.value)
    return 100 * breakdown.input_ms_summary.average / result.step_time_summary.average


def _input_ops(result: pb.InputPipelineAnalysisResult) -> pd.DataFrame:
    return pd.DataFrame(
        [(o.op_name, int(o.count), o.time_in_ms, o.time_in_percent, o.self_time_in_ms, o.self_time_in_percent,
          o.category) for o in result.input_op_details],
        columns=["op", "count", "time_ms", "time_percent", "self_time_ms", "self_time_percent", "category"],
    )


def _host_us(result: pb.InputPipelineAnalysisResult) -> dict[str, float]:
    b = result.input_time_breakdown
    return {"demanded_file_read": b.demanded_file_read_us, "advanced_file_read": b.advanced_file_read_us,
            "preprocessing": b.preprocessing_us, "enqueue": b.enqueue_us,
            "unclassified": b.unclassified_non_enqueue_us}


def overview_from_pb(name: str, data: bytes) -> LegacyOverview:
    page = pb.OverviewPage.FromString(data)
    result = page.input_analysis
    statement = page.recommendation.statement
    env = page.run_environment
    ops = pd.DataFrame(
        [(o.name, o.category, 100 * o.self_time_fraction, 100 * o.cumulative_time_fraction, o.flop_rate)
         for o in page.analysis.top_device_ops],
        columns=["operation", "category", "self_time_percent", "cumulative_percent", "gflops"],
    )
    return LegacyOverview(
        source=name,
        step_time=_summary(result.step_time_summary),
        steps=_steps_from_details(result),
        breakdown_ms=_breakdown_from_proto(result),
        input_percent=_input_percent(result),
        input_bound=_input_bound(statement),
        bottleneck=page.recommendation.bottleneck,
        statement=statement,
        device_idle_percent=page.analysis.device_idle_time_percent,
        host_idle_percent=page.analysis.host_idle_time_percent,
        device_type=env.device_type or result.hardware_type,
        device_core_count=env.device_core_count,
        host_count=env.host_count,
        top_ops=ops,
    )


def input_pipeline_from_pb(name: str, data: bytes) -> LegacyInputPipeline:
    result = pb.InputPipelineAnalysisResult.FromString(data)
    analysis = pb.BottleneckAnalysis.FromString(result.recommendation.bottleneck_analysis.value)
    return LegacyInputPipeline(
        source=name,
        step_time=_summary(result.step_time_summary),
        input_percent=_input_percent(result),
        conclusion=analysis.input_statement,
        next_step=result.recommendation.summary_next_step,
        host_us=_host_us(result),
        input_ops=_input_ops(result),
        steps=_steps_from_details(result),
    )


TF_STATS_COLUMNS = ["rank", "host_or_device", "op_type", "op_name", "occurrences", "total_time_us",
                    "avg_time_us", "total_self_time_us", "avg_self_time_us", "device_self_percent",
                    "device_cumulative_percent", "host_self_percent", "host_cumulative_percent",
                    "gflops", "memory_bw_gbps", "operational_intensity", "bound_by"]


def tf_stats_from_pb(name: str, data: bytes) -> LegacyTfStats:
    db = pb.TfStatsDatabase.FromString(data)
    records = db.without_idle.tf_stats_record
    rows = [
        (r.rank, r.host_or_device, r.op_type, r.op_name, r.occurrences, r.total_time_in_us, r.avg_time_in_us,
         r.total_self_time_in_us, r.avg_self_time_in_us, 100 * r.device_total_self_time_as_fraction,
         100 * r.device_cumulative_total_self_time_as_fraction, 100 * r.host_total_self_time_as_fraction,
         100 * r.host_cumulative_total_self_time_as_fraction, r.measured_flop_rate, r.measured_memory_bw,
         r.operational_intensity, r.bound_by)
        for r in records
    ]
    return LegacyTfStats(source=name, device_type=db.device_type, ops=pd.DataFrame(rows, columns=TF_STATS_COLUMNS))


KERNEL_COLUMNS = ["kernel_name", "op_name", "registers_per_thread", "shmem_bytes", "block_dim", "grid_dim",
                  "occurrences", "total_duration_us", "avg_duration_us", "min_duration_us", "max_duration_us",
                  "is_kernel_using_tensor_core", "is_op_tensor_core_eligible"]


def kernel_stats_from_pb(name: str, data: bytes) -> LegacyKernelStats:
    db = pb.KernelStatsDb.FromString(data)
    rows = [
        (r.name, r.op_name, r.registers_per_thread, r.static_shmem_bytes + r.dynamic_shmem_bytes,
         ",".join(map(str, r.block_dim)), ",".join(map(str, r.grid_dim)), r.occurrences,
         r.total_duration_ns / 1e3, r.total_duration_ns / 1e3 / max(r.occurrences, 1), r.min_duration_ns / 1e3,
         r.max_duration_ns / 1e3, r.is_kernel_using_tensor_core, r.is_op_tensor_core_eligible)
        for r in db.reports
    ]
    kernels = pd.DataFrame(rows, columns=KERNEL_COLUMNS)
    kernels = kernels.sort_values("total_duration_us", ascending=False, kind="stable", ignore_index=True)
    return LegacyKernelStats(source=name, kernels=kernels)


# --- Cloud TPU 1.9-era JSON DataTables ---------------------------------------


def _tables(name: str, data: bytes) -> list[dict]:
    try:
        tables = json.loads(data)
    except ValueError as exc:
        raise CaptureError(name, f"is not JSON ({exc})") from exc
    if not isinstance(tables, list):
        raise CaptureError(name, "is not a list of DataTables")
    return tables


def _rows(table: dict) -> pd.DataFrame:
    ids = [c["id"] for c in table.get("cols", [])]
    return pd.DataFrame([[cell.get("v") if cell else None for cell in row["c"]] for row in table.get("rows", [])],
                        columns=ids)


def _number(props: dict, key: str) -> float | None:
    text = props.get(key)
    if text is None:
        return None
    match = re.match(r"\s*(-?[0-9.]+)", str(text))
    return float(match.group(1)) if match else None


def _table_with(tables: list[dict], column: str = "", prop: str = "") -> dict:
    for table in tables:
        if column and column in [c["id"] for c in table.get("cols", [])]:
            return table
        if prop and prop in table.get("p", {}):
            return table
    return {}


def _json_step_time(props: dict) -> StepTime | None:
    if "steptime_ms_average" not in props:
        return None
    return StepTime(*(_number(props, f"steptime_ms_{k}") or 0.0
                      for k in ("average", "minimum", "maximum", "standard_deviation")))


def _json_steps(table: dict) -> pd.DataFrame:
    rows = _rows(table)
    compute = rows.get("computeTimeMs", rows.get("noninfeedTimeMs"))
    infeed = rows.get("inputTimeMs", rows.get("infeedTimeMs"))
    frame = pd.DataFrame({"step": rows.get("stepnum", pd.Series(dtype=str)).astype(str)})
    for key in CATEGORY_KEYS:
        frame[key] = 0.0
    if compute is not None:
        frame["device_compute"] = compute.astype(float)
    if infeed is not None:
        frame["input"] = infeed.astype(float)
    if "idleTimeMs" in rows:
        frame["other"] = rows["idleTimeMs"].astype(float)
    frame.insert(1, "step_time_ms", frame[list(CATEGORY_KEYS)].sum(axis=1))
    return frame


def overview_from_json(name: str, data: bytes) -> LegacyOverview:
    tables = _tables(name, data)
    analysis = _table_with(tables, column="selfTimePercent")
    steps_table = _table_with(tables, column="stepnum")
    env = _table_with(tables, prop="device_type").get("p", {})
    rec = _table_with(tables, prop="statement").get("p", {})
    steps_props = steps_table.get("p", {})
    ops = _rows(analysis)
    top = pd.DataFrame({
        "operation": ops.get("operation", pd.Series(dtype=str)),
        "category": ops.get("category", pd.Series(dtype=str)),
        "self_time_percent": 100 * ops.get("selfTimePercent", pd.Series(dtype=float)).astype(float),
        "cumulative_percent": 100 * ops.get("cumulativeTimePercent", pd.Series(dtype=float)).astype(float),
        "gflops": ops.get("flopRate", pd.Series(dtype=float)).astype(float),
    })
    props = analysis.get("p", {})
    breakdown = None
    if "compute_ms_average" in steps_props:
        breakdown = {k: 0.0 for k in CATEGORY_KEYS}
        breakdown["device_compute"] = _number(steps_props, "compute_ms_average") or 0.0
        breakdown["input"] = _number(steps_props, "input_ms_average") or 0.0
        breakdown["other"] = _number(steps_props, "idle_ms_average") or 0.0
    statement = rec.get("statement", "")
    cores = _number(env, "device_core_count")
    hosts = _number(env, "host_count")
    return LegacyOverview(
        source=name,
        step_time=_json_step_time(steps_props),
        steps=_json_steps(steps_table),
        breakdown_ms=breakdown,
        input_percent=_number(steps_props, "infeed_percent_average"),
        input_bound=_input_bound(statement),
        bottleneck=rec.get("bottleneck", ""),
        statement=statement,
        device_idle_percent=_number(props, "device_idle_time_percent"),
        host_idle_percent=_number(props, "host_idle_time_percent"),
        device_type=env.get("device_type", ""),
        device_core_count=int(cores) if cores is not None else None,
        host_count=int(hosts) if hosts is not None else None,
        top_ops=top,
    )


def input_pipeline_from_json(name: str, data: bytes) -> LegacyInputPipeline:
    tables = _tables(name, data)
    steps_table = _table_with(tables, column="stepnum")
    props = steps_table.get("p", {})
    ops_table = _table_with(tables, column="opName")
    ops = _rows(ops_table)
    input_ops = pd.DataFrame({
        "op": ops.get("opName", pd.Series(dtype=str)),
        "count": ops.get("count", pd.Series(dtype=float)).astype(float).astype("int64"),
        "time_ms": ops.get("timeInMs", pd.Series(dtype=float)).astype(float),
        "time_percent": 100 * ops.get("timeInPercent", pd.Series(dtype=float)).astype(float),
        "self_time_ms": ops.get("selfTimeInMs", pd.Series(dtype=float)).astype(float),
        "self_time_percent": 100 * ops.get("selfTimeInPercent", pd.Series(dtype=float)).astype(float),
        "category": ops.get("category", pd.Series(dtype=str)),
    })
    op_props = ops_table.get("p", {})
    host_us = {"demanded_file_read": _number(op_props, "demanded_file_read_us") or 0.0,
               "advanced_file_read": _number(op_props, "advanced_file_read_us") or 0.0,
               "preprocessing": _number(op_props, "preprocessing_us") or 0.0,
               "enqueue": _number(op_props, "enqueue_us") or 0.0,
               "unclassified": _number(op_props, "unclassified_nonequeue_us") or 0.0}
    return LegacyInputPipeline(
        source=name,
        step_time=_json_step_time(props),
        input_percent=_number(props, "infeed_percent_average"),
        conclusion=props.get("summary_conclusion", ""),
        next_step=props.get("summary_nextstep", ""),
        host_us=host_us,
        input_ops=input_ops,
        steps=_json_steps(steps_table),
    )


def pod_viewer_from_json(name: str, data: bytes) -> LegacyPodViewer:
    """Per-step, per-core stats and the all-reduce ops, as the file writes them."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise CaptureError(name, f"is not JSON ({exc})") from exc
    steps = doc.get("podStatsSequence", {}).get("podStatsMap", [])
    core_rows = []
    op_rows = []
    for step in steps:
        number = step.get("stepNum", 0)
        replicas = step.get("coreIdToReplicaIdMap", {})
        for core, stats in sorted(step.get("podStatsPerCore", {}).items(), key=lambda kv: int(kv[0])):
            row = {"step": number, "core": int(core), "replica": replicas.get(core),
                   "host": stats.get("hostName", ""), "bottleneck": stats.get("bottleneck", "")}
            row.update({k: float(v) for k, v in stats.items() if k.endswith("Us") and isinstance(v, (int, float))})
            core_rows.append(row)
        for op in step.get("allReduceOpDb", []):
            op_rows.append((number, op.get("name", ""), int(op.get("occurrences", 0) or 0),
                            float(op.get("durationUs", 0.0) or 0.0), int(op.get("dataSize", 0) or 0)))
    ops = pd.DataFrame(op_rows, columns=["step", "name", "occurrences", "duration_us", "data_size_bytes"])
    env = doc.get("runEnvironment", {})
    return LegacyPodViewer(source=name, tpu_type=env.get("tpuType", ""), cores=pd.DataFrame(core_rows),
                           all_reduce_ops=ops)


def op_profile_from_json(name: str, data: bytes) -> LegacyOpProfile:
    """The `byCategory` tree, flattened depth-first; metrics are fractions in the file."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise CaptureError(name, f"is not JSON ({exc})") from exc
    root = doc.get("byCategory") or doc.get("byProgram") or {}
    rows = []
    stack = [(child, 1, child.get("name", "")) for child in reversed(root.get("children", []))]
    while stack:
        node, depth, path = stack.pop()
        metrics = node.get("metrics", {})
        xla = node.get("xla", {})
        rows.append((depth, path, node.get("name", ""), xla.get("category", ""), xla.get("op", ""),
                     100 * float(metrics.get("time", 0.0) or 0.0), 100 * float(metrics.get("flops", 0.0) or 0.0)))
        stack.extend((c, depth + 1, f"{path}/{c.get('name', '')}") for c in reversed(node.get("children", [])))
    nodes = pd.DataFrame(rows, columns=["depth", "path", "name", "category", "op", "time_percent", "flops_percent"])
    flops = root.get("metrics", {}).get("flops")
    return LegacyOpProfile(source=name, flops_percent=100 * float(flops) if flops is not None else None,
                           nodes=nodes)


def _int(value) -> int:
    # proto3 JSON writes int64 as strings.
    return int(value or 0)


def memory_profile_from_json(name: str, data: bytes) -> LegacyMemoryProfile:
    """TF 2.3's MemoryProfile proto in its JSON form (camelCase keys, int64 as strings)."""
    if name.endswith(".gz"):
        data = limits.gunzip(name, data)
        limits.check_json(name, data)
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise CaptureError(name, f"is not JSON ({exc})") from exc
    allocators = []
    for memory_id, profile in sorted(doc.get("memoryProfilePerAllocator", {}).items()):
        summary = profile.get("profileSummary", {})
        peak = summary.get("peakStats", {})
        snapshots = profile.get("memoryProfileSnapshots", [])
        activities = [s.get("activityMetadata", {}).get("memoryActivity", "") for s in snapshots]
        shown = profile.get("sampledTimelineSnapshots") or snapshots
        timeline = pd.DataFrame(
            [(_int(s.get("timeOffsetPs")) / 1e9, _int(s.get("aggregationStats", {}).get("heapAllocatedBytes")),
              _int(s.get("aggregationStats", {}).get("stackReservedBytes")),
              _int(s.get("aggregationStats", {}).get("freeMemoryBytes"))) for s in shown],
            columns=["time_ms", "heap_bytes", "stack_bytes", "free_bytes"],
        )
        allocators.append(LegacyAllocator(
            memory_id=memory_id,
            peak_bytes=_int(peak.get("peakBytesInUse")),
            peak_time_ms=_int(summary.get("peakStatsTimePs")) / 1e9,
            capacity_bytes=_int(summary.get("memoryCapacity")),
            fragmentation_percent=100 * float(peak.get("fragmentation", 0.0) or 0.0),
            peak_bytes_usage_lifetime=_int(summary.get("peakBytesUsageLifetime")),
            allocations=activities.count("ALLOCATION"),
            deallocations=activities.count("DEALLOCATION"),
            timeline=timeline,
        ))
    return LegacyMemoryProfile(source=name, allocators=allocators)


DECODERS = {
    ".overview_page.pb": ("overview", overview_from_pb),
    ".overview_page.json": ("overview", overview_from_json),
    ".input_pipeline.pb": ("input_pipeline", input_pipeline_from_pb),
    ".input_pipeline.json": ("input_pipeline", input_pipeline_from_json),
    ".tensorflow_stats.pb": ("tf_stats", tf_stats_from_pb),
    ".kernel_stats.pb": ("kernel_stats", kernel_stats_from_pb),
    ".pod_viewer.json": ("pod_viewer", pod_viewer_from_json),
    ".op_profile.json": ("op_profile", op_profile_from_json),
    ".memory_profile.json.gz": ("memory_profile", memory_profile_from_json),
    ".memory_profile.json": ("memory_profile", memory_profile_from_json),
    ".memory_viewer.json": ("memory_viewer", memory_viewer_from_json),
}


def decode_legacy_host(host: str, files: list[tuple[str, bytes]],
                       errors: list[CaptureError] | None = None) -> LegacyHost:
    """Decode one host's tool files (the best source per tool, chosen by discovery).

    ProfilerHook timelines given here build the op table; other timeline files
    (`.trace.json.gz`, `.trace`, `.tracetable`) are the trace export's
    (`reportgen/legacy/trace_export.py`), which reads them one at a time. A file that
    cannot be decoded raises CaptureError naming it, or, given `errors`, is
    added there and left out while the others are decoded.
    """
    result = LegacyHost(host=host, files=[file_name(n) for n, _ in files])
    timelines = TimelineSteps()
    for path, data in files:
        name = file_name(path)
        try:
            if TIMELINE_PATTERN.match(name):
                timelines.add(parse_chrome_trace(path, data))
                continue
            if is_trace_source(name):
                continue
            for suffix, (tool, decoder) in DECODERS.items():
                if name.endswith(suffix):
                    if suffix.endswith(".json"):  # whatever their decoder, parsed JSON objects cost memory
                        limits.check_json(path, data)
                    try:
                        setattr(result, tool, decoder(name, data))
                    except CaptureError:
                        raise
                    except Exception as exc:  # a protobuf DecodeError or a malformed table
                        raise CaptureError(path, f"cannot be decoded as {suffix} ({exc})") from exc
                    break
        except CaptureError as exc:  # named by its full path, whichever decoder raised
            named = CaptureError(path, exc.problem)
            if errors is None:
                raise named from exc
            errors.append(named)
    if timelines.sources:
        result.timeline = timelines.result()
    return result
