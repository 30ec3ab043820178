"""`reportgen check` (and `build --budget`): runs against performance budgets, exit status 3 when over."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.cli.common import BUILD_FIRST_JOBS, fail, warn

# The budget and site modules import pandas and the build: the commands import them when they run, so that
# `reportgen --help`, `--version` and the commands that do not need them start at once.
if TYPE_CHECKING:
    from reportgen.compare.budget import Budget, CheckResult
    from reportgen.compare.sources import BuiltSite, RunResolver
    from reportgen.compare.trend import History

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
  reportgen check site/ --budget budget.toml --max-regression off        drop one budget of the file
  reportgen check site/ --budget budget.toml --format github --junit junit.xml   GitHub annotations, JUnit
  reportgen build ~/logs -o site/ --budget budget.toml

--format github prints an ::error annotation for each breach and a ::warning for each check that
could not be made; --junit FILE writes one test case per run and budget (breaches fail);
--codequality FILE writes GitLab's Code Quality report.
"""


def add_parser(sub) -> None:
    check = sub.add_parser(
        "check", help="check runs against performance budgets (exit status 3 when over budget)",
        description="Check every run of SITE (or LOGDIR, built first) against the budgets given.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("location", metavar="SITE_OR_LOGDIR")
    add_budget_arguments(check)
    check.add_argument("--runs", metavar="NAME,...", help="only these runs (default: every run but the baseline)")
    check.add_argument("--format", choices=("text", "github"), default="text",
                       help="github: also an ::error / ::warning annotation line per breach (default: text)")
    check.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report: a test case per run and budget")
    check.add_argument("--codequality", metavar="FILE", help="also write a GitLab Code Quality report (JSON)")
    check.add_argument("--jobs", **BUILD_FIRST_JOBS)


def add_budget_arguments(parser: argparse.ArgumentParser, title: str | None = None) -> None:
    """The budget options `check` and `summary` share."""
    group = parser.add_argument_group(title)
    group.add_argument("--budget", metavar="FILE", help="budgets from a TOML file; options given here override it")
    group.add_argument("--max-step-ms", metavar="MS", help="largest average step time allowed (off: none)")
    group.add_argument("--max-input-percent", metavar="PERCENT",
                       help="largest share of the step time spent waiting for input (off: none)")
    group.add_argument("--max-regression", metavar="LIMIT",
                       help="largest step-time increase over --baseline: 5%% or 12ms (off: none)")
    group.add_argument("--baseline", metavar="RUN_OR_SITE",
                       help="the run to measure regressions against: a run of SITE, or SITE:RUN, LOGDIR:RUN, a folder")
    group.add_argument("--history", metavar="SITE",
                       help="judge --max-regression against the median of this history's last 30 comparable runs "
                       "(a site or gs:// site of many runs; a gs:// pattern such as gs://b/nightly/* lists several)")
    group.add_argument("--fail-on-finding", action="append", metavar="SEVERITY|ID",
                       help="over budget when a run has a finding of this severity or worse (high, medium, low, "
                            "info), or with this id (`*` matches any text); repeat or separate with commas (off: none)")


def budget_of(args: argparse.Namespace) -> Budget:
    """The budget file's budgets (if any) with the options given on the command line over them."""
    from reportgen.compare.budget import budget_from_options

    return budget_from_options(args.budget, max_step_ms=args.max_step_ms, max_input_percent=args.max_input_percent,
                               max_regression=args.max_regression, baseline=args.baseline,
                               runs=getattr(args, "runs", None), fail_on_finding=args.fail_on_finding,
                               history=args.history)


def run(args: argparse.Namespace) -> int:
    from reportgen.compare.budget import BudgetError

    try:
        budget = budget_of(args)
    except BudgetError as exc:
        return fail(str(exc))
    if budget.empty and not budget.turned_off:
        return fail("check: give at least one budget (--max-step-ms, --max-input-percent, --max-regression, "
                    "--fail-on-finding or --budget FILE)")
    return check_command(args.location, budget, jobs=max(1, args.jobs), fmt=args.format, junit=args.junit,
                         codequality=args.codequality)


def checked(site: BuiltSite, budget: Budget, resolver: RunResolver) -> CheckResult:
    """The budget check of `site` (`check`, and the budgets `summary` shows)."""
    from reportgen.compare.budget import check_site, resolve_baseline

    history = load_history(budget.history) if budget.history and budget.max_regression is not None else None
    baseline = None if history is not None else resolve_baseline(site, budget, resolver)
    return check_site(site, budget.validate(), baseline, history)


def load_history(location: str) -> History:
    """The history of the site(s) at `location` (a gs:// pattern lists several); RunNotFoundError when it is no
    reportgen site."""
    from reportgen.cli.trend import expand
    from reportgen.compare.sources import BuiltSite, RunNotFoundError
    from reportgen.compare.trend import build_history

    sites = [BuiltSite.open(loc) for loc in expand([location])]
    if not sites or any(site is None for site in sites):
        raise RunNotFoundError(f"history {location}: not a reportgen site (build or publish its runs first)")
    return build_history(sites)


def check_command(location: str, budget: Budget, jobs: int = 1, *, fmt: str = "text", junit: str | None = None,
                  codequality: str | None = None) -> int:
    """Check the site at `location` (a logdir is built first); 3 when over budget.

    `fmt="github"` adds an annotation line for each breach (error) and each check
    that could not be made (warning); `junit` and `codequality` name report files."""
    from reportgen.ci import annotations as notes
    from reportgen.compare.budget import BudgetError, CheckResult
    from reportgen.compare.sources import RunNotFoundError, RunResolver

    if budget.empty:  # every budget was turned off: nothing to check, nothing wrong
        print(f"reportgen check: no budget left to check ({', '.join(sorted(budget.turned_off))} off)")
        result = CheckResult(checked=[])
    else:
        with tempfile.TemporaryDirectory(prefix="reportgen-check-") as scratch:
            resolver = RunResolver(Path(scratch), jobs=jobs, warn=warn)
            try:
                result = checked(resolver.site(location), budget, resolver)
            except (RunNotFoundError, BudgetError) as exc:
                return fail(str(exc))
        report = result.report()
        print(notes.without_workflow_commands(report) if fmt == "github" else report)
    annotations = notes.from_budget(result, budget) + notes.from_findings(result, budget)
    if fmt == "github":
        for line in notes.github_commands(annotations):
            print(line)
    try:
        if junit:
            from reportgen.ci.junit import junit_xml

            _write_report(Path(junit), junit_xml(result))
        if codequality:
            from reportgen.ci.codequality import codequality_report

            _write_report(Path(codequality), codequality_report(annotations).encode("utf-8"))
    except OSError as exc:
        return fail(f"cannot write {exc.filename}: {exc.strerror or exc}")
    return result.exit_code


def _write_report(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def check_built_site(site_dir: Path, budget: Budget, jobs: int = 1) -> int | None:
    """`build --budget`: check the site just built. None when within budget, else the exit status."""
    from reportgen.compare.budget import check_site, resolve_baseline
    from reportgen.compare.sources import BuiltSite, RunNotFoundError, RunResolver

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
