"""`reportgen check` (and `build --budget`): runs against performance budgets, exit status 3 when over."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from reportgen.cli.common import BUILD_FIRST_JOBS, fail, warn
from reportgen.compare.budget import (
    Budget,
    BudgetError,
    Regression,
    check_site,
    finding_values,
    load_budget,
    resolve_baseline,
)
from reportgen.compare.sources import BuiltSite, RunNotFoundError, RunResolver

EXAMPLES = """\
Exit status: 0 every run is within budget, 3 a budget is exceeded (each violation is
listed), 1 the check could not be made. A budget file (TOML) holds the same budgets:

  max_step_ms = 150
  max_input_percent = 20
  max_regression = "5%"          # or 5 (percent), or "12ms"
  baseline = "main"              # a run of the site, or SITE:RUN, LOGDIR:RUN, a run folder
  runs = ["pr"]                  # optional: only these runs (default: all but the baseline)
  fail_on_finding = ["high", "capture.clock_skew"]   # a severity (and worse), or finding ids (* allowed)

examples:
  reportgen check site/ --max-step-ms 150 --max-input-percent 20
  reportgen check site/ --max-regression 5% --baseline main
  reportgen check site/ --fail-on-finding medium --fail-on-finding 'input.*'
  reportgen check ~/logs --budget budget.toml
  reportgen build ~/logs -o site/ --budget budget.toml
"""


def add_parser(sub) -> None:
    check = sub.add_parser(
        "check", help="check runs against performance budgets (exit status 3 when over budget)",
        description="Check every run of SITE (or LOGDIR, built first) against the budgets given.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("location", metavar="SITE_OR_LOGDIR")
    check.add_argument("--max-step-ms", type=float, metavar="MS", help="largest average step time allowed")
    check.add_argument("--max-input-percent", type=float, metavar="PERCENT",
                       help="largest share of the step time spent waiting for input")
    check.add_argument("--max-regression", metavar="LIMIT",
                       help="largest step-time increase over --baseline: 5%% or 12ms")
    check.add_argument("--baseline", metavar="RUN_OR_SITE",
                       help="the run to measure regressions against: a run of SITE, or SITE:RUN, LOGDIR:RUN, a folder")
    check.add_argument("--fail-on-finding", action="append", metavar="SEVERITY|ID",
                       help="exit 3 when a run has a finding of this severity or worse (high, medium, low, info), "
                            "or with this id (`*` matches any text; repeat or separate with commas)")
    check.add_argument("--runs", metavar="NAME,...", help="only these runs (default: every run but the baseline)")
    check.add_argument("--budget", metavar="FILE", help="budgets from a TOML file; options given here override it")
    check.add_argument("--jobs", **BUILD_FIRST_JOBS)


def budget_of(args: argparse.Namespace) -> Budget:
    """The budget file's budgets (if any) with the options given on the command line over them."""
    budget = load_budget(args.budget) if args.budget else Budget()
    if args.max_step_ms is not None:
        budget.max_step_ms = args.max_step_ms
    if args.max_input_percent is not None:
        budget.max_input_percent = args.max_input_percent
    if args.max_regression is not None:
        budget.max_regression = Regression.parse(args.max_regression)
    if args.baseline is not None:
        budget.baseline, budget.base_dir = args.baseline, None
    if args.runs:
        budget.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if args.fail_on_finding:
        budget.fail_on_finding = finding_values(args.fail_on_finding)
    return budget


def run(args: argparse.Namespace) -> int:
    try:
        budget = budget_of(args)
    except BudgetError as exc:
        return fail(str(exc))
    if budget.empty:
        return fail("check: give at least one budget (--max-step-ms, --max-input-percent, --max-regression, "
                    "--fail-on-finding or --budget FILE)")
    return check_command(args.location, budget, jobs=max(1, args.jobs))


def check_command(location: str, budget: Budget, jobs: int = 1) -> int:
    """Check the site at `location` (a logdir is built first); 3 when over budget."""
    with tempfile.TemporaryDirectory(prefix="reportgen-check-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=warn)
        try:
            budget.validate()
            site = resolver.site(location)
            result = check_site(site, budget, resolve_baseline(site, budget, resolver))
        except (RunNotFoundError, BudgetError) as exc:
            return fail(str(exc))
    print(result.report())
    return result.exit_code


def check_built_site(site_dir: Path, budget: Budget, jobs: int = 1) -> int | None:
    """`build --budget`: check the site just built. None when within budget, else the exit status."""
    with tempfile.TemporaryDirectory(prefix="reportgen-check-") as scratch:
        site = BuiltSite.open(str(site_dir))
        if site is None:
            return fail(f"{site_dir}: the build wrote no summary.json to check")
        try:
            result = check_site(site, budget, resolve_baseline(site, budget, RunResolver(Path(scratch), jobs, warn)))
        except RunNotFoundError as exc:
            return fail(f"budget: {exc}")
    print(result.report())
    return result.exit_code or None
