"""The `compare`, `summary` and `check` commands, and `build --budget`: from arguments
to the modules that do the work, with the messages and exit statuses of the command line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from reportgen.budget import Budget, BudgetError, CheckResult, check_site, resolve_baseline
from reportgen.cli import DEFAULT_COMPARE_OUTPUT
from reportgen.compare.model import Comparison, compare_runs
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver
from reportgen.formatting import fmt_change_pct, fmt_delta, fmt_p_value
from reportgen.site import OutputNotASiteError

EXIT_OK = 0
EXIT_FAILED = 1


def _fail(message: str) -> int:
    print(f"reportgen: {message}", file=sys.stderr)
    return EXIT_FAILED


def _warn(message: str) -> None:
    print(f"reportgen: warning: {message}", file=sys.stderr)


def _runs_in(site: BuiltSite, resolver: RunResolver, names: list[str]) -> list[BuiltRun]:
    """Runs named by their name in `site`, or by a run reference of their own."""
    return [site.run(n) if n in site.run_names else resolver.resolve([RunRef.parse(n)])[0] for n in names]


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
    from reportgen.compare.page import write_comparison

    with tempfile.TemporaryDirectory(prefix="reportgen-compare-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=_warn)
        try:
            base, cand = resolver.resolve([RunRef.parse(baseline), RunRef.parse(candidate)])
        except RunNotFoundError as exc:
            return _fail(str(exc))
        if output is None:
            same_site = base.site is cand.site and _is_local_site(base.site)
            output = base.site.location if same_site else DEFAULT_COMPARE_OUTPUT
        comparison = compare_runs(base, cand)
        try:
            written = write_comparison(comparison, Path(output))
        except OutputNotASiteError as exc:
            return _fail(str(exc))
        except OSError as exc:
            return _fail(f"cannot write the comparison: {exc}")
    if not quiet:
        where = str(written.page)
        if written.in_site and not written.index_updated:
            where += " (the site index has no Comparisons block: rebuild the site to list it there)"
        print(f"reportgen: {base.name} → {cand.name}: {describe(comparison)} → {where}")
    return EXIT_OK


def _checked(site: BuiltSite, budget: Budget, resolver: RunResolver) -> CheckResult:
    return check_site(site, budget.validate(), resolve_baseline(site, budget, resolver))


def summary_command(location: str, compare: list[str] | None, fmt: str = "markdown", site_url: str | None = None,
                    output: str | None = None, jobs: int = 1, *, chart_url: str | None = None,
                    budget: Budget | None = None, sticky: str | None = None, links: list[str] | None = None,
                    step_summary: bool = False) -> int:
    from reportgen.ci.step_summary import StepSummaryError, append_step_summary, step_summary_file
    from reportgen.ci.sticky_comment import CommentError, marker, parse_link
    from reportgen.markdown_summary import build_summary, write_charts

    try:
        comment_marker = marker(sticky) if sticky is not None else None
        parsed_links = [parse_link(spec) for spec in links or ()]
    except CommentError as exc:
        return _fail(str(exc))
    with tempfile.TemporaryDirectory(prefix="reportgen-summary-") as scratch:
        resolver = RunResolver(Path(scratch), jobs=jobs, warn=_warn)
        try:
            site = resolver.site(location)
            comparison = compare_runs(*_runs_in(site, resolver, compare)) if compare else None
            checks = _checked(site, budget, resolver) if budget is not None and not budget.empty else None
        except (RunNotFoundError, BudgetError) as exc:
            return _fail(str(exc))
        target = Path(output) if output else None
        stem = target.stem if target is not None else "summary"
        common = {"site_url": site_url, "chart_stem": stem, "chart_url": chart_url, "checks": checks,
                  "links": parsed_links}
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
                return _fail(f"cannot write {target}: {exc}")
        if step_summary:
            # The job summary cannot show files beside it: charts only where they are published.
            shown = build_summary(site, comparison, with_charts=chart_url is not None, **common)
            summary_file = step_summary_file()
            if summary_file is None:
                _warn("--step-summary: GITHUB_STEP_SUMMARY is not set (not a GitHub Actions step): "
                      "no step summary written")
            else:
                try:
                    append_step_summary(shown.markdown, summary_file)
                except StepSummaryError as exc:
                    return _fail(str(exc))
    if target is not None:
        print(f"reportgen: wrote {target}" + (f" and {len(charts)} chart{'s' if len(charts) != 1 else ''} beside it"
                                              if charts else ""), file=sys.stderr)
    return EXIT_OK


def check_command(location: str, budget: Budget, jobs: int = 1, *, fmt: str = "text", junit: str | None = None,
                  codequality: str | None = None) -> int:
    """Check the site at `location` (a logdir is built first); 3 when over budget.

    `fmt="github"` adds an annotation line for each breach (error) and each check
    that could not be made (warning); `junit` and `codequality` name report files."""
    from reportgen.ci import annotations as notes

    if budget.empty:  # every budget was turned off: nothing to check, nothing wrong
        print(f"reportgen check: no budget left to check ({', '.join(sorted(budget.turned_off))} off)")
        result = CheckResult(checked=[])
    else:
        with tempfile.TemporaryDirectory(prefix="reportgen-check-") as scratch:
            resolver = RunResolver(Path(scratch), jobs=jobs, warn=_warn)
            try:
                result = _checked(resolver.site(location), budget, resolver)
            except (RunNotFoundError, BudgetError) as exc:
                return _fail(str(exc))
        report = result.report()
        print(notes.without_workflow_commands(report) if fmt == "github" else report)
    annotations = notes.from_budget(result, budget)
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
        return _fail(f"cannot write {exc.filename}: {exc.strerror or exc}")
    return result.exit_code


def _write_report(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def check_built_site(site_dir: Path, budget: Budget, jobs: int = 1) -> int | None:
    """`build --budget`: check the site just built. None when within budget, else the exit status."""
    with tempfile.TemporaryDirectory(prefix="reportgen-check-") as scratch:
        site = BuiltSite.open(str(site_dir))
        if site is None:
            return _fail(f"{site_dir}: the build wrote no summary.json to check")
        try:
            result = check_site(site, budget, resolve_baseline(site, budget, RunResolver(Path(scratch), jobs, _warn)))
        except RunNotFoundError as exc:
            return _fail(f"budget: {exc}")
    print(result.report())
    return result.exit_code or None


__all__ = ["DEFAULT_COMPARE_OUTPUT", "check_built_site", "check_command", "compare_command", "describe",
           "summary_command"]
