"""The run index page: what each host's capture holds, and its activity chart."""

from __future__ import annotations

from urllib.parse import quote

import altair as alt
import pandas as pd

from reportgen.core.tools.inventory import HostInventory, host_inventory
from reportgen.output.site import neutralize_formulas
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.busy_chart import busy_heatmap, busy_slices
from reportgen.sections.vega import vega_spec

HOST_CSV_COLUMNS = ["plane", "line_id", "line", "events", "first_ms", "last_ms"]


def host_csv_path(host: str) -> str:
    return f"data/inventory/hosts/{host}.csv"


def with_ms(lines: pd.DataFrame) -> pd.DataFrame:
    return lines.assign(first_ms=lines["first_ps"] / 1e9, last_ms=lines["last_ps"] / 1e9)


def activity_chart(activity: pd.DataFrame) -> alt.Chart:
    x = alt.X("bin_start_ms:Q", title="Time since capture start (ms)")
    height = max(60, 16 * activity["label"].nunique())
    return busy_heatmap("activity", x, None, 360).properties(width=900, height=height)


def _activity_spec(activity: pd.DataFrame) -> dict | None:
    shown = busy_slices(activity)
    return vega_spec(activity_chart(shown), {"activity": shown}) if len(shown) else None


class InventorySection(Section):
    slug = "inventory"
    title = "Run"
    listed = False

    def host_part(self, host: HostContext) -> HostInventory:
        inventory = host_inventory(host.capture)
        # Written here, while the host is at hand, through the host-stage output
        # contract (it also works when this stage runs on a Dask worker).
        inventory.csv = host_csv_path(host.host)
        with host.open_output(inventory.csv) as handle:
            neutralize_formulas(with_ms(inventory.lines)[HOST_CSV_COLUMNS]).to_csv(handle, index=False)
        return inventory

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
                    "dropped": part.dropped,
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
        findings = run.sections.get("findings")  # combined before any page is written
        page.write_html("index.html", "run_index.html", hosts=hosts, errors=run.errors, tools=tools,
                        findings=findings.findings if findings is not None else None)
