"""`reportgen build`: logdirs → decoded hosts → sections → a static site.

Hosts are independent until their run is combined, so the per-host stage
(decode, then every section's `host_part`) runs in worker processes when
there is more than one host and more than one job; only the small per-host
results travel back. Combining and rendering happen here, in order, so the
output is the same whatever the number of jobs.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from reportgen import __version__
from reportgen.errors import CaptureError, NoCapturesError
from reportgen.loaders.logdir import HostFile, RunSource, discover, read_file
from reportgen.loaders.xspace import decode_xspace
from reportgen.sections import SECTIONS, HostContext, HostSummary, RunContext
from reportgen.site import PageWriter, SiteTransaction, write_assets

SUMMARY_SCHEMA = 1

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARTIAL = 2


@dataclass
class BuildOptions:
    output: str = "site"
    runs: set[str] | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    progress: bool = False
    trace_format: str = "json"  # trace export: "json", "perfetto" or "both"


@dataclass
class HostOutcome:
    run: str
    host: str
    path: str
    summary: HostSummary | None = None
    parts: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class BuildReport:
    output: Path
    runs: int
    hosts: int
    events: int
    seconds: float
    errors: list[dict]
    exit_code: int


def summarize_host(ctx: HostContext) -> HostSummary:
    capture = ctx.capture
    first, last = capture.time_span_ps()
    env = ctx.environment
    return HostSummary(
        host=ctx.host,
        path=capture.path,
        size_bytes=capture.size_bytes,
        planes=len(capture.planes),
        lines=len(capture.lines),
        events=capture.event_count,
        duration_ps=last - first,
        device_type=env.device_type,
        device_core_count=env.device_core_count,
    )


def process_host(run: str, host: HostFile, site_dir: str, trace_format: str = "json") -> HostOutcome:
    """Decode one host file and run every section's per-host stage."""
    outcome = HostOutcome(run=run, host=host.host, path=host.path)
    try:
        try:
            data = read_file(host.path)
        except OSError as exc:
            raise CaptureError(host.path, f"cannot be read ({exc.strerror or exc})") from exc
        capture = decode_xspace(host.path, data, host=host.host)
        if len(capture.planes) == 0:
            raise CaptureError(host.path, "holds no planes (not an XSpace capture?)")
        ctx = HostContext(run=run, host=host.host, capture=capture, site_dir=site_dir, trace_format=trace_format)
        outcome.summary = summarize_host(ctx)
        for section in SECTIONS:
            part = section.host_part(ctx)
            if part is not None:
                outcome.parts[section.slug] = part
    except CaptureError as exc:
        outcome.error = str(exc)
    except Exception as exc:  # a bug must not take the other hosts down with it
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        outcome.error = f"{host.path}: internal error while processing this host: {detail}"
    return outcome


def _unique_run_names(runs: list[RunSource]) -> list[tuple[str, RunSource]]:
    """Runs from several logdirs may share a name: suffix the later ones."""
    seen: dict[str, int] = {}
    named = []
    for run in runs:
        count = seen.get(run.name, 0)
        seen[run.name] = count + 1
        named.append((run.name if count == 0 else f"{run.name}-{count + 1}", run))
    return named


def _progress(total: int, enabled: bool) -> Callable[[str], None]:
    if not enabled:
        return lambda _label: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="host", file=sys.stderr, leave=False)

    def step(label: str) -> None:
        bar.set_postfix_str(label, refresh=False)
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return step


def _run_hosts(named: list[tuple[str, RunSource]], site_dir: str, options: BuildOptions) -> list[HostOutcome]:
    jobs = [(name, host) for name, run in named for host in run.hosts]
    step = _progress(len(jobs), options.progress)
    if options.jobs <= 1 or len(jobs) <= 1:
        outcomes = []
        for name, host in jobs:
            outcomes.append(process_host(name, host, site_dir, options.trace_format))
            step(f"{name}/{host.host}")
        return outcomes
    with ProcessPoolExecutor(max_workers=min(options.jobs, len(jobs))) as pool:
        futures = [pool.submit(process_host, name, host, site_dir, options.trace_format) for name, host in jobs]
        outcomes = []
        for (name, host), future in zip(jobs, futures):
            outcomes.append(future.result())
            step(f"{name}/{host.host}")
        return outcomes


def build_site(locations: list[str], options: BuildOptions) -> BuildReport:
    """Build the site. Raises NoCapturesError when nothing can be built."""
    started = time.perf_counter()
    sources: list[RunSource] = []
    for location in locations:
        sources.extend(discover(location, options.runs))
    named = _unique_run_names(sources)

    transaction = SiteTransaction(Path(options.output))
    try:
        site_dir = transaction.tmp
        outcomes = _run_hosts(named, str(site_dir), options)
        assets = write_assets(site_dir)
        summary, run_rows, all_errors = _render_runs(named, outcomes, site_dir, assets)
        root = PageWriter(site_dir=site_dir, assets=assets)
        root.write_html(
            "index.html",
            "site_index.html",
            runs=run_rows,
            host_total=sum(len(r["hosts"]) for r in run_rows),
            errors=all_errors,
        )
        summary_doc = {
            "schema": SUMMARY_SCHEMA,
            "generator": f"reportgen {__version__}",
            "runs": summary,
            "hosts": sum(1 for o in outcomes if o.error is None),
            "errors": all_errors,
        }
        root.write_json("summary.json", summary_doc)
        if all(o.error is not None for o in outcomes):
            raise NoCapturesError(
                "no host file could be read:\n  " + "\n  ".join(e["message"] for e in all_errors)
            )
        transaction.commit()
    except BaseException:
        transaction.abort()
        raise
    return BuildReport(
        output=transaction.target,
        runs=len(named),
        hosts=sum(1 for o in outcomes if o.error is None),
        events=sum(o.summary.events for o in outcomes if o.summary),
        seconds=time.perf_counter() - started,
        errors=all_errors,
        exit_code=EXIT_PARTIAL if all_errors else EXIT_OK,
    )


def _render_runs(named, outcomes, site_dir: Path, assets):
    by_run: dict[str, list[HostOutcome]] = {}
    for outcome in outcomes:
        by_run.setdefault(outcome.run, []).append(outcome)
    summary: dict[str, dict] = {}
    rows = []
    all_errors = []
    for name, _source in named:
        host_outcomes = by_run.get(name, [])
        errors = [{"path": o.path, "message": o.error} for o in host_outcomes if o.error]
        all_errors.extend({"run": name, **e} for e in errors)
        good = [o for o in host_outcomes if o.error is None]
        run_ctx = RunContext(name=name, hosts=[o.summary for o in good], errors=errors)
        computed = {}
        for section in SECTIONS:
            parts = {o.host: o.parts[section.slug] for o in good if section.slug in o.parts}
            if not parts:
                continue
            data = section.combine(run_ctx, parts)
            if data is not None:
                computed[section.slug] = data
        tools = [
            {"slug": s.slug, "title": s.title, "href": f"{s.slug}.html"}
            for s in SECTIONS
            if s.listed and s.slug in computed
        ]
        nav = [{"title": "Run", "href": "index.html"}, *tools]
        page = PageWriter(site_dir=site_dir, assets=assets, folder=name, nav=nav, run=name)
        (site_dir / name).mkdir(parents=True, exist_ok=True)
        run_summary: dict[str, Any] = {
            "hosts": [o.host for o in good],
            "errors": errors,
            "tools": {t["slug"]: {"page": f"{name}/{t['href']}"} for t in tools},
        }
        if "inventory" not in computed:
            # Every host failed: the run page still says so.
            page.write_html("index.html", "run_index.html", hosts=[], errors=errors)
        for section in SECTIONS:
            if section.slug not in computed:
                continue
            section.render(computed[section.slug], page)
            block = section.summary(computed[section.slug])
            if block is not None:
                run_summary[section.slug] = block
        summary[name] = run_summary
        rows.append(
            {
                "name": name,
                "href": quote(name) + "/index.html",
                "hosts": run_ctx.hosts,
                "errors": errors,
                "device": _device_label(run_ctx.hosts),
                "duration_ps": max((h.duration_ps for h in run_ctx.hosts), default=0),
                "planes": sum(h.planes for h in run_ctx.hosts),
                "events": sum(h.events for h in run_ctx.hosts),
                "tools": [{"title": t["title"], "href": quote(name) + "/" + t["href"]} for t in tools],
            }
        )
    return summary, rows, all_errors


def _device_label(hosts: list[HostSummary]) -> str:
    labels = sorted({h.device_type + (f" × {h.device_core_count}" if h.device_core_count else "") for h in hosts})
    return ", ".join(labels) if labels else "–"


__all__ = ["BuildOptions", "BuildReport", "build_site", "EXIT_OK", "EXIT_FAILED", "EXIT_PARTIAL"]
