"""The comparison of two built runs, as plain data (no formatting, no HTML).

Every figure is one run's figure from its summary.json block or its CSV
tables, and every change is candidate − baseline of those figures, so the
comparison page, the Markdown summary and the budget check all agree with
the runs' own pages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from reportgen.compare.sources import BuiltRun
from reportgen.compare.welch import WelchResult, welch_t_test
from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.summary_blocks import Block, FindingItem, InputBottleneck, Overview, finite

TF_STATS_CSV = "tf_stats/framework_op_stats.csv"
KERNEL_STATS_CSV = "kernel_stats/kernel_stats.csv"
TF_STATS_ROWS_PER_SIDE = 500  # the TF stats table keeps the top 500 ops per side, as XProf
INPUT_STAGES = {
    "demanded_file_read": "Demanded file read",
    "advanced_file_read": "Advanced file read",
    "preprocessing": "Preprocessing",
    "enqueue": "Enqueue",
    "unclassified": "Unclassified",
}


@dataclass(frozen=True)
class Change:
    """One figure of both runs. `unit` is ms, us, percent, bytes or count; for
    percent figures the change is in percentage points and has no relative change."""

    key: str
    label: str
    unit: str
    baseline: float | None
    candidate: float | None
    lower_is_better: bool | None = True  # None: neither direction is better

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline

    @property
    def delta_percent(self) -> float | None:
        if self.unit == "percent" or self.delta is None or not self.baseline:
            return None
        return 100.0 * self.delta / self.baseline

    @property
    def direction(self) -> str:
        """better, worse, same, or "" when there is no judging the change."""
        if self.delta is None or self.lower_is_better is None:
            return ""
        if self.delta == 0:
            return "same"
        return "better" if (self.delta < 0) == self.lower_is_better else "worse"

    def as_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "unit": self.unit, "baseline": self.baseline,
                "candidate": self.candidate, "delta": self.delta, "delta_percent": self.delta_percent,
                "direction": self.direction}


@dataclass
class StepTimeTest:
    """Whether the step-time change stands out from the runs' own step-to-step noise."""

    result: WelchResult | None
    reason: str = ""  # why there is no result

    @property
    def significant(self) -> bool | None:
        return None if self.result is None else self.result.significant

    def as_dict(self) -> dict:
        r = self.result
        if r is None:
            return {"test": "welch", "judged": False, "reason": self.reason}
        return {"test": "welch", "judged": True, "significant": r.significant, "t": r.t, "df": r.df,
                "p_value": r.p_value, "confidence": r.confidence, "ci_low_ms": r.ci_low, "ci_high_ms": r.ci_high,
                "steps_baseline": r.n_baseline, "steps_candidate": r.n_candidate}


@dataclass
class InputPipelineChange:
    baseline_bottleneck: InputBottleneck | None
    candidate_bottleneck: InputBottleneck | None
    stages: list[Change]
    baseline_stage: str | None  # the host input stage with the most time
    candidate_stage: str | None
    available: bool  # either run has an input pipeline block

    def as_dict(self) -> dict:
        return {"baseline_bottleneck": _json(self.baseline_bottleneck),
                "candidate_bottleneck": _json(self.candidate_bottleneck),
                "baseline_stage": self.baseline_stage, "candidate_stage": self.candidate_stage,
                "stages": [s.as_dict() for s in self.stages]}


@dataclass
class FindingsChange:
    """Findings of the candidate that the baseline did not have, and the baseline's that went away (by id)."""

    appeared: list[FindingItem]  # the candidate's findings
    gone: list[FindingItem]  # the baseline's
    available: bool  # both runs have a findings block (runs of older profilers' files have none)

    def as_dict(self) -> dict:
        return {"appeared": [f.to_json() for f in self.appeared], "gone": [f.to_json() for f in self.gone],
                "available": self.available}


def _json(block: Block | None) -> dict | None:
    return block.to_json() if block is not None else None


def findings_of(run: BuiltRun) -> list[FindingItem] | None:
    """The run's findings, most costly first; None when its summary block has none (older captures)."""
    block = run.summary.findings
    return list(block.items) if block is not None else None


def findings_change(baseline: BuiltRun, candidate: BuiltRun) -> FindingsChange:
    a, b = findings_of(baseline), findings_of(candidate)
    if a is None or b is None:
        return FindingsChange([], [], False)
    ids_a, ids_b = {f.id for f in a}, {f.id for f in b}
    return FindingsChange([f for f in b if f.id not in ids_a], [f for f in a if f.id not in ids_b], True)


@dataclass
class Comparison:
    baseline: BuiltRun
    candidate: BuiltRun
    step_time: Change
    headline: list[Change]
    classification: tuple[str | None, str | None]  # XProf's input-bound word of each run
    test: StepTimeTest
    breakdown: list[Change]
    memory: list[Change]
    op_totals: list[Change]
    ops: pd.DataFrame  # one row per framework op of either run (see op_changes)
    ops_truncated: bool
    kernel_totals: list[Change]
    kernels: pd.DataFrame | None  # None when neither run has GPU kernels
    input_pipeline: InputPipelineChange
    notes: list[str] = field(default_factory=list)
    findings: FindingsChange = field(default_factory=lambda: FindingsChange([], [], False))

    @property
    def typical_step_ms(self) -> float:
        """The longer of the two runs' average steps (0 without steps): the per-step figures of both read in
        its unit (`step_time_unit`), µs only when both runs' steps are under a millisecond."""
        return max((abs(v) for v in (self.step_time.baseline, self.step_time.candidate) if v is not None),
                   default=0.0)

    @property
    def speedup(self) -> float | None:
        """Baseline step time over candidate step time (above 1: the candidate is faster)."""
        b, c = self.step_time.baseline, self.step_time.candidate
        return b / c if b and c else None

    @property
    def slowdown(self) -> float | None:
        """Candidate step time over baseline step time (above 1: the candidate is slower)."""
        b, c = self.step_time.baseline, self.step_time.candidate
        return c / b if b and c else None

    def as_dict(self, top: int | None = None) -> dict:
        """Everything as JSON-ready data; `top` keeps that many op/kernel changes per side."""

        def rows(frame: pd.DataFrame | None) -> list[dict] | None:
            if frame is None:
                return None
            frame = frame if top is None else frame.groupby("side", sort=False).head(top) \
                if "side" in frame else frame.head(top)
            return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]

        return {
            "baseline": self.baseline.name,
            "candidate": self.candidate.name,
            "step_time_ms": self.step_time.as_dict(),
            "speedup": self.speedup,
            "step_time_test": self.test.as_dict(),
            "input_bound": {"baseline": self.classification[0], "candidate": self.classification[1]},
            "headline": [c.as_dict() for c in self.headline],
            "breakdown_ms": [c.as_dict() for c in self.breakdown],
            "memory": [c.as_dict() for c in self.memory],
            "tf_stats": {"totals": [c.as_dict() for c in self.op_totals], "ops": rows(self.ops),
                         "truncated": self.ops_truncated},
            "kernel_stats": None if self.kernels is None else {
                "totals": [c.as_dict() for c in self.kernel_totals], "kernels": rows(self.kernels)},
            "input_pipeline": self.input_pipeline.as_dict(),
            "findings": self.findings.as_dict(),
            "notes": self.notes,
        }


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _idle_percent(run: BuiltRun, side: str) -> float | None:
    """The IDLE row's share of the side's time in the run's TF stats table."""
    table = run.table(TF_STATS_CSV)
    if table is None:
        return None
    rows = table[(table["Host/device"] == side) & (table["Operation Type"] == "IDLE")]
    column = f"Total self-time on {side} (%)"
    return float(rows[column].sum()) if len(rows) else None


def step_time_test(baseline: BuiltRun, candidate: BuiltRun) -> StepTimeTest:
    a, b = baseline.step_times_ms(), candidate.step_times_ms()
    if len(a) < 2 or len(b) < 2:
        return StepTimeTest(None, "each run needs at least two steps")
    result = welch_t_test(a, b)
    if result is None:
        return StepTimeTest(None, "the step times do not vary at all")
    return StepTimeTest(result)


def op_changes(baseline: pd.DataFrame | None, candidate: pd.DataFrame | None) -> pd.DataFrame:
    """Framework ops of both TF stats tables (IDLE left out) by (side, type, name): self
    time and occurrences of each run, the change, and whether the op was added or removed.
    Sorted device first, then host, each by the size of the change."""

    def prepared(table: pd.DataFrame | None) -> pd.DataFrame:
        if table is None or table.empty:
            return pd.DataFrame(columns=["side", "type", "name", "self_us", "occurrences"])
        ops = table[table["Operation Type"] != "IDLE"]
        ops = ops.rename(columns={"Host/device": "side", "Operation Type": "type", "Operation Name": "name",
                                  "Total self-time (us)": "self_us", "#Occurrences": "occurrences"})
        ops = ops.astype({"type": str, "name": str})
        return ops.groupby(["side", "type", "name"], as_index=False, sort=False)[["self_us", "occurrences"]].sum()

    merged = _merge(prepared(baseline), prepared(candidate), ["side", "type", "name"], "self_us")
    merged["side_order"] = (merged["side"] != "Device").astype(int)
    merged = merged.sort_values(["side_order", "abs_delta", "name"], ascending=[True, False, True], kind="stable")
    return merged.drop(columns=["side_order", "abs_delta"]).reset_index(drop=True)


def kernel_changes(baseline: pd.DataFrame | None, candidate: pd.DataFrame | None) -> pd.DataFrame | None:
    """GPU kernels of both kernel-stats tables by (kernel, op): total duration and
    launches of each run, the change, added/removed. None when neither run has kernels."""
    if baseline is None and candidate is None:
        return None

    def prepared(table: pd.DataFrame | None) -> pd.DataFrame:
        if table is None or table.empty:
            return pd.DataFrame(columns=["kernel", "op", "total_us", "occurrences"])
        frame = table.rename(columns={"Kernel Name": "kernel", "Op Name": "op", "Total Duration (μs)": "total_us",
                                      "Occurrences": "occurrences"}).astype({"kernel": str, "op": str})
        return frame.groupby(["kernel", "op"], as_index=False, sort=False)[["total_us", "occurrences"]].sum()

    merged = _merge(prepared(baseline), prepared(candidate), ["kernel", "op"], "total_us")
    merged = merged.sort_values(["abs_delta", "kernel"], ascending=[False, True], kind="stable")
    return merged.drop(columns=["abs_delta"]).reset_index(drop=True)


def _merge(base: pd.DataFrame, cand: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    merged = base.merge(cand, on=keys, how="outer", suffixes=("_baseline", "_candidate"), indicator=True, sort=False)
    status = merged.pop("_merge").astype(str).map({"left_only": "removed", "right_only": "added", "both": ""})
    for column in (f"{value}_baseline", f"{value}_candidate", "occurrences_baseline", "occurrences_candidate"):
        merged[column] = pd.to_numeric(merged[column], errors="coerce").fillna(0.0).astype(float)
    delta = merged[f"{value}_candidate"] - merged[f"{value}_baseline"]
    base_values = merged[f"{value}_baseline"]
    merged["delta_us"] = delta
    merged["delta_percent"] = (100.0 * delta / base_values.where(base_values > 0)).astype(float)
    merged["status"] = status.to_numpy()
    merged["abs_delta"] = delta.abs()
    return merged


def _totals(baseline: Block | None, candidate: Block | None, fields: list[tuple[str, str, str]]) -> list[Change]:
    return [Change(key, label, unit, finite(getattr(baseline, key, None)), finite(getattr(candidate, key, None)))
            for key, label, unit in fields]


def _peaks(run: BuiltRun) -> dict[str, float | None]:
    memory = run.summary.memory
    return {key: finite(p.peak_bytes) for key, p in ((memory.profiles if memory else None) or {}).items()}


def _memory(baseline: BuiltRun, candidate: BuiltRun) -> list[Change]:
    peaks_a, peaks_b = _peaks(baseline), _peaks(candidate)
    keys = list(peaks_a) + [k for k in peaks_b if k not in peaks_a]
    return [Change(f"memory/{key}", f"Peak memory · {key}", "bytes", peaks_a.get(key), peaks_b.get(key))
            for key in keys]


def _largest_stage(host_ms: dict[str, float | None]) -> str | None:
    stages = {k: finite(v) or 0.0 for k, v in host_ms.items() if k in INPUT_STAGES}
    if not stages or max(stages.values()) <= 0:
        return None
    return INPUT_STAGES[max(stages, key=lambda k: stages[k])]


def _input_pipeline(baseline: BuiltRun, candidate: BuiltRun) -> InputPipelineChange:
    a, b = baseline.summary.input_pipeline, candidate.summary.input_pipeline
    host_a, host_b = (a.host_ms if a else {}), (b.host_ms if b else {})
    stages = [Change(f"input/{key}", label, "ms", finite(host_a.get(key)), finite(host_b.get(key)))
              for key, label in INPUT_STAGES.items() if finite(host_a.get(key)) or finite(host_b.get(key))]
    return InputPipelineChange(a.bottleneck if a else None, b.bottleneck if b else None, stages,
                               _largest_stage(host_a), _largest_stage(host_b), bool(a or b))


def _step_figure(overview: Overview | None, figure: str) -> float | None:
    """A figure of the overview's steps (`input_percent`, or one of `step_time_ms`); None for a run without
    steps (whose block holds zeros there)."""
    if overview is None or not finite(overview.steps):
        return None
    if figure == "input_percent":
        return finite(overview.input_percent)
    return finite(getattr(overview.step_time_ms, figure, None))


def compare_runs(baseline: BuiltRun, candidate: BuiltRun) -> Comparison:
    over_a, over_b = baseline.summary.overview, candidate.summary.overview
    steps_a, steps_b = (finite(o.steps) if o else None for o in (over_a, over_b))
    step_time = Change("step_time", "Step time (average)", "ms", _step_figure(over_a, "average"),
                       _step_figure(over_b, "average"))
    headline = [
        step_time,
        Change("step_time_sd", "Step time (standard deviation)", "ms", _step_figure(over_a, "standard_deviation"),
               _step_figure(over_b, "standard_deviation"), None),
        Change("steps", "Steps", "count", steps_a, steps_b, None),
        Change("input_percent", "Input (share of step time)", "percent", _step_figure(over_a, "input_percent"),
               _step_figure(over_b, "input_percent")),
        Change("host_idle_percent", "Host idle (TF stats IDLE)", "percent", _idle_percent(baseline, "Host"),
               _idle_percent(candidate, "Host"), None),
    ]
    device_idle = Change("device_idle_percent", "Device idle (TF stats IDLE)", "percent",
                         _idle_percent(baseline, "Device"), _idle_percent(candidate, "Device"))
    if device_idle.baseline is not None or device_idle.candidate is not None:
        headline.append(device_idle)
    memory = _memory(baseline, candidate)
    breakdown_a = (over_a.breakdown_ms if over_a else None) or {}
    breakdown_b = (over_b.breakdown_ms if over_b else None) or {}
    breakdown = [Change(f"breakdown/{key}", CATEGORY_LABELS[key], "ms", finite(breakdown_a.get(key)),
                        finite(breakdown_b.get(key))) for key in CATEGORY_KEYS
                 if finite(breakdown_a.get(key)) or finite(breakdown_b.get(key))]
    tf_a, tf_b = baseline.table(TF_STATS_CSV), candidate.table(TF_STATS_CSV)
    ops = op_changes(tf_a, tf_b)
    truncated = any(t is not None and (t["Host/device"] == side).sum() >= TF_STATS_ROWS_PER_SIDE
                    for t in (tf_a, tf_b) for side in ("Host", "Device"))
    op_totals = _totals(baseline.summary.tf_stats, candidate.summary.tf_stats,
                        [("device_self_us", "Device self time (all ops)", "us"),
                         ("host_self_us", "Host self time (all ops)", "us"), ("ops", "Ops", "count")])
    kernels = kernel_changes(baseline.table(KERNEL_STATS_CSV), candidate.table(KERNEL_STATS_CSV))
    kernel_totals = _totals(baseline.summary.kernel_stats, candidate.summary.kernel_stats,
                            [("total_us", "Total kernel time", "us"), ("kernels", "Kernel–op rows", "count"),
                             ("tensor_core_percent", "Time in TensorCore kernels", "percent")])
    notes = []
    if steps_a and steps_b and steps_a != steps_b:
        notes.append(f"The runs captured different numbers of steps ({steps_a:.0f} and {steps_b:.0f}): op and "
                     "kernel times are totals over each capture, so compare them with that in mind.")
    return Comparison(
        baseline=baseline, candidate=candidate, step_time=step_time, headline=headline,
        classification=(over_a.input_bound if over_a else None, over_b.input_bound if over_b else None),
        test=step_time_test(baseline, candidate), breakdown=breakdown, memory=memory, op_totals=op_totals,
        ops=ops, ops_truncated=truncated, kernel_totals=kernel_totals, kernels=kernels,
        input_pipeline=_input_pipeline(baseline, candidate), notes=notes,
        findings=findings_change(baseline, candidate),
    )


__all__ = ["Change", "Comparison", "FindingsChange", "InputPipelineChange", "StepTimeTest", "compare_runs",
           "findings_change", "findings_of", "kernel_changes", "op_changes"]
