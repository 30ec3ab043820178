"""The memory viewer page: each HLO module's working space and the buffers live at its peak
(numbers from `reportgen.core.tools.memory_viewer`)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from reportgen.core.pages import memory_viewer_anchor, memory_viewer_csv
from reportgen.core.tools.memory_profile import NEAR_CAPACITY
from reportgen.core.tools.memory_viewer import (
    BUFFER_COLUMNS,
    HostMemoryViewer,
    MemorySpaceView,
    heap_rows,
    host_memory_viewer,
    memory_viewer_data,
    memory_viewer_summary,
    near_capacity,
)
from reportgen.output.formatting import fmt_bytes, size_unit
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec
from reportgen.summary_blocks import MemoryBlock

# Working-space curves longer than this are reduced to the maximum per bucket
# (the peak always survives), so a page stays light for huge modules.
MAX_CURVE_POINTS = 4000
SPACE_NAMES = {0: "default (HBM / device) memory", 1: "alternate memory (e.g. VMEM)", 5: "host memory"}

MIB = float(1 << 20)  # the core's sizes are MiB, as XProf's memory viewer gives them


def space_label(space: int) -> str:
    return f"Memory space {space}" + (f" — {SPACE_NAMES[space]}" if space in SPACE_NAMES else "")


def _curve(view: MemorySpaceView) -> pd.DataFrame:
    """Memory after each heap-simulator event (XProf's timeline holds the value before it).

    Plotted this way the event that reaches the peak sits on the peak, and a
    buffer's span [allocated at, freed at] lines up with its step on the curve.
    """
    n = len(view.heap_bytes) - 1
    positions = np.arange(n)
    if n > MAX_CURVE_POINTS:
        buckets = np.array_split(positions, MAX_CURVE_POINTS)
        positions = np.array([b[np.argmax(view.heap_bytes[b + 1])] for b in buckets])
    return pd.DataFrame(
        {
            "position": positions,
            "size": view.heap_sizes_mib[positions + 1],
            "unpadded": view.unpadded_heap_sizes_mib[positions + 1],
            "instruction": [view.instruction_names[i] for i in positions],
        }
    )


def working_space_spec(view: MemorySpaceView) -> dict:
    """Working space over program order with the peak marked.

    The `highlight` dataset starts empty; the page's script fills it with the
    lifetime of the buffer the reader points at.
    """
    curve = _curve(view)
    # The memory axis in the unit the peak reads best in (KiB for a small module: not "0.0005 MiB" steps).
    unit, per = size_unit(float(curve["size"].max()) * MIB if len(curve) else 0)
    curve["size"] = curve["size"] * (MIB / per)
    curve["unpadded"] = curve["unpadded"] * (MIB / per)
    peak = view.peak_heap_mib * (MIB / per)
    long = pd.concat(
        [curve.assign(series="Without padding", value=curve["unpadded"]),
         curve.assign(series="Allocated (with padding)", value=curve["size"])],
        ignore_index=True,
    )[["position", "series", "value", "instruction"]]
    # A fixed domain: the highlight layer is empty until the reader points at a buffer.
    domain = {"domain": [0, max(len(view.heap_bytes) - 2, 1)], "nice": False, "zero": False}
    x = {"field": "position", "type": "quantitative", "title": "Heap-simulator event (program order)",
         "scale": domain, "axis": {"tickMinStep": 1, "format": "d"}}
    y = {"field": "value", "type": "quantitative", "title": f"Memory allocated ({unit})"}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "width": 900,
        "height": 280,
        "layer": [
            {
                "data": {"name": "highlight"},
                # the pointed-at buffer's lifetime: an overlay, not content of its own for screen readers
                "mark": {"type": "rect", "color": "#f5a623", "opacity": 0.3, "aria": False},
                "encoding": {"x": {"field": "start", "type": "quantitative", "scale": domain},
                             "x2": {"field": "limit"},
                             "tooltip": [{"field": "label", "title": "Buffer"},
                                         {"field": "start", "title": "Allocated at"},
                                         {"field": "limit", "title": "Freed at"}]},
            },
            {
                "data": {"values": long.to_dict("records")},
                "mark": {"type": "line", "interpolate": "step-after"},
                "encoding": {
                    "x": x, "y": y,
                    "color": {"field": "series", "type": "nominal", "title": None,
                              "sort": ["Allocated (with padding)", "Without padding"],
                              "scale": {"range": ["#0b57d0", "#8fb3ee"]}},
                    "strokeDash": {"field": "series", "type": "nominal", "legend": None,
                                   "sort": ["Allocated (with padding)", "Without padding"],
                                   "scale": {"range": [[1, 0], [4, 3]]}},
                },
            },
            {
                "data": {"values": curve.to_dict("records")},
                "mark": {"type": "point", "size": 14, "opacity": 0.01, "filled": True},
                "encoding": {
                    "x": {"field": "position", "type": "quantitative", "scale": domain},
                    "y": {"field": "size", "type": "quantitative"},
                    "tooltip": [{"field": "position", "title": "After event"},
                                {"field": "instruction", "title": "Instruction"},
                                {"field": "size", "title": f"Allocated ({unit})", "format": ",.4f"},
                                {"field": "unpadded", "title": f"Without padding ({unit})", "format": ",.4f"}],
                },
            },
            {
                "data": {"values": [{"position": view.peak_position, "size": peak,
                                     "label": f"peak {fmt_bytes(view.peak_heap_mib * MIB)}"}]},
                "layer": [
                    {"mark": {"type": "rule", "color": "#cf222e", "strokeDash": [4, 4]},
                     "encoding": {"x": {"field": "position", "type": "quantitative", "scale": domain}}},
                    {"mark": {"type": "point", "color": "#cf222e", "filled": True, "size": 60},
                     "encoding": {"x": {"field": "position", "type": "quantitative", "scale": domain},
                                  "y": {"field": "size", "type": "quantitative"},
                                  "tooltip": [{"field": "label", "title": "Peak"},
                                              {"field": "position", "title": "At event"}]}},
                ],
            },
        ],
    }


def buffers_chart(view: MemorySpaceView, by_size: bool) -> dict:
    """The buffers live at the peak as bars, in program order or largest first."""
    order = view.by_size if by_size else list(range(len(view.max_heap)))
    unit, per = size_unit(max((o.size_mib for o in view.max_heap), default=0) * MIB)
    rows = []
    for rank, i in enumerate(order):
        o = view.max_heap[i]
        rows.append({"rank": rank, "mib": o.size_mib * (MIB / per), "name": o.instruction_name or o.label,
                     "category": o.category or "small buffers", "shape": o.shape, "op": o.tf_op_name})
    chart = (
        alt.Chart(alt.Data(name="buffers"))
        .mark_bar()
        .encode(
            x=alt.X("rank:O", title="Largest first" if by_size else "Program order", axis=alt.Axis(labels=False)),
            y=alt.Y("mib:Q", title=f"Size ({unit})"),
            color=alt.Color("category:N", title="Allocation type"),
            tooltip=[alt.Tooltip("name:N", title="Buffer"), alt.Tooltip("mib:Q", title=f"Size ({unit})", format=",.4f"),
                     alt.Tooltip("category:N", title="Allocation type"), alt.Tooltip("shape:N", title="Shape"),
                     alt.Tooltip("op:N", title="TF op name")],
        )
        .properties(width=430, height=180)
    )
    return vega_spec(chart, {"buffers": rows})


class MemoryViewerSection(Section):
    slug = "memory_viewer"
    title = "Memory viewer"
    summary_key = "memory"

    def host_part(self, host: HostContext) -> HostMemoryViewer | None:
        return host_memory_viewer(host)

    def combine(self, run: RunContext, parts: dict[str, HostMemoryViewer]) -> dict | None:
        return memory_viewer_data(run.host_names, parts)

    def summary(self, data: dict) -> MemoryBlock:
        return memory_viewer_summary(data)

    def render(self, data: dict, page) -> None:
        modules = []
        alerts = []
        # In the picker's order (most device time first, core/tools/memory_viewer.py): the first is shown.
        for m_index, name in enumerate(data.get("picker") or list(data["modules"])):
            mv = data["modules"][name]
            csv = memory_viewer_csv(name)
            frames = [v.buffers_frame().assign(**{"Memory space": v.memory_space}) for v in mv.spaces]
            table = pd.concat(frames, ignore_index=True)[["Memory space", *BUFFER_COLUMNS]]
            page.write_csv(csv, table)
            spaces = []
            for s_index, view in enumerate(mv.spaces):
                key = f"m{m_index}s{s_index}"
                oom = near_capacity(view, data["capacity"])
                entry = {
                    "key": key, "view": view, "label": space_label(view.memory_space),
                    "chart": working_space_spec(view) if len(view.heap_bytes) > 1 else None,
                    "by_order": buffers_chart(view, by_size=False) if view.max_heap else None,
                    "by_size": buffers_chart(view, by_size=True) if view.max_heap else None,
                    "rows": heap_rows(view), "oom": oom,
                    "peak_mib": view.peak_heap_mib, "unpadded_mib": view.peak_unpadded_heap_mib,
                    "padding_mib": view.padding_mib,
                    "temp_mib": view.temporary_mib,
                    "temp_frag_mib": view.temporary_with_fragmentation_mib,
                }
                spaces.append(entry)
                if oom:
                    alerts.append({"module": name, "space": entry["label"], **oom})
            modules.append({"name": name, "index": m_index, "csv": csv, "spaces": spaces, "note": mv.note,
                            "anchor": memory_viewer_anchor(name),
                            "device_percent": data.get("device_percent", {}).get(name)})
        page.write_html("memory_viewer.html", "memory_viewer.html", modules=modules, alerts=alerts,
                        capacity=data["capacity"], near_capacity_percent=100 * NEAR_CAPACITY)


