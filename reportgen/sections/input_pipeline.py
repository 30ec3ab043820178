"""The input pipeline page: XProf's input_pipeline_analyzer, plus the tf.data bottleneck.

Per host: the core OpStats (`HostContext.op_stats`: step database and host
op metrics, computed once per host for every section) and the tf.data
iterator statistics. Per run, for all hosts combined and (with several
hosts) each host alone: XProf's input-pipeline analysis — whether the run is
input-bound, the step time per step by category, the share of each step
spent waiting for input, and the host-side input op table and time split —
then its tf.data bottleneck analysis across hosts, with the slowest
pipeline's iterator graph, critical path and bottleneck.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reportgen.core.events.tf_op import DATASET_TYPE
from reportgen.core.input.advice import RECOMMENDATIONS, link_segments, summary_next_step
from reportgen.core.input.input_ops import BREAKDOWN, InputOpAnalysis
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
from reportgen.core.tools.input_pipeline import CATEGORY_LABELS, StepAnalysis, analyze_steps, step_warnings
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.input_pipeline_charts import (
    category_chart,
    input_ops_csv,
    input_percent_chart,
    iterator_chart,
    iterators_table,
    latency_chart,
    pipelines_table,
    step_breakdown_chart,
    steps_csv,
)
from reportgen.sections.vega import vega_spec
from reportgen.sections.views import ALL_HOSTS, run_views

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
        next_step=summary_next_step(analysis.bottleneck.input_classification, uses_tf_data),
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


class InputPipelineSection(Section):
    slug = "input_pipeline"
    title = "Input pipeline"

    def host_part(self, host: HostContext) -> HostInputPart:
        return HostInputPart(op_stats=host.op_stats, tf_data=tf_data_stats(host.events, host.host))

    def combine(self, run: RunContext, parts: dict[str, HostInputPart]) -> InputPipelineData:
        hosts = [h for h in run.host_names if h in parts] + [h for h in parts if h not in run.host_names]
        # XProf 2.24.2's input pipeline, like its overview, leaves out the first and last step of a
        # host with more than five.
        views = run_views({h: parts[h].op_stats for h in hosts}, hosts, overview_steps=True)
        stats = [parts[h].tf_data for h in hosts]
        analysis = bottleneck_analysis(stats)
        return InputPipelineData(
            run=run.name,
            hosts=hosts,
            views={label: input_view(label, op_stats) for label, op_stats in views.items()},
            tf_data=stats,
            analysis=analysis,
            focus=_focus(stats, analysis),
            bottleneck_summary=_bottleneck_summary(analysis, {h: parts[h].op_stats.host_db for h in hosts}),
        )

    def summary(self, data: InputPipelineData) -> dict:
        view = data.main
        b = view.analysis.bottleneck
        breakdown = view.host_side.breakdown.by_key()
        return {
            "input_percent": b.input_percent,
            "input_bound": b.input_bound if len(view.steps) else None,
            # To the nanosecond: below that the split's subtraction leaves only float residue.
            "host_ms": {key: round(breakdown[key] / 1e3, 6) for key in BREAKDOWN},
            "bottleneck": data.bottleneck_summary,
        }

    def render(self, data: InputPipelineData, page) -> None:
        page.write_csv("data/input_pipeline/input_ops.csv", input_ops_csv(data.main.host_side))
        page.write_csv("data/input_pipeline/steps.csv", steps_csv(data.views))
        pipelines = pipelines_table(data.tf_data)
        page.write_csv("data/input_pipeline/tf_data_pipelines.csv", pipelines)
        focus = data.focus
        if focus is not None:
            page.write_csv("data/input_pipeline/tf_data_iterators.csv", iterators_table(focus.tree))
        page.write_html(
            "input_pipeline.html",
            "input_pipeline.html",
            labels=list(data.views),
            all_hosts=ALL_HOSTS,
            views=[_view_panel(view, str(i)) for i, view in enumerate(data.views.values())],
            recommendations=[link_segments(text) for text in RECOMMENDATIONS],
            tf_data=_tf_data_view(data, pipelines),
        )


def _view_panel(view: InputPipelineView, key: str) -> dict:
    """What the template shows of one view (all numbers ready to print)."""
    a = view.analysis
    b = a.bottleneck
    host = view.host_side
    breakdown = host.breakdown.by_key()
    total_us = sum(breakdown.values())
    has_steps = bool(len(view.steps))
    return {
        "view": view,
        "key": key,
        "has_steps": has_steps,
        "input_bound": b.input_bound if has_steps else None,
        "statement": b.input_statement,
        "next_step": link_segments(view.next_step),
        "statements": [link_segments(text) for text in view.statements],
        "step_summaries": [("Step time", a.step_time)] + [
            (view.labels[k], s) for k, s in (a.tpu_breakdown if a.tpu else a.categories).items() if k in view.labels],
        "step_rows": view.steps.to_dict("records"),
        "step_chart": step_breakdown_chart(view.steps, view.labels) if has_steps else None,
        "input_chart": input_percent_chart(view.steps, view.has_core_range) if has_steps else None,
        "host_rows": host.ops.to_dict("records"),
        "host_table_id": f"input-ops-{key}",
        "breakdown": [{"label": BREAKDOWN[k], "ms": breakdown[k] / 1e3,
                       "percent": 100 * breakdown[k] / total_us if total_us else 0.0} for k in BREAKDOWN],
        "breakdown_total_ms": total_us / 1e3,
        # Categories worth a summary card: at least a microsecond (float residue is not time).
        "cards": [{"label": BREAKDOWN[k], "ms": breakdown[k] / 1e3} for k in BREAKDOWN if breakdown[k] >= 1.0],
        "category_chart": vega_spec(category_chart(breakdown)) if total_us > 0 else None,
        "enqueue_ratio": host.enqueue_ratio,
    }


def _tf_data_view(data: InputPipelineData, pipelines: pd.DataFrame) -> dict:
    focus = data.focus
    view: dict = {
        "has_events": any(s.has_events for s in data.tf_data),
        "summary": data.analysis.summary,
        "is_input_bound": data.analysis.is_input_bound,
        "pipelines": pipelines.to_dict("records"),
        "pipeline_columns": list(pipelines.columns),
        "candidates": [vars(c) for c in data.analysis.candidates],
        "focus": None,
    }
    if focus is None:
        return view
    pipeline = focus.pipeline
    slowest_ps = int(pipeline.executions["duration_ps"].iloc[0])
    tree = focus.tree.assign(indent=[d * 1.4 for d in focus.tree["depth"]])
    view["focus"] = {
        "host": focus.host,
        "pipeline": pipeline.name,
        "is_device_pipeline": focus.is_device_pipeline,
        "executions": pipeline.count,
        "slow_calls": pipeline.num_slow_calls,
        "slowest_ps": slowest_ps,
        "slowest_start_ps": int(pipeline.executions["start_ps"].iloc[0]),
        "bottleneck": focus.bottleneck,
        "bottleneck_latency_ps": pipeline.bottleneck_latency_ps,
        "bottleneck_share": 100 * pipeline.bottleneck_latency_ps / slowest_ps if slowest_ps else 0.0,
        "explanation": focus.explanation,
        "xprof_type": focus.xprof_type,
        "xprof_suggestions": focus.xprof_suggestions,
        "advice": focus.advice,
        "tree": tree.to_dict("records"),
        "iterator_chart": vega_spec(iterator_chart(focus.tree)) if focus.tree["called"].any() else None,
        "latency_chart": vega_spec(latency_chart(pipeline)),
    }
    return view


