"""The run index page: what each host's capture holds, and its activity chart."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from reportgen.core.inventory import line_activity, line_inventory
from reportgen.sections.base import HostContext, RunContext, Section

ACTIVITY_BINS = 100


@dataclass
class HostInventory:
    lines: pd.DataFrame  # plane, line_id, line, events, first_ps, last_ps
    activity: pd.DataFrame  # line label, bin, bin_start_ms, bin_end_ms, busy_percent
    empty_planes: list[str]


def activity_chart(activity: pd.DataFrame) -> alt.Chart:
    rows = activity["label"].nunique()
    return (
        alt.Chart(activity)
        .mark_rect()
        .encode(
            x=alt.X("bin_start_ms:Q", title="Time since capture start (ms)"),
            x2="bin_end_ms:Q",
            y=alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=360)),
            color=alt.Color("busy_percent:Q", title="Busy %", scale=alt.Scale(scheme="blues", domain=[0, 100])),
            tooltip=[
                alt.Tooltip("label:N", title="Line"),
                alt.Tooltip("bin_start_ms:Q", title="From (ms)", format=",.3f"),
                alt.Tooltip("bin_end_ms:Q", title="To (ms)", format=",.3f"),
                alt.Tooltip("busy_percent:Q", title="Busy %", format=".1f"),
            ],
        )
        .properties(width=900, height=max(60, 16 * rows))
    )


def _chart_dict(activity: pd.DataFrame) -> dict:
    # A capture with many lines exceeds Altair's default 5,000-row guard.
    with alt.data_transformers.disable_max_rows():
        return activity_chart(activity).to_dict()


class InventorySection(Section):
    slug = "inventory"
    title = "Run"
    listed = False

    def host_part(self, host: HostContext) -> HostInventory:
        capture = host.capture
        lines = line_inventory(capture)
        activity = line_activity(capture, ACTIVITY_BINS)
        labels = lines["plane"] + " · " + lines["line"].astype(str)
        activity = activity.assign(label=labels.to_numpy()[activity["line"].to_numpy().astype(int)])
        planes_with_lines = set(lines["plane"])
        empty = [p for p in capture.planes["name"] if p not in planes_with_lines]
        return HostInventory(lines=lines, activity=activity, empty_planes=empty)

    def combine(self, run: RunContext, parts: dict[str, HostInventory]) -> dict:
        return {"run": run, "hosts": parts}

    def render(self, data: dict, page) -> None:
        run: RunContext = data["run"]
        parts: dict[str, HostInventory] = data["hosts"]
        hosts = []
        csv_rows = []
        for summary in run.hosts:
            part = parts.get(summary.host)
            if part is None:
                continue
            table = part.lines.assign(first_ms=part.lines["first_ps"] / 1e9, last_ms=part.lines["last_ps"] / 1e9)
            csv_rows.append(table.assign(host=summary.host))
            with_events = table[table["events"] > 0]
            hosts.append(
                {
                    **vars(summary),
                    "lines_table": with_events.to_dict("records"),
                    "empty_planes": part.empty_planes,
                    "chart": _chart_dict(part.activity) if len(part.activity) else None,
                }
            )
        if csv_rows:
            frame = pd.concat(csv_rows, ignore_index=True)
            page.write_csv(
                "data/inventory/lines.csv",
                frame[["host", "plane", "line_id", "line", "events", "first_ms", "last_ms"]],
            )
        else:
            page.write_csv("data/inventory/lines.csv", pd.DataFrame(columns=["host", "plane", "line_id", "line",
                                                                            "events", "first_ms", "last_ms"]))
        tools = [n for n in page.nav if n["href"] != "index.html"]
        page.write_html("index.html", "run_index.html", hosts=hosts, errors=run.errors, tools=tools)
