"""XProf's overview page numbers (docs/xprof/overview_page.md), as `op_stats_to_overview_page` computes them.

Per view (one host, or all hosts combined): the performance summary (step
time and its breakdown, idle, precision, eager share, outside compilation),
the per-step breakdown, the top device ops (host ops when there is no
device), the run environment, the diagnostics and the recommendation. The
step analysis is the input pipeline's (`core.tools.input_pipeline`), as in
XProf. XProf 2.24.2 leaves the first and last step of a host with more than
five out of this page; `OverviewView.dropped_note` says so.

    views = overview_views(parts, host_names)     # {"All hosts": …, host: …}
    overview_summary(views[first])                # the summary.json block
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reportgen.core.events.tf_op import is_outside_compilation
from reportgen.core.ops.kernel_reports import kernel_time_by_op
from reportgen.core.ops.op_metrics import IDLE, framework_op_db, safe_divide
from reportgen.core.ops.op_stats import HostOpStats, RunOpStats
from reportgen.core.ops.views import run_views
from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.core.tools.input_pipeline import (
    InputTimeBreakdown,
    StepAnalysis,
    analyze_steps,
    step_warnings,
    summary_next_step,
)
from reportgen.summary_blocks import HostSteps, OverviewBlock, OverviewOp, StepCategory, StepTime

TOP_OPS = 10
TPU_CATEGORIES = [("tc_compute", "TensorCore compute"), ("tc_infeed", "TensorCore input"),
                  ("tc_outfeed", "TensorCore output"), ("tc_idle", "TensorCore idle")]
# summary.json breakdown keys for TPU steps (XProf's TPU categories mapped onto the generic keys).
TPU_BREAKDOWN = {"tc_compute": "device_compute", "tc_infeed": "input", "tc_outfeed": "output", "tc_idle": "other"}
LOW_PRECISION_PERCENT = 10.0


@dataclass
class OverviewView:
    """One host's (or all hosts') overview numbers."""

    label: str
    hosts: list[str]
    environment: dict
    analysis: StepAnalysis
    steps: pd.DataFrame  # step_name, per-category ms, step_time_ms (chart and CSV)
    category_labels: dict[str, str]
    top_ops: list[dict]
    top_ops_on_device: bool
    stats: dict  # percentages of the performance summary
    recommendation: dict
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dropped_note: str = ""


def _pct(a: float, b: float) -> float:
    return 100.0 * safe_divide(a, b)


def _eager_percent(db_metrics: pd.DataFrame) -> float:
    ops = db_metrics[db_metrics["category"] != IDLE]
    return _pct(float(ops.loc[ops["is_eager"], "self_time_ps"].sum()), float(ops["self_time_ps"].sum()))


def _top_ops(op_stats: RunOpStats) -> tuple[list[dict], bool]:
    """XProf's top device ops (framework-level, IDLE excluded); host ops when there is no device."""
    device = framework_op_db(op_stats.device_db, include_idle=False)
    on_device = len(device.metrics) > 0
    db = device if on_device else op_stats.host_db
    total = db.total_time_ps if on_device else db.total_op_time_ps
    ops = db.sorted()
    ops = ops[ops["category"] != IDLE].head(TOP_OPS)
    # TensorCore columns: the op's kernels in the kernel stats DB, looked up by exact name.
    kernels = kernel_time_by_op(op_stats.kernel_reports) if on_device else None
    rows, cumulative = [], 0.0
    for op in ops.itertuples():
        fraction = safe_divide(op.self_time_ps, total)
        cumulative += fraction
        known = kernels is not None and op.name in kernels.index
        rows.append({"name": op.name, "category": op.category, "self_time_percent": 100 * fraction,
                     "cumulative_percent": 100 * cumulative, "self_time_ms": op.self_time_ps / 1e9,
                     "flop_rate": safe_divide(op.flops, op.time_ps / 1000),
                     "tensor_core_eligible": bool(known and kernels.at[op.name, "is_op_tensor_core_eligible"]),
                     "tensor_core_used": bool(known and kernels.at[op.name, "tensor_core_duration_ns"] != 0)})
    return rows, on_device


def _summary_stats(op_stats: RunOpStats) -> dict:
    host, device = op_stats.host_db, op_stats.device_db
    tf_device = framework_op_db(device, include_idle=False)
    n_host = int(host.metrics["occurrences"].sum())
    n_device = int(tf_device.metrics["occurrences"].sum())
    c16, c32 = device.compute_16bit_ps, device.compute_32bit_ps
    is_tpu = op_stats.environment.hardware_type == "TPU"
    outside = device.metrics[[is_outside_compilation(str(p), str(ln)) for p, ln in
                              zip(device.metrics["provenance"], device.metrics["long_name"])]] \
        if len(device.metrics) else device.metrics
    return {
        "host_tf_op_percent": _pct(n_host, n_host + n_device),
        "device_tf_op_percent": _pct(n_device, n_host + n_device),
        "host_op_time_eager_percent": _eager_percent(host.metrics),
        "device_op_time_eager_percent": _eager_percent(tf_device.metrics),
        "device_op_time_outside_compilation_percent": _pct(
            float(outside["self_time_ps"].sum()), float(tf_device.without_idle()["self_time_ps"].sum())),
        "device_compute_16bit_percent": _pct(c16, c16 + c32),
        "device_compute_32bit_percent": _pct(c32, c16 + c32),
        "has_precision": c16 + c32 > 0,
        # XProf computes these three for TPU only; other devices report 0.
        "device_idle_percent": 100 * device.idle_ratio if is_tpu else 0.0,
        "host_idle_percent": 100 * host.idle_ratio if is_tpu else 0.0,
        "device_duty_cycle_percent": _pct(device.busy_time_ps, device.busy_time_ps + device.idle_time_ps)
        if is_tpu else 0.0,
        "measured_device_idle_percent": 100 * device.idle_ratio if len(device.metrics) else None,
        "measured_host_idle_percent": 100 * host.idle_ratio if len(host.metrics) else None,
        "mxu_utilization_percent": op_stats.mxu_utilization_percent,
    }


def _steps_frame(analysis: StepAnalysis) -> tuple[pd.DataFrame, dict[str, str]]:
    if analysis.tpu:
        labels = dict(TPU_CATEGORIES)
    else:
        labels = dict(CATEGORY_LABELS)
    cols = ["step_num", "step_name", *labels, "step_time_ms"]
    return analysis.steps[cols].reset_index(drop=True), labels


def _recommendation(op_stats: RunOpStats, analysis: StepAnalysis, stats: dict) -> dict:
    b = analysis.bottleneck
    hw = op_stats.environment.hardware_type
    breakdown = analysis.input_breakdown or InputTimeBreakdown()
    precision = ""
    if stats["has_precision"] and stats["device_compute_16bit_percent"] < LOW_PRECISION_PERCENT:
        precision = (f"Only {stats['device_compute_16bit_percent']:.1f}% of device computation is 16 bit. So you "
                     "might want to replace more 32-bit Ops by 16-bit Ops to improve performance (if the reduced "
                     "accuracy is acceptable).")
    device_word = {"GPU": "GPU", "TPU": "TPU", "CPU_ONLY": "CPU_ONLY"}.get(hw, "UNKNOWN_HARDWARE")
    device_tool = "op_profile" if hw == "TPU" else "tf_stats"
    timeline = "TPU core" if hw == "TPU" else device_word
    return {
        "classification": b.input_classification,
        "input_bound": b.input_bound,
        "statement": b.input_statement,
        "next_step": summary_next_step(b.input_classification, breakdown) if analysis.steps.shape[0] else "",
        "kernel_launch": b.kernel_launch_statement,
        "all_other": b.all_other_statement,
        "device_collectives": b.device_collectives_statement,
        "precision": precision,
        # Tool tips as XProf words them; `tool` slugs are linked when the run has the page.
        "host_tips": [("input_pipeline", "(especially Section 3 for the breakdown of input operations on the Host)"),
                      ("trace", "(look at the activities on the timeline of each Host Thread near the bottom of "
                                "the trace view)")],
        "device_tips": [(device_tool, f"(identify the time-consuming operations executed on the {device_word})"),
                        ("trace", f"(look at the activities on the timeline of each {timeline} in the trace view)")],
        "non_bottleneck": "device" if b.input_classification == "host" else
        "host" if b.input_classification == "device" else "",
    }


def overview_view(label: str, op_stats: RunOpStats) -> OverviewView:
    env = op_stats.environment
    analysis = analyze_steps(op_stats.step_db, env.hardware_type, op_stats.host_db)
    stats = _summary_stats(op_stats)
    top, on_device = _top_ops(op_stats)
    steps, labels = _steps_frame(analysis)
    warnings = list(op_stats.diagnostics.warnings) + step_warnings(op_stats.step_db)
    errors = sorted(op_stats.diagnostics.errors)
    if not errors and env.device_type != "CPU" and env.device_core_count <= 0:
        errors.append("No TensorCore device trace was collected. This might happen if your job hadn't been run on "
                      "the device when sampling was turned on. You could try the sampling again later.")
    environment = {
        "host_count": env.host_count, "task_count": env.task_count, "device_type": env.device_type,
        "device_core_count": env.device_core_count, "hardware_type": env.hardware_type,
        "is_training": env.is_training, "hostnames": env.hostnames,
    }
    return OverviewView(label, op_stats.hosts, environment, analysis, steps, labels, top, on_device, stats,
                        _recommendation(op_stats, analysis, stats), warnings, errors)


def overview_views(parts: dict[str, HostOpStats], host_names: list[str]) -> dict[str, OverviewView]:
    """The run's views: all hosts combined first (with several hosts), then each host."""
    views = run_views(parts, host_names, overview_steps=True)
    out = {label: overview_view(label, v) for label, v in views.items()}
    for view in out.values():
        view.dropped_note = _dropped_note(parts, view.hosts)
    return out


TOP_OPS_IN_SUMMARY = 5


def dominant_category(breakdown_ms: dict[str, float | None]) -> StepCategory | None:
    """The step-time category with the largest average (summary.json keys), its label and its share of the step."""
    values = {k: v for k, v in breakdown_ms.items() if v is not None and v > 0}
    total = sum(values.values())
    if total <= 0:
        return None
    key = max(values, key=lambda k: (values[k], -CATEGORY_KEYS.index(k) if k in CATEGORY_KEYS else 0))
    return StepCategory(category=key, label=CATEGORY_LABELS.get(key, key), percent=100.0 * values[key] / total)


def _step_time(view: OverviewView) -> StepTime:
    a = view.analysis
    return StepTime(average=a.step_time.average, minimum=a.step_time.minimum, maximum=a.step_time.maximum,
                    standard_deviation=_finite(a.step_time.standard_deviation))


def overview_summary(view: OverviewView, per_host: dict[str, OverviewView] | None = None) -> OverviewBlock:
    """The run's `overview` block of summary.json (XSpace runs' keys; older captures use the same).

    `per_host`: each host's own view, when the run has several (`step_time_ms` per host)."""
    a = view.analysis
    breakdown = {k: 0.0 for k in CATEGORY_KEYS}
    for key, summary in a.categories.items():
        breakdown[TPU_BREAKDOWN.get(key, key)] = summary.average
    breakdown = {k: _finite(v) for k, v in breakdown.items()}
    stats = view.stats
    return OverviewBlock(
        steps=int(len(a.steps)),
        step_time_ms=_step_time(view),
        breakdown_ms=breakdown,
        input_percent=a.bottleneck.input_percent,
        input_bound=a.bottleneck.input_bound if len(a.steps) else None,
        device_idle_percent=stats["device_idle_percent"],
        host_idle_percent=stats["host_idle_percent"],
        device_type=view.environment["device_type"],
        device_core_count=view.environment["device_core_count"],
        host_count=view.environment["host_count"],
        # The performance summary's shares, as the page shows them.
        host_op_time_eager_percent=stats["host_op_time_eager_percent"],
        device_op_time_eager_percent=stats["device_op_time_eager_percent"],
        device_op_time_outside_compilation_percent=stats["device_op_time_outside_compilation_percent"],
        device_compute_16bit_percent=stats["device_compute_16bit_percent"] if stats["has_precision"] else None,
        device_compute_32bit_percent=stats["device_compute_32bit_percent"] if stats["has_precision"] else None,
        statement=view.recommendation["statement"] if len(a.steps) else "",
        bottleneck=dominant_category(breakdown) if len(a.steps) else None,
        top_ops_on_device=view.top_ops_on_device,
        top_ops=tuple(OverviewOp(name=op["name"], category=op["category"], self_time_ms=op["self_time_ms"],
                                 self_time_percent=op["self_time_percent"])
                      for op in view.top_ops[:TOP_OPS_IN_SUMMARY]),
        is_training=bool(view.environment["is_training"]),
        per_host={host: HostSteps(steps=int(len(v.analysis.steps)), step_time_ms=_step_time(v))
                  for host, v in per_host.items()} if per_host else None,
    )


def _dropped_note(parts: dict[str, HostOpStats], hosts: list[str]) -> str:
    """Say when XProf 2.24.2's overview rule left steps out of this view."""
    dropped = {h: len(parts[h].step_db) for h in hosts if h in parts and len(parts[h].step_db) > 5}
    if not dropped:
        return ""
    detail = ", ".join(f"{h}: {n} steps, first and last left out" for h, n in dropped.items())
    return ("As XProf 2.24.2's overview does, a host with more than five steps has its first and last step left "
            f"out here (they are often incomplete) — {detail}. XProf's pod viewer keeps every step.")


def _finite(value: float) -> float | None:
    return value if value == value and value not in (float("inf"), float("-inf")) else None
