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

from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.op_stats import HostOpStats
from reportgen.core.ops.views import ALL_HOSTS, host_views_note
from reportgen.core.pages import TF_STATS_CSV, tf_op_anchor
from reportgen.core.tools.tf_stats import COLUMNS, PERCENT_COLUMNS, TfStatsView, tf_stats_summary, tf_stats_views
from reportgen.output.formatting import fmt_duration_us
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec, with_datasets
from reportgen.summary_blocks import TfStatsBlock

PIE_SLICES = 10
MIDDLE_ELLIPSIS = ("length(datum.label) > 34 ? slice(datum.label, 0, 10) + '…' + slice(datum.label, -23)"
                   " : datum.label")


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
    frame["self_time"] = [fmt_duration_us(v) for v in frame["self_us"]]  # the tooltip's text, in the unit that fits
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
                            # Long names keep their tail, where ops differ (the tables' cut names alike).
                            legend=alt.Legend(title=None, labelLimit=240, labelExpr=MIDDLE_ELLIPSIS)),
            tooltip=[alt.Tooltip("name:N", title="Op" if by == "op" else "Type"),
                     alt.Tooltip("self_time:N", title="Self time"),
                     alt.Tooltip("percent:Q", title="Share (%)", format=".1f")],
        )
        .properties(width=200, height=200)
    )
    return vega_spec(chart)


def pie_charts(view: TfStatsView) -> dict:
    """Self time by op type and by op, device then host (XProf's order), with and without IDLE:
    (mode-side-by) → spec."""
    pies = {}
    for mode, table in (("with", view.with_idle), ("without", view.without_idle)):
        for side in ("Device", "Host"):
            for by, word in (("type", "operation type"), ("op", "operation")):
                spec = _pie(table, side, by, f"{side} self time by {word}")
                if spec is not None:
                    pies[f"{mode}-{side}-{by}"] = spec
    return pies


# The page's table: (column, label shown, cell format, shown by default, key column). Labels are short so that
# the key columns fit a laptop screen; XProf's label is each header's tooltip and the CSV's column name. Self
# time (%) and Cumulative (%) show the host or device column of XProf's pair that applies to the row.
PAGE_COLUMNS = [
    ("rank", "Rank", "int", True, True),
    ("operation", "Operation", "name", True, True),
    ("type", "Type", "label", True, True),
    ("host_or_device", "Host/device", "text", True, False),
    ("occurrences", "Occurrences", "int", True, True),
    ("total_self_time", "Self time", "us", True, True),
    ("self_percent", "Self time (%)", "pct", True, True),
    ("cumulative_percent", "Cumulative (%)", "pct", True, True),
    ("total_time", "Total time", "us", True, False),
    ("avg_time", "Avg. time", "us", False, False),
    ("avg_self_time", "Avg. self-time", "us", False, False),
    ("device_total_self_time_percent", "Self time on device (%)", "pct", False, False),
    ("device_cumulative_total_self_time_percent", "Cumulative on device (%)", "pct", False, False),
    ("host_total_self_time_percent", "Self time on host (%)", "pct", False, False),
    ("host_cumulative_total_self_time_percent", "Cumulative on host (%)", "pct", False, False),
    ("measured_flop_rate", "FLOP rate", "gflops", False, False),
    ("model_flop_rate", "Model FLOP rate", "gflops", False, False),
    ("measured_memory_bw", "Memory bandwidth", "gib_per_s", False, False),
    ("operational_intensity", "FLOP/byte", "num", False, False),
    ("gpu_tensorcore_utilization", "TensorCore (%)", "pct", False, False),
    ("bound_by", "Bound by", "text", False, False),
    ("eager", "Execution mode", "text", False, False),
]


def page_table(table: pd.DataFrame, has_gpu: bool, table_id: str) -> dict:
    """The page's table of one view: columns (with XProf's label as each one's title) and rows of values."""
    xprof = {key: label for key, label, _ in COLUMNS}
    frame = table.copy()
    for key in PERCENT_COLUMNS:
        frame[key] = 100 * frame[key]
    frame["gpu_tensorcore_utilization"] = 100 * frame["gpu_tensorcore_utilization"]
    device = frame["host_or_device"] == "Device"
    frame["self_percent"] = frame["device_total_self_time_percent"].where(device, frame["host_total_self_time_percent"])
    frame["cumulative_percent"] = frame["device_cumulative_total_self_time_percent"].where(
        device, frame["host_cumulative_total_self_time_percent"])
    merged = {"self_percent": "Total self-time on Device (%) or on Host (%), whichever side the op ran on",
              "cumulative_percent": "Cumulative total-self time on Device (%) or on Host (%), as the row's side"}
    has_device = bool(device.any())
    columns = [{"key": key, "label": label, "format": cell, "key_column": key_column,
                # a table of host rows only says so once, above it, not in a column
                "shown": shown and (has_device or key != "host_or_device"),
                "title": merged.get(key) or xprof[key]}
               for key, label, cell, shown, key_column in PAGE_COLUMNS
               if has_gpu or key != "gpu_tensorcore_utilization"]
    keys = [c["key"] for c in columns]
    return {"id": table_id, "columns": columns, "rows": frame[keys].to_dict("split")["data"], "anchors": []}


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
        return {"views": tf_stats_views(parts, run.host_names), "views_note": host_views_note(len(parts)),
                "xla_gpu_costs_missing": any(xla_gpu_costs_missing(p.device_db, p.environment.hardware_type)
                                             for p in parts.values())}

    def summary(self, data: dict) -> TfStatsBlock:
        return tf_stats_summary(next(iter(data["views"].values())))

    def render(self, data: dict, page) -> None:
        views: dict[str, TfStatsView] = data["views"]
        first = next(iter(views.values()))
        page.write_csv(TF_STATS_CSV, csv_frame(first.with_idle, first.has_gpu))
        rendered = []
        for index, view in enumerate(views.values()):
            tables = {mode: page_table(table, view.has_gpu, f"ops-{index}-{mode}")
                      for mode, table in (("without", view.without_idle), ("with", view.with_idle))}
            # Row ids in the run's table with IDLE (the CSV's rows), where the findings point.
            tables["with"]["anchors"] = [tf_op_anchor(r) for r in view.with_idle["rank"]] if index == 0 else []
            rendered.append({"view": view, "tables": tables, "index": index, "pies": pie_charts(view),
                             "has_device": bool((view.with_idle["host_or_device"] == "Device").any())})
        page.write_html("tf_stats.html", "tf_stats.html", views=rendered, labels=list(views), all_hosts=ALL_HOSTS,
                        views_note=data.get("views_note", ""),
                        xla_gpu_costs_missing=data.get("xla_gpu_costs_missing", False))


__all__ = ["TfStatsSection"]
