"""TF stats page: XProf's framework_op_stats tool (tables from `reportgen.core.tools.tf_stats`).

The op tables with XProf's columns, with and without IDLE, and pie charts of
self time by op and by op type, host and device, per host and (with several
hosts) for all hosts combined.
"""

from __future__ import annotations

import copy
from functools import lru_cache

import altair as alt
import pandas as pd

from reportgen.core.ops.op_stats import HostOpStats
from reportgen.core.ops.views import ALL_HOSTS
from reportgen.core.pages import TF_STATS_CSV, tf_op_anchor
from reportgen.core.tools.tf_stats import COLUMNS, PERCENT_COLUMNS, TfStatsView, tf_stats_summary, tf_stats_views
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec, with_datasets

PIE_SLICES = 10


def _pie(table: pd.DataFrame, side: str, by: str, title: str) -> dict | None:
    rows = table[table["host_or_device"] == side]
    if rows.empty or rows["total_self_time"].sum() <= 0:
        return None
    key = "operation" if by == "op" else "type"
    sums = rows.groupby(key, sort=False)["total_self_time"].sum().sort_values(ascending=False)
    top = sums.head(PIE_SLICES)
    if len(sums) > PIE_SLICES:
        top = pd.concat([top, pd.Series({"(other)": sums.iloc[PIE_SLICES:].sum()})])
    names = [n if n else "(no type)" for n in top.index.astype(str)]
    frame = pd.DataFrame({"name": names, "self_us": top.to_numpy()})
    frame["percent"] = 100 * frame["self_us"] / frame["self_us"].sum()
    spec = copy.deepcopy(_pie_spec(title, by))
    spec["encoding"]["color"]["sort"] = names  # slices in size order, "(other)" last
    return with_datasets(spec, {"slices": frame})


@lru_cache(maxsize=64)
def _pie_spec(title: str, by: str) -> dict:
    """A pie without its slices: Altair builds it once per title, not once per pie and host."""
    chart = (
        alt.Chart(alt.Data(name="slices"), title=title)
        .mark_arc()
        .encode(
            theta=alt.Theta("self_us:Q"),
            color=alt.Color("name:N", scale=alt.Scale(scheme="tableau20"),
                            legend=alt.Legend(title=None, labelLimit=320)),
            tooltip=[alt.Tooltip("name:N", title="Op" if by == "op" else "Type"),
                     alt.Tooltip("self_us:Q", title="Self time (µs)", format=",.1f"),
                     alt.Tooltip("percent:Q", title="Share (%)", format=".1f")],
        )
        .properties(width=260, height=260)
    )
    return vega_spec(chart)


def pie_charts(view: TfStatsView) -> dict:
    """Self time by op and by op type, host and device, with and without IDLE: (mode-side-by) → spec."""
    pies = {}
    for mode, table in (("with", view.with_idle), ("without", view.without_idle)):
        for side in ("Host", "Device"):
            for by, word in (("op", "operation"), ("type", "operation type")):
                spec = _pie(table, side, by, f"{side} self time by {word}")
                if spec is not None:
                    pies[f"{mode}-{side}-{by}"] = spec
    return pies


def csv_frame(table: pd.DataFrame, has_gpu: bool) -> pd.DataFrame:
    """XProf's column labels; `(%)` columns as percentages."""
    out = table.copy()
    for key in PERCENT_COLUMNS:
        out[key] = 100 * out[key]
    cols = [(k, label) for k, label, _ in COLUMNS if has_gpu or k != "gpu_tensorcore_utilization"]
    return out[[k for k, _ in cols]].rename(columns=dict(cols))


class TfStatsSection(Section):
    slug = "tf_stats"
    title = "TF stats"

    def host_part(self, host: HostContext) -> HostOpStats:
        return host.op_stats

    def combine(self, run: RunContext, parts: dict[str, HostOpStats]) -> dict:
        return {"views": tf_stats_views(parts, run.host_names)}

    def summary(self, data: dict) -> dict:
        return tf_stats_summary(next(iter(data["views"].values())))

    def render(self, data: dict, page) -> None:
        views: dict[str, TfStatsView] = data["views"]
        first = next(iter(views.values()))
        page.write_csv(TF_STATS_CSV, csv_frame(first.with_idle, first.has_gpu))
        rendered = []
        for index, view in enumerate(views.values()):
            tables = {}
            for mode, table in (("with", view.with_idle), ("without", view.without_idle)):
                display = csv_frame(table, view.has_gpu)
                tables[mode] = {"columns": list(display.columns), "rows": display.to_dict("split")["data"],
                                "id": f"ops-{index}-{mode}",
                                "anchors": [tf_op_anchor(r) for r in table["rank"]]
                                if index == 0 and mode == "with" else []}
            rendered.append({"view": view, "tables": tables, "index": index, "pies": pie_charts(view)})
        page.write_html("tf_stats.html", "tf_stats.html", views=rendered, labels=list(views), all_hosts=ALL_HOSTS,
                        integer_columns=["Rank", "#Occurrences"],
                        numeric_columns=[label for key, label, _ in COLUMNS
                                         if key not in ("host_or_device", "type", "operation", "bound_by",
                                                        "eager")])


__all__ = ["TfStatsSection"]
