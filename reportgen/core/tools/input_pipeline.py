"""XProf's input-pipeline analysis (input_pipeline_analyzer, docs/xprof/input_pipeline.md), as XProf computes it.

The step analysis, which the overview shares (`analyze_steps`): per-step
category times in milliseconds, their summaries (XProf's `Stat` quirks
included) and the bottleneck classification (HIGHLY / MODERATELY /
POTENTIALLY / NOT input-bound) with its statements; the host-side input ops
(`core.input.input_ops`). Then the tool itself: one view per host and all
hosts combined, and the tf.data bottleneck analysis across hosts with the
pipeline the page draws (`input_pipeline_data`).

    part = host_input_part(host)                            # per host
    data = input_pipeline_data(run, host_names, parts)      # per run
    input_pipeline_summary(data)                            # the summary.json block
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.events.tf_op import DATASET_TYPE
from reportgen.core.host import HostContext
from reportgen.core.input.advice import plain_text
from reportgen.core.input.advice import summary_next_step as xprof_next_step
from reportgen.core.input.input_ops import BREAKDOWN, InputOpAnalysis, InputTimeBreakdown, input_op_analysis
from reportgen.core.input.tf_data import (
    InputPipeline,
    IteratorInfo,
    TfDataAnalysis,
    TfDataStats,
    bottleneck_analysis,
    tf_data_stats,
)
from reportgen.core.input.tf_data_advice import (
    XPROF_SUGGESTIONS,
    Advice,
    bottleneck_type,
    concrete_advice,
    explain_long_name,
)
from reportgen.core.input.tf_data_graph import iterator_tree, pipeline_iterators
from reportgen.core.ops.op_metrics import OpMetricsDb
from reportgen.core.ops.op_stats import HostOpStats, RunOpStats
from reportgen.core.ops.views import hosts_in_order, run_views
from reportgen.core.steps import events as et
from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS, GENERIC_CATEGORIES
from reportgen.core.steps.step_db import DEFAULT_GPU_CORE, StepDb
from reportgen.core.steps.tpu_details import SPARSE_CORE_ID_MIN, tpu_step_details
from reportgen.summary_blocks import InputBottleneck, InputPipelineBlock

HIGHLY_INPUT_BOUND = 20.0
MODERATELY_INPUT_BOUND = 5.0
MODERATELY_ALL_OTHER_BOUND = 3.0
HIGH_THRESHOLD = 15.0
MODERATE_THRESHOLD = 3.0
ALL_REDUCE_MARGIN = 6.0  # all-reduce share above the input share that XProf reports
HIGH_SCV0_PERCENT = 10.0
INPUT_TYPES = (et.HOST_WAIT_INPUT, et.HOST_TO_DEVICE, et.DEVICE_WAIT_HOST)
# The TPU step-time breakdown XProf summarises (TpuStepTimeBreakdown).
TPU_SUMMARY_KEYS = ("tc_compute", "scv0_compute", "tc_infeed", "tc_outfeed", "scv0_infeed", "tc_idle",
                    "host_transfer")

_DOUBLE_MIN = np.finfo(np.float64).tiny  # std::numeric_limits<double>::min()


@dataclass
class StepSummary:
    """XProf's StepSummary of a `Stat<double>` (input_pipeline.md §1)."""

    average: float = 0.0
    standard_deviation: float = 0.0
    minimum: float = 0.0
    maximum: float = 0.0

    @classmethod
    def of(cls, values) -> StepSummary:
        v = np.asarray(values, np.float64)
        if len(v) == 0:
            return cls()
        # Stat starts with max = the smallest positive double, so an all-zero
        # series is not "all same" and a single zero gives 0/0 = NaN.
        vmax = max(float(v.max()), _DOUBLE_MIN)
        vmin = float(v.min())
        n = len(v)
        if vmin == vmax:
            variance = 0.0
        elif n == 1:
            variance = math.nan
        else:
            total = float(v.sum())
            variance = (float((v * v).sum()) - total * total / n) / (n - 1)
        sd = math.sqrt(variance) if variance >= 0 else math.nan
        return cls(float(v.mean()) if n else 0.0, sd, vmin, float(v.max()))


@dataclass
class Bottleneck:
    input_classification: str = "unknown"  # host / both / device / unknown
    input_statement: str = ""
    input_bound: str | None = None  # HIGHLY / MODERATELY / POTENTIALLY / NOT
    input_percent: float = 0.0
    output_percent: float = 0.0
    idle_percent: float = 0.0
    compute_percent: float = 0.0
    all_other_percent: float = 0.0
    kernel_launch_classification: str = "no"
    kernel_launch_statement: str = ""
    all_other_classification: str = "no"
    all_other_statement: str = ""
    device_collectives_classification: str = "no"
    device_collectives_statement: str = ""
    # TPU only (input_pipeline.md §3.4).
    output_classification: str = "no"
    output_statement: str = ""
    tpu_idle_classification: str = "no"
    tpu_idle_statement: str = ""
    all_reduce_classification: str = "no"
    all_reduce_statement: str = ""
    scv0_classification: str = "no"
    scv0_statement: str = ""


@dataclass
class StepAnalysis:
    """Per-step category times (ms) and their summaries.

    steps: one row per step: step_num, step_name, step_time_ms and one column per
    category key (`device_compute`, …, `other`, in XProf's order).
    """

    hardware_type: str
    steps: pd.DataFrame
    step_time: StepSummary
    categories: dict[str, StepSummary] = field(default_factory=dict)
    input_percent: StepSummary = field(default_factory=StepSummary)
    bottleneck: Bottleneck = field(default_factory=Bottleneck)
    tpu: bool = False
    input_breakdown: InputTimeBreakdown | None = None
    input_ops: InputOpAnalysis | None = None  # the host-side input analysis
    tpu_breakdown: dict[str, StepSummary] = field(default_factory=dict)  # TPU: every TpuStepTimeBreakdown summary


NO_STEP_STATEMENT = "No step time measured. Therefore we cannot tell where the performance bottleneck is."


def _step_times_ms(step_db: StepDb) -> np.ndarray:
    """Per step: max duration over cores below the SparseCore range (XProf's step_time_summary)."""
    s = step_db.steps
    if s.empty:
        return np.zeros(0)
    tc = s[s["core"] < 1_000_000]
    per = tc.groupby("step_num", sort=False)["duration_ps"].max().reindex(step_db.step_numbers).fillna(0)
    return per.to_numpy(np.float64) / 1e9


def _host_to_device_ms(step_db: StepDb) -> np.ndarray:
    core = step_db.steps[step_db.steps["core"] == DEFAULT_GPU_CORE]
    ps = core[f"t{et.HOST_TO_DEVICE}"].to_numpy(np.float64) + core[f"t{et.DEVICE_WAIT_HOST}"].to_numpy(np.float64)
    return ps / 1e9


def generic_step_frame(step_db: StepDb) -> pd.DataFrame:
    s = step_db.steps
    core = s[s["core"] == DEFAULT_GPU_CORE]
    out = pd.DataFrame({
        "step_num": core["step_num"].to_numpy(np.int64),
        "step_name": [n if n else str(k) for n, k in zip(core["name"], core["step_num"])],
        "step_time_ms": core["duration_ps"].to_numpy(np.float64) / 1e9,
    })
    for category in GENERIC_CATEGORIES:
        out[category.key] = sum(core[f"t{t}"].to_numpy(np.float64) for t in category.event_types) / 1e9
    return out


def classify_input(input_percent: float, all_other_percent: float) -> tuple[str, str, str]:
    """(classification, statement, input-bound word) — XProf's InputAnalysis."""
    if input_percent >= HIGHLY_INPUT_BOUND:
        return ("host", f"Your program is HIGHLY input-bound because {input_percent:.1f}% of the total step time "
                "sampled is waiting for input. Therefore, you should first focus on reducing the input time.",
                "HIGHLY")
    if input_percent >= MODERATELY_INPUT_BOUND:
        return ("both", f"Your program is MODERATELY input-bound because {input_percent:.1f}% of the total step "
                "time sampled is waiting for input. Therefore, you would need to reduce both the input time and "
                "other time.", "MODERATELY")
    if all_other_percent >= MODERATELY_ALL_OTHER_BOUND:
        return ("both", f"Your program is POTENTIALLY input-bound because {all_other_percent:.1f}% of the total "
                "step time sampled is spent on 'All Others' time (which could be due to I/O or Python execution "
                "or both).", "POTENTIALLY")
    return ("device", f"Your program is NOT input-bound because only {input_percent:.1f}% of the total step time "
            "sampled is waiting for input. Therefore, you should focus on reducing other time.", "NOT")


def _level(percent: float) -> str:
    return "high" if percent >= HIGH_THRESHOLD else "moderate" if percent >= MODERATE_THRESHOLD else "no"


def generic_bottleneck(steps: pd.DataFrame, uses_tf_data: bool) -> Bottleneck:
    total = float(steps["step_time_ms"].sum()) if len(steps) else 0.0
    if total == 0:
        return Bottleneck(input_statement=NO_STEP_STATEMENT)
    pct = {k: 100.0 * float(steps[k].sum()) / total for k in CATEGORY_KEYS}
    input_p, output_p = pct["input"], pct["output"]
    compute_p, coll_p = pct["device_compute"], pct["device_collectives"]
    idle_p = max(0.0, 100.0 - input_p - output_p - compute_p - coll_p)
    cls, statement, word = classify_input(input_p, pct["other"])
    b = Bottleneck(cls, statement, word, input_p, output_p, idle_p, compute_p, pct["other"])
    b.device_collectives_classification = _level(coll_p)
    if b.device_collectives_classification != "no":
        b.device_collectives_statement = (f"{coll_p:.1f} % of the total step time sampled is spent on 'Device "
                                          "Collective Communication'.")
    kl = pct["kernel_launch"]
    b.kernel_launch_classification = _level(kl)
    if b.kernel_launch_classification != "no":
        b.kernel_launch_statement = f"{kl:.1f} % of the total step time sampled is spent on 'Kernel Launch'."
        if uses_tf_data:
            b.kernel_launch_statement += (" It could be due to CPU contention with tf.data. In this case, you may "
                                          "try to set the environment variable TF_GPU_THREAD_MODE=gpu_private.")
    if word != "POTENTIALLY":
        b.all_other_classification = _level(pct["other"])
        if b.all_other_classification != "no":
            b.all_other_statement = (f"{pct['other']:.1f} % of the total step time sampled is spent on 'All Others' "
                                     "time. This could be due to Python execution overhead.")
    return b


def tpu_bottleneck(steps: pd.DataFrame) -> Bottleneck:
    """XProf's TPU bottleneck analysis (input_pipeline.md §3.4) over PerTpuStepDetails rows."""
    total = float(steps["step_time_ms"].sum()) if len(steps) else 0.0
    if total == 0:
        return Bottleneck(input_statement=NO_STEP_STATEMENT)
    infeed = 100.0 * float(steps["input_ms"].sum()) / total
    outfeed = 100.0 * float(steps["tc_outfeed"].sum()) / total
    idle = 100.0 * float(steps["tc_idle"].sum()) / total
    cls, statement, word = classify_input(infeed, 0.0)
    b = Bottleneck(cls, statement, word, infeed, outfeed, idle, max(0.0, 100.0 - infeed - outfeed - idle))
    if outfeed >= HIGHLY_INPUT_BOUND:
        b.output_classification = "host"
        b.output_statement = (f"Your program is HIGHLY output-bound because {outfeed:.1f}% of the total step time "
                              "sampled is spent on output. Therefore, you should first focus on reducing the output "
                              "time.")
    elif outfeed >= MODERATELY_INPUT_BOUND:
        b.output_classification = "both"
        b.output_statement = (f"Your program is MODERATELY output-bound because {outfeed:.1f}% of the total step "
                              "time sampled is spent on output. Therefore, you would need to reduce both the output "
                              "time and other time.")
    else:
        b.output_classification = "device"
    if idle >= MODERATE_THRESHOLD:
        b.tpu_idle_classification = "yes"
        b.tpu_idle_statement = (f"{idle:.1f} % of the total step time sampled is due to host overhead that is not "
                                "input-related. For TF 2.x, you may want to use a <a href=\"https://www.tensorflow."
                                "org/guide/tpu#improving_performance_by_multiple_steps_within_tffunction\" "
                                "target=\"_blank\">host-training loop (i.e. running multiple steps within a "
                                "tf.function).</a>")
    sync = 100.0 * float(steps["all_reduce_sync"].sum()) / total
    reduce = 100.0 * float(steps["all_reduce_compute"].sum()) / total
    if sync + reduce - infeed >= ALL_REDUCE_MARGIN:
        b.all_reduce_classification = "yes"
        b.all_reduce_statement = (f"Also, {sync:.1f} % of the total step time sampled is spent on synchronization "
                                  f"with other TPU cores, and {reduce:.1f} % of the total step time sampled is spent "
                                  "on actual AllReduce.")
    scv0 = 100.0 * float(steps["scv0_compute"].sum()) / total
    if scv0 > 0:
        b.scv0_classification = "moderate" if scv0 < HIGH_SCV0_PERCENT else "high"
        advice = ("You may also want to reduce the SparseCoreV0 compute time." if scv0 < HIGH_SCV0_PERCENT else
                  "You should focus on reducing the SparseCoreV0 compute time as well.")
        b.scv0_statement = (f"Also, {scv0:.1f} % of the total step time sampled is spent on the SparseCoreV0 "
                            f"compute. {advice}")
    return b


def _input_percent_range(step_db: StepDb) -> pd.DataFrame:
    """Per step (generic path): the share of step time each core waited for input, min and max over cores."""
    s = step_db.steps
    s = s[s["core"] < SPARSE_CORE_ID_MIN]
    input_ps = sum(s[f"t{t}"].to_numpy(np.float64) for t in INPUT_TYPES)
    duration = s["duration_ps"].to_numpy(np.float64)
    pct = 100.0 * np.divide(input_ps, duration, out=np.zeros(len(s)), where=np.abs(duration) >= 1e-10)
    per = pd.DataFrame({"step_num": s["step_num"].to_numpy(np.int64), "pct": pct})
    return per.groupby("step_num", sort=False)["pct"].agg(input_percent_min="min", input_percent_max="max",
                                                          cores="size")


def analyze_steps(step_db: StepDb, hardware_type: str, host_db: OpMetricsDb | None = None,
                  core_details: dict[int, dict] | None = None) -> StepAnalysis:
    """XProf's input-pipeline analysis of a (combined) step database.

    `host_db`: the host op database, for the host-side input analysis (and
    the tf.data part of the statements); `core_details`: TPU core names."""
    step_time = StepSummary.of(_step_times_ms(step_db))
    host_db = host_db if host_db is not None else OpMetricsDb()
    if hardware_type == "TPU":
        steps = tpu_step_details(step_db, core_details)
        input_ops = input_op_analysis(host_db)
        tpu_breakdown = {k: StepSummary.of(steps[k]) for k in TPU_SUMMARY_KEYS}
        return StepAnalysis(hardware_type, steps, step_time,
                            {k: tpu_breakdown[k] for k in ("tc_compute", "tc_infeed", "tc_outfeed", "tc_idle")},
                            StepSummary.of(steps["infeed_percent_maximum"]), tpu_bottleneck(steps), tpu=True,
                            input_breakdown=input_ops.breakdown, input_ops=input_ops, tpu_breakdown=tpu_breakdown)
    steps = generic_step_frame(step_db)
    categories = {k: StepSummary.of(steps[k]) for k in CATEGORY_KEYS}
    h2d = StepSummary.of(_host_to_device_ms(step_db)).average
    input_ops = input_op_analysis(host_db, h2d, step_time.average, generic=True)
    step_ms = steps["step_time_ms"].to_numpy(np.float64)
    steps["input_percent"] = 100.0 * np.divide(steps["input"].to_numpy(np.float64), step_ms,
                                               out=np.zeros(len(steps)), where=np.abs(step_ms) >= 1e-10)
    ranges = _input_percent_range(step_db).reindex(steps["step_num"].to_numpy())
    for col in ("input_percent_min", "input_percent_max"):
        steps[col] = ranges[col].fillna(0.0).to_numpy(np.float64)
    steps["cores"] = ranges["cores"].fillna(0).to_numpy(np.int64)
    return StepAnalysis(hardware_type, steps, step_time, categories, StepSummary.of(steps["input_percent"]),
                        generic_bottleneck(steps, input_ops.breakdown.uses_tf_data),
                        input_breakdown=input_ops.breakdown, input_ops=input_ops)


def summary_next_step(classification: str, breakdown: InputTimeBreakdown) -> str:
    """XProf's next step as plain text (its links reduced to their labels)."""
    return plain_text(xprof_next_step(classification, breakdown.uses_tf_data))


# --- step diagnostics (overview_page.md §4) ------------------------------------------------------

INCOMPLETE_STEP_WARNING = (
    "Incomplete step observed and hence the step time is unknown.Instead, we use the trace duration as the step "
    "time. This may happen if your profiling duration is shorter than the step time. In this case, you may try to "
    "profile longer.")
NO_STEP_WARNING = (
    "No step marker observed and hence the step time is unknown. This may happen if (1) training steps are not "
    "instrumented (e.g., if you are not using Keras) or (2) the profiling duration is shorter than the step time. "
    "For (1), you need to add step instrumentation; for (2), you may try to profile longer.")
EMPTY_INTERSECT_WARNING = (
    "Although there are steps observed on some host(s), the intersection of the steps over all hosts is empty "
    "(because the differences among individual host's step sequences are too big). Consequently, the overall step "
    "time is unknown.")


def step_warnings(step_db: StepDb) -> list[str]:
    """XProf's step diagnostics (warnings only; the input pipeline page shows just these)."""
    out = []
    if step_db.use_incomplete_step:
        out.append(INCOMPLETE_STEP_WARNING)
    elif len(step_db) == 0:
        out.append(EMPTY_INTERSECT_WARNING if step_db.empty_intersect else NO_STEP_WARNING)
    if step_db.num_steps_dropped > 0:
        out.append(f"{step_db.num_steps_dropped} steps dropped. This might happen when you profile many hosts "
                   "and/or many steps. You could try to profile shorter or reduce the number of hosts you profile.")
    return out


# --- the tool: per-host and combined views, tf.data bottleneck (input_pipeline_analyzer) ---------

# XProf's TPU step-time categories (its step table's stacked columns), key → label.
TPU_LABELS = {
    "tc_compute": "TensorCore compute",
    "scv0_compute": "SparseCoreV0 compute",
    "scv0_infeed": "SparseCoreV0 input",
    "tc_infeed": "TensorCore input",
    "tc_outfeed": "TensorCore output",
    "tc_idle": "TensorCore idle",
    "host_transfer": "Host transfer",
}
SPARSE_CORE_V0 = ("scv0_compute", "scv0_infeed")  # XProf drops these columns when SparseCores were profiled


@dataclass
class HostInputPart:
    op_stats: HostOpStats  # the section shares the core result (pickled once with the overview's)
    tf_data: TfDataStats


@dataclass
class InputPipelineView:
    """XProf's input-pipeline analysis of one host, or of all hosts combined."""

    label: str
    hosts: list[str]
    hardware_type: str
    analysis: StepAnalysis
    labels: dict[str, str]  # step-time categories of the step table and chart, key → label
    steps: pd.DataFrame  # step_num, step_name, one column per label key, step_time_ms, input % (+ range), cores
    next_step: str  # XProf's summary next step (its HTML, verbatim)
    statements: list[str] = field(default_factory=list)  # XProf's other bottleneck statements (HTML, verbatim)
    warnings: list[str] = field(default_factory=list)

    @property
    def host_side(self) -> InputOpAnalysis:
        assert self.analysis.input_ops is not None
        return self.analysis.input_ops

    @property
    def has_core_range(self) -> bool:
        """Whether some step ran on several cores (the per-step input share then has a range)."""
        return bool(len(self.steps)) and int(self.steps["cores"].max()) > 1


@dataclass
class FocusPipeline:
    """The pipeline whose graph the page draws (XProf's top bottleneck)."""

    host: str
    pipeline: InputPipeline
    tree: pd.DataFrame
    bottleneck: IteratorInfo | None
    explanation: list[dict]
    xprof_type: str
    xprof_suggestions: list[Advice]
    advice: list[Advice]
    is_device_pipeline: bool  # XProf ignores device pipelines; shown only when there is nothing else


@dataclass
class InputPipelineData:
    run: str
    hosts: list[str]
    views: dict[str, InputPipelineView]  # "All hosts" first when there are several hosts
    tf_data: list[TfDataStats]
    analysis: TfDataAnalysis
    focus: FocusPipeline | None
    bottleneck_summary: dict | None

    @property
    def main(self) -> InputPipelineView:
        """The run's view: all hosts combined (XProf's page)."""
        return next(iter(self.views.values()))


def _labels(analysis: StepAnalysis, core_details: dict[int, dict]) -> dict[str, str]:
    if not analysis.tpu:
        return dict(CATEGORY_LABELS)
    sparse = any(d.get("is_sparse_core") for d in core_details.values())
    return {k: v for k, v in TPU_LABELS.items() if not (sparse and k in SPARSE_CORE_V0)}


def _steps(analysis: StepAnalysis, labels: dict[str, str]) -> pd.DataFrame:
    s = analysis.steps
    if analysis.tpu:
        # XProf's TPU chart: each step's average share over cores, its minimum and maximum.
        s = s.rename(columns={"infeed_percent_average": "input_percent", "infeed_percent_minimum": "input_percent_min",
                              "infeed_percent_maximum": "input_percent_max"})
    extra = ["max_infeed_core_name"] if analysis.tpu else []
    cols = ["step_num", "step_name", *labels, "step_time_ms", "input_percent", "input_percent_min",
            "input_percent_max", "cores", *extra]
    return s[cols].reset_index(drop=True)


def _statements(analysis: StepAnalysis) -> list[str]:
    b = analysis.bottleneck
    if analysis.tpu:
        found = [b.output_statement, b.tpu_idle_statement, b.all_reduce_statement, b.scv0_statement]
    else:
        found = [b.kernel_launch_statement, b.all_other_statement, b.device_collectives_statement]
    return [text for text in found if text]


def input_view(label: str, op_stats: RunOpStats) -> InputPipelineView:
    env = op_stats.environment
    analysis = analyze_steps(op_stats.step_db, env.hardware_type, op_stats.host_db, op_stats.core_details)
    labels = _labels(analysis, op_stats.core_details)
    uses_tf_data = analysis.input_breakdown is not None and analysis.input_breakdown.uses_tf_data
    return InputPipelineView(
        label=label,
        hosts=list(op_stats.hosts),
        hardware_type=env.hardware_type,
        analysis=analysis,
        labels=labels,
        steps=_steps(analysis, labels),
        next_step=xprof_next_step(analysis.bottleneck.input_classification, uses_tf_data),
        statements=_statements(analysis),
        warnings=step_warnings(op_stats.step_db),
    )


def _focus(stats: list[TfDataStats], analysis: TfDataAnalysis) -> FocusPipeline | None:
    by_host = {s.host: s for s in stats}
    top = analysis.top
    if top is not None:
        host_stats = by_host[top.host]
        pipeline = next(p for p in host_stats.pipelines if p.name == top.input_pipeline)
        device = False
    else:
        device_pipelines = [(s, p) for s in stats for p in s.pipelines]
        if not device_pipelines:
            return None
        host_stats, pipeline = max(device_pipelines, key=lambda sp: sp[1].max_latency_ps)
        device = True
    bottleneck = host_stats.iterators.get(pipeline.bottleneck_id) if pipeline.bottleneck_latency_ps > 0 else None
    members = pipeline_iterators(host_stats, pipeline)
    by_long_name = {}
    for info in members:
        by_long_name.setdefault(info.long_name, info)
    kind = bottleneck_type(bottleneck.name) if bottleneck else ""
    return FocusPipeline(
        host=host_stats.host,
        pipeline=pipeline,
        tree=iterator_tree(host_stats, pipeline),
        bottleneck=bottleneck,
        explanation=explain_long_name(bottleneck.long_name, by_long_name) if bottleneck else [],
        xprof_type=kind,
        xprof_suggestions=XPROF_SUGGESTIONS.get(kind, []) if bottleneck else [],
        advice=concrete_advice(bottleneck, members) if bottleneck else [],
        is_device_pipeline=device,
    )


def _bottleneck_summary(analysis: TfDataAnalysis, host_dbs: dict[str, OpMetricsDb]) -> dict | None:
    top = analysis.top
    if top is None or not top.iterator_long_name:
        return None
    ops = host_dbs[top.host].metrics
    mine = ops[(ops["name"] == top.iterator_long_name) & (ops["category"] == DATASET_TYPE)]
    return {
        "iterator": top.iterator_long_name,
        # The iterator's self time over the capture, from the host's input op table.
        "self_time_ms": float(mine["self_time_ps"].sum()) / 1e9,
        # Its self time in the pipeline's slowest execution (XProf's iterator latency).
        "latency_ms": top.iterator_latency_ps / 1e9,
        "host": top.host,
        "input_pipeline": top.input_pipeline,
        "max_latency_ms": top.max_latency_ps / 1e9,
    }

def host_input_part(host: HostContext) -> HostInputPart:
    """One host's share: its OpStats and its tf.data iterator statistics."""
    return HostInputPart(op_stats=host.op_stats, tf_data=tf_data_stats(host.events, host.host))


def input_pipeline_data(run: str, host_names: list[str], parts: dict[str, HostInputPart]) -> InputPipelineData:
    """The run's analysis: one view per host and all hosts combined, and the tf.data bottleneck."""
    hosts = hosts_in_order(host_names, parts)
    # XProf 2.24.2's input pipeline, like its overview, leaves out the first and last step of a
    # host with more than five.
    views = run_views({h: parts[h].op_stats for h in hosts}, hosts, overview_steps=True)
    stats = [parts[h].tf_data for h in hosts]
    analysis = bottleneck_analysis(stats)
    return InputPipelineData(
        run=run,
        hosts=hosts,
        views={label: input_view(label, op_stats) for label, op_stats in views.items()},
        tf_data=stats,
        analysis=analysis,
        focus=_focus(stats, analysis),
        bottleneck_summary=_bottleneck_summary(analysis, {h: parts[h].op_stats.host_db for h in hosts}),
    )


def input_pipeline_summary(data: InputPipelineData) -> InputPipelineBlock:
    """The run's `input_pipeline` block of summary.json."""
    view = data.main
    b = view.analysis.bottleneck
    breakdown = view.host_side.breakdown.by_key()
    return InputPipelineBlock(
        input_percent=b.input_percent,
        input_bound=b.input_bound if len(view.steps) else None,
        # To the nanosecond: below that the split's subtraction leaves only float residue.
        host_ms={key: round(breakdown[key] / 1e3, 6) for key in BREAKDOWN},
        bottleneck=InputBottleneck(**data.bottleneck_summary) if data.bottleneck_summary else None,
    )
