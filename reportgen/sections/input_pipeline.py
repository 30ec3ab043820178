"""The input pipeline page: host-side input ops and the tf.data bottleneck.

Per host: the host op metrics DB (for the input op table) and the tf.data
iterator statistics. Per run: XProf's host-side input analysis on the hosts
combined, and its tf.data bottleneck analysis across hosts, with the slowest
pipeline's iterator graph, critical path and bottleneck.

The device-side step breakdown and the input-bound summary come from the
step database; `InputPipelineData.device_side` and `.input_bound` are where
they go, and the template has a block for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from reportgen.core.input_host_ops import HostOpMetricsDb, combine_host_op_metrics, host_op_metrics_db
from reportgen.core.input_ops import BREAKDOWN, InputOpAnalysis, input_op_analysis
from reportgen.core.tf_data import (
    InputPipeline,
    IteratorInfo,
    TfDataAnalysis,
    TfDataStats,
    bottleneck_analysis,
    tf_data_stats,
)
from reportgen.core.tf_data_advice import (
    XPROF_SUGGESTIONS,
    Advice,
    bottleneck_type,
    concrete_advice,
    explain_long_name,
)
from reportgen.core.tf_data_graph import iterator_tree, pipeline_iterators
from reportgen.core.tf_op_names import DATASET_OP_TYPE
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.input_pipeline_charts import (
    category_chart,
    input_ops_csv,
    iterator_chart,
    iterators_table,
    latency_chart,
    pipelines_table,
)

ALL_HOSTS = "All hosts"
TF_DATA_GUIDE = "https://www.tensorflow.org/guide/data"
API_DATASET = "https://www.tensorflow.org/api_docs/python/tf/data/Dataset"
API_TFRECORD = "https://www.tensorflow.org/api_docs/python/tf/data/TFRecordDataset"

# XProf's recommendation table, in its order.
RECOMMENDATIONS = [
    {"title": "Enqueuing data", "text": "you may want to combine small input data chunks into fewer but larger "
     "chunks.", "links": []},
    {"title": "Data preprocessing", "text": "you may increase num_parallel_calls in Dataset map() or preprocess the "
     "data offline.", "links": [("Dataset map()", API_DATASET + "#map")]},
    {"title": "Reading data from files in advance", "text": "you may tune the prefetch size, the interleave "
     "cycle_length and the reader buffer_size.",
     "links": [("prefetch", API_DATASET + "#prefetch"), ("interleave", API_DATASET + "#interleave"),
               ("reader buffer", API_TFRECORD)]},
    {"title": "Reading data from files on demand", "text": "you should read data in advance with prefetch, "
     "interleave and a reader buffer.",
     "links": [("prefetch", API_DATASET + "#prefetch"), ("interleave", API_DATASET + "#interleave"),
               ("reader buffer", API_TFRECORD)]},
    {"title": "Other data reading or processing", "text": "you may consider using the tf.data API (if you are not "
     "using it now).", "links": [("tf.data API", TF_DATA_GUIDE)]},
]

@dataclass
class HostInputPart:
    host_ops: HostOpMetricsDb
    tf_data: TfDataStats


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
    host_side: InputOpAnalysis  # all hosts combined, as XProf shows it
    host_side_per_host: dict[str, InputOpAnalysis]  # only for runs with several hosts
    tf_data: list[TfDataStats]
    analysis: TfDataAnalysis
    focus: FocusPipeline | None
    bottleneck_summary: dict | None
    # From the step database (not computed here yet): the per-step device-side
    # breakdown and XProf's input-bound classification and statements.
    device_side: Any = None
    input_bound: Any = None


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


def _bottleneck_summary(analysis: TfDataAnalysis, host_dbs: dict[str, HostOpMetricsDb]) -> dict | None:
    top = analysis.top
    if top is None or not top.iterator_long_name:
        return None
    ops = host_dbs[top.host].ops
    mine = ops[(ops["name"] == top.iterator_long_name) & (ops["category"] == DATASET_OP_TYPE)]
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
        capture = host.capture
        return HostInputPart(host_ops=host_op_metrics_db(capture), tf_data=tf_data_stats(capture, host.host))

    def combine(self, run: RunContext, parts: dict[str, HostInputPart]) -> InputPipelineData:
        hosts = [h for h in run.host_names if h in parts] or list(parts)
        host_dbs = {h: parts[h].host_ops for h in hosts}
        combined = input_op_analysis(combine_host_op_metrics([host_dbs[h] for h in hosts]))
        per_host = {h: input_op_analysis(host_dbs[h]) for h in hosts} if len(hosts) > 1 else {}
        stats = [parts[h].tf_data for h in hosts]
        analysis = bottleneck_analysis(stats)
        return InputPipelineData(
            run=run.name,
            hosts=hosts,
            host_side=combined,
            host_side_per_host=per_host,
            tf_data=stats,
            analysis=analysis,
            focus=_focus(stats, analysis),
            bottleneck_summary=_bottleneck_summary(analysis, host_dbs),
        )

    def summary(self, data: InputPipelineData) -> dict:
        # input_percent / input_bound join this block once the step database exists.
        return {
            "host_ms": {key: round(data.host_side.breakdown_us[key] / 1e3, 6) for key in BREAKDOWN},
            "bottleneck": data.bottleneck_summary,
        }

    def render(self, data: InputPipelineData, page) -> None:
        page.write_csv("data/input_pipeline/input_ops.csv", input_ops_csv(data.host_side))
        pipelines = pipelines_table(data.tf_data)
        page.write_csv("data/input_pipeline/tf_data_pipelines.csv", pipelines)
        focus = data.focus
        if focus is not None:
            page.write_csv("data/input_pipeline/tf_data_iterators.csv", iterators_table(focus.tree))
        panels = [_host_panel(ALL_HOSTS if data.host_side_per_host else data.hosts[0], data.host_side, "all")]
        panels += [_host_panel(h, a, str(i)) for i, (h, a) in enumerate(data.host_side_per_host.items())]
        page.write_html(
            "input_pipeline.html",
            "input_pipeline.html",
            hosts=data.hosts,
            host_panels=panels,
            recommendations=RECOMMENDATIONS,
            tf_data=_tf_data_view(data, pipelines),
            device_side=data.device_side,
            input_bound=data.input_bound,
            bottleneck=data.bottleneck_summary,
        )


def _host_panel(label: str, analysis: InputOpAnalysis, key: str) -> dict:
    total_us = sum(analysis.breakdown_us.values())
    return {
        "host": label,
        "table_id": f"input-ops-{key}",
        "rows": analysis.ops.to_dict("records"),
        "breakdown": [{"label": BREAKDOWN[k], "ms": analysis.breakdown_us[k] / 1e3,
                       "percent": 100 * analysis.breakdown_us[k] / total_us if total_us else 0.0} for k in BREAKDOWN],
        "total_ms": total_us / 1e3,
        # Categories worth a summary card: at least a microsecond (float residue is not time).
        "cards": [{"label": BREAKDOWN[k], "ms": analysis.breakdown_us[k] / 1e3} for k in BREAKDOWN
                  if analysis.breakdown_us[k] >= 1.0],
        "chart": category_chart(analysis).to_dict() if total_us > 0 else None,
        "enqueue_ratio": analysis.enqueue_ratio,
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
        "iterator_chart": iterator_chart(focus.tree).to_dict() if focus.tree["called"].any() else None,
        "latency_chart": latency_chart(pipeline).to_dict(),
    }
    return view


