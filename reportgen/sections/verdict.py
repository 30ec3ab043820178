"""The run's answer: its landing page (`<run>/index.html`) and its row of the site index.

Both are drawn from the run's summary.json blocks alone (each tool section's `summary()`), so that the landing
page, the site index, `reportgen summary` and anything reading summary.json say the same thing: the step time,
where it goes (XProf's input-bound classification and the largest step-time category), the biggest time sinks
with their shares, the device's utilisation, the memory peak against capacity, and a way into every tool page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.sections.base import HostSummary
from reportgen.sections.kernel_stats import compact_kernel_name
from reportgen.summary_blocks import (
    FindingsBlock,
    MemoryBlock,
    OpProfileBlock,
    Overview,
    RunSummary,
    StepLedgerBlock,
    finite,
)

SINK_ROWS = 5
KERNEL_NAME_CHARS = 60
MEMORY_ROWS = 3

# What each page answers, in one line: the landing page's way into the tools.
TOOL_QUESTIONS = {
    "overview": "step time per step and category, the top ops, XProf's recommendation",
    "input_pipeline": "where the input time goes on the host, the tf.data bottleneck",
    "tf_stats": "every framework op by self time, host and device",
    "kernel_stats": "every GPU kernel by total time, occupancy, TensorCore use",
    "op_profile": "XLA ops by device time, FLOPS and memory-bandwidth utilization",
    "hlo_stats": "every HLO op with its FLOP rate, bandwidth and what bounds it",
    "roofline_model": "XLA ops against the device's compute and memory roofs",
    "memory_profile": "memory in use over time per allocator, what is live at the peak",
    "memory_viewer": "each XLA program's buffers at its memory peak",
    "graph_viewer": "each XLA program as a graph",
    "pod_viewer": "each step's breakdown per core",
    "trace": "the complete timeline, for Perfetto UI",
    "inventory": "what the capture files hold: planes, lines, events, activity",
    "legacy_overview": "step time and XProf's recommendation, as the older capture recorded them",
    "legacy_input_pipeline": "the input pipeline analysis the older capture recorded",
    "legacy_tf_stats": "framework ops by self time, as recorded",
    "legacy_timeline": "per-step op statistics from ProfilerHook timelines",
    "legacy_kernel_stats": "GPU kernels, as recorded",
    "legacy_op_profile": "XLA ops by device time, as recorded",
    "legacy_memory_profile": "memory in use over time, as recorded",
    "legacy_pod_viewer": "per-core step breakdown, as recorded",
}


@dataclass
class Sink:
    name: str
    share: float | None  # percent
    time_ps: float
    detail: str = ""


@dataclass
class SinkGroup:
    title: str
    href: str
    share_of: str  # what the shares are a share of
    rows: list[Sink] = field(default_factory=list)


def has_steps(overview: Overview | None) -> bool:
    """Whether the run has a step time (older captures may hold its summary without the steps)."""
    if overview is None:
        return False
    step_time = overview.step_time_ms
    return bool(overview.steps) or bool((finite(step_time.average if step_time else None) or 0) > 0)


def classification(overview: Overview | None, ledger: StepLedgerBlock | None = None) -> dict:
    """The answer's headline: a short class, its severity (for colour, never alone) and XProf's statement. Where
    XProf's largest category is its 'All others' and the step ledger names what that time was, the ledger's largest
    cause heads the answer instead (XProf's statement stays, named as XProf's)."""
    if overview is None or not has_steps(overview):
        return {"label": "No steps marked", "severity": "none", "statement":
                "The capture marks no steps, so there is no step time to break down: "
                "the figures below are over the whole capture."}
    bound = overview.input_bound
    bottleneck = overview.bottleneck
    statement = overview.statement or ""
    if bound in ("HIGHLY", "MODERATELY"):
        label = f"{bound.capitalize()} input-bound"
        severity = "bad" if bound == "HIGHLY" else "warn"
    elif bottleneck and bottleneck.category == "other" and ledger and ledger.steps:
        key, percent = max(((k, finite(v) or 0.0) for k, v in ledger.percent.items()), key=lambda kv: kv[1])
        label = f"{ledger.labels.get(key, key)}: {percent:.1f}% of the step time (step ledger)"
        severity = "none"
    elif bottleneck:
        label = f"{bottleneck.label}: {bottleneck.percent:.1f}% of the step time"
        severity = "good" if bound == "NOT" else "none"
    else:
        label, severity = "No time recorded in steps", "none"
    return {"label": label, "severity": severity, "statement": f"XProf: {statement}" if statement else ""}


def _breakdown(overview: Overview) -> dict[str, float]:
    return {k: finite(v) or 0.0 for k, v in (overview.breakdown_ms or {}).items()}


def breakdown_rows(overview: Overview | None) -> list[dict]:
    """The non-empty step-time categories, largest first, with their share of the step."""
    if overview is None or not has_steps(overview):
        return []
    values = _breakdown(overview)
    total = sum(v for v in values.values() if v > 0)
    rows = [{"key": k, "label": CATEGORY_LABELS.get(k, k), "ms": v, "percent": 100.0 * v / total if total else 0.0}
            for k, v in values.items() if v > 0]
    rows.sort(key=lambda r: (-r["ms"], CATEGORY_KEYS.index(r["key"]) if r["key"] in CATEGORY_KEYS else 99))
    return rows


LEDGER_STEPS_SHOWN = 40  # bars drawn one per step; longer runs show their slowest, fastest and median steps


def _ledger_segments(ms: dict[str, float], keys: tuple[str, ...], labels: dict[str, str], total: float) -> list[dict]:
    return [{"key": k, "label": labels.get(k, k), "ms": float(ms.get(k) or 0.0),
             "percent": 100.0 * float(ms.get(k) or 0.0) / total if total else 0.0}
            for k in keys if (ms.get(k) or 0.0) > 0]


def ledger_view(block: RunSummary) -> dict | None:
    """The step ledger as the run page draws it: the average step and one bar per step (each segment a cause, in
    the ledger's precedence), the causes largest first, and how XProf's breakdown differs."""
    ledger = block.step_ledger
    if ledger is None or not ledger.steps:
        return None
    keys, labels = ledger.precedence, ledger.labels
    step_ms = finite(ledger.step_time_ms) or 0.0
    average = _ledger_segments(ledger.average_ms, keys, labels, step_ms)
    steps = ledger.per_step
    shown = steps
    if len(steps) > LEDGER_STEPS_SHOWN:
        by_time = sorted(steps, key=lambda s: s.duration_ms)
        half = LEDGER_STEPS_SHOWN // 2
        shown = tuple(sorted(by_time[:half // 2] + by_time[len(by_time) // 2 - half // 2:len(by_time) // 2 + half // 2]
                             + by_time[-half:], key=lambda s: s.begin_ps))
    longest = max((s.duration_ms for s in shown), default=0.0)
    several_hosts = len({s.host for s in steps}) > 1
    bars = [{"label": (f"{s.host} · " if several_hosts else "") + str(s.step), "ms": s.duration_ms,
             "width": 100.0 * s.duration_ms / longest if longest else 0.0,
             "segments": _ledger_segments(s.ms, keys, labels, s.duration_ms)} for s in shown]
    causes = sorted(average, key=lambda c: -c["ms"])
    # The start-up step, set aside from the average: drawn on its own scale (it can be hundreds of steps long).
    startup = [{"label": (f"{s.host} · " if several_hosts else "") + str(s.step), "ms": s.duration_ms,
                "segments": _ledger_segments(s.ms, keys, labels, s.duration_ms)} for s in ledger.startup]
    return {"average": average, "step_ms": step_ms, "steps": ledger.steps, "bars": bars, "startup": startup,
            "not_analysed": ledger.steps_not_analysed,
            "bars_left_out": len(steps) - len(shown) + ledger.per_step_left_out,
            "causes": causes, "inferred_from": ledger.inferred_from,
            "xprof_other_percent": _xprof_share(block.overview, "other")}


def _ledger_input_if_different(block: RunSummary) -> float | None:
    """The step ledger's input share where it differs from XProf's by a point or more (both are then shown, named),
    else None."""
    measured = finite(block.step_ledger.percent.get("input")) if block.step_ledger else None
    xprof = finite(block.overview.input_percent) if block.overview else None
    if measured is None or xprof is None or abs(measured - xprof) < 1.0:
        return None
    return measured


def _xprof_share(overview: Overview | None, key: str) -> float | None:
    if overview is None or not has_steps(overview):
        return None
    values = _breakdown(overview)
    total = sum(v for v in values.values() if v > 0)
    return 100.0 * values.get(key, 0.0) / total if total else None


def sink_groups(block: RunSummary, pages: set[str]) -> list[SinkGroup]:
    """The biggest time sinks, from the most specific source each side has."""
    groups: list[SinkGroup] = []
    if block.op_profile and block.op_profile.top_ops:
        group = SinkGroup("XLA ops on the device", "op_profile.html", "of device op time (idle excluded)")
        for op in block.op_profile.top_ops[:SINK_ROWS]:
            group.rows.append(Sink(op.name, op.time_percent, op.time_ms * 1e9,
                                   f"{op.category} · FLOPS {op.flops_utilization_percent:.1f}% · "
                                   f"HBM {op.hbm_utilization_percent:.1f}%"))
        groups.append(group)
    if block.kernel_stats and block.kernel_stats.top_kernels:
        group = SinkGroup("GPU kernels", "kernel_stats.html", "of GPU kernel time")
        for k in block.kernel_stats.top_kernels[:SINK_ROWS]:
            group.rows.append(Sink(compact_kernel_name(k.name, KERNEL_NAME_CHARS), k.percent, k.total_us * 1e6,
                                   f"{k.occurrences:,} launches: {k.name}"))
        groups.append(group)
    tf_ops = block.tf_stats.top_ops if block.tf_stats else ()
    tf_page = "tf_stats.html" if "tf_stats.html" in pages else "legacy_tf_stats.html"
    for side, title in (("Device", "Framework ops on the device"), ("Host", "Framework ops on the host")):
        if side == "Device" and groups:
            continue  # the device's XLA ops or kernels say it more precisely
        rows = [op for op in tf_ops if op.side == side and op.self_time_us > 0]
        if rows:
            group = SinkGroup(title, tf_page, f"of {side.lower()} op time (IDLE excluded)")
            for op in rows[:SINK_ROWS]:
                group.rows.append(Sink(op.name, op.self_time_percent, op.self_time_us * 1e6, op.type))
            groups.append(group)
    return groups


def memory_rows(block: RunSummary) -> list[dict]:
    """The allocators closest to their capacity at their peak (memory profile), then the largest programs."""
    memory = block.memory or MemoryBlock()
    rows = []
    for name, p in (memory.profiles or {}).items():
        peak, capacity = finite(p.peak_bytes), finite(p.capacity_bytes)
        if peak is None:
            continue
        rows.append({"name": name, "peak": peak, "capacity": capacity,
                     "percent": 100.0 * peak / capacity if capacity else None, "kind": "allocator"})
    rows.sort(key=lambda r: (-(r["percent"] or 0.0), -r["peak"]))
    modules = sorted(((name, finite(m.peak_bytes) or 0.0) for name, m in (memory.modules or {}).items()),
                     key=lambda item: -item[1])
    if not rows and modules:
        rows = [{"name": name, "peak": peak, "capacity": None, "percent": None, "kind": "program"}
                for name, peak in modules]
    return rows[:MEMORY_ROWS]


def device_label(hosts: list[HostSummary]) -> str:
    labels = sorted({h.device_type + (f" × {h.device_core_count}" if h.device_core_count else "") for h in hosts})
    return ", ".join(labels) if labels else "–"


def run_verdict(name: str, block: RunSummary, hosts: list[HostSummary], nav: list[dict]) -> dict:
    """Everything the landing page shows, from the run's summary.json block."""
    overview = block.overview
    pages = {item["href"] for item in nav}
    op_profile = block.op_profile
    return {
        "answer": classification(overview, block.step_ledger),
        "overview": overview,
        "has_steps": has_steps(overview),
        "breakdown": breakdown_rows(overview),
        "ledger": ledger_view(block),
        "ledger_input": _ledger_input_if_different(block),
        "per_host": (overview.per_host if overview else None) or {},
        "tf_data": block.input_pipeline.bottleneck if block.input_pipeline else None,
        "sinks": sink_groups(block, pages),
        # No XLA op placed: no utilisation to speak of (a GPU capture without HLO modules: its op profile is idle
        # time only).
        "device": _device(op_profile) if isinstance(op_profile, OpProfileBlock) and op_profile.top_ops else None,
        "memory": memory_rows(block),
        "device_label": device_label(hosts),
        "capture_ps": max((h.duration_ps for h in hosts), default=0),
        "events": sum(h.events for h in hosts),
        "tools": [{**item, "question": TOOL_QUESTIONS.get(item["href"].removesuffix(".html"), "")}
                  for item in nav if item["href"] != "index.html"],
        "trace": block.trace,
    }


def _device(op_profile: OpProfileBlock) -> dict[str, float | None]:
    return {key: finite(getattr(op_profile, key)) for key in (
        "flops_utilization_percent", "hbm_utilization_percent", "idle_percent", "peak_flop_rate",
        "peak_hbm_bandwidth")}


def index_row(name: str, href: str, block: RunSummary, hosts: list[HostSummary], errors: list[dict],
              tools: list[dict]) -> dict:
    """The run's row of the site index: the answer in a line."""
    overview = block.overview
    timed = has_steps(overview)
    step = overview.step_time_ms if overview else None
    return {
        "name": name,
        "href": href,
        "hosts": hosts,
        "errors": errors,
        "device": device_label(hosts),
        "duration_ps": max((h.duration_ps for h in hosts), default=0),
        "planes": sum(h.planes for h in hosts),
        "events": sum(h.events for h in hosts),
        "tools": tools,
        "steps": int(overview.steps or 0) if overview else 0,
        "step_ms": finite(step.average) if timed and step else None,
        "step_sd_ms": finite(step.standard_deviation) if timed and step else None,
        "input_percent": finite(overview.input_percent) if timed and overview else None,
        "input_bound": overview.input_bound if timed and overview else None,
        # The row is plain data (the rebuild cache keeps it beside the run's pages).
        "bottleneck": overview.bottleneck.to_json() if overview and overview.bottleneck else None,
        "severity": classification(overview)["severity"],
        "breakdown_ms": overview.breakdown_ms if timed and overview else None,
        # The run's most costly finding and how many there are (runs of older profilers' files have none).
        "findings": _findings_brief(block.findings),
    }


def _findings_brief(block: FindingsBlock | None) -> dict | None:
    if block is None:
        return None
    return {"count": len(block.items), "top": block.items[0].to_json() if block.items else None}


__all__ = ["TOOL_QUESTIONS", "classification", "device_label", "index_row", "run_verdict"]
