"""Performance budgets for CI: `reportgen check` and `reportgen build --budget FILE`.

A budget caps the average step time, the input share of the step time, and
the step-time regression against a baseline run, and can refuse findings
(`fail_on_finding`: a severity, which refuses that severity and worse, or
finding ids, `*` allowed). Every figure is the run's own figure from the
built site (summary.json and the run's CSVs), the same the pages show.
Exit status 3 means a budget was exceeded.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from reportgen.compare.model import compare_runs, findings_of
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver
from reportgen.output.formatting import fmt_change_pct, fmt_delta, fmt_p_value, fmt_value

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

EXIT_BUDGET_EXCEEDED = 3
SEVERITIES = ("high", "medium", "low", "info")  # most severe first, as findings are


class BudgetError(Exception):
    """A budget that cannot be used as written; the message says why."""


@dataclass(frozen=True)
class Regression:
    """The largest step-time increase allowed over the baseline: a percentage or milliseconds."""

    limit: float
    unit: str  # "percent" or "ms"

    @classmethod
    def parse(cls, value: object) -> Regression:
        """`5%`, `5` (a percentage), `12ms` or `12 ms`."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls._checked(float(value), "percent")
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%|ms)?\s*", str(value))
        if match is None:
            raise BudgetError(f"max regression {value!r}: give a percentage (5%) or milliseconds (12ms)")
        return cls._checked(float(match.group(1)), "ms" if match.group(2) == "ms" else "percent")

    @classmethod
    def _checked(cls, limit: float, unit: str) -> Regression:
        if limit < 0:
            raise BudgetError("max regression must not be negative")
        return cls(limit, unit)

    def __str__(self) -> str:
        return f"{self.limit:g}%" if self.unit == "percent" else f"{self.limit:g} ms"


@dataclass
class Budget:
    max_step_ms: float | None = None
    max_input_percent: float | None = None
    max_regression: Regression | None = None
    baseline: str | None = None  # a run of the checked site, or a run reference (SITE:RUN, LOGDIR:RUN, folder)
    runs: list[str] | None = None  # only these runs (default: every run but the baseline)
    base_dir: Path | None = None  # relative baseline paths of a budget file are relative to the file
    fail_on_finding: list[str] | None = None  # severities (that one and worse) or finding ids (`*` allowed)

    @property
    def empty(self) -> bool:
        return (self.max_step_ms is None and self.max_input_percent is None and self.max_regression is None
                and not self.fail_on_finding)

    def validate(self) -> Budget:
        for name in ("max_step_ms", "max_input_percent"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise BudgetError(f"{name} must be a non-negative number, not {value!r}")
        if self.max_regression is not None and self.baseline is None:
            raise BudgetError("a regression budget needs a baseline run (--baseline, or baseline = \"…\")")
        for value in self.fail_on_finding or []:
            if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.*?-]+", value):
                raise BudgetError(f"fail on finding {value!r}: give a severity ({', '.join(SEVERITIES)}) or a "
                                  "finding id such as input.tf_data_bottleneck (`*` matches any text)")
        return self

    def refused(self, finding: dict) -> str | None:
        """The fail-on-finding value that refuses this finding, or None."""
        for value in self.fail_on_finding or []:
            if value in SEVERITIES:
                if SEVERITIES.index(finding.get("severity", "info")) <= SEVERITIES.index(value):
                    return value
            elif fnmatch.fnmatchcase(finding.get("id", ""), value):
                return value
        return None


BUDGET_KEYS = ("max_step_ms", "max_input_percent", "max_regression", "baseline", "runs", "fail_on_finding")


def finding_values(value: object) -> list[str]:
    """`fail_on_finding` as given: one value, a comma-separated text, or a list of them."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, str):
            raise BudgetError(f"fail on finding {item!r}: give a severity or a finding id (text)")
        out += [part.strip() for part in item.split(",") if part.strip()]
    return out


def load_budget(path: str | Path) -> Budget:
    """A budget file (TOML), e.g.::

        max_step_ms = 150
        max_input_percent = 20
        max_regression = "5%"
        baseline = "main"
        fail_on_finding = ["high", "capture.*"]
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BudgetError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BudgetError(f"{path}: not valid TOML ({exc})") from exc
    unknown = sorted(set(data) - set(BUDGET_KEYS))
    if unknown:
        raise BudgetError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                          f"(known: {', '.join(BUDGET_KEYS)})")
    runs = data.get("runs")
    if runs is not None and not (isinstance(runs, list) and all(isinstance(r, str) for r in runs)):
        raise BudgetError(f"{path}: runs must be a list of run names")
    baseline = data.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise BudgetError(f"{path}: baseline must be a run name or a run reference (text)")
    try:
        budget = Budget(
            max_step_ms=data.get("max_step_ms"),
            max_input_percent=data.get("max_input_percent"),
            max_regression=Regression.parse(data["max_regression"]) if "max_regression" in data else None,
            baseline=baseline, runs=runs, base_dir=path.parent,
            fail_on_finding=finding_values(data["fail_on_finding"]) if "fail_on_finding" in data else None,
        ).validate()
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from exc
    if budget.empty:
        raise BudgetError(f"{path}: sets no budget (give max_step_ms, max_input_percent, max_regression or "
                          "fail_on_finding)")
    return budget


@dataclass
class Violation:
    run: str
    budget: str  # the budget's key
    message: str
    finding: dict | None = None  # fail_on_finding: the finding (as summary.json holds it)


@dataclass
class CheckResult:
    checked: list[str]  # run names
    violations: list[Violation] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)  # one line per check within budget
    unchecked: list[str] = field(default_factory=list)  # checks that could not be made, and why

    @property
    def exit_code(self) -> int:
        return EXIT_BUDGET_EXCEEDED if self.violations else 0

    def report(self) -> str:
        budgets = len(self.violations) + len(self.passed)
        head = (f"reportgen check: {len(self.checked)} run{'s' if len(self.checked) != 1 else ''}, "
                f"{budgets} check{'s' if budgets != 1 else ''}: ")
        head += (f"{len(self.violations)} over budget" if self.violations else "all within budget")
        lines = [head]
        lines += [f"  over budget: {v.message}" for v in self.violations]
        lines += [f"  within budget: {line}" for line in self.passed]
        lines += [f"  not checked: {line}" for line in self.unchecked]
        return "\n".join(lines)


def _check_run(run: BuiltRun, budget: Budget, baseline: BuiltRun | None, result: CheckResult) -> None:
    overview = run.block.get("overview") or {}
    step = (overview.get("step_time_ms") or {}).get("average") if overview.get("steps") else None
    name = run.name
    if budget.max_step_ms is not None:
        if step is None:
            result.unchecked.append(f"{name}: step time (the run has no steps)")
        elif step > budget.max_step_ms:
            result.violations.append(Violation(name, "max_step_ms", (
                f"{name}: average step time {fmt_value(step, 'ms')} is over the "
                f"{budget.max_step_ms:g} ms budget (max step ms)")))
        else:
            result.passed.append(f"{name}: average step time {fmt_value(step, 'ms')} ≤ {budget.max_step_ms:g} ms")
    if budget.max_input_percent is not None:
        share = overview.get("input_percent") if overview.get("steps") else None
        if share is None:
            result.unchecked.append(f"{name}: input share (the run has no steps)")
        elif share > budget.max_input_percent:
            result.violations.append(Violation(name, "max_input_percent", (
                f"{name}: {fmt_value(share, 'percent')} of the step time waits for input, over the "
                f"{budget.max_input_percent:g}% budget (max input percent; XProf: {overview.get('input_bound')} "
                "input-bound)")))
        else:
            result.passed.append(f"{name}: input {fmt_value(share, 'percent')} ≤ {budget.max_input_percent:g}%")
    if budget.max_regression is not None and baseline is not None:
        _check_regression(run, baseline, budget.max_regression, result)
    if budget.fail_on_finding:
        _check_findings(run, budget, result)


def _check_findings(run: BuiltRun, budget: Budget, result: CheckResult) -> None:
    findings = findings_of(run)
    wanted = ", ".join(budget.fail_on_finding or [])
    if findings is None:
        result.unchecked.append(f"{run.name}: findings (the run has none: a capture of an older profiler)")
        return
    refused = [(f, budget.refused(f)) for f in findings]
    refused = [(f, value) for f, value in refused if value is not None]
    for f, value in refused:
        result.violations.append(Violation(run.name, "fail_on_finding", (
            f"{run.name}: finding {f['id']} ({f['severity']}): {f['title']} (fail on finding {value})"),
            finding=f))
    if not refused:
        result.passed.append(f"{run.name}: no finding matches {wanted} ({len(findings)} finding"
                             f"{'s' if len(findings) != 1 else ''} in all)")


def _check_regression(run: BuiltRun, baseline: BuiltRun, limit: Regression, result: CheckResult) -> None:
    comparison = compare_runs(baseline, run)
    change = comparison.step_time
    name = f"{run.name} against {baseline.name}"
    if change.delta is None:
        result.unchecked.append(f"{name}: regression (a run has no steps)")
        return
    amount = change.delta_percent if limit.unit == "percent" else change.delta
    if amount is None:
        result.unchecked.append(f"{name}: regression (the baseline step time is 0)")
        return
    test = comparison.test.result
    noise = (f"; {'beyond' if test.significant else 'within'} the runs' noise ({fmt_p_value(test.p_value)})"
             if test is not None else "")
    what = (f"step time {fmt_value(change.baseline, 'ms')} → {fmt_value(change.candidate, 'ms')} "
            f"({fmt_delta(change.delta, 'ms')}, {fmt_change_pct(change.delta_percent)})")
    if amount > limit.limit:
        result.violations.append(Violation(run.name, "max_regression",
                                           f"{name}: {what}, over the {limit} regression budget{noise}"))
    else:
        result.passed.append(f"{name}: {what} ≤ {limit} regression{noise}")


def resolve_baseline(site: BuiltSite, budget: Budget, resolver: RunResolver) -> BuiltRun | None:
    """The baseline: a run of the checked site, or a run reference resolved elsewhere."""
    if budget.baseline is None:
        return None
    if budget.baseline in site.run_names:
        return site.run(budget.baseline)
    ref = RunRef.parse(budget.baseline)
    if budget.base_dir is not None and not Path(ref.location).is_absolute() and "://" not in ref.location \
            and (budget.base_dir / ref.location).exists():
        ref = RunRef(str(budget.base_dir / ref.location), ref.run)
    return resolver.resolve([ref])[0]


def check_site(site: BuiltSite, budget: Budget, baseline: BuiltRun | None = None) -> CheckResult:
    """Check every run of `site` (or the budget's runs), the baseline itself excepted."""
    names = budget.runs if budget.runs is not None else site.run_names
    missing = [n for n in names if n not in site.run_names]
    if missing:
        raise RunNotFoundError(f"{site.location} has no run {', '.join(repr(n) for n in missing)} "
                               f"(runs: {', '.join(site.run_names)})")
    runs = [site.run(n) for n in names]
    if baseline is not None and baseline.site is site:
        runs = [r for r in runs if r.name != baseline.name]
    result = CheckResult(checked=[r.name for r in runs])
    for run in runs:
        _check_run(run, budget, baseline, result)
    return result


__all__ = ["BUDGET_KEYS", "EXIT_BUDGET_EXCEEDED", "Budget", "BudgetError", "CheckResult", "Regression", "Violation",
           "check_site", "finding_values", "load_budget", "resolve_baseline"]
