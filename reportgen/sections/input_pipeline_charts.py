"""Charts and downloadable tables of the input pipeline page (Altair / pandas)."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from reportgen.core.input.input_ops import BREAKDOWN, INPUT_OP_COLUMNS, InputOpAnalysis
from reportgen.core.input.tf_data import HOST, SLOW_CALL_THRESHOLD_PS, InputPipeline, TfDataStats
from reportgen.sections.vega import responsive, vega_spec

ROLE_COLORS = {"bottleneck": "#cf222e", "critical path": "#f2a33a", "not blocking": "#8c959f"}


def input_ops_csv(analysis: InputOpAnalysis) -> pd.DataFrame:
    return analysis.ops[list(INPUT_OP_COLUMNS)].rename(columns=INPUT_OP_COLUMNS)


def steps_csv(views: dict) -> pd.DataFrame:
    """Every view's step table: one row per view and step, times in ms, input shares in %."""
    frames = []
    for label, view in views.items():
        columns = {"step_num": "Step id", "step_name": "Step number",
                   **{k: f"{v} (ms)" for k, v in view.labels.items()}, "step_time_ms": "Step time (ms)",
                   "input_percent": "Waiting for input (%)",
                   "input_percent_min": "Waiting for input, least core (%)",
                   "input_percent_max": "Waiting for input, most core (%)", "cores": "Cores",
                   "max_infeed_core_name": "Core with the most input time"}
        frame = view.steps.rename(columns=columns)
        frames.append(frame.assign(Host=label)[["Host", *frame.columns]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def category_chart(breakdown_us: dict[str, float]) -> alt.Chart:
    frame = pd.DataFrame(
        {"category": list(BREAKDOWN.values()), "ms": [breakdown_us[k] / 1e3 for k in BREAKDOWN]}
    )
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", title="Input time on the host (ms)"),
            y=alt.Y("category:N", title=None, sort=list(BREAKDOWN.values()), axis=alt.Axis(labelLimit=420)),
            color=alt.Color("category:N", legend=None, sort=list(BREAKDOWN.values())),
            tooltip=[alt.Tooltip("category:N", title="Category"), alt.Tooltip("ms:Q", title="ms", format=",.3f")],
        )
        .properties(width="container", height=26 * len(frame))
    )


def _step_axis(steps: pd.DataFrame) -> tuple[pd.DataFrame, alt.X]:
    frame = steps.assign(Step=steps["step_name"].astype(str), order=range(len(steps)))
    return frame, alt.X("Step:N", sort=alt.SortField("order"), title="Step")


def input_percent_chart(steps: pd.DataFrame, with_range: bool) -> dict:
    """The share of each step spent waiting for input; with several cores, the range over cores."""
    frame, x = _step_axis(steps)
    frame = frame[["Step", "order", "input_percent", "input_percent_min", "input_percent_max", "cores"]]
    tooltip = [alt.Tooltip("Step:N"), alt.Tooltip("input_percent:Q", title="Waiting for input (%)", format=".1f")]
    if with_range:
        tooltip += [alt.Tooltip("input_percent_min:Q", title="Least of its cores (%)", format=".1f"),
                    alt.Tooltip("input_percent_max:Q", title="Most of its cores (%)", format=".1f"),
                    alt.Tooltip("cores:Q", title="Cores")]
    base = alt.Chart(frame).encode(x=x)
    points = base.mark_line(point=True).encode(
        y=alt.Y("input_percent:Q", title="Step time waiting for input (%)"), tooltip=tooltip)
    layers = [points]
    if with_range:
        layers.insert(0, base.mark_rule(strokeWidth=2, color="#8c959f").encode(
            y="input_percent_min:Q", y2="input_percent_max:Q", tooltip=tooltip))
    return responsive(vega_spec(alt.layer(*layers).properties(height=220)))


def iterator_chart(tree: pd.DataFrame) -> alt.Chart:
    called = tree[tree["called"]]
    labels = ["\u2003" * int(d) + str(n) for d, n in zip(called["depth"], called["name"])]
    roles = ["bottleneck" if b else "critical path" if c else "not blocking"
             for b, c in zip(called["is_bottleneck"], called["is_blocking"])]
    frame = pd.DataFrame(
        {"label": labels, "iterator": called["long_name"].to_numpy(), "self_ms": called["self_time_ps"] / 1e9,
         "duration_ms": called["duration_ps"] / 1e9, "calls": called["num_calls"].to_numpy(), "role": roles}
    )
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("self_ms:Q", title="Self time in the slowest execution (ms)",
                    axis=alt.Axis(tickCount=6, labelOverlap=True, labelFlush=True)),
            y=alt.Y("label:N", title=None, sort=labels, axis=alt.Axis(labelLimit=420)),
            color=alt.Color("role:N", title="Role", scale=alt.Scale(domain=list(ROLE_COLORS),
                                                                  range=list(ROLE_COLORS.values()))),
            tooltip=[alt.Tooltip("iterator:N", title="Iterator"), alt.Tooltip("self_ms:Q", title="Self (ms)",
                     format=",.3f"), alt.Tooltip("duration_ms:Q", title="Time (ms)", format=",.3f"),
                     alt.Tooltip("calls:Q", title="Calls"), alt.Tooltip("role:N", title="Role")],
        )
        .properties(width="container", height=max(40, 24 * len(frame)))
    )


MAX_LATENCY_POINTS = 4000


def latency_chart(pipeline: InputPipeline) -> alt.Chart:
    executions = pipeline.executions.sort_values("start_ps")
    title = "Latency (µs)"
    if len(executions) > MAX_LATENCY_POINTS:
        # Long captures: the slowest execution of each time slice keeps the chart small.
        slices = pd.cut(executions["start_ps"], MAX_LATENCY_POINTS // 2, labels=False)
        executions = executions.loc[executions.groupby(slices)["duration_ps"].idxmax()]
        title = "Slowest latency per time slice (µs)"
    threshold_us = SLOW_CALL_THRESHOLD_PS / 1e6
    latencies = executions["duration_ps"] / 1e6
    low = min(threshold_us, float(latencies[latencies > 0].min())) if (latencies > 0).any() else threshold_us
    high = max(threshold_us, float(latencies.max()))
    domain = [low / 2, high * 2]  # the points and the threshold, off the edges
    decades = [10.0 ** k for k in range(math.floor(math.log10(domain[0])), math.ceil(math.log10(domain[1])) + 1)
               if domain[0] <= 10.0 ** k <= domain[1]]
    frame = pd.DataFrame(
        {
            "start_ms": executions["start_ps"] / 1e9,
            "latency_us": executions["duration_ps"] / 1e6,
            "slow": ["over 50 µs" if d > SLOW_CALL_THRESHOLD_PS else "50 µs or less"
                     for d in executions["duration_ps"]],
        }
    )
    colors = {"over 50 µs": "#cf222e", "50 µs or less": "#1a7f37"}
    kinds = [k for k in colors if k in set(frame["slow"])]
    points = (
        alt.Chart(frame)
        .mark_circle(size=40)
        .encode(
            x=alt.X("start_ms:Q", title="Execution start since capture start (ms)"),
            # latencies span decades (a cached step against a slow map): a log axis keeps both readable
            y=alt.Y("latency_us:Q", title=title, scale=alt.Scale(type="log", domain=domain, nice=False),
                    axis=alt.Axis(values=decades, format=",")),
            # only the kinds of call that occur are in the legend
            color=alt.Color("slow:N", title="Call",
                            scale=alt.Scale(domain=kinds, range=[colors[k] for k in kinds])),
            tooltip=[alt.Tooltip("start_ms:Q", title="Start (ms)", format=",.3f"),
                     alt.Tooltip("latency_us:Q", title="Latency (µs)", format=",.1f")],
        )
    )
    rule = alt.Chart(pd.DataFrame({"threshold_us": [threshold_us], "mark": ["slow-call threshold (50 µs)"]})).mark_rule(
        color="#59636e"
    ).encode(y="threshold_us:Q", strokeDash=alt.StrokeDash("mark:N", title=None,
                                                          scale=alt.Scale(range=[[4, 3]])))
    return (points + rule).resolve_legend(strokeDash="independent").properties(width="container", height=240)


PIPELINE_COLUMNS = [
    "Host", "Input pipeline", "Type", "Executions", "Average latency (µs)", "Minimum latency (µs)",
    "Maximum latency (µs)", "Slow calls (over 50 µs)", "Bottleneck iterator (slowest execution)",
    "Bottleneck self time (µs)",
]


def pipelines_table(stats: list[TfDataStats]) -> pd.DataFrame:
    """Every input pipeline on every host: latency statistics and slow calls."""
    rows = []
    for host_stats in stats:
        for p in host_stats.pipelines:
            info = host_stats.iterators.get(p.bottleneck_id) if p.bottleneck_latency_ps > 0 else None
            rows.append(
                {
                    "Host": host_stats.host,
                    "Input pipeline": p.name,
                    "Type": "host" if p.type == HOST else "device",
                    "Executions": p.count,
                    "Average latency (µs)": p.avg_latency_ps / 1e6,
                    "Minimum latency (µs)": p.min_latency_ps / 1e6,
                    "Maximum latency (µs)": p.max_latency_ps / 1e6,
                    "Slow calls (over 50 µs)": p.num_slow_calls,
                    "Bottleneck iterator (slowest execution)": info.long_name if info else "",
                    "Bottleneck self time (µs)": p.bottleneck_latency_ps / 1e6,
                }
            )
    return pd.DataFrame(rows, columns=PIPELINE_COLUMNS)


def iterators_table(tree: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Depth": tree["depth"],
            "Iterator": tree["long_name"],
            "Dataset op": tree["dataset"],
            "Asynchronous": tree["is_async"],
            "Calls (slowest execution)": tree["num_calls"],
            "Time (µs)": tree["duration_ps"] / 1e6,
            "Self time (µs)": tree["self_time_ps"] / 1e6,
            "Self time (% of execution)": tree["self_percent"],
            "On critical path": tree["is_blocking"],
            "Bottleneck": tree["is_bottleneck"],
            "Self time, all executions (µs)": tree["total_self_time_ps"] / 1e6,
            "Bottleneck in executions": tree["bottleneck_count"],
        }
    )

