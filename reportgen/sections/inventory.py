"""The run index page: what each host's capture holds, and its activity chart."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import altair as alt
import pandas as pd

from reportgen.core.inventory import line_activity, line_inventory
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.vega import vega_spec

ACTIVITY_BINS = 100


HOST_CSV_COLUMNS = ["plane", "line_id", "line", "events", "first_ms", "last_ms"]


@dataclass
class HostInventory:
    lines: pd.DataFrame  # plane, line_id, line, events, first_ps, last_ps
    activity: pd.DataFrame  # line label, bin, bin_start_ms, bin_end_ms, busy_percent
    empty_planes: list[str]
    csv: str = ""  # this host's line table, written by the host stage (relative to the run folder)


def host_csv_path(host: str) -> str:
    return f"data/inventory/hosts/{host}.csv"


def with_ms(lines: pd.DataFrame) -> pd.DataFrame:
    return lines.assign(first_ms=lines["first_ps"] / 1e9, last_ms=lines["last_ps"] / 1e9)


def activity_chart(activity: pd.DataFrame) -> alt.Chart:
    rows = activity["label"].nunique()
    return (
        alt.Chart(alt.Data(name="activity"))
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


def _activity_spec(activity: pd.DataFrame) -> dict | None:
    # Only busy slices, only the columns the chart reads, rounded: a run of many hosts
    # otherwise carries megabytes of idle bins in its index page.
    shown = activity.loc[activity["busy_percent"] > 0, ["label", "bin_start_ms", "bin_end_ms", "busy_percent"]]
    if shown.empty:
        return None
    shown = shown.round({"bin_start_ms": 4, "bin_end_ms": 4, "busy_percent": 2})
    return vega_spec(activity_chart(shown), {"activity": shown})


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
        # Written here, while the host is at hand, through the host-stage output
        # contract (it also works when this stage runs on a Dask worker).
        csv = host_csv_path(host.host)
        with host.open_output(csv) as handle:
            with_ms(lines)[HOST_CSV_COLUMNS].to_csv(handle, index=False)
        return HostInventory(lines=lines, activity=activity, empty_planes=empty, csv=csv)

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
            table = with_ms(part.lines)
            csv_rows.append(table.assign(host=summary.host))
            with_events = table[table["events"] > 0]
            hosts.append(
                {
                    **vars(summary),
                    "lines_table": with_events.to_dict("records"),
                    "empty_planes": part.empty_planes,
                    "csv_href": quote(part.csv),
                    "chart": _activity_spec(part.activity),
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
