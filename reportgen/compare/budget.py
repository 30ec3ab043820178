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
from typing import TYPE_CHECKING

from reportgen.compare.model import compare_runs, findings_of
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver
from reportgen.output.formatting import (
    fmt_change_pct,
    fmt_p_value,
    fmt_step_delta,
    fmt_step_time,
    fmt_value,
    terminal_text,
)
from reportgen.summary_blocks import FindingItem

if TYPE_CHECKING:  # a history is read (and ruptures imported) only when a check asks for one
    from reportgen.compare.trend import History

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

EXIT_BUDGET_EXCEEDED = 3
OFF = "off"  # a budget given as `off` on the command line drops that budget of the file

# The status of one check.
OVER, WITHIN, NOT_CHECKED = "over budget", "within budget", "not checked"
FINDING_SEVERITIES = ("high", "medium", "low", "info")  # most severe first, as findings are


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
    file: Path | None = None  # the budget file, when there is one
    from_file: frozenset[str] = frozenset()  # the budgets whose limit is the file's (not overridden)
    turned_off: frozenset[str] = frozenset()  # budgets given as `off` on the command line
    fail_on_finding: list[str] | None = None  # severities (that one and worse) or finding ids (`*` allowed)
    history: str | None = None  # a history's site(s): the regression budget judges against its recent median

    @property
    def empty(self) -> bool:
        return (self.max_step_ms is None and self.max_input_percent is None and self.max_regression is None
                and not self.fail_on_finding)

    def refused(self, finding: FindingItem) -> str | None:
        """The fail-on-finding value that refuses this finding, or None."""
        severity = finding.severity or "info"
        for value in self.fail_on_finding or []:
            if value in FINDING_SEVERITIES:
                if FINDING_SEVERITIES.index(severity) <= FINDING_SEVERITIES.index(value):
                    return value
            elif fnmatch.fnmatchcase(finding.id, value):
                return value
        return None

    def source(self, key: str) -> Path | None:
        """The budget file that set `key`'s limit, or None when the command line did."""
        return self.file if key in self.from_file else None

    def validate(self, need_baseline: bool = True) -> Budget:
        """Raises BudgetError for a limit that is not a number, or (unless the baseline
        is still to be given) a regression budget without a baseline."""
        for name in ("max_step_ms", "max_input_percent"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise BudgetError(f"{name} must be a non-negative number, not {value!r}")
        if need_baseline and self.max_regression is not None and self.baseline is None and self.history is None:
            raise BudgetError("a regression budget needs a baseline run (--baseline, or baseline = \"…\") or a "
                              "history (--history SITE)")
        for value in self.fail_on_finding or []:
            if not re.fullmatch(r"[A-Za-z0-9_.*?-]+", value):
                raise BudgetError(f"fail on finding {value!r}: give a severity ({', '.join(FINDING_SEVERITIES)}) "
                                  "or a finding id such as input.tf_data_bottleneck (`*` matches any text)")
        return self


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


def load_budget(path: str | Path, need_baseline: bool = True) -> Budget:
    """A budget file (TOML), e.g.::

        max_step_ms = 150
        max_input_percent = 20
        max_regression = "5%"
        baseline = "main"
        fail_on_finding = ["high", "capture.*"]

    The baseline may be left out when the command line gives it (need_baseline=False).
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
            baseline=baseline, runs=runs, base_dir=path.parent, file=path,
            from_file=frozenset(k for k in ("max_step_ms", "max_input_percent", "max_regression", "fail_on_finding")
                                if k in data),
            fail_on_finding=finding_values(data["fail_on_finding"]) if "fail_on_finding" in data else None,
        ).validate(need_baseline)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from exc
    if budget.empty:
        raise BudgetError(f"{path}: sets no budget (give max_step_ms, max_input_percent, max_regression or "
                          "fail_on_finding)")
    return budget


def budget_from_options(file: str | None = None, *, max_step_ms: float | str | None = None,
                        max_input_percent: float | str | None = None, max_regression: str | None = None,
                        baseline: str | None = None, runs: str | None = None,
                        fail_on_finding: list[str] | None = None, history: str | None = None) -> Budget:
    """A budget from a file (if any) and command-line options, which override it.

    Each limit may be `off`, which drops that budget of the file (a workflow
    without a baseline run turns the regression budget off this way).
    """
    budget = load_budget(file, need_baseline=False) if file else Budget()
    turned_off = set()
    for key, value in (("max_step_ms", max_step_ms), ("max_input_percent", max_input_percent),
                       ("max_regression", max_regression)):
        if value is None:
            continue
        if str(value).strip().lower() == OFF:
            setattr(budget, key, None)
            turned_off.add(key)
        elif key == "max_regression":
            budget.max_regression = Regression.parse(value)
        else:
            try:
                setattr(budget, key, float(value))
            except ValueError:
                raise BudgetError(f"{key.replace('_', ' ')} {value!r}: give a number, or off") from None
        budget.from_file = budget.from_file - {key}
    if fail_on_finding:
        values = finding_values(fail_on_finding)
        if [v.lower() for v in values] == [OFF]:
            budget.fail_on_finding = None
            turned_off.add("fail_on_finding")
        else:
            budget.fail_on_finding = values
        budget.from_file = budget.from_file - {"fail_on_finding"}
    budget.turned_off = frozenset(turned_off)
    if baseline is not None:
        budget.baseline, budget.base_dir = baseline, None
    budget.history = history
    if runs:
        budget.runs = [r.strip() for r in runs.split(",") if r.strip()]
    return budget


@dataclass(frozen=True)
class Outcome:
    """One check of one run against one budget."""

    run: str  # the run checked
    budget: str  # the budget's key (max_step_ms, max_input_percent, max_regression, fail_on_finding)
    status: str  # OVER, WITHIN or NOT_CHECKED
    subject: str  # what was checked: the run's name, or "RUN against BASELINE"
    detail: str  # the figures and the limit, or why the check could not be made
    finding: str = ""  # fail_on_finding: the id of the finding refused

    @property
    def message(self) -> str:
        return f"{self.subject}: {self.detail}"


@dataclass
class CheckResult:
    checked: list[str]  # run names
    outcomes: list[Outcome] = field(default_factory=list)  # in the order the checks were made
    findings: dict[str, list[FindingItem]] = field(default_factory=dict)  # each checked run's findings

    def _with(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def violations(self) -> list[Outcome]:
        return self._with(OVER)

    @property
    def passed(self) -> list[Outcome]:
        return self._with(WITHIN)

    @property
    def unchecked(self) -> list[Outcome]:
        return self._with(NOT_CHECKED)

    @property
    def exit_code(self) -> int:
        return EXIT_BUDGET_EXCEEDED if self.violations else 0

    def headline(self) -> str:
        budgets = len(self.violations) + len(self.passed)
        head = (f"{len(self.checked)} run{'s' if len(self.checked) != 1 else ''}, "
                f"{budgets} check{'s' if budgets != 1 else ''}: ")
        return head + (f"{len(self.violations)} over budget" if self.violations else "all within budget")

    def report(self) -> str:
        lines = [f"reportgen check: {self.headline()}"]
        # One line per outcome, whatever the run names hold (the annotations escape them their own way).
        lines += [f"  {status}: {terminal_text(o.message)}"
                  for status in (OVER, WITHIN, NOT_CHECKED) for o in self._with(status)]
        return "\n".join(lines)


def _check_run(run: BuiltRun, budget: Budget, baseline: BuiltRun | None, result: CheckResult,
               history: History | None = None) -> None:
    overview = run.summary.overview
    step = overview.step_time_ms.average if overview and overview.steps and overview.step_time_ms else None
    name = run.name

    def record(key: str, status: str, detail: str) -> None:
        result.outcomes.append(Outcome(name, key, status, name, detail))

    if budget.max_step_ms is not None:
        if step is None:
            record("max_step_ms", NOT_CHECKED, "step time (the run has no steps)")
        elif step > budget.max_step_ms:
            record("max_step_ms", OVER, f"average step time {fmt_step_time(step, 2)} is over the "
                   f"{budget.max_step_ms:g} ms budget (max step ms)")
        else:
            record("max_step_ms", WITHIN, f"average step time {fmt_step_time(step, 2)} ≤ {budget.max_step_ms:g} ms")
    if budget.max_input_percent is not None:
        share = overview.input_percent if overview and overview.steps else None
        if share is None:
            record("max_input_percent", NOT_CHECKED, "input share (the run has no steps)")
        elif share > budget.max_input_percent:
            record("max_input_percent", OVER, f"{fmt_value(share, 'percent')} of the step time waits for input, "
                   f"over the {budget.max_input_percent:g}% budget (max input percent; XProf: "
                   f"{overview.input_bound} input-bound)")
        else:
            record("max_input_percent", WITHIN,
                   f"input {fmt_value(share, 'percent')} ≤ {budget.max_input_percent:g}%")
    if budget.max_regression is not None and history is not None:
        _check_history_regression(run, history, budget.max_regression, result)
    elif budget.max_regression is not None and baseline is not None:
        _check_regression(run, baseline, budget.max_regression, result)
    if budget.fail_on_finding:
        _check_findings(run, budget, result)


def _check_findings(run: BuiltRun, budget: Budget, result: CheckResult) -> None:
    """One breach per finding the budget refuses; else one check within budget."""
    findings = findings_of(run)
    wanted = ", ".join(budget.fail_on_finding or [])
    if findings is None:
        result.outcomes.append(Outcome(run.name, "fail_on_finding", NOT_CHECKED, run.name,
                                       "findings (a run of an older profiler's files has none)"))
        return
    refused = [(f, budget.refused(f)) for f in findings]
    refused = [(f, value) for f, value in refused if value is not None]
    for f, value in refused:
        result.outcomes.append(Outcome(run.name, "fail_on_finding", OVER, run.name,
                                       f"finding {f.id} ({f.severity}): {f.title} (fail on finding {value})",
                                       finding=f.id))
    if not refused:
        result.outcomes.append(Outcome(run.name, "fail_on_finding", WITHIN, run.name,
                                       f"no finding matches {wanted} ({len(findings)} finding"
                                       f"{'s' if len(findings) != 1 else ''} in all)"))


def _check_regression(run: BuiltRun, baseline: BuiltRun, limit: Regression, result: CheckResult) -> None:
    comparison = compare_runs(baseline, run)
    change = comparison.step_time
    subject = f"{run.name} against {baseline.name}"

    def record(status: str, detail: str) -> None:
        result.outcomes.append(Outcome(run.name, "max_regression", status, subject, detail))

    if change.delta is None:
        record(NOT_CHECKED, "regression (a run has no steps)")
        return
    amount = change.delta_percent if limit.unit == "percent" else change.delta
    if amount is None:
        record(NOT_CHECKED, "regression (the baseline step time is 0)")
        return
    test = comparison.test.result
    noise = (f"; {'beyond' if test.significant else 'within'} the runs' noise ({fmt_p_value(test.p_value)})"
             if test is not None else "")
    like = comparison.typical_step_ms  # one unit for both runs
    what = (f"step time {fmt_step_time(change.baseline, 2, like)} → {fmt_step_time(change.candidate, 2, like)} "
            f"({fmt_step_delta(change.delta, 2, like)}, {fmt_change_pct(change.delta_percent)})")
    if amount > limit.limit:
        record(OVER, f"{what}, over the {limit} regression budget{noise}")
    else:
        record(WITHIN, f"{what} ≤ {limit} regression{noise}")


def _check_history_regression(run: BuiltRun, history: History, limit: Regression, result: CheckResult) -> None:
    """The run's average step against the median of its history's recent comparable runs: over the budget when
    the increase is over the limit, with Welch's verdict on whether it stands out of the runs' noise (as
    `_check_regression` gives it against one baseline)."""
    from reportgen.compare.trend import place

    subject = f"{run.name} against its history"

    def record(status: str, detail: str) -> None:
        result.outcomes.append(Outcome(run.name, "max_regression", status, subject, detail))

    placement = place(run, history)
    if placement is None:
        record(NOT_CHECKED, "regression (the run, or every comparable run of the history, has no steps)")
        return
    amount = placement.delta_percent if limit.unit == "percent" else placement.delta_ms
    if amount is None:
        record(NOT_CHECKED, "regression (the history's median step time is 0)")
        return
    like = placement.median_ms
    what = (f"step time {fmt_step_time(placement.candidate.step_ms, 2, like)} against the median "
            f"{fmt_step_time(placement.median_ms, 2, like)} of the last {len(placement.recent)} comparable runs "
            f"({fmt_step_delta(placement.delta_ms, 2, like)}, {fmt_change_pct(placement.delta_percent)}; slower than "
            f"{placement.slower_than} of them)")
    test = placement.test
    noise = (f"; {'beyond' if test.significant else 'within'} the runs' noise ({fmt_p_value(test.p_value)})"
             if test is not None else "")
    if amount > limit.limit:
        record(OVER, f"{what}, over the {limit} regression budget{noise}")
    else:
        record(WITHIN, f"{what} ≤ {limit} regression{noise}")


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


def check_site(site: BuiltSite, budget: Budget, baseline: BuiltRun | None = None,
               history: History | None = None) -> CheckResult:
    """Check every run of `site` (or the budget's runs), the baseline itself excepted; with a `history`, the
    regression budget is judged against it."""
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
        _check_run(run, budget, baseline, result, history)
        result.findings[run.name] = findings_of(run) or []
    return result


__all__ = ["BUDGET_KEYS", "EXIT_BUDGET_EXCEEDED", "NOT_CHECKED", "OFF", "OVER", "WITHIN", "Budget", "BudgetError",
           "CheckResult", "FINDING_SEVERITIES", "Outcome", "Regression", "budget_from_options", "check_site",
           "finding_values", "load_budget", "resolve_baseline"]
