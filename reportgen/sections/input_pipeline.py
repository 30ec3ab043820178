"""The input pipeline page: XProf's input_pipeline_analyzer, plus the tf.data bottleneck.

The numbers come from `reportgen.core.tools.input_pipeline`: for all hosts
combined and (with several hosts) each host alone, whether the run is
input-bound, the step time per step by category, the share of each step
spent waiting for input, the host-side input op table and time split, then
the tf.data bottleneck analysis across hosts, with the slowest pipeline's
iterator graph, critical path and bottleneck. Here they become the page, its
charts and its CSVs.
"""

from __future__ import annotations

import pandas as pd

from reportgen.core.input.advice import RECOMMENDATIONS, in_our_words, link_segments
from reportgen.core.input.input_ops import BREAKDOWN
from reportgen.core.ops.views import ALL_HOSTS, host_views_note
from reportgen.core.pages import (
    INPUT_OPS_CSV,
    INPUT_STEPS_CSV,
    TF_DATA_ITERATORS_CSV,
    TF_DATA_PIPELINES_CSV,
    input_step_anchor,
    iterator_anchor,
    timeline_href,
)
from reportgen.core.tools.input_pipeline import (
    HostInputPart,
    InputPipelineData,
    InputPipelineView,
    host_input_part,
    input_pipeline_data,
    input_pipeline_summary,
)
from reportgen.output.table_cells import link_attrs
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.charts import step_chart
from reportgen.sections.input_pipeline_charts import (
    category_chart,
    input_ops_csv,
    input_percent_chart,
    iterator_chart,
    iterators_table,
    latency_chart,
    pipelines_table,
    steps_csv,
)
from reportgen.sections.vega import responsive, vega_spec
from reportgen.summary_blocks import InputPipelineBlock


class InputPipelineSection(Section):
    slug = "input_pipeline"
    title = "Input pipeline"

    def host_part(self, host: HostContext) -> HostInputPart:
        return host_input_part(host)

    def combine(self, run: RunContext, parts: dict[str, HostInputPart]) -> InputPipelineData:
        return input_pipeline_data(run.name, run.host_names, parts)

    def summary(self, data: InputPipelineData) -> InputPipelineBlock:
        return input_pipeline_summary(data)

    def render(self, data: InputPipelineData, page) -> None:
        page.write_csv(INPUT_OPS_CSV, input_ops_csv(data.main.host_side))
        page.write_csv(INPUT_STEPS_CSV, steps_csv(data.views))
        pipelines = pipelines_table(data.tf_data)
        page.write_csv(TF_DATA_PIPELINES_CSV, pipelines)
        focus = data.focus
        if focus is not None:
            page.write_csv(TF_DATA_ITERATORS_CSV, iterators_table(focus.tree))
        page.write_html(
            "input_pipeline.html",
            "input_pipeline.html",
            labels=list(data.views),
            all_hosts=ALL_HOSTS,
            views_note=host_views_note(len(data.hosts)),
            views=[_view_panel(view, str(i), anchors=i == 0,
                               trace_link=any(item.get("href") == "trace.html" for item in page.nav))
                   for i, view in enumerate(data.views.values())],
            recommendations=[link_segments(text) for text in RECOMMENDATIONS],
            tf_data=_tf_data_view(data, pipelines),
        )


def step_table(view: InputPipelineView, anchors: bool, trace_link: bool) -> dict:
    """The steps table's rows as data (`table_data`), their cell formats and row ids: a step's categories and
    time in ms, its share waiting for input (and the range over cores), on TPU the core that waited longest, and
    a link to the step in the timeline when the run has a trace page."""
    a = view.analysis
    formats = ["text"] + (["timeline"] if trace_link else []) + ["ms:2"] * (len(view.labels) + 1) + ["pct:1"]
    formats += ["pct:1", "pct:1"] if view.has_core_range else []
    formats += ["text"] if a.tpu else []
    rows, ids = [], []
    for row in view.steps.to_dict("records"):
        values = [row["step_name"]]
        if trace_link:
            href = timeline_href(None, step=str(row["step_name"]))
            values.append(link_attrs(href, "Open in the trace page's timeline", "timeline-link"))
        values += [row[key] for key in view.labels] + [row["step_time_ms"], row["input_percent"]]
        if view.has_core_range:
            values += [row["input_percent_min"], row["input_percent_max"]]
        if a.tpu:
            values.append(row["max_infeed_core_name"] or "unknown")
        rows.append(values)
        ids.append(input_step_anchor(row["step_num"]))
    return {"rows": rows, "formats": formats, "anchors": ids if anchors else None, "trace_link": trace_link}


def _view_panel(view: InputPipelineView, key: str, anchors: bool, trace_link: bool) -> dict:
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
        "next_step": link_segments(in_our_words(view.next_step, on_input_page=True)),
        "statements": [link_segments(in_our_words(text, on_input_page=True)) for text in view.statements],
        "step_summaries": [("Step time", a.step_time)] + [
            (view.labels[k], s) for k, s in (a.tpu_breakdown if a.tpu else a.categories).items() if k in view.labels],
        "step_table": step_table(view, anchors, trace_link),
        "step_chart": step_chart(view.steps, view.labels) if has_steps else None,
        "input_chart": input_percent_chart(view.steps, view.has_core_range) if has_steps else None,
        "host_rows": host.ops.to_dict("records"),
        "host_table_id": f"input-ops-{key}",
        "breakdown": [{"label": BREAKDOWN[k], "ms": breakdown[k] / 1e3,
                       "percent": 100 * breakdown[k] / total_us if total_us else 0.0} for k in BREAKDOWN],
        "breakdown_total_ms": total_us / 1e3,
        # Categories worth a summary card: at least a microsecond (float residue is not time).
        "cards": [{"label": BREAKDOWN[k], "ms": breakdown[k] / 1e3} for k in BREAKDOWN if breakdown[k] >= 1.0],
        "category_chart": responsive(vega_spec(category_chart(breakdown))) if total_us > 0 else None,
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
    tree = focus.tree.assign(indent=[d * 1.4 for d in focus.tree["depth"]],
                             anchor=[iterator_anchor(i) for i in range(len(focus.tree))])
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
        "iterator_chart": responsive(vega_spec(iterator_chart(focus.tree))) if focus.tree["called"].any() else None,
        "latency_chart": responsive(vega_spec(latency_chart(pipeline))),
    }
    return view


