"""Findings: what is wrong with the run, what it costs, the evidence and what to do.

Per host, the few facts no tool computes (`core.findings.facts`); per run, the
rules (`core.findings.registry`) over every other section's combined data,
which is why this section comes last in the registry. The findings are shown
at the top of the run's page (templates/findings.html), written to
`data/findings/findings.csv` and to the run's `findings` block of
summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reportgen.core.findings.facts import HostFacts, host_facts
from reportgen.core.findings.inputs import RunInputs
from reportgen.core.findings.model import SEVERITIES, Finding
from reportgen.core.findings.registry import evaluate
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.summary_blocks import FindingItem, FindingsBlock

CSV_PATH = "data/findings/findings.csv"
CSV_COLUMNS = {"id": "Id", "severity": "Severity", "title": "Finding", "ms_per_step": "Time per step (ms)",
               "percent_of_step": "Share of step time (%)", "percent_of_device_time": "Share of device time (%)",
               "bytes": "Memory (bytes)", "estimate": "How the cost was estimated", "action": "What to do"}
# Slugs of sections that feed the findings but have no page of their own.
_NOT_PAGES = {"inventory", "findings", "step_ledger"}


@dataclass
class FindingsData:
    findings: list[Finding]  # most costly first


def run_inputs(run: RunContext, facts: dict[str, HostFacts]) -> RunInputs:
    """What the rules read, from the sections combined before this one."""
    data = run.sections
    overview = (data.get("overview") or {}).get("views", {})
    views = list(overview.values())
    tf_stats = (data.get("tf_stats") or {}).get("views", {})
    return RunInputs(
        run=run.name,
        hosts=run.host_names,
        pages={slug for slug, value in data.items() if value is not None and slug not in _NOT_PAGES},
        overview=views[0] if views else None,
        host_views={label: view for label, view in list(overview.items())[1:]} if len(views) > 1 else {},
        input_pipeline=data.get("input_pipeline"),
        tf_stats=next(iter(tf_stats.values()), None),
        kernel_stats=data.get("kernel_stats"),
        op_profile=data.get("op_profile"),
        hlo_stats=data.get("hlo_stats"),
        memory_profile=(data.get("memory_profile") or {}).get("hosts", {}),
        memory_viewer=data.get("memory_viewer"),
        facts={h: facts[h] for h in run.host_names if h in facts},
        ledger=data.get("step_ledger"),
    )


def findings_summary(findings: list[Finding]) -> FindingsBlock:
    """The run's `findings` block of summary.json: counts by severity and every finding, most costly first."""
    return FindingsBlock(
        counts={s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        # Each as the finding writes itself (`Finding.as_dict`, its keys stable), read into the block's type.
        items=tuple(FindingItem.from_json(f.as_dict()) for f in findings),
    )


class FindingsSection(Section):
    slug = "findings"
    # 2: each host's events fingerprinted (capture.duplicate_hosts).
    part_version = 2
    title = "Findings"
    listed = False

    def host_part(self, host: HostContext) -> HostFacts:
        modules = list(host.hlo_modules.values())
        return host_facts(host.host, host.events, host.op_stats.step_db, [m.name for m in modules], modules)

    def combine(self, run: RunContext, parts: dict[str, HostFacts]) -> FindingsData:
        return FindingsData(findings=evaluate(run_inputs(run, parts)))

    def summary(self, data: FindingsData) -> FindingsBlock:
        return findings_summary(data.findings)

    def render(self, data: FindingsData, page) -> None:
        rows = [{k: getattr(f, k) for k in CSV_COLUMNS} for f in data.findings]
        page.write_csv(CSV_PATH, pd.DataFrame(rows, columns=list(CSV_COLUMNS)).rename(columns=CSV_COLUMNS))


__all__ = ["CSV_PATH", "FindingsData", "FindingsSection", "findings_summary", "run_inputs"]
