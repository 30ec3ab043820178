"""Writing a history: the Trends page (`index.html`, or `trends/index.html` inside a site), `trend.json` and CSVs.

Every point of the page's charts is one run's figure from its summary.json block, and links to that run's
page (a relative link for a local site, the bucket's public URL for a `gs://` one).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import altair as alt
import pandas as pd

from reportgen.compare.page import replace_index_block
from reportgen.compare.sources import BuiltSite
from reportgen.compare.trend import MIN_SEGMENT, History, TrendRun
from reportgen.output.formatting import step_time_axis
from reportgen.output.site import PageWriter, write_assets
from reportgen.output.transaction import OutputNotASiteError, is_site_or_empty
from reportgen.sections.vega import CATEGORY_COLORS, responsive, vega_spec

FOLDER_IN_SITE = "trends"  # where the page goes when the output folder is a built site
MANIFEST = "trend.json"
COMPARABLE, NOT_COMPARABLE = "#0b57d0", "#cf222e"
GCS_PUBLIC = "https://storage.googleapis.com/"
# Past this many runs the charts draw on a canvas: SVG's thousands of mark elements took a 1,000-run page
# about 2 s to load in headless Chromium, a canvas a fraction of that (bench/trend.py).
CANVAS_FROM_RUNS = 300
TABLE_ROWS = 200  # the latest runs listed in the page's table (all of them are in data/runs.csv)


def _drawn(spec: dict, runs: int) -> dict:
    return {**spec, "usermeta": {"renderer": "canvas"}} if runs >= CANVAS_FROM_RUNS else spec


@dataclass
class WrittenTrend:
    page: Path
    json: Path


def _page_folder(output: Path) -> str:
    """The page's folder in `output`: a built site keeps its own index and gets `trends/`."""
    return FOLDER_IN_SITE if BuiltSite.open(str(output)) is not None else ""


def _check_output(output: Path) -> None:
    if is_site_or_empty(output) or (output / MANIFEST).is_file():
        return
    raise OutputNotASiteError(f"{output}: exists and is neither a reportgen site nor a history written by "
                              "`reportgen trend`; choose an empty or new output folder")


def run_href(run: TrendRun, page_dir: Path) -> str:
    """The run's landing page as the Trends page links to it."""
    location = run.run.site.location.rstrip("/")
    relative = quote(run.run.folder) + "/index.html"
    if location.startswith("gs://"):
        return GCS_PUBLIC + quote(location[len("gs://"):]) + "/" + relative
    if "://" in location:
        return location + "/" + relative
    target = Path(location).resolve() / run.run.folder / "index.html"
    return "/".join(quote(part) for part in Path(os.path.relpath(target, page_dir.resolve())).parts)


def runs_frame(history: History, page_dir: Path) -> pd.DataFrame:
    rows = []
    for r in history.runs:
        avg, sd = r.step_figure("average"), r.step_figure("standard_deviation") or 0.0
        rows.append({
            "Run": r.name, "index": r.index + 1, "Captured": r.time.strftime("%Y-%m-%d %H:%M UTC") if r.time else "",
            "step_ms": avg, "min_ms": r.step_figure("minimum"), "max_ms": r.step_figure("maximum"),
            "sd_ms": sd if avg is not None else None, "low_ms": None if avg is None else avg - sd,
            "high_ms": None if avg is None else avg + sd, "steps": r.steps, "input_percent": r.input_percent,
            "device_utilization_percent": r.device_utilization_percent, "memory_peak_bytes": r.memory_peak_bytes,
            "memory_peak_mib": None if r.memory_peak_bytes is None else r.memory_peak_bytes / 2**20,
            "Program": "comparable" if r.comparable else "not comparable",
            "not_comparable_because": r.not_comparable_because, "Verdict": r.verdict(),
            "href": run_href(r, page_dir),
        })
    return pd.DataFrame(rows)


# What every chart's points carry: a chart holds its own copy of the rows, so each keeps only the columns it draws.
POINT_COLUMNS = ["index", "Run", "Captured", "Verdict", "href"]


def _rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """The chart's copy of the figures to 4 decimals (tooltips show 3): a third less JSON for the page to parse;
    the exact figures are in trend.json and data/runs.csv."""
    floats = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    return frame.assign(**{c: frame[c].round(4) for c in floats}) if floats else frame


def _tooltip(extra: list) -> list:
    return [alt.Tooltip("Run:N"), alt.Tooltip("Captured:N"), *extra, alt.Tooltip("Verdict:N")]


def step_chart(frame: pd.DataFrame, history: History) -> dict | None:
    """Each run's average step (●), its σ band (bar) and its fastest and slowest step (thin rule); change points
    as dashed rules between the runs they separate."""
    measured = frame.loc[frame["step_ms"].notna(), [*POINT_COLUMNS, "Program", "steps", "step_ms", "min_ms", "max_ms",
                                                    "low_ms", "high_ms", "sd_ms"]]
    if measured.empty:
        return None
    like = float(measured["step_ms"].max())
    unit, _field, scale = step_time_axis(like)
    data = measured.assign(**{c: measured[c] * scale for c in ("step_ms", "min_ms", "max_ms", "low_ms", "high_ms",
                                                               "sd_ms")})
    x = alt.X("index:Q", title="Run (capture order)", scale=alt.Scale(nice=False, zero=False),
              axis=alt.Axis(tickMinStep=1, format="d"))
    # Legends above the plots, so that every chart of the page spans the same width and a run sits at the
    # same x on each of them.
    color = alt.Color("Program:N", title=None, scale=alt.Scale(domain=["comparable", "not comparable"],
                                                                range=[COMPARABLE, NOT_COMPARABLE]),
                      legend=alt.Legend(orient="top"))
    tip = _tooltip([alt.Tooltip("step_ms:Q", title=f"Average step ({unit})", format=",.3f"),
                    alt.Tooltip("sd_ms:Q", title=f"σ ({unit})", format=",.3f"),
                    alt.Tooltip("min_ms:Q", title=f"Fastest step ({unit})", format=",.3f"),
                    alt.Tooltip("max_ms:Q", title=f"Slowest step ({unit})", format=",.3f"),
                    alt.Tooltip("steps:Q", title="Steps")])
    base = alt.Chart(_rounded(data)).encode(x=x, color=color, tooltip=tip, href="href:N")
    # Not from zero: a nightly change of a few percent must be visible; the axis says where it starts.
    y = alt.Y("min_ms:Q", title=f"Step time ({unit})", scale=alt.Scale(zero=False))
    layers = [base.mark_rule(opacity=0.45).encode(y=y, y2="max_ms:Q"),
              base.mark_rule(size=5, opacity=0.35).encode(y="low_ms:Q", y2="high_ms:Q"),
              base.mark_point(filled=True, size=36, cursor="pointer").encode(y="step_ms:Q")]
    segments = _segments(history, scale)
    if segments is not None:
        layers.append(alt.Chart(segments).mark_rule(color="#1f2328", size=2, opacity=0.7).encode(
            x="x:Q", x2="x2:Q", y="mean:Q",
            tooltip=[alt.Tooltip("mean:Q", title=f"Segment average ({unit})", format=",.3f"),
                     alt.Tooltip("runs:Q", title="Runs")]))
    if history.change_points:
        cps = pd.DataFrame([{"x": c.after.index + 0.5, "Change": f"{c.before.name} → {c.after.name}",
                             "size": c.size_ms * scale, "low": c.test.ci_low * scale, "high": c.test.ci_high * scale}
                            for c in history.change_points])
        layers.append(alt.Chart(cps).mark_rule(strokeDash=[6, 4], color="#1f2328").encode(
            x="x:Q", tooltip=[alt.Tooltip("Change:N"), alt.Tooltip("size:Q", title=f"Size ({unit})", format="+,.3f"),
                              alt.Tooltip("low:Q", title="95% CI from", format="+,.3f"),
                              alt.Tooltip("high:Q", title="95% CI to", format="+,.3f")]))
    return _drawn(responsive(vega_spec(alt.layer(*layers).properties(height=260))), len(frame))


def _segments(history: History, scale: float) -> pd.DataFrame | None:
    """The comparable runs' average between change points, as horizontal rules."""
    measured = [r for r in history.comparable if r.step_ms is not None]
    if not measured:
        return None
    cuts = [c.after for c in history.change_points]
    rows, start = [], 0
    for k in range(len(cuts) + 1):
        end = measured.index(cuts[k]) if k < len(cuts) else len(measured)
        part = measured[start:end]
        if part:
            rows.append({"x": part[0].index + 0.6, "x2": part[-1].index + 1.4, "runs": len(part),
                         "mean": sum(r.step_ms for r in part) / len(part) * scale})
        start = end
    return pd.DataFrame(rows)


def series_chart(frame: pd.DataFrame, column: str, title: str, fmt: str) -> dict | None:
    # The verdict travels with the step-time chart only (it would be a fourth copy of the longest column).
    data = frame.loc[frame[column].notna(), ["index", "Run", "Captured", "href", column]]
    if data.empty:
        return None
    points = alt.OverlayMarkDef(filled=True, size=24, cursor="pointer")
    chart = alt.Chart(_rounded(data)).mark_line(point=points).encode(
        x=alt.X("index:Q", title="Run (capture order)", scale=alt.Scale(nice=False, zero=False),
                axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y(f"{column}:Q", title=title),
        tooltip=[alt.Tooltip("Run:N"), alt.Tooltip("Captured:N"), alt.Tooltip(f"{column}:Q", title=title, format=fmt)],
        href="href:N", color=alt.value(COMPARABLE))
    return _drawn(responsive(vega_spec(chart.properties(height=140))), len(frame))


def causes_chart(history: History) -> tuple[dict | None, str]:
    """Each run's average step by cause, stacked: the step ledger's causes where the runs have that block, else
    the overview's step-time breakdown."""
    sources = {r.causes[0] for r in history.runs if r.step_ms is not None}
    source = "ledger" if "ledger" in sources else "breakdown"
    rows = []
    for r in history.runs:
        if r.step_ms is None:
            continue
        kind, causes = r.causes
        if kind != source:
            continue
        rows += [{"index": r.index + 1, "Run": r.name, "Category": cause, "ms": ms} for cause, ms in causes.items()]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return None, source
    shown = [c for c in dict.fromkeys(frame["Category"]) if frame.loc[frame["Category"] == c, "ms"].abs().sum() > 0]
    frame = frame[frame["Category"].isin(shown)]
    chart = alt.Chart(_rounded(frame)).mark_area(opacity=0.85).encode(
        x=alt.X("index:Q", title="Run (capture order)", scale=alt.Scale(nice=False, zero=False),
                axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("ms:Q", stack="zero", title="Average step (ms)"),
        color=alt.Color("Category:N", sort=shown, title="Cause",
                        scale=alt.Scale(domain=shown, range=(CATEGORY_COLORS * 4)[:len(shown)]),
                        legend=alt.Legend(orient="top", labelLimit=300)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("Run:N"), alt.Tooltip("Category:N", title="Cause"),
                 alt.Tooltip("ms:Q", title="ms per step", format=",.3f")],
    ).transform_calculate(order=f"indexof({shown!r}, datum.Category)")
    return _drawn(responsive(vega_spec(chart.properties(height=200))), len(history.runs)), source


# The tool page whose table a mover's time comes from.
MOVER_TOOLS = {"op": "tf_stats", "kernel": "kernel_stats", "tf.data": "input_pipeline"}


def _context(history: History, frame: pd.DataFrame, folder: str) -> dict:
    hrefs = dict(zip(frame["Run"], frame["href"]))

    def tool_href(run: TrendRun, kind: str) -> str | None:
        """The run's page of the tool a mover of `kind` comes from, when the run has that page."""
        slug = MOVER_TOOLS.get(kind, "")
        tool = run.summary.tools.get(slug)
        page = tool.page if tool else ""
        if not page:
            return None
        return hrefs[run.name].rsplit("/", 1)[0] + "/" + quote(page.rsplit("/", 1)[-1])
    causes, causes_source = causes_chart(history)
    like = max((r.step_ms for r in history.runs if r.step_ms is not None), default=0.0)
    return {
        "h": history, "hrefs": hrefs, "tool_href": tool_href, "step_like": like, "table_rows": TABLE_ROWS,
        "measured_runs": sum(1 for r in history.comparable if r.step_ms is not None), "min_runs": 2 * MIN_SEGMENT,
        "step_chart": step_chart(frame, history),
        "input_chart": series_chart(frame, "input_percent", "Input share (%)", ",.2f"),
        "device_chart": series_chart(frame, "device_utilization_percent", "Device utilisation (%)", ",.1f"),
        "memory_chart": series_chart(frame, "memory_peak_mib", "Memory peak (MiB)", ",.1f"),
        "causes_chart": causes, "causes_source": causes_source,
        "rows": frame.astype(object).where(frame.notna(), None).to_dict("records"),
        "in_site": bool(folder),
    }


RUN_CSV_COLUMNS = {"index": "Position", "Run": "Run", "Captured": "Captured (UTC)", "Program": "Program",
                   "not_comparable_because": "Not comparable because", "steps": "Steps",
                   "step_ms": "Average step (ms)", "sd_ms": "Step σ (ms)", "min_ms": "Fastest step (ms)",
                   "max_ms": "Slowest step (ms)", "input_percent": "Input (%)",
                   "device_utilization_percent": "Device utilisation (%)", "memory_peak_bytes": "Memory peak (B)",
                   "href": "Run page"}


def write_trend(history: History, output: Path) -> WrittenTrend:
    output = Path(output)
    _check_output(output)
    output.mkdir(parents=True, exist_ok=True)
    folder = _page_folder(output)
    page_dir = output / folder
    frame = runs_frame(history, page_dir)
    assets = write_assets(output)
    writer = PageWriter(site_dir=output, assets=assets, folder=folder)
    writer.write_csv("data/runs.csv", frame[list(RUN_CSV_COLUMNS)].rename(columns=RUN_CSV_COLUMNS))
    changes = [{"Before": c.before.name, "After": c.after.name, "Change (ms)": c.size_ms,
                "Change (%)": c.size_percent, "95% CI low (ms)": c.test.ci_low, "95% CI high (ms)": c.test.ci_high,
                "p": c.test.p_value, "Runs before": c.test.n_baseline, "Runs after": c.test.n_candidate}
               for c in history.change_points]
    writer.write_csv("data/change_points.csv", pd.DataFrame(changes, columns=[
        "Before", "After", "Change (ms)", "Change (%)", "95% CI low (ms)", "95% CI high (ms)", "p", "Runs before",
        "Runs after"]))
    writer.write_json(MANIFEST, history.as_dict())
    writer.write_html("index.html", "trend.html", **_context(history, frame, folder))
    if folder:
        _link_from_index(output, history)
    return WrittenTrend(page=page_dir / "index.html", json=page_dir / MANIFEST)


# The site index's place for the link to its Trends page: between two inert, empty <template> elements.
INDEX_BLOCK = re.compile(r'(<template id="trends-start"></template>).*?(<template id="trends-end"></template>)', re.S)


def _link_from_index(output: Path, history: History) -> bool:
    """Link the Trends page from the site's index (only that block of index.html changes); False when the
    index has no such block (a site of an older reportgen)."""
    n, points = len(history.runs), len(history.change_points)
    block = (f'<p class="trends-link"><a href="{FOLDER_IN_SITE}/index.html">Trends across these {n:,} runs</a>: '
             f'{points} change point{"s" if points != 1 else ""} in step time.</p>')
    return replace_index_block(output / "index.html", INDEX_BLOCK, block)


__all__ = ["WrittenTrend", "run_href", "write_trend"]
