"""`reportgen compare`: a page comparing two built runs (they are built first when they are not)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.cli.common import BUILD_FIRST_JOBS, EXIT_OK, fail, warn
from reportgen.output.formatting import fmt_change_pct, fmt_delta, fmt_p_value, terminal_text
from reportgen.output.transaction import OutputNotASiteError

if TYPE_CHECKING:  # imported when the command runs (see reportgen/cli/check.py)
    from reportgen.compare.model import Comparison
    from reportgen.compare.sources import BuiltSite

DEFAULT_OUTPUT = "comparisons"  # where runs that are not in one site are compared

EXAMPLES = """\
BASELINE and CANDIDATE name a run as SITE:RUN (a site written by `reportgen build`),
LOGDIR:RUN, a run folder, or a site or logdir holding one run. Runs that are not
built yet are built first into scratch space. Every figure is read from the runs'
built pages (summary.json and CSVs); the step-time change is judged against the
runs' own step-to-step noise with Welch's t-test.

examples:
  reportgen compare site:before site:after             writes site/compare/before--vs--after.html
  reportgen compare logs/plugins/profile/a logs/plugins/profile/b -o cmp/
  reportgen compare ~/logs:run1 ~/logs:run2
"""


def add_parser(sub) -> None:
    compare = sub.add_parser(
        "compare", help="compare two runs: step time, breakdown, ops, kernels, input pipeline",
        description="Write a page comparing CANDIDATE with BASELINE: compare/<a>--vs--<b>.html.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("baseline", metavar="BASELINE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    compare.add_argument("-o", "--output", metavar="DIR",
                         help="folder to write into (default: the runs' site when both are runs of one built site, "
                         f"which then lists the comparison on its index; otherwise {DEFAULT_OUTPUT}/)")
    compare.add_argument("--jobs", **BUILD_FIRST_JOBS)
    compare.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args: argparse.Namespace) -> int:
    return compare_command(args.baseline, args.candidate, args.output, jobs=max(1, args.jobs), quiet=args.quiet)


def _is_local_site(site: BuiltSite) -> bool:
    return not site.temporary and "://" not in site.location and Path(site.location).is_dir()


def describe(comparison: Comparison) -> str:
    """One line on the step-time change, for the terminal."""
    step = comparison.step_time
    if step.delta is None:
        return "step time not comparable (a run has no steps)"
    line = f"step time {fmt_delta(step.delta, 'ms')} ({fmt_change_pct(step.delta_percent)})"
    result = comparison.test.result
    if result is not None:
        line += f", {'beyond' if result.significant else 'within'} the runs' noise ({fmt_p_value(result.p_value)})"
    return line


def compare_command(baseline: str, candidate: str, output: str | None, jobs: int = 1, quiet: bool = False) -> int:
    from reportgen.compare.model import compare_runs
    from reportgen.compare.page import write_comparison
    from reportgen.compare.sources import RunNotFoundError, RunRef, RunResolver

    with tempfile.TemporaryDirectory(prefix="reportgen-compare-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=warn)
        try:
            base, cand = resolver.resolve([RunRef.parse(baseline), RunRef.parse(candidate)])
        except RunNotFoundError as exc:
            return fail(str(exc))
        if output is None:
            same_site = base.site is cand.site and _is_local_site(base.site)
            output = base.site.location if same_site else DEFAULT_OUTPUT
        comparison = compare_runs(base, cand)
        try:
            written = write_comparison(comparison, Path(output))
        except OutputNotASiteError as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"cannot write the comparison: {exc}")
    if not quiet:
        where = str(written.page)
        if written.in_site and not written.index_updated:
            where += " (the site index has no Comparisons block: rebuild the site to list it there)"
        print(terminal_text(f"reportgen: {base.name} → {cand.name}: {describe(comparison)} → {where}"))
    return EXIT_OK
