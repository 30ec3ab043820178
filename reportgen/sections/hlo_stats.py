"""HLO op stats page: XProf's hlo_stats table, one row per device op (see `reportgen/core/tools/hlo_stats.py`).

A chart of self time by HLO category and by bound-by resource sits above the
sortable, filterable table. Runs without a device get no page; a device on which
no XLA op could be placed (a GPU capture without HLO modules) gets XProf's empty
table and the reason.
"""

from __future__ import annotations

import numbers

import altair as alt
import pandas as pd

from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.device_run import DevicePart, device_part
from reportgen.core.pages import HLO_STATS_CSV, graph_viewer_href, hlo_op_anchor
from reportgen.core.tools.hlo_stats import COLUMNS, HloStatsData, hlo_stats_data
from reportgen.output.formatting import duration_unit_us
from reportgen.output.table_cells import link_cell
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import responsive, vega_spec

CSV_PATH = HLO_STATS_CSV
# Columns the page offers (all of them go to the CSV): label shown, shown by default, key column. XProf's label is
# each header's tooltip.
SHOWN = {
    "rank": ("Rank", True, True), "program_id": ("Program id", False, False),
    "category": ("Category", True, True), "hlo_op_name": ("HLO op", True, True),
    "tf_op_name": ("Framework op", False, False), "occurrences": ("Occurrences", True, True),
    "total_time": ("Total time", False, False), "avg_time": ("Avg. time", False, False),
    "total_self_time": ("Self time", True, True), "total_self_time_percent": ("Self time (%)", True, True),
    "cumulative_total_self_time_percent": ("Cumulative (%)", True, False),
    "model_flop_rate": ("Model FLOP rate", False, False), "normalized_flop_rate": ("FLOP rate", True, False),
    "measured_memory_bw": ("Memory BW", True, False), "hbm_bw": ("HBM BW", False, False),
    "operational_intensity": ("FLOP/byte", False, False), "bound_by": ("Bound by", True, False),
    "dma_stall_percent": ("DMA stall (%)", False, False), "hlo_rematerialization": ("Remat.", False, False),
    "outside_compilation": ("Outside compilation", False, False), "source_info": ("Source", False, False),
}
FLOP_RATE_COLUMNS = {"model_flop_rate", "normalized_flop_rate"}  # GFLOP/s
BANDWIDTH_COLUMNS = {"measured_memory_bw", "hbm_bw"}  # GiB/s
DURATION_COLUMNS = {"total_time", "avg_time", "total_self_time"}  # µs, shown in the unit that reads best


def category_chart(table: pd.DataFrame) -> dict:
    by_category = (table.groupby("category", sort=False)["total_self_time"].sum().reset_index()
                   .sort_values("total_self_time", ascending=False))
    total = by_category["total_self_time"].sum()
    by_category["percent"] = 100.0 * by_category["total_self_time"] / total if total > 0 else 0.0
    # The axis in the unit its longest bar reads best in (seconds for a long run, not "640,000,000 µs").
    unit, per = duration_unit_us(by_category["total_self_time"].max() if len(by_category) else 0)
    by_category["self_time"] = by_category["total_self_time"] / per
    chart = (
        alt.Chart(by_category)
        .mark_bar()
        .encode(
            x=alt.X("self_time:Q", title=f"Total self time ({unit})"),
            y=alt.Y("category:N", sort="-x", title="HLO op category"),
            tooltip=[alt.Tooltip("category:N", title="Category"),
                     alt.Tooltip("self_time:Q", title=f"Self time ({unit})", format=",.3f"),
                     alt.Tooltip("percent:Q", title="Share of op time (%)", format=".2f")],
        )
        .properties(height=alt.Step(18))
    )
    return responsive(vega_spec(chart))


def _format(column: str, sample) -> str:
    """A column's cell format (output/table_cells.py), from its name and, for the rest, its first value."""
    if column == "hlo_op_name":
        return "code"
    if column in FLOP_RATE_COLUMNS:
        return "gflops"
    if column in BANDWIDTH_COLUMNS:
        return "gib_per_s"
    if column in ("category", "tf_op_name"):
        return "label"
    if column in ("rank", "occurrences"):
        return "int"
    if not isinstance(sample, numbers.Real) or isinstance(sample, bool):
        return "name"
    if column.endswith("_percent"):
        return "pct:3"
    return "us" if column in DURATION_COLUMNS else "num"


def table_rows(table: pd.DataFrame, graph_link: bool) -> tuple[list[list], list[str]]:
    """The table's rows as data (`table_data`) in SHOWN's column order and their formats: each op's name with its
    HLO text on hover and, where the run has a graph viewer, a link to the op there; its source with the stack."""
    records = table.to_dict("records")
    formats = [_format(c, records[0][c] if records else None) for c in SHOWN]
    rows = []
    for row in records:
        values = []
        for column in SHOWN:
            value = row[column]
            if column == "hlo_op_name":
                href = graph_viewer_href(value, program=row["program_id"]) if graph_link and value else None
                value = link_cell(value, href, "Show in the graph viewer", title=row["hlo_op_expression"] or None)
            elif column == "source_info":
                value = link_cell(value, title=row["source_stack"] or None)
            values.append(value)
        rows.append(values)
    return rows, formats


def csv_frame(table: pd.DataFrame) -> pd.DataFrame:
    return table[list(COLUMNS)].rename(columns=COLUMNS)


class HloStatsSection(Section):
    slug = "hlo_stats"
    title = "HLO op stats"

    def host_part(self, host: HostContext) -> DevicePart | None:
        return device_part(host)

    def combine(self, run: RunContext, parts: dict[str, DevicePart]) -> HloStatsData | None:
        return hlo_stats_data(run.host_names, parts)

    def render(self, data: HloStatsData, page) -> None:
        page.write_csv(CSV_PATH, csv_frame(data.table))
        env = data.run.op_stats.environment
        rows, formats = table_rows(data.table, any(item.get("href") == "graph_viewer.html" for item in page.nav))
        page.write_html(
            "hlo_stats.html",
            "hlo_stats.html",
            rows=rows,
            formats=formats,
            anchors=[hlo_op_anchor(rank) for rank in data.table["rank"]],
            columns=SHOWN,
            labels=COLUMNS,
            chart=category_chart(data.table) if len(data.table) else None,
            device_type=env.device_type,
            hardware_type=env.hardware_type,
            has_ops=data.run.has_ops,
            xla_gpu_costs_missing=xla_gpu_costs_missing(data.run.op_stats.device_db, env.hardware_type),
            hosts=data.run.hosts,
            csv_path=CSV_PATH,
        )
