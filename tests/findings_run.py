"""A run's findings from captures built in code, through the build's own stages: each host file decoded and
run through every section's host stage (`process_host`), then the run combined (`combine_run`), without
writing pages."""

from __future__ import annotations

from pathlib import Path

from reportgen.core.findings.model import Finding
from reportgen.loaders.logdir import discover
from reportgen.pipeline.build import combine_run
from reportgen.pipeline.host_stage import HostTask, process_host
from reportgen.sections.base import RunContext
from tests.xspace import Space


def run_findings(tmp: Path, hosts: dict[str, Space], run: str = "run") -> tuple[list[Finding], RunContext]:
    """(the run's findings, most costly first; the combined run) of these hosts' captures."""
    folder = tmp / "logs" / "plugins" / "profile" / run
    for host, space in hosts.items():
        space.capture(host, sort_lines=True)  # saved captures hold each line's events in time order
        space.write(folder, host)
    (source,) = discover(str(tmp / "logs"))
    outcomes = []
    for index, host in enumerate(source.hosts):
        outcome = process_host(HostTask(index, run, host), str(tmp / "out" / str(index)))
        assert outcome.error is None, outcome.error
        outcomes.append(outcome)
    ctx = combine_run(run, outcomes)
    return ctx.sections["findings"].findings, ctx


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    """The first finding of each id."""
    out: dict[str, Finding] = {}
    for finding in findings:
        out.setdefault(finding.id, finding)
    return out


def evidence(finding: Finding, label_start: str):
    """The first evidence item whose label starts with `label_start`."""
    return next(e for e in finding.evidence if e.label.startswith(label_start))
