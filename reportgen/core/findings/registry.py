"""Every rule, the ids it may emit, and the run's findings, most costly first.

A rule is a pure function of `RunInputs` returning zero or more findings; it reads only what the tools
computed (and the hosts' findings facts) and never the capture. docs/findings.md describes each rule:
what it reads, its threshold and its source (tests/test_findings_rules.py checks that every id is there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reportgen.core.findings import capture, device, gpu, memory, steps
from reportgen.core.findings.inputs import RunInputs
from reportgen.core.findings.model import Finding, ordered


@dataclass(frozen=True)
class Rule:
    ids: tuple[str, ...]  # the finding ids it may emit
    check: Callable[[RunInputs], list[Finding]]


RULES: list[Rule] = [
    # The step's time, category by category (input first: the most common bottleneck).
    Rule(("input.tf_data_bottleneck", "input.bound"), steps.input_bound),
    Rule(("tpu.host_round_trips",), steps.tpu_host_round_trips),
    Rule(("gpu.kernel_launch_bound",), steps.kernel_launch),
    Rule(("host.blocking_loop",), steps.blocking_loop),
    Rule(("host.compute_in_step",), steps.host_compute),
    Rule(("host.dispatch_in_step",), steps.cpu_dispatch),
    Rule(("host.python_in_step",), steps.python_in_step),
    Rule(("host.unattributed_step_time",), steps.all_others),
    Rule(("device.communication",), steps.communication),
    Rule(("host.compilation_in_steps",), steps.compilation),
    Rule(("host.compilation_between_steps",), steps.compilation_between_steps),
    Rule(("steps.startup",), steps.startup),
    Rule(("steps.compute_bound",), steps.compute_bound),
    Rule(("steps.variance",), steps.step_variance),
    Rule(("steps.straggler_host",), steps.straggler_hosts),
    # Device ops.
    Rule(("tpu.async_copies_dominate",), device.tpu_async_copies),
    Rule(("tpu.non_matrix_ops_dominate",), device.tpu_non_matrix),
    Rule(("device.data_formatting",), device.data_formatting),
    Rule(("tpu.layout_padding",), device.tpu_layout_padding),
    Rule(("device.idle",), device.tpu_device_idle),
    Rule(("device.fp32_compute",), device.fp32_compute),
    Rule(("device.model_flops_utilization",), device.model_flops_utilization),
    Rule(("device.outside_compilation",), device.outside_compilation),
    Rule(("host.eager_ops",), device.eager_ops),
    # GPU kernels and timelines.
    Rule(("gpu.tensor_cores_unused",), gpu.tensor_cores_unused),
    Rule(("gpu.tiny_kernels",), gpu.tiny_kernels),
    Rule(("gpu.copy_kernels",), gpu.copy_kernels),
    Rule(("gpu.unfused_elementwise",), gpu.unfused_elementwise),
    Rule(("gpu.synchronous_copies",), gpu.sync_copies),
    Rule(("gpu.pageable_copies",), gpu.pageable_copies),
    Rule(("gpu.stream_synchronization",), gpu.sync_calls),
    Rule(("gpu.low_utilization",), gpu.low_utilization),
    Rule(("gpu.idle_gaps",), gpu.idle_gaps),
    Rule(("gpu.collectives_not_overlapped",), gpu.collective_overlap),
    # Memory.
    Rule(("memory.near_capacity",), memory.allocators_near_capacity),
    Rule(("memory.program_near_capacity",), memory.programs_near_capacity),
    Rule(("memory.padding",), memory.padding),
    # Capture health.
    Rule(("capture.dropped_events",), capture.dropped_events),
    Rule(("capture.no_steps",), capture.no_steps),
    Rule(("capture.too_few_steps",), capture.too_few_steps),
    Rule(("capture.clock_skew",), capture.clock_skew),
    Rule(("capture.missing_hlo_metadata",), capture.missing_hlo_metadata),
    Rule(("capture.partial_gpu_trace",), capture.partial_gpu_trace),
    Rule(("capture.duplicate_hosts",), capture.duplicate_hosts),
]

RULE_IDS: tuple[str, ...] = tuple(i for rule in RULES for i in rule.ids)


def evaluate(inputs: RunInputs) -> list[Finding]:
    """Every rule's findings for the run, most severe and most costly first."""
    found: list[Finding] = []
    for rule in RULES:
        for finding in rule.check(inputs):
            if finding.id not in rule.ids:
                raise ValueError(f"{rule.check.__name__} emitted {finding.id!r}, not one of {rule.ids}")
            # A link to a page the run does not have is left out rather than broken.
            finding.links = [link for link in finding.links if link.href]
            found.append(finding)
    return _without_double_counting(ordered(found))


def _without_double_counting(findings: list[Finding]) -> list[Finding]:
    """A finding whose ledger causes a costlier finding already claims keeps its evidence but not the time: it is
    said to be counted there, so the shares of the step never add up past 100%."""
    claimed: dict[str, str] = {}
    for finding in findings:
        taken = [claimed[c] for c in finding.claims if c in claimed]
        if taken:
            finding.estimate += f" This time is counted under {', '.join(sorted(set(taken)))}, not again here."
            finding.ms_per_step = finding.percent_of_step = None
            finding.claims = []
            finding.severity = "info"
            continue
        for cause in finding.claims:
            claimed[cause] = finding.id
    return ordered(findings)


__all__ = ["RULES", "RULE_IDS", "Rule", "evaluate"]
