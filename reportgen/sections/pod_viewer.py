"""Pod viewer page: for a chosen step, a stacked column per worker/core with that step's time
breakdown, and the bottleneck of each (XProf's pod_viewer; see `reportgen/core/tools/pod_viewer.py`).

All hosts are combined as XProf combines them (steps aligned across hosts,
global core ids = host × 1000 + core), so one host and many hosts read the
same way. Every step is kept (XProf's pod viewer drops none). TPU steps are
broken down by HLO category here, since XProf leaves their generic
breakdown empty. Runs without steps get no page.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from reportgen.core.ops.op_stats import HostOpStats, combine_op_stats
from reportgen.core.tools.pod_viewer import BREAKDOWN_NAMES, PodStats, bottleneck_of, hostnames_by_core, pod_stats
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec

CSV_PATH = "data/pod_viewer/pod_stats.csv"


@dataclass
class PodViewerData:
    stats: PodStats
    hosts: list[str]
    breakdown: pd.DataFrame  # step_num, core, label, host, part, us (long form, what the chart stacks)
    columns: pd.DataFrame  # step_num, core, label, host, total_us, bottleneck (one row per column)
    parts: list[str]  # the stacked parts in legend order


def core_label(core: int, host: str, multi_host: bool) -> str:
    """A column's label: the core, and with several hosts which host it is on (host names may repeat)."""
    if not multi_host:
        return f"core {core}"
    return f"host {core // 1000} ({host}) core {core % 1000}"


def _frames(stats: PodStats, multi_host: bool) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    r = stats.records
    labels = [core_label(int(c), h, multi_host) for c, h in zip(r["core"], r["host_name"])]
    columns = pd.DataFrame({"step_num": r["step_num"].to_numpy(), "core": r["core"].to_numpy(), "label": labels,
                            "host": r["host_name"].to_numpy(), "total_us": r["total_duration_us"].to_numpy(),
                            "bottleneck": r["bottleneck"].to_numpy()})
    if stats.step_kind == "tpu":
        cats = stats.tpu_category_us
        parts = (cats.groupby("category")["us"].sum().sort_values(ascending=False).index.tolist()
                 if len(cats) else [])
        long = cats.rename(columns={"category": "part"}).merge(columns[["step_num", "core", "label", "host"]],
                                                               on=["step_num", "core"])
        wide = cats.pivot_table(index=["step_num", "core"], columns="category", values="us", aggfunc="sum",
                                fill_value=0.0)
        names = list(wide.columns)
        best = bottleneck_of(wide.to_numpy(), names) if len(wide) else []
        by_column = dict(zip(wide.index, best))
        columns["bottleneck"] = [by_column.get((s, c), "") for s, c in zip(columns["step_num"], columns["core"])]
    else:
        parts = list(BREAKDOWN_NAMES)
        long = r.melt(id_vars=["step_num", "core"], value_vars=parts, var_name="part", value_name="us")
        long = long.merge(columns[["step_num", "core", "label", "host"]], on=["step_num", "core"])
    long = long[long["us"] > 0]
    return long[["step_num", "core", "label", "host", "part", "us"]], columns, parts


def pod_chart(data: PodViewerData) -> dict:
    steps = [int(s) for s in dict.fromkeys(data.columns["step_num"].tolist())]
    step = alt.param(name="step", value=steps[0],
                     bind=alt.binding_select(options=steps, name="Step "))
    order = {name: i for i, name in enumerate(data.parts)}
    breakdown = data.breakdown.assign(order=data.breakdown["part"].map(order))
    labels = data.columns.drop_duplicates("core").sort_values("core")["label"].tolist()
    x = alt.X("label:N", title="Worker / core", sort=labels, axis=alt.Axis(labelAngle=-40, labelLimit=260))
    bars = alt.Chart(breakdown).mark_bar().encode(
        x=x,
        y=alt.Y("us:Q", title="Step time (µs)", stack="zero"),
        color=alt.Color("part:N", title="Time in", sort=data.parts, scale=alt.Scale(scheme="tableau10")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("label:N", title="Worker / core"), alt.Tooltip("part:N", title="Time in"),
                 alt.Tooltip("us:Q", title="µs", format=",.3f")],
    ).add_params(step).transform_filter(alt.datum.step_num == step)
    text = alt.Chart(data.columns).mark_text(dy=-8, fontSize=11, fontWeight="bold").encode(
        x=x, y=alt.Y("total_us:Q"), text=alt.Text("bottleneck:N"),
        tooltip=[alt.Tooltip("label:N", title="Worker / core"), alt.Tooltip("host:N", title="Host"),
                 alt.Tooltip("total_us:Q", title="Step time (µs)", format=",.3f"),
                 alt.Tooltip("bottleneck:N", title="Bottleneck")],
    ).transform_filter(alt.datum.step_num == step)
    width = max(320, min(1200, 60 * data.columns["core"].nunique()))
    return vega_spec(alt.layer(bars, text).properties(width=width, height=360))


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
        hosts = [h for h in run.host_names if h in parts] + [h for h in parts if h not in run.host_names]
        ordered = [parts[h] for h in hosts]
        combined = combine_op_stats(ordered)
        names = hostnames_by_core([(p.environment.hostnames[0], p.core_details) for p in ordered])
        stats = pod_stats(combined.step_db, names, combined.environment.device_type)
        if stats.records.empty:
            return None
        breakdown, columns, stacked = _frames(stats, len(hosts) > 1)
        return PodViewerData(stats=stats, hosts=hosts, breakdown=breakdown, columns=columns, parts=stacked)

    def render(self, data: PodViewerData, page) -> None:
        page.write_csv(CSV_PATH, csv_frame(data.stats))
        rows = data.columns.merge(data.stats.records.drop(columns=["bottleneck"]), on=["step_num", "core"])
        page.write_html(
            "pod_viewer.html",
            "pod_viewer.html",
            chart=pod_chart(data),
            rows=rows.to_dict("records"),
            breakdown_names=BREAKDOWN_NAMES,
            tpu=data.stats.step_kind == "tpu",
            steps=int(data.columns["step_num"].nunique()),
            cores=int(data.columns["core"].nunique()),
            hosts=data.hosts,
            device_type=data.stats.device_type,
            csv_path=CSV_PATH,
        )
