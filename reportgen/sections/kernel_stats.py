"""GPU kernel stats page: the kernels with the most time, one row per kernel–op pair.

Numbers are XProf's kernel_stats tool (`reportgen/core/tools/kernel_stats.py`).
A run gets the page when a host has GPU planes; CPU-only and TPU runs get
none (XProf does not offer the tool there either).
"""

from __future__ import annotations

import re

import altair as alt
import numpy as np
import pandas as pd

from reportgen.core.ops.kernel_reports import MAX_KERNEL_REPORTS
from reportgen.core.pages import KERNEL_STATS_CSV, kernel_anchor, timeline_href
from reportgen.core.tools.kernel_stats import (
    XPROF_COLUMNS,
    HostKernelStats,
    KernelStatsData,
    host_kernel_stats,
    kernel_stats_data,
    kernel_stats_summary,
    tensor_core_percent,
)
from reportgen.output.table_cells import link_attrs, link_cell
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec
from reportgen.summary_blocks import KernelStatsBlock

CSV_PATH = KERNEL_STATS_CSV
PIE_SLICES = 10
SHORT_NAME_CHARS = 120  # compacted kernel names in the table; the full name is a click away
LEGEND_NAME_CHARS = 120


def elide(text: str, limit: int) -> str:
    """Shorten in the middle: the start and the end of a signature say the most."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 3 // 5
    return text[:head] + "\u2026" + text[len(text) - (limit - 1 - head) :]


_NAMESPACE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*::")
_CONST = re.compile(r"\s+const\b")


def _without_parameters(name: str) -> str:
    """Drop a trailing `( … )` parameter list (it repeats the template arguments)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 else name
    return name


_INNERMOST_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_FOLDED = "\x00"  # a folded `<…>` while folding goes on


def compact_kernel_name(name: str, limit: int) -> str:
    """A demangled C++ kernel name made readable within `limit` characters.

    Drops `void`, the parameter list, namespaces and `const`; then, while it
    is too long, folds the innermost template argument lists into `<…>`, one
    nesting level at a time, so the outer structure (which tells kernels
    apart) survives; what is still too long is elided in the middle.
    """
    text = name.removeprefix("void ").replace(_FOLDED, "")
    text = _without_parameters(text)
    text = _CONST.sub("", _NAMESPACE.sub("", text))
    text = " ".join(text.split()) or name

    def shown(t: str) -> str:
        return t.replace(_FOLDED, "<\u2026>")

    while len(shown(text)) > limit:
        folded = _INNERMOST_TEMPLATE_ARGS.sub(_FOLDED, text)
        if folded == text:
            break
        text = folded
    return elide(shown(text), limit)


def top_rows(table: pd.DataFrame, slices: int = PIE_SLICES) -> pd.DataFrame:
    """The chart's slices: the `slices` rows of the table with the most total time, one slice each, labelled
    with the row's rank, and the other rows as one slice. (Slices per kernel name, all its op rows merged,
    had legends whose "#rank" did not match the table: a merged slice showed 22.5 ms where its row said
    19.1 ms, and the merged rows' ranks were missing.)"""
    if table.empty:
        return pd.DataFrame(columns=["label", "kernel_name", "op_name", "host", "total_us", "percent", "order"])
    rows = table.sort_values(["total_duration_us", "rank"], ascending=[False, True], kind="stable")
    top = rows.head(slices)
    rest = rows.iloc[slices:]
    labels = [f"#{r} {compact_kernel_name(n, LEGEND_NAME_CHARS)}" for r, n in zip(top["rank"], top["kernel_name"])]
    out = pd.DataFrame({"label": labels, "kernel_name": top["kernel_name"].to_numpy(),
                        "op_name": top["op_name"].astype(str).to_numpy(),
                        # Rows of the hosts' view differ by host only: the tooltip tells them apart.
                        "host": top["host"].astype(str).to_numpy() if "host" in top else "",
                        "total_us": top["total_duration_us"].to_numpy()})
    if len(rest):
        label = f"{len(rest)} other row" + ("s" if len(rest) != 1 else "")
        other = pd.DataFrame({"label": [label], "kernel_name": ["(other rows)"], "op_name": [""], "host": [""],
                              "total_us": [rest["total_duration_us"].sum()]})
        out = pd.concat([out, other], ignore_index=True)
    total = out["total_us"].sum()
    out["percent"] = 100.0 * out["total_us"] / total if total > 0 else 0.0
    out["order"] = np.arange(len(out))
    return out


def pie_chart(slices: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(slices)
        .mark_arc(innerRadius=40)
        .encode(
            theta=alt.Theta("total_us:Q", stack=True),
            color=alt.Color(
                "label:N",
                sort=alt.SortField("order"),
                title="Row (#rank in the table)",
                legend=alt.Legend(labelLimit=760, orient="right"),
                scale=alt.Scale(scheme="tableau20"),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("kernel_name:N", title="Kernel"),
                alt.Tooltip("op_name:N", title="Op"),
                alt.Tooltip("host:N", title="Host"),
                alt.Tooltip("total_us:Q", title="Total (µs)", format=",.3f"),
                alt.Tooltip("percent:Q", title="Share of kernel time (%)", format=".1f"),
            ],
        )
        .properties(width=320, height=320)
    )


def csv_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The CSV download: XProf's labels, then the host each row came from."""
    frame = table[list(XPROF_COLUMNS)].rename(columns=XPROF_COLUMNS)
    frame["Host"] = table["host"].to_numpy() if "host" in table else ""
    return frame


# The table's columns after Rank (and Host, on the hosts' view), Kernel and the timeline link: the row's field and
# its cell format (output/table_cells.py).
_COLUMNS = [("occurrences", "int"), ("total_duration_us", "num"), ("share_percent", "pct"),
            ("avg_duration_us", "num"), ("min_duration_us", "num"), ("max_duration_us", "num"),
            ("occupancy_pct", "num:2"), ("is_kernel_using_tensor_core", "text"),
            ("is_op_tensor_core_eligible", "text"), ("op_name", "name"), ("registers_per_thread", "int"),
            ("shmem_bytes", "bytes"), ("block_dim", "text"), ("grid_dim", "text")]


def table_rows(table: pd.DataFrame, show_host: bool, trace_link: bool) -> tuple[list[list], list[str]]:
    """The kernel table's rows as data (`table_data`) and their cell formats: the kernel's whole name, cut to a
    readable short one until the row is opened, and a link to its first launch in the timeline when the run has
    a trace page."""
    formats = ["int"] + (["text"] if show_host else []) + ["code"] + (["timeline"] if trace_link else [])
    formats += [fmt for _, fmt in _COLUMNS]
    total = float(table["total_duration_us"].sum())
    rows = []
    for row in table.to_dict("records"):
        row["share_percent"] = 100.0 * row["total_duration_us"] / total if total > 0 else 0.0
        for flag in ("is_kernel_using_tensor_core", "is_op_tensor_core_eligible"):
            row[flag] = "yes" if row[flag] else "no"
        name = row["kernel_name"]
        short = compact_kernel_name(name, SHORT_NAME_CHARS)
        values = [row["rank"]] + ([row["host"]] if show_host else [])
        values.append(link_cell(name, short=short if short != name else None))
        if trace_link:
            href = timeline_href(row["host"] if show_host else None, q=name)
            values.append(link_attrs(href, "Open in the trace page's timeline", "timeline-link"))
        rows.append(values + [row[field] for field, _ in _COLUMNS])
    return rows, formats


class KernelStatsSection(Section):
    slug = "kernel_stats"
    title = "GPU kernel stats"

    def host_part(self, host: HostContext) -> HostKernelStats | None:
        return host_kernel_stats(host)

    def combine(self, run: RunContext, parts: dict[str, HostKernelStats]) -> KernelStatsData | None:
        return kernel_stats_data(run.host_names, parts)

    def summary(self, data: KernelStatsData) -> KernelStatsBlock:
        return kernel_stats_summary(data)

    def render(self, data: KernelStatsData, page) -> None:
        page.write_csv(CSV_PATH, csv_frame(data.combined))
        views = []
        trace_link = any(item.get("href") == "trace.html" for item in page.nav)
        for view in data.views:
            table = view.table
            slices = top_rows(table)
            rows, formats = table_rows(table, view.show_host, trace_link)
            views.append(
                {
                    "key": view.key,
                    "label": view.label,
                    "show_host": view.show_host,
                    "rows": rows,
                    "formats": formats,
                    # The first view's rows are the ones other pages link to.
                    "anchors": [kernel_anchor(rank) for rank in table["rank"]] if not views else None,
                    "has_op_names": bool(table["op_name"].astype(str).str.len().gt(0).any()),
                    "chart": vega_spec(pie_chart(slices)) if len(slices) else None,
                    "kernels": len(table),
                    "total_ms": float(table["total_duration_us"].sum()) / 1000.0,
                    "occurrences": int(table["occurrences"].sum()),
                    "tensor_core_percent": tensor_core_percent(table),
                    "tensor_core_kernels": int(table["is_kernel_using_tensor_core"].sum()),
                    "truncated": len(table) >= MAX_KERNEL_REPORTS,
                }
            )
        page.write_html(
            "kernel_stats.html",
            "kernel_stats.html",
            views=views,
            hosts=data.hosts,
            gpu_planes=data.gpu_planes,
            xla_kernel_events=data.xla_kernel_events,
            csv_path=CSV_PATH,
            max_reports=MAX_KERNEL_REPORTS,
            labels=XPROF_COLUMNS,
        )
