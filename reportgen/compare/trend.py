"""A profile history: many built runs in capture order, their change points and what moved across them.

A history is read from built sites only (each run's summary.json block, and the TF stats, kernel stats and
tf.data tables of the few runs beside a change point), never from captures: a nightly job builds its new run
and the history never needs the old captures again. Memory grows with the runs (a few figures each), not with
their events.

Change points are found in the runs' average step times with `ruptures` (PELT over the change-in-mean cost:
its kernel search with the linear kernel).
The penalty is chosen from the series' own noise: σ is estimated from the median absolute difference between
neighbouring runs (a level shift moves one difference, not the median), and a change is accepted only where
it costs less than `PENALTY_FACTOR · σ² · ln n` (the BIC penalty of a change in mean with known variance,
doubled: a nightly history should not cry wolf). Each change found is then judged by Welch's t-test between
the runs of the segments on either side (the same test `compare` applies to two runs' steps) and kept only
when it is beyond their noise; its size is the difference of the two segments' means, with Welch's 95 %
confidence interval.
"""

from __future__ import annotations

import fnmatch
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from reportgen.compare.model import (
    INPUT_STAGES,
    KERNEL_STATS_CSV,
    TF_STATS_CSV,
    findings_of,
    kernel_changes,
    op_changes,
)
from reportgen.compare.sources import BuiltRun, BuiltSite
from reportgen.compare.welch import ALPHA, WelchResult, welch_t_test
from reportgen.core.steps.categories import CATEGORY_LABELS
from reportgen.summary_blocks import FindingItem, Overview, OverviewBlock, RunSummary, finite

PENALTY_FACTOR = 4.0  # × σ² ln n: twice the BIC penalty of a change in mean
MIN_SEGMENT = 3  # runs on each side of a change point: fewer cannot show a noise of their own
WINDOW = 3  # runs on each side whose op, kernel and tf.data tables are compared across a change
TOP_MOVERS = 5  # ops, kernels and tf.data iterators listed per change point
TF_DATA_CSV = "input_pipeline/tf_data_iterators.csv"
# TensorBoard names a profile run after its start: 2024_06_01_12_00_00 (also accepted: ISO 8601 forms).
_TIMESTAMP = re.compile(r"(\d{4})[_-](\d{2})[_-](\d{2})[_T-](\d{2})[_:-]?(\d{2})[_:-]?(\d{2})")


def run_time(run) -> datetime | None:
    """When a built run was captured: the timestamp its folder's (or its) name holds, else the profiler's own start
    time that the run's `inventory` block of summary.json records (sites built before it have none)."""
    named = capture_time(run.folder) or capture_time(run.name)
    if named is not None:
        return named
    inventory = run.summary.inventory
    start = finite(inventory.profile_start_ns) if inventory else None
    return datetime.fromtimestamp(start / 1e9, tz=timezone.utc) if start and start > 0 else None


def capture_time(name: str) -> datetime | None:
    """The capture time a run folder's name holds (UTC), or None."""
    match = _TIMESTAMP.search(name)
    if match is None:
        return None
    try:
        return datetime(*(int(g) for g in match.groups()), tzinfo=timezone.utc)
    except ValueError:
        return None


def _natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def ledger_causes(summary: RunSummary) -> dict[str, float] | None:
    """Milliseconds per step by cause from a run's `step_ledger` block, or None when the run has none.

    The block's `average_ms` (cause key → ms per step, adding up to the step time) names its causes by
    `labels`, in the order of `precedence`; a block without it has its `per_step` causes averaged here."""
    ledger = summary.step_ledger
    if ledger is None:
        return None

    def numeric(mapping: dict[str, float | None]) -> dict[str, float]:
        values = {k: finite(v) for k, v in mapping.items()}
        return {k: v for k, v in values.items() if v is not None}

    causes = numeric(ledger.average_ms)
    if not causes:
        steps = [s for s in (numeric(step.ms) for step in ledger.per_step) if s]
        if not steps:
            return None
        names = list(dict.fromkeys(k for s in steps for k in s))
        causes = {k: math.fsum(s.get(k, 0.0) for s in steps) / len(steps) for k in names}
    order = [k for k in ledger.precedence if k in causes]
    return {ledger.labels.get(k, k): causes[k] for k in [*order, *(k for k in causes if k not in order)]}


@dataclass
class TrendRun:
    """One run of a history: the figures of its summary.json block a trend shows, and where its page is."""

    run: BuiltRun
    time: datetime | None  # capture time, from the run folder's name
    index: int = 0  # position in the history
    comparable: bool = True
    not_comparable_because: str = ""

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def summary(self) -> RunSummary:
        return self.run.summary

    @property
    def overview(self) -> Overview:
        """The run's overview block (an empty one where it has none: no steps)."""
        return self.summary.overview or OverviewBlock()

    @property
    def steps(self) -> int:
        return int(finite(self.overview.steps) or 0)

    def step_figure(self, key: str) -> float | None:
        return finite(getattr(self.overview.step_time_ms, key, None)) if self.steps else None

    @property
    def step_ms(self) -> float | None:
        return self.step_figure("average")

    @property
    def input_percent(self) -> float | None:
        return finite(self.overview.input_percent) if self.steps else None

    @property
    def device_type(self) -> str:
        return self.overview.device_type

    @property
    def device_utilization_percent(self) -> float | None:
        """100 − XProf's device idle share, for runs with a device (a CPU-only run has none)."""
        if self.device_type.upper() in ("", "CPU") or not self.steps:
            return None
        idle = finite(self.overview.device_idle_percent)
        return None if idle is None else 100.0 - idle

    @property
    def memory_peak_bytes(self) -> float | None:
        memory = self.summary.memory
        peaks = [finite(p.peak_bytes) for p in ((memory.profiles if memory else None) or {}).values()]
        peaks = [p for p in peaks if p is not None]
        return max(peaks) if peaks else None

    @property
    def causes(self) -> tuple[str, dict[str, float]]:
        """("ledger" or "breakdown", cause label → ms per step): the step ledger's causes when the run has
        that block, else the overview's step-time breakdown by XProf's categories."""
        ledger = ledger_causes(self.summary)
        if ledger:
            return "ledger", ledger
        breakdown = self.overview.breakdown_ms or {}
        return "breakdown", {label: finite(breakdown.get(key)) or 0.0 for key, label in CATEGORY_LABELS.items()}

    @property
    def host_count(self) -> int:
        return int(finite(self.overview.host_count) or len(self.summary.hosts))

    @property
    def modules(self) -> frozenset[str]:
        graphs = self.summary.graph_viewer
        return frozenset(graphs.modules if graphs else ())

    @property
    def top_ops(self) -> frozenset[str]:
        tf_stats = self.summary.tf_stats
        return frozenset(op.name for op in (tf_stats.top_ops if tf_stats else ()))

    @property
    def findings(self) -> list[FindingItem] | None:
        return findings_of(self.run)

    def verdict(self) -> str:
        """The run's answer in one line, as its page leads with it."""
        if self.step_ms is None:
            return "no steps"
        parts = [f"{self.steps} steps"]
        bound = self.overview.input_bound
        if bound:
            parts.append(f"input-bound: {bound}")
        bottleneck = self.overview.bottleneck
        if bottleneck and bottleneck.label:
            parts.append(f"bottleneck: {bottleneck.label}")
        findings = self.findings or []
        if findings:
            parts.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}, first: {findings[0].title}")
        return "; ".join(parts)


@dataclass
class Mover:
    """An op, kernel or tf.data iterator whose time per step moved across a change point."""

    kind: str  # op, kernel, tf.data
    name: str
    detail: str  # op type, kernel's op, iterator's dataset op
    before_ms: float  # per step, averaged over the window before
    after_ms: float

    @property
    def delta_ms(self) -> float:
        return self.after_ms - self.before_ms

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "detail": self.detail, "before_ms": self.before_ms,
                "after_ms": self.after_ms, "delta_ms": self.delta_ms}


@dataclass
class ChangePoint:
    """A change of the average step time between two neighbouring runs of the history."""

    before: TrendRun  # the last run of the segment before
    after: TrendRun  # the first run of the segment after
    segment_before: list[TrendRun]
    segment_after: list[TrendRun]
    test: WelchResult
    movers: list[Mover] = field(default_factory=list)
    findings_appeared: list[FindingItem] = field(default_factory=list)
    findings_gone: list[FindingItem] = field(default_factory=list)

    @property
    def size_ms(self) -> float:
        return self.test.difference

    @property
    def size_percent(self) -> float | None:
        base = self.test.mean_baseline
        return 100.0 * self.size_ms / base if base else None

    def as_dict(self) -> dict:
        t = self.test
        return {"before": self.before.name, "after": self.after.name, "size_ms": t.difference,
                "size_percent": self.size_percent, "ci_low_ms": t.ci_low, "ci_high_ms": t.ci_high,
                "confidence": t.confidence, "p_value": t.p_value, "mean_before_ms": t.mean_baseline,
                "mean_after_ms": t.mean_candidate, "runs_before": t.n_baseline, "runs_after": t.n_candidate,
                "movers": [m.as_dict() for m in self.movers],
                "findings_appeared": [f.id for f in self.findings_appeared],
                "findings_gone": [f.id for f in self.findings_gone]}


@dataclass
class FindingEvent:
    """Findings a run has that the comparable run before it had not, and those it no longer has."""

    run: TrendRun
    previous: TrendRun
    appeared: list[FindingItem]
    gone: list[FindingItem]


@dataclass
class History:
    runs: list[TrendRun]  # in capture order
    change_points: list[ChangePoint]
    noise_ms: float | None  # σ of one run's average step time, as estimated for the penalty
    penalty: float | None
    finding_events: list[FindingEvent]
    pattern: str | None = None

    @property
    def comparable(self) -> list[TrendRun]:
        return [r for r in self.runs if r.comparable]

    @property
    def not_comparable(self) -> list[TrendRun]:
        return [r for r in self.runs if not r.comparable]

    def as_dict(self) -> dict:
        return {
            "series": self.pattern,
            "runs": [{"name": r.name, "index": r.index, "site": r.run.site.location, "folder": r.run.folder,
                      "captured_at": r.time.isoformat() if r.time else None, "comparable": r.comparable,
                      "not_comparable_because": r.not_comparable_because or None, "steps": r.steps,
                      "step_time_ms": {k: r.step_figure(k) for k in
                                       ("average", "minimum", "maximum", "standard_deviation")},
                      "input_percent": r.input_percent, "device_utilization_percent": r.device_utilization_percent,
                      "memory_peak_bytes": r.memory_peak_bytes, "causes_from": r.causes[0],
                      "causes_ms": r.causes[1], "findings": [f.id for f in r.findings or []]}
                     for r in self.runs],
            "noise_ms": self.noise_ms,
            "penalty": self.penalty,
            "change_points": [c.as_dict() for c in self.change_points],
            "findings_changes": [{"run": e.run.name, "previous": e.previous.name,
                                  "appeared": [f.id for f in e.appeared], "gone": [f.id for f in e.gone]}
                                 for e in self.finding_events],
        }


def series_runs(sites: list[BuiltSite], pattern: str | None = None) -> list[TrendRun]:
    """Every run of `sites` (those whose name matches the glob `pattern`), in capture order (`run_time`: the run
    folder's timestamp name, else the profiler's start time), then runs with neither in natural name order after
    them, each input's order kept for ties."""
    runs = []
    for site in sites:
        for name in site.run_names:
            if pattern is None or fnmatch.fnmatchcase(name, pattern):
                run = site.run(name)
                runs.append(TrendRun(run, run_time(run)))
    order = sorted(range(len(runs)), key=lambda i: (runs[i].time is None, runs[i].time or datetime.min.replace(
        tzinfo=timezone.utc), _natural_key(runs[i].name) if runs[i].time is None else [], i))
    ordered = [runs[i] for i in order]
    for index, run in enumerate(ordered):
        run.index = index
    return ordered


def flag_not_comparable(runs: list[TrendRun]) -> None:
    """Mark the runs whose program differs from the series' own: another host count or device, other HLO
    modules, or top ops mostly not the series' (fewer than half of them among the ops most runs lead with).
    The series' program is what most runs have, so one odd run never makes the rest look odd."""
    if not runs:
        return
    shape = Counter((r.host_count, r.device_type, r.modules) for r in runs)
    (hosts, device, modules), _ = shape.most_common(1)[0]
    usual = [r for r in runs if (r.host_count, r.device_type, r.modules)
             == (hosts, device, modules)]
    counts = Counter(op for r in usual for op in r.top_ops)
    common = {op for op, n in counts.items() if 2 * n >= len(usual)}
    for run in runs:
        reasons = []
        if run.host_count != hosts:
            reasons.append(f"{run.host_count} host{'s' if run.host_count != 1 else ''} where the series has {hosts}")
        if run.device_type != device:
            reasons.append(f"device {run.device_type or 'none'} where the series has "
                           f"{device or 'none'}")
        if run.modules != modules:
            added, missing = sorted(run.modules - modules), sorted(modules - run.modules)
            reasons.append("other HLO modules (" + "; ".join(
                part for part in (f"added {', '.join(added[:3])}" if added else "",
                                  f"missing {', '.join(missing[:3])}" if missing else "") if part) + ")")
        top = run.top_ops
        if common and top and 2 * len(top & common) < min(len(top), len(common)):
            reasons.append(f"only {len(top & common)} of its {len(top)} top ops are among the series' usual ones")
        if reasons:
            run.comparable, run.not_comparable_because = False, "; ".join(reasons)


def noise_sigma(values: list[float]) -> float:
    """σ of one value from the median absolute difference of neighbours (robust to level shifts:
    a change moves one difference). For Gaussian noise, |x_i − x_{i−1}| has median 0.6745·√2·σ."""
    if len(values) < 2:
        return 0.0
    diffs = np.abs(np.diff(np.asarray(values, dtype=float)))
    return float(np.median(diffs) / (0.6744897501960817 * math.sqrt(2.0)))


def change_indices(values: list[float], sigma: float, penalty_factor: float = PENALTY_FACTOR,
                   min_size: int = MIN_SEGMENT) -> tuple[list[int], float]:
    """Where the segments of `values` start (indices > 0), found by PELT, and the penalty used."""
    import ruptures  # imported here: only a history needs it

    n = len(values)
    if n < 2 * min_size:
        return [], 0.0
    scale = sigma if sigma > 0 else max(1e-9, 1e-6 * abs(statistics.fmean(values)))
    penalty = penalty_factor * scale * scale * math.log(n)
    signal = np.asarray(values, dtype=float).reshape(-1, 1)
    # PELT over the change-in-mean (L2) cost: ruptures' kernel change-point search with the linear kernel is
    # that search with that cost, in C (its Pelt(model="l2") gives the same segments in Python: 7 s for 1,000 runs).
    ends = ruptures.KernelCPD(kernel="linear", min_size=min_size, jump=1).fit(signal).predict(pen=penalty)
    return [int(e) for e in ends if e < n], penalty


def _scaled(run: TrendRun, relative: str, columns: list[str]) -> pd.DataFrame | None:
    """The run's table with `columns` per step (÷ the run's steps), or None."""
    table = run.run.table(relative)
    if table is None or table.empty or not run.steps:
        return None
    table = table.copy()
    for column in columns:
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").fillna(0.0) / run.steps
    return table


def _window_table(runs: list[TrendRun], relative: str, columns: list[str]) -> pd.DataFrame | None:
    """The runs' tables, per step and averaged over the runs (summed rows ÷ the number of runs)."""
    tables = [t for t in (_scaled(r, relative, columns) for r in runs) if t is not None]
    if not tables:
        return None
    table = pd.concat(tables, ignore_index=True)
    for column in columns:
        if column in table:
            table[column] = table[column] / len(tables)
    return table


def movers(before: list[TrendRun], after: list[TrendRun], top: int = TOP_MOVERS) -> list[Mover]:
    """The ops, kernels and tf.data iterators whose time per step moved most between the two windows."""
    out: list[Mover] = []
    ops = op_changes(_window_table(before, TF_STATS_CSV, ["Total self-time (us)", "#Occurrences"]),
                     _window_table(after, TF_STATS_CSV, ["Total self-time (us)", "#Occurrences"]))
    ops = ops.assign(abs_delta=ops["delta_us"].abs()).sort_values("abs_delta", ascending=False, kind="stable")
    out += [Mover("op", str(r["name"]), f"{r['side']} · {r['type']}", r["self_us_baseline"] / 1e3,
                  r["self_us_candidate"] / 1e3) for r in ops.head(top).to_dict("records") if r["delta_us"]]
    kernels = kernel_changes(_window_table(before, KERNEL_STATS_CSV, ["Total Duration (μs)", "Occurrences"]),
                             _window_table(after, KERNEL_STATS_CSV, ["Total Duration (μs)", "Occurrences"]))
    if kernels is not None:
        out += [Mover("kernel", str(r["kernel"]), str(r["op"]), r["total_us_baseline"] / 1e3,
                      r["total_us_candidate"] / 1e3) for r in kernels.head(top).to_dict("records") if r["delta_us"]]
    out += _tf_data_movers(before, after, top)
    return out


def _tf_data_movers(before: list[TrendRun], after: list[TrendRun], top: int) -> list[Mover]:
    column = "Self time, all executions (µs)"

    def per_iterator(runs: list[TrendRun]) -> dict[tuple[str, str], float]:
        table = _window_table(runs, TF_DATA_CSV, [column])
        if table is None or column not in table:
            return {}
        grouped = table.astype({"Iterator": str, "Dataset op": str}).groupby(["Iterator", "Dataset op"])[column].sum()
        return {key: float(v) for key, v in grouped.items()}

    a, b = per_iterator(before), per_iterator(after)
    rows = [Mover("tf.data", name, op, a.get((name, op), 0.0) / 1e3, b.get((name, op), 0.0) / 1e3)
            for name, op in dict.fromkeys([*a, *b])]
    # The host's input stages (summary.json's input pipeline block) say which kind of input work moved.
    stage_a, stage_b = _stages(before), _stages(after)
    rows += [Mover("tf.data", label, "host input stage", stage_a.get(key, 0.0), stage_b.get(key, 0.0))
             for key, label in INPUT_STAGES.items() if key in stage_a or key in stage_b]
    rows = [m for m in rows if m.delta_ms]
    return sorted(rows, key=lambda m: -abs(m.delta_ms))[:top]


def _stages(runs: list[TrendRun]) -> dict[str, float]:
    """Input-stage ms per step, averaged over the runs."""
    totals: dict[str, float] = {}
    counted = 0
    for run in runs:
        pipeline = run.summary.input_pipeline
        host_ms = pipeline.host_ms if pipeline else None
        if host_ms is None or not run.steps:
            continue
        counted += 1
        for key, value in host_ms.items():
            totals[key] = totals.get(key, 0.0) + (finite(value) or 0.0) / run.steps
    return {k: v / counted for k, v in totals.items()} if counted else {}


def _findings_between(before: list[TrendRun], after: list[TrendRun]) -> tuple[list[FindingItem], list[FindingItem]]:
    """Findings every run after has and no run before had, and the reverse (by id)."""

    def ids(runs: list[TrendRun]) -> list[set[str]]:
        return [{f.id for f in r.findings} for r in runs if r.findings is not None]

    a, b = ids(before), ids(after)
    if not a or not b:
        return [], []
    before_any, after_all = set().union(*a), set.intersection(*b)
    after_any, before_all = set().union(*b), set.intersection(*a)
    appeared = [f for f in after[0].findings or [] if f.id in after_all - before_any]
    gone = [f for f in before[-1].findings or [] if f.id in before_all - after_any]
    return appeared, gone


def finding_events(runs: list[TrendRun]) -> list[FindingEvent]:
    events = []
    previous = None
    for run in runs:
        if run.findings is None:
            continue
        if previous is not None:
            old, new = {f.id for f in previous.findings or []}, {f.id for f in run.findings}
            appeared = [f for f in run.findings if f.id not in old]
            gone = [f for f in previous.findings or [] if f.id not in new]
            if appeared or gone:
                events.append(FindingEvent(run, previous, appeared, gone))
        previous = run
    return events


def build_history(sites: list[BuiltSite], pattern: str | None = None,
                  penalty_factor: float = PENALTY_FACTOR) -> History:
    """The history of the runs of `sites` (matching `pattern`): ordered, flagged, its change points found."""
    runs = series_runs(sites, pattern)
    flag_not_comparable(runs)
    measured = [r for r in runs if r.comparable and r.step_ms is not None]
    values = [r.step_ms for r in measured]
    sigma = noise_sigma(values) if len(values) >= 2 else None
    starts, penalty = change_indices(values, sigma or 0.0, penalty_factor) if values else ([], 0.0)
    bounds = [0, *starts, len(measured)]
    points = []
    # Each change is judged against the segments on either side of it (as found, before dropping any).
    for k, start in enumerate(starts):
        left, right = measured[bounds[k]:start], measured[start:bounds[k + 2]]
        test = welch_t_test([r.step_ms for r in left], [r.step_ms for r in right])
        if test is None:  # no variation at all on either side: an exact step
            a, b = statistics.fmean(r.step_ms for r in left), statistics.fmean(r.step_ms for r in right)
            if a == b:
                continue
            test = WelchResult(len(left), len(right), a, b, b - a, math.inf, math.inf, 0.0, b - a, b - a,
                               1.0 - ALPHA)
        if not test.significant:
            continue
        window_before, window_after = left[-WINDOW:], right[:WINDOW]
        appeared, gone = _findings_between(window_before, window_after)
        points.append(ChangePoint(left[-1], right[0], left, right, test, movers(window_before, window_after),
                                  appeared, gone))
    return History(runs, points, sigma, penalty or None, finding_events([r for r in runs if r.comparable]), pattern)


@dataclass
class Placement:
    """A candidate run placed in a history: how it ranks among the recent runs, its change against their median."""

    candidate: TrendRun
    recent: list[TrendRun]  # the comparable runs it is judged against, oldest first
    median_ms: float
    slower_than: int  # recent runs with a shorter average step
    test: WelchResult | None  # candidate's steps against the recent runs' averages
    movers: list[Mover]

    @property
    def delta_ms(self) -> float:
        return (self.candidate.step_ms or 0.0) - self.median_ms

    @property
    def delta_percent(self) -> float | None:
        return 100.0 * self.delta_ms / self.median_ms if self.median_ms else None

    def as_dict(self) -> dict:
        t = self.test
        return {"candidate": self.candidate.name, "recent_runs": [r.name for r in self.recent],
                "median_ms": self.median_ms, "candidate_ms": self.candidate.step_ms, "delta_ms": self.delta_ms,
                "delta_percent": self.delta_percent, "slower_than": self.slower_than,
                "significant": None if t is None else t.significant, "p_value": None if t is None else t.p_value,
                "ci_low_ms": None if t is None else t.ci_low, "ci_high_ms": None if t is None else t.ci_high,
                "movers": [m.as_dict() for m in self.movers]}


RECENT_RUNS = 30


def place(candidate: BuiltRun, history: History, recent: int = RECENT_RUNS) -> Placement | None:
    """The candidate against the last `recent` comparable runs of `history` (itself left out when it is one of
    them). The noise-aware test is Welch's, as `check --baseline`'s, here between the candidate's steps and the
    recent runs' averages: the history's run-to-run spread is the noise a nightly change must stand out of.
    None when the candidate has no steps or the history no comparable run with steps."""
    run = TrendRun(candidate, run_time(candidate))
    if run.step_ms is None:
        return None
    same = (candidate.site.location, candidate.name)
    pool = [r for r in history.runs if r.comparable and r.step_ms is not None
            and (r.run.site.location, r.name) != same]
    pool = pool[-recent:]
    if not pool:
        return None
    averages = [r.step_ms for r in pool]
    median = statistics.median(averages)
    slower_than = sum(1 for v in averages if v < run.step_ms)
    steps = candidate.step_times_ms()
    test = welch_t_test(averages, steps) if len(steps) >= 2 and len(averages) >= 2 else None
    return Placement(run, pool, median, slower_than, test, movers(pool[-WINDOW:], [run], top=3))


__all__ = ["ChangePoint", "FindingEvent", "History", "Mover", "PENALTY_FACTOR", "Placement", "RECENT_RUNS",
           "TrendRun", "build_history", "capture_time", "change_indices", "flag_not_comparable", "ledger_causes",
           "movers", "noise_sigma", "place", "run_time", "series_runs"]
