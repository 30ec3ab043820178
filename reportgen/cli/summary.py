"""`reportgen summary`: the runs of a site (or logdir) as a pull-request comment, Markdown or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from reportgen.cli.common import BUILD_FIRST_JOBS, EXIT_OK, fail, warn
from reportgen.compare.model import compare_runs
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver

EXAMPLES = """\
examples:
  reportgen summary site/                                      Markdown to stdout
  reportgen summary site/ --compare main pr -o comment.md      plus comment-breakdown.png, … beside it
  reportgen summary ~/logs --format json
  reportgen summary site/ --compare main pr --site-url https://storage.googleapis.com/b/site -o pr.md
"""


def add_parser(sub) -> None:
    summary = sub.add_parser(
        "summary", help="a Markdown (or JSON) summary for a pull-request comment",
        description="Summarise the runs of SITE (or LOGDIR, built first) as GitHub-flavoured Markdown under "
        "65,000 characters: headline numbers, bottlenecks and, with --compare, the top changes.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    summary.add_argument("location", metavar="LOGDIR|SITE")
    summary.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"),
                         help="compare two runs (run names of the site, or run references as for `compare`)")
    summary.add_argument("--format", choices=("markdown", "json"), default="markdown", help="default: markdown")
    summary.add_argument("--site-url", metavar="URL", help="where the site is published: the summary links to it")
    summary.add_argument("-o", "--output", metavar="FILE",
                         help="write FILE, and the charts as PNG files beside it (default: stdout, no charts)")
    summary.add_argument("--jobs", **BUILD_FIRST_JOBS)


def run(args: argparse.Namespace) -> int:
    return summary_command(args.location, args.compare, fmt=args.format, site_url=args.site_url,
                           output=args.output, jobs=max(1, args.jobs))


def _runs_in(site: BuiltSite, resolver: RunResolver, names: list[str]) -> list[BuiltRun]:
    """Runs named by their name in `site`, or by a run reference of their own."""
    return [site.run(n) if n in site.run_names else resolver.resolve([RunRef.parse(n)])[0] for n in names]


def summary_command(location: str, compare: list[str] | None, fmt: str = "markdown", site_url: str | None = None,
                    output: str | None = None, jobs: int = 1) -> int:
    from reportgen.compare.pr_summary import build_summary, write_charts

    with tempfile.TemporaryDirectory(prefix="reportgen-summary-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=warn)
        try:
            site = resolver.site(location)
            comparison = compare_runs(*_runs_in(site, resolver, compare)) if compare else None
        except RunNotFoundError as exc:
            return fail(str(exc))
        target = Path(output) if output else None
        stem = target.stem if target is not None else "summary"
        document = build_summary(site, comparison, site_url=site_url, chart_stem=stem, with_charts=target is not None)
        text = document.markdown if fmt == "markdown" else json.dumps(document.data, indent=1) + "\n"
        if target is None:
            sys.stdout.write(text)
            return EXIT_OK
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            charts = write_charts(document, target.parent)
        except OSError as exc:
            return fail(f"cannot write {target}: {exc}")
    print(f"reportgen: wrote {target}" + (f" and {len(charts)} chart{'s' if len(charts) != 1 else ''} beside it"
                                          if charts else ""), file=sys.stderr)
    return EXIT_OK
