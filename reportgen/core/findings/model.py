"""What a finding is: the problem, the time (or memory) at stake, the evidence, what to do, and where to look.

Every number a finding cites is an `Evidence` item that names where the site
shows the same number (`source`): a key of the run's summary.json block, a
cell of one of the run's CSV tables, or a window of the trace. The build
checks nothing here; the tests read those places back and compare
(tests/test_findings_site.py), so a finding cannot quote a number the pages
do not show.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

SEVERITIES = ("high", "medium", "low", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}

# The share of the step (or device) time at stake that makes a finding high, medium or low.
HIGH_PERCENT = 25.0
MEDIUM_PERCENT = 10.0
LOW_PERCENT = 3.0


def severity_for(percent: float | None) -> str:
    """Severity of a time share at stake (percent of the step time, or of the device time)."""
    if percent is None or not math.isfinite(percent):
        return "info"
    if percent >= HIGH_PERCENT:
        return "high"
    if percent >= MEDIUM_PERCENT:
        return "medium"
    if percent >= LOW_PERCENT:
        return "low"
    return "info"


def ms_text(ms: float) -> str:
    """Milliseconds for a title: one decimal, or three significant digits below 10 ms."""
    return f"{ms:,.1f} ms" if abs(ms) >= 10 else f"{ms:.3g} ms"


def step_label(name: str) -> str:
    """A step as the pages name it: its marker's name (`train 7`), or `step 7` for a bare number."""
    return f"step {name}" if name.isdigit() else name


def summary_source(*path: str) -> dict:
    """The number is the run's summary.json block at this key path, e.g. ("overview", "input_percent")."""
    return {"summary": list(path)}


def csv_source(path: str, where: dict, column: str, aggregate: str = "") -> dict:
    """The number is the `column` cell of the row of the run's CSV `path` whose cells equal `where` (numbers
    compare as numbers); with `aggregate` ("sum" or "mean"), of every such row."""
    source = {"csv": path, "where": {k: str(v) for k, v in where.items()}, "column": column}
    if aggregate:
        source["aggregate"] = aggregate
    return source


@dataclass
class Evidence:
    """One number behind a finding, with the place the site shows it."""

    label: str
    value: float | int | str
    unit: str = ""  # "ms", "us", "percent", "bytes", "count" or "" (text)
    # Where the site shows it: summary_source(), csv_source(), {"page_text": page}, {"sum": [sources]}, or the
    # trace: {"trace": {"host", "plane", "t0_ps", "t1_ps" or "windows", "what"}} for a window (an event, a gap,
    # a busy share) or {"trace_total": {"host", "kind", "field", "windows"}} for events counted on the timeline.
    # None: text, or a number derived from the others.
    source: dict | None = None
    href: str = ""  # the page (and row) that shows it, relative to the run's folder


@dataclass
class Link:
    label: str
    href: str  # relative to the run's folder: "input_pipeline.html#tf-data", "trace.html#host=…&t0=…&t1=…"


@dataclass
class Finding:
    """One thing that is wrong (or that limits what the report can say), most costly first.

    `ms_per_step` and `percent_of_step` are the step time at stake; runs without
    steps give the share of device time in `percent_of_device_time` instead.
    `bytes` is memory at stake. `estimate` says in one sentence how the time at
    stake was estimated."""

    id: str
    severity: str
    title: str
    estimate: str
    action: str
    evidence: list[Evidence] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    ms_per_step: float | None = None
    percent_of_step: float | None = None
    percent_of_device_time: float | None = None
    bytes: int | None = None
    # The step ledger's causes (core.steps.ledger.LEDGER_KEYS) whose time is the time at stake: no two findings of a
    # run claim the same cause, so their shares of the step never add up past 100%.
    claims: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"{self.id}: unknown severity {self.severity!r}")

    @property
    def cost(self) -> float:
        """What orders findings of one severity: the share of time at stake, else nothing."""
        for value in (self.percent_of_step, self.percent_of_device_time):
            if value is not None and math.isfinite(value):
                return value
        return 0.0

    def as_dict(self) -> dict:
        """The finding as summary.json holds it (keys stable)."""
        return _finite(asdict(self))


def ordered(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then most costly, then by id (a stable order for equal findings)."""
    return sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], -f.cost, f.id))


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


__all__ = ["Evidence", "Finding", "Link", "SEVERITIES", "csv_source", "ms_text", "ordered", "severity_for",
           "step_label", "summary_source"]
