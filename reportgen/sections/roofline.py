"""Roofline page: each device op's FLOP rate against its operational intensity, under the
device's compute and memory roofs (XProf's roofline_model; see `reportgen/core/tools/roofline.py`).

The chart plots ops with FLOPs (an op without any has no place on the log
axes; the table lists it). Runs without device ops get no page.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.device_run import DevicePart, device_part
from reportgen.core.ops.op_metrics import safe_divide
from reportgen.core.tools.op_profile import gibi_to_giga
from reportgen.core.tools.roofline import COLUMNS, FRACTION_COLUMNS, RooflineData, RooflineModel, roofline_data
from reportgen.output.formatting import fmt_gflops, fmt_gib_per_s
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import responsive, vega_spec

CSV_PATH = "data/roofline_model/roofline_model.csv"
# Columns the page offers (all of XProf's go to the CSV): label shown, shown by default, key column.
TABLE_COLUMNS = {
    "rank": ("Rank", True, True), "category": ("Category", True, True), "operation": ("Operation", True, True),
    "occurrences": ("Occurrences", True, True), "total_time": ("Total time", True, True),
    "total_self_time_percent": ("Self time (%)", True, True), "measured_flop_rate": ("FLOP rate", True, False),
    "model_flop_rate": ("Model FLOP rate", False, False), "measured_memory_bw": ("Memory BW", True, False),
    "hbm_bw": ("HBM BW", False, False), "operational_intensity": ("FLOP/byte", True, False),
    "hbm_operational_intensity": ("HBM FLOP/byte", False, False), "bound_by": ("Bound by", True, False),
    "roofline_efficiency": ("Roofline efficiency (%)", False, False),
    "compute_efficiency": ("FLOP rate / peak (%)", False, False),
    "max_mem_bw_utilization": ("Max memory BW utilization (%)", False, False),
    "optimal_flop_rate": ("Optimal FLOP rate", False, False),
    "total_time_per_core": ("Time per core", False, False), "source_info": ("Source", False, False),
}
FLOP_RATE_COLUMNS = {"measured_flop_rate", "model_flop_rate", "optimal_flop_rate"}  # GFLOP/s
BANDWIDTH_COLUMNS = {"measured_memory_bw", "hbm_bw"}  # GiB/s
DURATION_COLUMNS = {"total_time", "total_time_per_core"}  # µs, shown in the unit that reads best
PERCENT_SHOWN = {"total_self_time_percent", "roofline_efficiency", "compute_efficiency", "max_mem_bw_utilization"}


def roof_lines(model: RooflineModel, x_min: float, x_max: float) -> pd.DataFrame:
    """Points of each roof: memory roofs rise with intensity until they meet the compute roof."""
    peak = model.peaks.peak_flop_rate
    rows = []
    for label, bw_gib in model.peaks.ceilings:
        bw = gibi_to_giga(bw_gib)  # GB/s × FLOP/byte = GFLOP/s
        if bw <= 0:
            continue
        ridge = safe_divide(peak, bw) if peak > 0 else x_max
        xs = [x_min, min(max(ridge, x_min), x_max), x_max]
        for x in xs:
            rows.append({"roof": f"{label} ({fmt_gib_per_s(bw_gib)})", "x": x, "y": min(peak, x * bw) if peak > 0
                         else x * bw})
    if peak > 0:
        rows += [{"roof": f"Compute ({fmt_gflops(peak)})", "x": x, "y": peak} for x in (x_min, x_max)]
    return pd.DataFrame(rows, columns=["roof", "x", "y"])


def roofline_chart(model: RooflineModel) -> dict | None:
    ops = model.ops
    records = model.records
    program = records[(records["step"] == "Total") & (records["rank"] == 0) & records["include_infeed_outfeed"]]
    points = pd.concat([ops.assign(kind="op"), program.assign(kind="Program (all ops)")], ignore_index=True)
    points = points[(points["operational_intensity"] > 0) & (points["measured_flop_rate"] > 0)]
    ridges = [safe_divide(model.peaks.peak_flop_rate, gibi_to_giga(bw)) for _, bw in model.peaks.ceilings]
    xs = np.concatenate([points["operational_intensity"].to_numpy(float), [r for r in ridges if r > 0]])
    if len(xs) == 0:
        return None
    x_min, x_max = float(xs.min()) / 4, float(xs.max()) * 4
    roofs = roof_lines(model, x_min, x_max)
    points = points.assign(self_time_percent=100.0 * points["total_self_time_percent"])
    x = alt.X("x:Q", scale=alt.Scale(type="log", domain=[x_min, x_max]), title="Operational intensity (FLOP/byte)")
    y = alt.Y("y:Q", scale=alt.Scale(type="log"), title="FLOP rate (GFLOP/s)")
    roof_layer = alt.Chart(roofs).mark_line(strokeDash=[6, 3]).encode(
        x=x, y=y, color=alt.Color("roof:N", title="Roof", scale=alt.Scale(scheme="dark2")),
        tooltip=[alt.Tooltip("roof:N", title="Roof")],
    )
    plotted = points.rename(columns={"operational_intensity": "x", "measured_flop_rate": "y"})
    point_layer = alt.Chart(plotted).mark_point(filled=True, size=70, opacity=0.8).encode(
        x=x, y=y,
        shape=alt.Shape("kind:N", title="Point"),
        fill=alt.Fill("bound_by:N", title="Bound by", scale=alt.Scale(scheme="set1")),
        stroke=alt.value("#333"),
        tooltip=[alt.Tooltip("operation:N", title="Op"), alt.Tooltip("category:N", title="Category"),
                 alt.Tooltip("x:Q", title="Operational intensity (FLOP/byte)", format=",.4g"),
                 alt.Tooltip("y:Q", title="FLOP rate (GFLOP/s)", format=",.4g"),
                 alt.Tooltip("hbm_bw:Q", title="HBM BW (GiB/s)", format=",.4g"),
                 alt.Tooltip("bound_by:N", title="Bound by"),
                 alt.Tooltip("total_time:Q", title="Total time (µs)", format=",.3f"),
                 alt.Tooltip("self_time_percent:Q", title="Self time (%)", format=".3f")],
    )
    # As wide as the page: ops crowd the ridge points, and every pixel of width separates them.
    return responsive(vega_spec(alt.layer(roof_layer, point_layer).resolve_scale(color="independent").properties(
        height=420)))


def csv_frame(records: pd.DataFrame) -> pd.DataFrame:
    frame = records[list(COLUMNS)].copy()
    for col in FRACTION_COLUMNS:
        frame[col] = 100.0 * frame[col]
    return frame.rename(columns=COLUMNS)


def _table_rows(records: pd.DataFrame, include: bool) -> list[dict]:
    rows = records[(records["step"] == "Total") & (records["include_infeed_outfeed"] == include)].copy()
    for col in PERCENT_SHOWN:
        rows[col] = 100.0 * rows[col]
    return rows.to_dict("records")


class RooflineSection(Section):
    slug = "roofline_model"
    title = "Roofline"

    def host_part(self, host: HostContext) -> DevicePart | None:
        return device_part(host)

    def combine(self, run: RunContext, parts: dict[str, DevicePart]) -> RooflineData | None:
        return roofline_data(run.host_names, parts)

    def render(self, data: RooflineData, page) -> None:
        model = data.model
        page.write_csv(CSV_PATH, csv_frame(model.records))
        peaks = model.peaks
        page.write_html(
            "roofline_model.html",
            "roofline_model.html",
            chart=roofline_chart(model),
            peaks=peaks,
            roofs=[{"label": label, "bw": bw, "ridge": peaks.ridge_point(bw)} for label, bw in peaks.ceilings],
            views=[{"key": "with", "label": "Included", "rows": _table_rows(model.records, True)},
                   {"key": "without", "label": "Excluded", "rows": _table_rows(model.records, False)}],
            columns=TABLE_COLUMNS,
            labels=COLUMNS,
            percent=PERCENT_SHOWN,
            flop_rates=FLOP_RATE_COLUMNS,
            bandwidths=BANDWIDTH_COLUMNS,
            durations=DURATION_COLUMNS,
            unplotted=int(((model.ops["operational_intensity"] <= 0) | (model.ops["measured_flop_rate"] <= 0)).sum())
            if len(model.ops) else 0,
            per_step_omitted=model.per_step_omitted,
            hosts=data.run.hosts,
            has_ops=data.run.has_ops,
            hardware_type=data.run.hardware_type,
            xla_gpu_costs_missing=xla_gpu_costs_missing(data.run.op_stats.device_db, data.run.hardware_type),
            csv_path=CSV_PATH,
        )
