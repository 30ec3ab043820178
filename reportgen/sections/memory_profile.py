"""The memory profile page: allocator timelines, what was live at the peak, and (TPU hosts) the HLO modules'
runs, each of which zooms the host's timelines to its run (`static/memory_profile.js`)."""

from __future__ import annotations

import json
from functools import lru_cache

import altair as alt
import numpy as np
import pandas as pd

from reportgen.core.pages import memory_profile_anchor, memory_profile_csv, safe_file_part
from reportgen.core.tools.memory_profile import (
    ALLOCATION,
    BREAKDOWN_COLUMNS,
    NEAR_CAPACITY,
    AllocatorProfile,
    HostMemoryProfile,
    host_memory_profile,
    memory_profile_summary,
)
from reportgen.output.formatting import size_unit
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import responsive, vega_spec, with_datasets
from reportgen.summary_blocks import MemoryBlock

GIB = float(1 << 30)
# The breakdown table's columns, in the page's order (its formats are in the template).
BREAKDOWN_ROW = ["op", "allocation_bytes", "requested_bytes", "occurrences", "region_type", "data_type", "shape"]
MIB = float(1 << 20)
OOM_TOP_ROWS = 5
FREE_SHOWN_UP_TO = 10  # × the peak in use
TIME_DOMAIN = "time_domain"  # the timeline's time-axis variable (ms), set by the page to zoom
MODULE_COLUMNS = {"id": "Id", "name": "HLO Module", "plane": "Device", "start_ms": "Start Time (ms)",
                  "end_ms": "End Time (ms)", "duration_ms": "Duration (ms)"}


def _shows_free(profile: AllocatorProfile) -> bool:
    """Free memory is stacked on the chart (as XProf does) unless it would flatten the rest.

    CPU allocators report the host's whole free RAM: tens of GiB over a heap
    of a few MiB. XProf also drops the series when no event reports any.
    """
    free = profile.timeline["free_bytes"]
    return bool((free != 0).any()) and profile.peak_stats["free_bytes"] <= FREE_SHOWN_UP_TO * profile.peak_bytes


def _unit(profile: AllocatorProfile) -> tuple[str, float]:
    top = profile.memory_capacity if _shows_free(profile) else profile.peak_bytes
    return size_unit(top)


def timeline_chart(profile: AllocatorProfile) -> dict:
    """Stack / heap / free as stacked areas, fragmentation % on a second axis, a tooltip per event."""
    unit, scale = _unit(profile)
    t = profile.timeline
    in_use = (t["stack_bytes"] + t["heap_bytes"]).to_numpy()
    sign = np.where(t["activity"].to_numpy() == ALLOCATION, 1, -1)
    # Short field names and sizes to 6 significant digits: a chart holds up to 2,000 events and their names
    # repeat on every one (the tooltips give each field its title); an allocator of 1,000 events was 0.45 MiB.
    points = pd.DataFrame(
        {
            "t": t["time_ps"].to_numpy() / 1e9,
            "s": sign,
            "rq": _digits(sign * t["requested_bytes"].to_numpy() / scale),
            "al": _digits(sign * t["allocation_bytes"].to_numpy() / scale),
            "op": t["tf_op"].to_numpy(),
            "st": t["step"].to_numpy(),
            "rg": t["region_type"].to_numpy(),
            "dt": t["data_type"].to_numpy(),
            "sh": t["shape"].to_numpy(),
            "u": _digits(in_use / scale),
            "fr": _digits(100.0 * t["fragmentation"].to_numpy()),
        }
    )
    # The legend lists the series with memory in them (a CPU allocator reserves no stack).
    series = [("stack", "stack_bytes")] if (t["stack_bytes"] > 0).any() else []
    series.append(("heap", "heap_bytes"))
    if _shows_free(profile):
        series.append(("free", "free_bytes"))
    areas = pd.concat(
        [pd.DataFrame({"t": points["t"], "kind": name, "order": i, "v": _digits(t[col].to_numpy() / scale)})
         for i, (name, col) in enumerate(series)],
        ignore_index=True,
    )
    spec = _timeline_spec(unit, tuple(name for name, _ in series))
    # The time axis runs over the variable TIME_DOMAIN (ms), so that the page can zoom it to one HLO
    # module's run (static/memory_profile.js) and back: from 0 (as the axis started before) to the end.
    times = points["t"]
    start = min(0.0, float(times.min())) if len(times) else 0.0
    end = float(times.max()) if len(times) else 1.0
    spec = {**spec, "params": [{"name": TIME_DOMAIN, "value": [start, end if end > start else start + 1.0]}]}
    return with_datasets(spec, {"areas": areas, "points": points})


def _digits(values: np.ndarray) -> np.ndarray:
    """`values` to 6 significant digits (the tooltips show 4 decimals of a unit chosen for the peak)."""
    values = np.asarray(values, dtype=np.float64)
    # A value that is not finite (a capture's absurd size overflowing to inf) stays as it is: rounding it
    # would multiply inf by 0.
    finite = np.isfinite(values) & (values != 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        magnitude = np.where(finite, np.floor(np.log10(np.abs(np.where(finite, values, 1.0)))), 0)
        factor = 10.0 ** (5 - np.maximum(magnitude, -300))  # subnormal values round to 0, not inf * 0
        return np.where(finite, np.round(values * factor) / factor, values)


SERIES_COLORS = {"stack": "#d62728", "heap": "#ff7f0e", "free": "#2ca02c"}


@lru_cache(maxsize=16)
def _timeline_spec(unit: str, series: tuple[str, ...]) -> dict:
    """The timeline chart without its data: built by Altair once per unit and series set,
    not once per allocator (building the layered chart cost ≈ 0.1 s each)."""
    x = alt.X("t:Q", title="Time (ms, XProf's per-thread offset)",
              scale=alt.Scale(domain=alt.ExprRef(expr=TIME_DOMAIN)))
    area = (
        alt.Chart(alt.Data(name="areas"))
        .mark_area(opacity=0.55, interpolate="step-after", clip=True)
        .encode(
            x=x,
            y=alt.Y("v:Q", stack="zero", title=f"Memory ({unit})"),
            color=alt.Color("kind:N", title=None, sort=list(series),
                            scale=alt.Scale(domain=list(series), range=[SERIES_COLORS[name] for name in series])),
            order=alt.Order("order:Q"),
        )
    )
    tooltip = [
        alt.Tooltip("t:Q", title="Timestamp (ms)", format=",.3f"),
        alt.Tooltip("ev:N", title="Event"),
        alt.Tooltip("rq:Q", title=f"Requested size ({unit})", format=",.4f"),
        alt.Tooltip("al:Q", title=f"Allocation size ({unit})", format=",.4f"),
        alt.Tooltip("op:N", title="TF op"),
        alt.Tooltip("st:Q", title="Step"),
        alt.Tooltip("rg:N", title="Region type"),
        alt.Tooltip("dt:N", title="Data type"),
        alt.Tooltip("sh:N", title="Shape"),
        alt.Tooltip("u:Q", title=f"Memory in use ({unit})", format=",.4f"),
    ]
    # Every mark has a legend entry: the points and the dashed line get theirs from a constant field.
    in_use_points = (
        alt.Chart(alt.Data(name="points"))
        # The event's kind from its sign (1: allocation), not its name repeated on every event.
        .transform_calculate(mark="'memory in use, at each event'",
                             ev="datum.s > 0 ? 'allocation' : 'deallocation'")
        .mark_point(size=18, filled=True, color="#444", opacity=0.6, clip=True)
        .encode(x=x, y=alt.Y("u:Q"), tooltip=tooltip,
                shape=alt.Shape("mark:N", title=None, scale=alt.Scale(range=["circle"])))
    )
    fragmentation = (
        alt.Chart(alt.Data(name="points"))
        .transform_calculate(line="'fragmentation (%, right axis)'")
        .mark_line(color="#6f42c1", interpolate="step-after", clip=True)
        .encode(
            x=x,
            y=alt.Y("fr:Q", title="Fragmentation (%)", scale=alt.Scale(domain=[0, 100])),
            strokeDash=alt.StrokeDash("line:N", title=None, scale=alt.Scale(range=[[4, 4]])),
            tooltip=[alt.Tooltip("t:Q", title="Timestamp (ms)", format=",.3f"),
                     alt.Tooltip("fr:Q", title="Fragmentation (%)", format=".2f")],
        )
    )
    chart = (alt.layer(alt.layer(area, in_use_points), fragmentation).resolve_scale(y="independent")
             .resolve_legend(color="independent", shape="independent", strokeDash="independent"))
    return responsive(vega_spec(chart.properties(height=320)))


def breakdown_frame(profile: AllocatorProfile) -> pd.DataFrame:
    b = profile.breakdown
    frame = pd.DataFrame(
        {
            "op": b["op"].to_numpy(),
            "allocation_gib": b["allocation_bytes"].to_numpy() / GIB,
            "requested_gib": b["requested_bytes"].to_numpy() / GIB,
            "occurrences": b["occurrences"].to_numpy(),
            "region_type": b["region_type"].to_numpy(),
            "data_type": b["data_type"].to_numpy(),
            "shape": b["shape"].to_numpy(),
            "allocation_bytes": b["allocation_bytes"].to_numpy(),
            "requested_bytes": b["requested_bytes"].to_numpy(),
        }
    )
    return frame


def module_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The HLO module runs as the page lists them: times in ms (XProf's table shows them to 3 decimals)."""
    start, end = runs["start_ps"].to_numpy(np.int64), runs["end_ps"].to_numpy(np.int64)
    return pd.DataFrame({"id": runs["id"].to_numpy(), "name": runs["name"].to_numpy(),
                         "plane": runs["plane"].to_numpy(), "start_ms": start / 1e9, "end_ms": end / 1e9,
                         "duration_ms": end / 1e9 - start / 1e9})


class MemoryProfileSection(Section):
    slug = "memory_profile"
    title = "Memory profile"
    summary_key = "memory"

    def host_part(self, host: HostContext) -> HostMemoryProfile | None:
        return host_memory_profile(host)

    def combine(self, run: RunContext, parts: dict[str, HostMemoryProfile]) -> dict | None:
        ordered = {h: parts[h] for h in run.host_names if h in parts}
        return {"hosts": ordered} if ordered else None

    def summary(self, data: dict) -> MemoryBlock:
        return memory_profile_summary(data["hosts"])

    def render(self, data: dict, page) -> None:
        panels = []
        charts: dict[str, int] = {}  # a chart's JSON: the first panel (1-based, the chart ids') that shows it
        breakdowns: dict[str, int] = {}  # the same for the breakdown tables' rows
        alerts = []
        modules = []
        for host, part in data["hosts"].items():
            runs = part.hlo_modules
            if runs is not None and len(runs):
                frame = module_frame(runs)
                csv = f"data/memory_profile/{safe_file_part(host, len('__hlo_modules.csv'))}__hlo_modules.csv"
                page.write_csv(csv, frame.rename(columns=MODULE_COLUMNS))
                modules.append({"host": host, "csv": csv, "rows": frame.to_dict("records")})
            for memory_id, p in part.profiles.items():
                key = f"{host}/{memory_id}"
                csv = memory_profile_csv(host, memory_id)
                frame = breakdown_frame(p)
                page.write_csv(csv, frame.rename(columns=BREAKDOWN_COLUMNS))
                unit, scale = _unit(p)
                panel = {
                    "key": key, "host": host, "memory_id": memory_id, "profile": p, "csv": csv,
                    "anchor": memory_profile_anchor(host, memory_id),
                    "unit": unit, "chart": timeline_chart(p),
                    "rows": frame[BREAKDOWN_ROW].to_numpy().tolist(),
                    "free_hidden": bool((p.timeline["free_bytes"] != 0).any()) and not _shows_free(p),
                    "peak_percent": 100.0 * p.peak_bytes / p.memory_capacity if p.memory_capacity else None,
                }
                # Allocators with the very same timeline (hosts of one job often record alike) share one spec.
                key_text = json.dumps(panel["chart"], sort_keys=True, default=str)
                panel["chart_of"] = charts.setdefault(key_text, len(panels) + 1)
                panel["rows_of"] = breakdowns.setdefault(json.dumps(panel["rows"], default=str), len(panels) + 1)
                panels.append(panel)
                if p.out_of_memory:
                    alerts.append({**panel, "top": frame.head(OOM_TOP_ROWS).to_dict("records")})
        messages = [(h, m) for h, part in data["hosts"].items() for m in part.oom_messages]
        page.write_html(
            "memory_profile.html", "memory_profile.html", panels=panels, alerts=alerts, messages=messages,
            near_capacity_percent=100 * NEAR_CAPACITY, multi_host=len(data["hosts"]) > 1, modules=modules,
            time_domain=TIME_DOMAIN,
        )
