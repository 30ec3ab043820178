"""`reportgen summary`: the runs of a site (or logdir) as a pull-request comment, Markdown or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.cli.check import add_budget_arguments, budget_of, checked
from reportgen.cli.common import BUILD_FIRST_JOBS, EXIT_OK, fail, warn

if TYPE_CHECKING:  # imported when the command runs (see reportgen/cli/check.py)
    from reportgen.compare.budget import Budget
    from reportgen.compare.sources import BuiltRun, BuiltSite, RunResolver

EXAMPLES = """\
examples:
  reportgen summary site/                                      Markdown to stdout
  reportgen summary site/ --compare main pr -o comment.md      plus comment-breakdown.png, … beside it
  reportgen summary ~/logs --format json
  reportgen summary site/ --compare main pr --site-url https://storage.googleapis.com/b/site -o pr.md
  reportgen summary site/ --compare main pr --budget budget.toml --baseline main --sticky profile \
      -o comment.md --step-summary

In GitHub Actions, --step-summary appends the Markdown to the job summary ($GITHUB_STEP_SUMMARY);
it is never appended unless asked. Charts are named <stem>-breakdown.png, <stem>-steps.png and
<stem>-ops.png after -o FILE's stem; --chart-url links them where a workflow publishes them.
--sticky KEY opens the Markdown with <!-- reportgen:sticky:KEY -->, the marker by which a CI step
finds the pull-request comment to edit instead of adding one on each push.
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
    summary.add_argument("--chart-url", metavar="URL",
                         help="link the charts as URL/<file> (where the workflow publishes them) instead of by file "
                         "name")
    summary.add_argument("--step-summary", action="store_true",
                         help="also append the Markdown to $GITHUB_STEP_SUMMARY (GitHub Actions' job summary; charts "
                         "only with --chart-url)")
    summary.add_argument("--sticky", metavar="KEY",
                         help="open with the hidden marker <!-- reportgen:sticky:KEY --> of a sticky pull-request "
                         "comment")
    summary.add_argument("--link", action="append", metavar="TEXT=URL",
                         help="end with this link (repeatable), e.g. the workflow run")
    add_budget_arguments(summary, "budgets to show the check of, first (the exit status stays 0: "
                         "`reportgen check` fails a job)")
    summary.add_argument("--jobs", **BUILD_FIRST_JOBS)


def run(args: argparse.Namespace) -> int:
    from reportgen.compare.budget import BudgetError

    try:
        budget = budget_of(args)
    except BudgetError as exc:
        return fail(str(exc))
    return summary_command(args.location, args.compare, fmt=args.format, site_url=args.site_url,
                           output=args.output, jobs=max(1, args.jobs), chart_url=args.chart_url, budget=budget,
                           sticky=args.sticky, links=args.link, step_summary=args.step_summary)


def _runs_in(site: BuiltSite, resolver: RunResolver, names: list[str]) -> list[BuiltRun]:
    """Runs named by their name in `site`, or by a run reference of their own."""
    from reportgen.compare.sources import RunRef

    return [site.run(n) if n in site.run_names else resolver.resolve([RunRef.parse(n)])[0] for n in names]


def _placements(site: BuiltSite, location: str) -> list:
    """Each run of `site` (with steps) placed in the history at `location` (`--history`)."""
    from reportgen.cli.check import load_history
    from reportgen.compare.trend import place

    history = load_history(location)
    placed = [place(site.run(name), history) for name in site.run_names]
    return [p for p in placed if p is not None]


def summary_command(location: str, compare: list[str] | None, fmt: str = "markdown", site_url: str | None = None,
                    output: str | None = None, jobs: int = 1, *, chart_url: str | None = None,
                    budget: Budget | None = None, sticky: str | None = None, links: list[str] | None = None,
                    step_summary: bool = False) -> int:
    from reportgen.ci.step_summary import StepSummaryError, append_step_summary, step_summary_file
    from reportgen.ci.sticky_comment import CommentError, marker, parse_link
    from reportgen.compare.budget import BudgetError
    from reportgen.compare.model import compare_runs
    from reportgen.compare.pr_summary import build_summary, write_charts
    from reportgen.compare.sources import RunNotFoundError, RunResolver

    try:
        comment_marker = marker(sticky) if sticky is not None else None
        parsed_links = [parse_link(spec) for spec in links or ()]
    except CommentError as exc:
        return fail(str(exc))
    with tempfile.TemporaryDirectory(prefix="reportgen-summary-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=warn)
        try:
            site = resolver.site(location)
            comparison = compare_runs(*_runs_in(site, resolver, compare)) if compare else None
            checks = checked(site, budget, resolver) if budget is not None and not budget.empty else None
            history = _placements(site, budget.history) if budget is not None and budget.history else None
        except (RunNotFoundError, BudgetError) as exc:
            return fail(str(exc))
        target = Path(output) if output else None
        stem = target.stem if target is not None else "summary"
        common = {"site_url": site_url, "chart_stem": stem, "chart_url": chart_url, "checks": checks,
                  "links": parsed_links, "history": history}
        document = build_summary(site, comparison, with_charts=target is not None, marker=comment_marker, **common)
        text = document.markdown if fmt == "markdown" else json.dumps(document.data, indent=1) + "\n"
        charts = []
        if target is None:
            sys.stdout.write(text)
        else:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                charts = write_charts(document, target.parent)
            except OSError as exc:
                return fail(f"cannot write {target}: {exc}")
        if step_summary:
            # The job summary cannot show files beside it: charts only where they are published.
            shown = build_summary(site, comparison, with_charts=chart_url is not None, **common)
            summary_file = step_summary_file()
            if summary_file is None:
                warn("--step-summary: GITHUB_STEP_SUMMARY is not set (not a GitHub Actions step): "
                     "no step summary written")
            else:
                try:
                    append_step_summary(shown.markdown, summary_file)
                except StepSummaryError as exc:
                    return fail(str(exc))
    if target is not None:
        print(f"reportgen: wrote {target}" + (f" and {len(charts)} chart{'s' if len(charts) != 1 else ''} beside it"
                                              if charts else ""), file=sys.stderr)
    return EXIT_OK
