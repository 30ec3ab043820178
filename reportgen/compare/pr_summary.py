"""`reportgen summary`: a pull-request comment (GitHub-flavoured Markdown) or JSON.

Headline numbers of each run of a built site, and with `--compare A B` the
comparison of two runs: verdict, bottleneck before and after, the top
changes in a small table. Charts are PNG files written next to the Markdown,
referenced by file name, ready to attach. Every capture string is escaped so
that it reads as text wherever the Markdown is rendered: no HTML, no links,
no mentions or emoji from an op name.

For CI, the summary can open with the budget check's verdict, link its charts
where a workflow published them (`chart_url`), end with links of the
workflow's own, and carry the hidden marker of a sticky comment
(`reportgen.ci.sticky_comment`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import altair as alt
import pandas as pd

from reportgen.ci.sticky_comment import Link, link_url
from reportgen.compare.budget import NOT_CHECKED, OVER, WITHIN, CheckResult
from reportgen.compare.charts import breakdown_chart, elide, op_change_chart, step_times_chart
from reportgen.compare.model import Comparison, findings_of
from reportgen.compare.page import page_stem
from reportgen.compare.sources import BuiltRun, BuiltSite
from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.output.formatting import (
    fmt_change_pct,
    fmt_delta,
    fmt_p_value,
    fmt_ratio,
    fmt_step_delta,
    fmt_step_time,
    fmt_value,
    step_time_axis,
)
from reportgen.sections.vega import vega_spec
from reportgen.summary_blocks import FindingItem, Overview, StepTime

if TYPE_CHECKING:  # a history is read (and ruptures imported) only with `summary --history`
    from reportgen.compare.trend import Placement

MAX_CHARS = 65_000  # under GitHub's limit for a comment body (65,536), counted in UTF-8 bytes
NAME_CHARS = 100  # capture names are cut to this length in tables
TOP_OPS = 10
TOP_FINDINGS = 3  # per run
SUMMARY_SCHEMA = 1

# Characters that Markdown (CommonMark/GFM and Python-Markdown alike) honours a
# backslash escape for; the others that could start markup become entities.
_BACKSLASH = set("\\`*_{}[]()#+-.!|")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "~": "&#126;", "$": "&#36;", "@": "&#64;", ":": "&#58;",
             '"': "&quot;"}


def md_escape(text: object, limit: int | None = None) -> str:
    """Capture text as literal Markdown text (one line, cut to `limit` characters)."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if limit is not None:
        text = elide(text, limit)
    return "".join("\\" + ch if ch in _BACKSLASH else _ENTITIES.get(ch, ch) for ch in text)


def md_code(text: object, limit: int | None = NAME_CHARS) -> str:
    """A capture name in monospace. Not a code span: those cannot hold escapes, and a
    name may hold backticks. GitHub does not turn mentions or emoji in <code> into links."""
    return f"<code>{md_escape(text, limit)}</code>"


def _table(header: list[str], align: list[str], rows: list[list[str]]) -> str:
    marks = {"l": "---", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _link(text: str, url: str) -> str:
    return f"[{text}]({url})"


def _url(base: str, *parts: str) -> str:
    return base.rstrip("/") + "/" + "/".join(quote(p) for p in parts)


@dataclass
class Chart:
    file: str  # written next to the Markdown
    title: str
    spec: dict


@dataclass
class SummaryDocument:
    markdown: str
    data: dict
    charts: list[Chart] = field(default_factory=list)


def _has_steps(overview: Overview | None) -> bool:
    """Whether the run has a step time: steps, or (older captures' summaries) an average above 0. A run
    without steps reports 0 steps of 0 ms, which is no step time (the site index says "no steps")."""
    if overview is None:
        return False
    average = overview.step_time_ms.average if overview.step_time_ms else None
    return bool(overview.steps) or (isinstance(average, (int, float)) and average > 0)


def _run_headline(run: BuiltRun) -> dict:
    overview = run.summary.overview
    step = (overview.step_time_ms if _has_steps(overview) else None) or StepTime()
    pipeline = run.summary.input_pipeline
    bottleneck = pipeline.bottleneck if pipeline else None
    ops = run.table("tf_stats/framework_op_stats.csv")
    top = None
    if ops is not None and len(ops):
        ops = ops[ops["Operation Type"] != "IDLE"].sort_values("Total self-time (us)", ascending=False, kind="stable")
        if len(ops):
            row = ops.iloc[0]
            top = {"side": row["Host/device"], "type": str(row["Operation Type"]), "name": str(row["Operation Name"]),
                   "self_us": float(row["Total self-time (us)"])}
    findings = findings_of(run)
    return {
        "findings": None if findings is None else [_finding_brief(f) for f in findings],
        "steps": overview.steps if overview else None,
        "step_time_ms": step.average,
        "step_time_sd_ms": step.standard_deviation,
        "input_percent": overview.input_percent if overview else None,
        "input_bound": overview.input_bound if overview else None,
        "device_type": overview.device_type if overview else None,
        "bottleneck_iterator": bottleneck.iterator if bottleneck else None,
        "top_op": top,
    }


def _finding_brief(item: FindingItem) -> dict:
    return {k: getattr(item, k) for k in ("id", "severity", "title", "ms_per_step", "percent_of_step",
                                          "percent_of_device_time", "bytes")}


def _run_step_ms(run: BuiltRun) -> float | None:
    """The run's average step time in ms: the figure whose unit (`step_time_unit`) its per-step times follow."""
    overview = run.summary.overview
    return overview.step_time_ms.average if overview and overview.step_time_ms else None


def _per_step(value, like, delta: bool = False) -> str:
    """A time per step given in ms, in the unit of the step time `like` (µs for a microbenchmark's steps; ms, as
    XProf gives them, when there is no step time)."""
    like = 0.0 if like is None else like
    return fmt_step_delta(value, 2, like=like) if delta else fmt_step_time(value, 2, like=like)


def _at_stake(item: FindingItem, step_ms: float | None = None) -> str:
    parts = []
    if item.ms_per_step is not None:
        parts.append(f"≈ {_per_step(item.ms_per_step, step_ms)} per step")
    if item.percent_of_step is not None:
        parts.append(f"{fmt_value(item.percent_of_step, 'percent')} of the step time")
    if item.percent_of_device_time is not None:
        parts.append(f"{fmt_value(item.percent_of_device_time, 'percent')} of the device time")
    if item.bytes is not None:
        parts.append(fmt_value(item.bytes, "bytes"))
    return ", ".join(parts) or "–"


def _findings_table(items: list[FindingItem], run: BuiltRun, site_url: str | None) -> list[str]:
    """One row per finding: severity, title (escaped), what is at stake, its id (linked to the run page)."""
    rows = []
    for item in items:
        name = md_code(item.id, 60)
        if site_url:
            name = _link(name, _url(site_url, run.folder, "index.html") + f"#finding-{quote(item.id)}")
        rows.append([f"**{md_escape(item.severity)}**", md_escape(item.title, 240),
                     _at_stake(item, _run_step_ms(run)), name])
    return [_table(["Severity", "Finding", "At stake", "Id"], list("llll"), rows), ""]


def _findings_markdown(runs: list[BuiltRun], top: int, site_url: str | None) -> list[str]:
    parts = []
    for run in runs:
        items = findings_of(run)
        if items is None:
            continue
        counts = ", ".join(f"{n} {s}" for s in ("high", "medium", "low", "info")
                           if (n := sum(1 for f in items if f.severity == s)))
        head = f"**{md_code(run.name)}**: " + (f"{len(items)} finding{'s' if len(items) != 1 else ''} ({counts})"
                                               if items else "no finding")
        shown = items[:top]
        more = f", the top {len(shown)} below" if len(items) > len(shown) else ""
        parts += [head + more, "", *_findings_table(shown, run, site_url)] if shown else [head, ""]
    return ["### Findings", "", *parts] if parts else []


def _findings_change_markdown(c: Comparison, top: int, site_url: str | None) -> list[str]:
    change = c.findings
    if not change.available:
        return []
    if not change.appeared and not change.gone:
        return ["**Findings**: the same in both runs.", ""]
    parts = []
    if change.appeared:
        parts += [f"**Findings that appeared** in {md_code(c.candidate.name)}", "",
                  *_findings_table(change.appeared[:top], c.candidate, site_url)]
    if change.gone:
        parts += [f"**Findings that went away** (were in {md_code(c.baseline.name)})", "",
                  *_findings_table(change.gone[:top], c.baseline, site_url)]
    return parts


_STATUS = {OVER: "❌ over", WITHIN: "✅ within", NOT_CHECKED: "⚠️ not checked"}
BUDGET_LABELS = {"max_step_ms": "Step time", "max_input_percent": "Input share", "max_regression": "Regression",
                 "fail_on_finding": "Findings"}


def _budget_markdown(checks: CheckResult) -> list[str]:
    """The budget check's verdict and one row per check, breaches first."""
    total = len(checks.violations) + len(checks.passed)
    verdict = (f"❌ **{len(checks.violations)} of {total} checks over budget**" if checks.violations
               else f"✅ **All {total} checks within budget**" if total else "⚠️ **No check could be made**")
    if checks.unchecked and total:
        verdict += f" ({len(checks.unchecked)} not checked)"
    order = {OVER: 0, WITHIN: 1, NOT_CHECKED: 2}
    rows = [[md_code(o.subject), BUDGET_LABELS.get(o.budget, md_escape(o.budget)), _STATUS[o.status],
             md_escape(o.detail)]
            for o in sorted(checks.outcomes, key=lambda o: order[o.status])]
    return ["### Budgets", "", verdict + ".", "", _table(["Run", "Budget", "Result", "Figures"], list("llll"), rows),
            ""]


def _runs_breakdown_chart(runs: list[BuiltRun]) -> dict | None:
    """The runs' average step by category, in µs when every run's step is under a millisecond (as the table
    beside it and the site index's chart)."""
    unit, field, scale = step_time_axis(max((_run_step_ms(run) or 0.0 for run in runs), default=0.0))
    rows = []
    for run in runs:
        overview = run.summary.overview
        breakdown = (overview.breakdown_ms if overview else None) or {}
        for order, key in enumerate(CATEGORY_KEYS):
            value = breakdown.get(key)
            if value:
                rows.append({"Run": run.name, "Category": CATEGORY_LABELS[key], field: value * scale, "order": order})
    if not rows:
        return None
    categories = [CATEGORY_LABELS[k] for k in CATEGORY_KEYS if any(r["Category"] == CATEGORY_LABELS[k] for r in rows)]
    return vega_spec(
        alt.Chart(pd.DataFrame(rows), title="Average step time by category")
        .mark_bar()
        .encode(y=alt.Y("Run:N", sort=[r.name for r in runs], title=None, axis=alt.Axis(labelLimit=360)),
                x=alt.X(f"{field}:Q", stack="zero", title=f"Average step time ({unit})"),
                color=alt.Color("Category:N", sort=categories, scale=alt.Scale(domain=categories)),
                order=alt.Order("order:Q"))
        .properties(width=600, height=max(40, 28 * len(runs)))
    )


def _comparison_markdown(c: Comparison, top: int, compare_url: str | None, site_url: str | None = None
                         ) -> list[str]:
    parts = []
    step = c.step_time
    like = c.typical_step_ms  # one unit for both runs' per-step times
    if step.delta is None:
        parts.append("The step time cannot be compared: a run has no steps.")
    else:
        ratio = (f"**{fmt_ratio(c.speedup)} faster** per step" if step.delta < 0
                 else f"**{fmt_ratio(c.slowdown)} slower** per step" if step.delta > 0
                 else "**no change** in step time")
        sentence = (f"{ratio}: {_per_step(step.candidate, like)} against {_per_step(step.baseline, like)} "
                    f"({_per_step(step.delta, like, delta=True)}, {fmt_change_pct(step.delta_percent)})")
        result = c.test.result
        if result is not None:
            sentence += (f", {'beyond' if result.significant else 'within'} the runs' own noise "
                         f"(Welch's t-test on per-step times, {fmt_p_value(result.p_value)}).")
        else:
            sentence += f"; whether beyond noise cannot be judged ({md_escape(c.test.reason)})."
        parts.append(sentence)
    parts.append("")
    ip = c.input_pipeline
    bottleneck = [f"Input-bound: {md_escape(c.classification[0] or '–')} → {md_escape(c.classification[1] or '–')}"]
    if ip.baseline_bottleneck or ip.candidate_bottleneck:
        before = md_code(ip.baseline_bottleneck.iterator if ip.baseline_bottleneck else "–")
        after = md_code(ip.candidate_bottleneck.iterator if ip.candidate_bottleneck else "–")
        bottleneck.append(f"tf.data bottleneck: {before} → {after}")
    parts += ["; ".join(bottleneck) + ".", ""]
    rows = [[md_escape(ch.label), _per_step(ch.baseline, like), _per_step(ch.candidate, like),
             _per_step(ch.delta, like, delta=True), fmt_change_pct(ch.delta_percent)] if ch.unit == "ms" else
            [md_escape(ch.label), fmt_value(ch.baseline, ch.unit), fmt_value(ch.candidate, ch.unit),
             fmt_delta(ch.delta, ch.unit), fmt_change_pct(ch.delta_percent)]
            for ch in [*c.headline, *c.breakdown, *c.memory]]
    parts += [_table(["Figure", "Baseline", "Candidate", "Change", "Change (%)"], list("lrrrr"), rows), ""]
    ops = c.ops.reindex(c.ops["delta_us"].abs().sort_values(ascending=False, kind="stable").index).head(top)
    if len(ops):
        parts += [f"**Ops that changed most** (total self time over the capture, top {len(ops)} of {len(c.ops)})", ""]
        op_rows = [[md_escape(r.side), md_code(r.name), md_escape(r.type, 40), fmt_value(r.self_us_baseline, "us"),
                    fmt_value(r.self_us_candidate, "us"), fmt_delta(r.delta_us, "us"), md_escape(r.status)]
                   for r in ops.itertuples()]
        parts += [_table(["Side", "Op", "Type", "Baseline", "Candidate", "Change", ""], list("lllrrrl"), op_rows), ""]
    if c.kernels is not None and len(c.kernels):
        kernels = c.kernels.head(top)
        parts += [f"**GPU kernels that changed most** (top {len(kernels)} of {len(c.kernels)})", ""]
        k_rows = [[md_code(r.kernel), md_code(r.op, 60), fmt_value(r.total_us_baseline, "us"),
                   fmt_value(r.total_us_candidate, "us"), fmt_delta(r.delta_us, "us"), md_escape(r.status)]
                  for r in kernels.itertuples()]
        parts += [_table(["Kernel", "Op", "Baseline", "Candidate", "Change", ""], list("llrrrl"), k_rows), ""]
    parts += _findings_change_markdown(c, min(top, TOP_FINDINGS * 2), site_url)
    if compare_url:
        parts += [_link("Full comparison", compare_url), ""]
    return parts


def _runs_markdown(runs: list[BuiltRun], headlines: dict[str, dict], site_url: str | None) -> list[str]:
    rows = []
    for run in runs:
        h = headlines[run.name]
        name = md_code(run.name)
        if site_url:
            name = _link(name, _url(site_url, run.folder, "index.html"))
        step = "no steps" if h["step_time_ms"] is None else (
            f"{_per_step(h['step_time_ms'], h['step_time_ms'])} ± {_per_step(h['step_time_sd_ms'], h['step_time_ms'])}")
        top = h["top_op"]
        rows.append([name, "–" if h["step_time_ms"] is None else str(h["steps"]), step,
                     fmt_value(h["input_percent"], "percent"), md_escape(h["input_bound"] or "–"),
                     md_code(h["bottleneck_iterator"]) if h["bottleneck_iterator"] else "–",
                     f"{md_code(top['name'], 60)} ({fmt_value(top['self_us'], 'us')})" if top else "–"])
    return [_table(["Run", "Steps", "Step time (avg ± σ)", "Input", "Input-bound", "tf.data bottleneck",
                    "Top op by self time"], list("lrrrlll"), rows), ""]


def _history_markdown(placements: list[Placement]) -> list[str]:
    """Each run placed in its history: its rank among the recent runs, its change against their median (± the
    half width of Welch's 95% interval), and what moved most against the last of them."""
    lines = ["### In its history", ""]
    for p in placements:
        like = p.median_ms
        spread = ""
        if p.test is not None:
            spread = f" ± {_per_step((p.test.ci_high - p.test.ci_low) / 2, like)}"
        # What moved by a tenth of the change or more: smaller moves are the runs' noise.
        moved = [m for m in sorted(p.movers, key=lambda m: -abs(m.delta_ms))[:2]
                 if abs(m.delta_ms) >= abs(p.delta_ms) / 10]
        text = (f"- {md_code(p.candidate.name)}: slower than {p.slower_than} of the last {len(p.recent)} runs; "
                f"{_per_step(p.delta_ms, like, delta=True)}{spread} against their median "
                f"({_per_step(p.median_ms, like)}, {fmt_change_pct(p.delta_percent)})")
        if p.test is not None:
            text += f", {'beyond' if p.test.significant else 'within'} their noise"
        if moved:
            text += "; " + ", ".join(f"{md_code(m.name, 60)} {_per_step(m.delta_ms, like, delta=True)}"
                                     for m in moved)
        lines.append(text)
    return [*lines, ""]


def build_summary(site: BuiltSite, comparison: Comparison | None = None, site_url: str | None = None,
                  chart_stem: str = "summary", with_charts: bool = True, *, chart_url: str | None = None,
                  checks: CheckResult | None = None, links: list[Link] | tuple[Link, ...] = (),
                  marker: str | None = None, history: list[Placement] | None = None) -> SummaryDocument:
    """The Markdown, its JSON twin and its charts (not written yet; without charts, the
    Markdown refers to none). Charts are linked by file name, or under `chart_url`
    (where a workflow publishes them); `checks` puts the budget verdict first,
    `links` end the summary, and `marker` opens it (a sticky comment's)."""
    # A comparison is about its two runs: the site's others are not listed (nor charted) beside them.
    runs = ([comparison.baseline, comparison.candidate] if comparison is not None
            else [site.run(name) for name in site.run_names])
    headlines = {run.name: _run_headline(run) for run in runs}
    compare_url = None
    if comparison is not None and site_url and not site.temporary:
        stem = page_stem(comparison.baseline.name, comparison.candidate.name)
        in_site = all(r.site is site for r in (comparison.baseline, comparison.candidate))
        if in_site and Path(site.location, "compare", f"{stem}.html").is_file():
            compare_url = _url(site_url, "compare", f"{stem}.html")
    charts: list[Chart] = []
    if not with_charts:
        pass
    elif comparison is not None:
        for suffix, title, spec in (("breakdown", "Step-time breakdown", breakdown_chart(comparison)),
                                    ("steps", "Step times", step_times_chart(comparison)),
                                    ("ops", "Ops that changed most", _largest_op_chart(comparison))):
            if spec is not None:
                charts.append(Chart(f"{chart_stem}-{suffix}.png", title, spec))
    else:
        spec = _runs_breakdown_chart(runs)
        if spec is not None:
            charts.append(Chart(f"{chart_stem}-breakdown.png", "Step-time breakdown", spec))

    def chart_link(chart: Chart) -> str:
        return link_url(chart_url.rstrip("/") + "/" + quote(chart.file)) if chart_url else quote(chart.file)

    def render(top: int) -> str:
        title = "## Profile summary"
        if comparison is not None:
            title = f"## Profile comparison: {md_code(comparison.baseline.name)} → {md_code(comparison.candidate.name)}"
        parts = [marker] if marker else []
        parts += [title, ""]
        if checks is not None:
            parts += _budget_markdown(checks)
        if history:
            parts += _history_markdown(history)
        if comparison is not None:
            parts += _comparison_markdown(comparison, top, compare_url, site_url)
        if charts:
            parts += [f"![{md_escape(chart.title)}]({chart_link(chart)})" for chart in charts] + [""]
        parts += [f"### Runs ({len(runs)})", ""] if comparison is not None else []
        parts += _runs_markdown(runs, headlines, site_url)
        parts += _findings_markdown(runs, min(top, TOP_FINDINGS), site_url)
        footer = [_link("Full report", _url(site_url, "index.html"))] if site_url else []
        footer += [_link(md_escape(link.text), link.url) for link in links]
        if footer:
            parts += [" · ".join(footer), ""]
        parts.append(f"<sub>{md_escape(site.summary.generator)}; numbers follow XProf's "
                     "definitions.</sub>")
        return "\n".join(parts) + "\n"

    markdown = render(TOP_OPS)
    top = TOP_OPS
    while _size(markdown) > MAX_CHARS and top > 1:
        top //= 2
        markdown = render(top)
    if _size(markdown) > MAX_CHARS:  # cut at a line end; the marker and title open the text and stay
        head = markdown.encode("utf-8")[: MAX_CHARS - 40].decode("utf-8", "ignore")
        markdown = head.rsplit("\n", 1)[0] + "\n\n(summary cut to fit a comment)\n"
    data = {
        "schema": SUMMARY_SCHEMA,
        "generator": site.summary.generator,
        "runs": headlines,
        "comparison": comparison.as_dict(top=TOP_OPS) if comparison is not None else None,
        "links": {"site": _url(site_url, "index.html") if site_url else None, "comparison": compare_url},
        "charts": [chart.file for chart in charts],
        "history": None if history is None else [p.as_dict() for p in history],
        "budgets": None if checks is None else [
            {"run": o.run, "budget": o.budget, "status": o.status, "message": o.message} for o in checks.outcomes],
    }
    return SummaryDocument(markdown, data, charts)


def _largest_op_chart(comparison: Comparison) -> dict | None:
    """The op-change chart of the side (device or host) whose ops changed most."""
    ops = comparison.ops
    if ops.empty:
        return None
    totals = ops.assign(size=ops["delta_us"].abs()).groupby("side")["size"].sum()
    return op_change_chart(comparison, str(totals.idxmax()))


def write_charts(document: SummaryDocument, folder: Path) -> list[Path]:
    """The charts as PNG files in `folder` (vl-convert renders them offline)."""
    import vl_convert

    from reportgen.output.site import VEGA_LITE_VERSION

    written = []
    for chart in document.charts:
        png = vl_convert.vegalite_to_png(chart.spec, vl_version=VEGA_LITE_VERSION, scale=2)
        path = folder / chart.file
        path.write_bytes(png)
        written.append(path)
    return written


__all__ = ["MAX_CHARS", "SummaryDocument", "build_summary", "md_code", "md_escape", "write_charts"]
