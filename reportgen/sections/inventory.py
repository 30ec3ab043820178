"""The inventory page (`<run>/inventory.html`): what each host's capture holds, and its activity chart."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from functools import lru_cache
from urllib.parse import quote

import altair as alt
import numpy as np
import pandas as pd

from reportgen.core.tools.inventory import HostInventory, host_inventory
from reportgen.names import host_folder
from reportgen.output.site import write_csv_columns
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.busy_chart import busy_heatmap, busy_rects, busy_slices, pool_threads
from reportgen.sections.vega import records, responsive, vega_spec, with_datasets
from reportgen.summary_blocks import InventoryBlock


def host_csv_path(host: str) -> str:
    return f"data/inventory/hosts/{host_folder(host)}.csv"  # a host's name need not be a file's


def with_ms(lines: pd.DataFrame) -> pd.DataFrame:
    return lines.assign(first_ms=lines["first_ps"] / 1e9, last_ms=lines["last_ps"] / 1e9)


def activity_chart(rows: list[str]) -> alt.Chart:
    x = alt.X("bin_start_ms:Q", title="Time since capture start (ms)")
    return busy_heatmap("activity", x, rows, 300).properties(height=max(60, 16 * len(rows)))


@lru_cache(maxsize=64)
def _activity_chart_spec(rows: tuple[str, ...]) -> dict:
    """The chart without its data, built once per list of rows: building it costs more than a tiny host's
    whole inventory, and a run of many hosts has few distinct lists of lines."""
    return responsive(vega_spec(activity_chart(list(rows))))


def _activity_spec(activity: dict[str, np.ndarray]) -> tuple[dict | None, int]:
    """The chart's spec (None when no line is busy) and how many thread lines it draws as pool rows."""
    shown = busy_slices(activity)
    if not len(shown["label"]):
        return None, 0
    shown, rows, pooled = pool_threads(shown, list(dict.fromkeys(activity["label"].tolist())))
    return with_datasets(_activity_chart_spec(tuple(rows)), {"activity": busy_rects(shown)}), pooled


class InventorySection(Section):
    slug = "inventory"
    title = "Inventory"
    listed = False
    nav_page = "inventory.html"

    def host_part(self, host: HostContext) -> HostInventory:
        inventory = host_inventory(host.capture)
        # Written here, while the host is at hand, through the host-stage output
        # contract (it also works when this stage runs on a Dask worker).
        inventory.csv = host_csv_path(host.host)
        lines = inventory.lines
        table = {"plane": lines["plane"].to_numpy(object), "line_id": lines["line_id"].to_numpy(),
                 "line": lines["line"].to_numpy(object), "events": lines["events"].to_numpy(),
                 "first_ms": lines["first_ps"].to_numpy() / 1e9, "last_ms": lines["last_ps"].to_numpy() / 1e9}
        with io.TextIOWrapper(host.open_output(inventory.csv), encoding="utf-8", newline="") as handle:
            write_csv_columns(handle, table)  # with_ms's columns, without a frame
        return inventory

    def combine(self, run: RunContext, parts: dict[str, HostInventory]) -> dict:
        return {"run": run, "hosts": parts}

    def summary(self, data: dict) -> InventoryBlock | None:
        """When the run was captured: its earliest host's profile start (histories order runs by it)."""
        starts = [p.profile_start_ns for p in data["hosts"].values() if p.profile_start_ns]
        if not starts:
            return None
        first = min(starts)
        when = datetime.fromtimestamp(first / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds")
        return InventoryBlock(profile_start_ns=first, profile_start=when.replace("+00:00", "Z"))

    def render(self, data: dict, page) -> None:
        run: RunContext = data["run"]
        parts: dict[str, HostInventory] = data["hosts"]
        shown = [(summary, parts[summary.host]) for summary in run.hosts if summary.host in parts]
        hosts = []
        if shown:
            # All hosts' lines in one frame (per-host pandas calls cost milliseconds a host, and a pod's run
            # has thousands of hosts), then each host's lines with events back to its own table.
            counts = [len(part.lines) for _, part in shown]
            frame = with_ms(pd.concat([part.lines for _, part in shown], ignore_index=True))
            table_columns = list(frame.columns)
            frame["host"] = np.repeat(np.array([summary.host for summary, _ in shown], dtype=object), counts)
            owner = np.repeat(np.arange(len(shown)), counts)
            with_events = frame["events"].to_numpy() > 0
            lines_tables: list[list[dict]] = [[] for _ in shown]
            for index, row in zip(owner[with_events], records(frame.loc[with_events, table_columns])):
                lines_tables[index].append(row)
            for (summary, part), lines_table in zip(shown, lines_tables):
                chart, pooled = _activity_spec(part.activity)
                hosts.append(
                    {
                        **vars(summary),
                        "lines_table": lines_table,
                        "empty_planes": part.empty_planes,
                        "dropped": part.dropped,
                        "csv_href": quote(part.csv),
                        "chart": chart,
                        "grouped_lines": pooled,
                    }
                )
            page.write_csv(
                "data/inventory/lines.csv",
                frame[["host", "plane", "line_id", "line", "events", "first_ms", "last_ms"]],
            )
        else:
            page.write_csv("data/inventory/lines.csv", pd.DataFrame(columns=["host", "plane", "line_id", "line",
                                                                            "events", "first_ms", "last_ms"]))
        page.write_html("inventory.html", "inventory.html", hosts=hosts)
