"""Pod viewer page: for a chosen step, a stacked column per worker/core with that step's time
breakdown, and the bottleneck of each (XProf's pod_viewer; see `reportgen/core/tools/pod_viewer.py`).

All hosts are combined as XProf combines them (steps aligned across hosts,
global core ids = host × 1000 + core), so one host and many hosts read the
same way. Every step is kept (XProf's pod viewer drops none). TPU steps are
broken down by HLO category here, since XProf leaves their generic
breakdown empty. Runs without steps get no page, and neither do runs of a single core: XProf no longer lists
the tool, and one core's steps are the overview's step-time graph.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from reportgen.core.ops.op_stats import HostOpStats
from reportgen.core.tools.pod_viewer import BREAKDOWN_NAMES, PodStats, PodViewerData, pod_viewer_data
from reportgen.output.formatting import duration_unit_us
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import responsive, vega_spec

CSV_PATH = "data/pod_viewer/pod_stats.csv"


# Past this many cores a column is a few pixels wide on a laptop screen: the bottleneck named above each column
# and every core's axis label would print over each other. The chart then leaves the bottleneck names out (the
# table below the chart names each core's) and Vega keeps the axis labels that fit.
MAX_NAMED_COLUMNS = 40


def names_columns(data: PodViewerData) -> bool:
    """Whether the chart names each column's bottleneck above it (few enough cores)."""
    return int(data.columns["core"].nunique()) <= MAX_NAMED_COLUMNS


def pod_chart(data: PodViewerData) -> dict:
    steps = [int(s) for s in dict.fromkeys(data.columns["step_num"].tolist())]
    step = alt.param(name="step", value=steps[0],
                     bind=alt.binding_select(options=steps, name="Step "))
    order = {name: i for i, name in enumerate(data.parts)}
    # The step-time axis in the unit the longest column reads best in ("40 ms", not "40,000 µs").
    unit, per = duration_unit_us(data.columns["total_us"].max() if len(data.columns) else 0)
    breakdown = data.breakdown.assign(order=data.breakdown["part"].map(order), t=data.breakdown["us"] / per)
    columns = data.columns.assign(total=data.columns["total_us"] / per)
    labels = data.columns.drop_duplicates("core").sort_values("core")["label"].tolist()
    named = names_columns(data)
    axis = alt.Axis(labelAngle=-40, labelLimit=260, labelOverlap=alt.Undefined if named else "greedy")
    x = alt.X("label:N", title="Worker / core", sort=labels, axis=axis)
    bars = alt.Chart(breakdown).mark_bar().encode(
        x=x,
        y=alt.Y("t:Q", title=f"Step time ({unit})", stack="zero"),
        color=alt.Color("part:N", title="Time in", sort=data.parts, scale=alt.Scale(scheme="tableau10")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("label:N", title="Worker / core"), alt.Tooltip("part:N", title="Time in"),
                 alt.Tooltip("t:Q", title=unit, format=",.3f")],
    ).add_params(step).transform_filter(alt.datum.step_num == step)
    text = alt.Chart(columns).mark_text(dy=-8, fontSize=11, fontWeight="bold").encode(
        x=x, y=alt.Y("total:Q"), text=alt.Text("bottleneck:N"),
        tooltip=[alt.Tooltip("label:N", title="Worker / core"), alt.Tooltip("host:N", title="Host"),
                 alt.Tooltip("total:Q", title=f"Step time ({unit})", format=",.3f"),
                 alt.Tooltip("bottleneck:N", title="Bottleneck")],
    ).transform_filter(alt.datum.step_num == step)
    layers = (bars, text) if named else (bars,)
    return responsive(vega_spec(alt.layer(*layers).properties(height=360)))


def csv_frame(stats: PodStats) -> pd.DataFrame:
    r = stats.records
    frame = pd.DataFrame({"Step": r["step_num"], "Core id": r["core"], "Host": r["host_name"],
                          "Step time (us)": r["total_duration_us"]})
    for name in BREAKDOWN_NAMES:
        frame[f"{name} (us)"] = r[name]
    frame["Bottleneck"] = r["bottleneck"]
    return frame


class PodViewerSection(Section):
    slug = "pod_viewer"
    title = "Pod viewer"

    def host_part(self, host: HostContext) -> HostOpStats:
        return host.op_stats

    def combine(self, run: RunContext, parts: dict[str, HostOpStats]) -> PodViewerData | None:
        data = pod_viewer_data(run.host_names, parts)
        if data is None or data.columns["core"].nunique() < 2:
            return None
        return data

    def render(self, data: PodViewerData, page) -> None:
        page.write_csv(CSV_PATH, csv_frame(data.stats))
        rows = data.columns.merge(data.stats.records.drop(columns=["bottleneck"]), on=["step_num", "core"])
        page.write_html(
            "pod_viewer.html",
            "pod_viewer.html",
            chart=pod_chart(data),
            rows=rows.to_dict("records"),
            breakdown_names=BREAKDOWN_NAMES,
            # the categories some core spends time in are shown; the rest are under the table's Columns
            busy_names=[n for n in BREAKDOWN_NAMES if (data.stats.records[n] > 0).any()],
            tpu=data.stats.step_kind == "tpu",
            steps=int(data.columns["step_num"].nunique()),
            cores=int(data.columns["core"].nunique()),
            named=names_columns(data),
            hosts=data.hosts,
            device_type=data.stats.device_type,
            csv_path=CSV_PATH,
        )
