"""A run's pages: its hosts combined section by section, then each section's page, CSVs and summary block.

`pipeline/build.py` calls `render_run` once per run, in the site's order, with the hosts' outcomes in host
order: so the pages are the same whatever ran the hosts or came from the rebuild cache.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from reportgen.core.ops.views import forget_combined
from reportgen.output.site import PageWriter
from reportgen.pipeline.heap import LongLived
from reportgen.pipeline.host_stage import HostOutcome
from reportgen.pipeline.timings import Timings
from reportgen.sections.base import RunContext
from reportgen.sections.registry import SECTIONS
from reportgen.sections.verdict import index_row, run_verdict
from reportgen.summary_blocks import RunError, RunSummary, ToolPage


def combine_run(name: str, host_outcomes: list[HostOutcome], errors: list[dict] | None = None,
                timings: Timings | None = None) -> RunContext:
    """Combine a run's hosts, section by section in registry order (`RunContext.sections`: each section's data)."""
    timings = timings if timings is not None else Timings()
    good = [o for o in host_outcomes if o.error is None]
    run_ctx = RunContext(name=name, hosts=[o.summary for o in good], errors=errors if errors is not None else [])
    try:
        for section in SECTIONS:
            parts = {o.host: o.parts[section.slug] for o in good if section.slug in o.parts}
            if not parts:
                continue
            with timings.stage(f"combine.{section.slug}"):
                data = section.combine(run_ctx, parts)  # the findings section (last) reads what the others computed
            if data is not None:
                run_ctx.sections[section.slug] = data
    finally:
        forget_combined()  # the hosts' combined views the sections shared (core/ops/views.py)
    return run_ctx


def render_run(name: str, host_outcomes: list[HostOutcome], errors: list[dict], site_dir: Path, assets,
                timings: Timings, heap: LongLived) -> tuple[dict, dict]:
    """Combine a run's hosts and write its pages: (its summary.json block, its site index row)."""
    run_ctx = combine_run(name, host_outcomes, errors, timings)
    heap.freeze()  # the run's combined tables live until its pages are written
    computed = run_ctx.sections
    tools = [
        {"slug": s.slug, "title": s.title, "href": f"{s.slug}.html"}
        for s in SECTIONS
        if s.listed and s.slug in computed
    ]
    extra = [{"title": s.title, "href": s.nav_page} for s in SECTIONS if s.nav_page and s.slug in computed]
    nav = [{"title": "Summary", "href": "index.html"}, *tools, *extra]
    page = PageWriter(site_dir=site_dir, assets=assets, folder=name, nav=nav, run=name,
                      hosts=[h.host for h in run_ctx.hosts])
    (site_dir / name).mkdir(parents=True, exist_ok=True)
    run_summary = RunSummary(
        hosts=tuple(o.host for o in host_outcomes if o.error is None),
        errors=tuple(RunError(path=e["path"], message=e["message"]) for e in errors),
        tools={t["slug"]: ToolPage(page=f"{name}/{t['href']}") for t in tools},
    )
    for section in SECTIONS:
        if section.slug not in computed:
            continue
        with timings.stage(f"render.{section.slug}"):
            section.render(computed[section.slug], page)
            block = section.summary(computed[section.slug])
        if block is not None:
            run_summary = run_summary.with_block(section.summary_key or section.slug, block)
    with timings.stage("render.summary"):
        # The run's answer, drawn from the summary blocks the sections just wrote; its findings (None for runs of
        # older profilers' files, which have no rules) right under it.
        findings = computed.get("findings")
        page.write_html("index.html", "run_index.html", errors=errors,
                        findings=findings.findings if findings is not None else None,
                        verdict=run_verdict(name, run_summary, run_ctx.hosts, nav))
    row = index_row(name, quote(name) + "/index.html", run_summary, run_ctx.hosts, errors,
                    [{"title": t["title"], "href": quote(name) + "/" + t["href"]} for t in tools])
    row["pages"] = [item["href"] for item in nav]
    return run_summary.to_json(), row


