"""Capture health: what limits what the report can say (events dropped by the profiler, no step markers, too
few steps, hosts whose clocks disagree, device ops without their HLO program)."""

from __future__ import annotations

import re
import statistics

from reportgen.core.findings.inputs import RunInputs, pick
from reportgen.core.findings.model import Evidence, Finding, Link, csv_source, ms_text, step_label, summary_source
from reportgen.core.ops.op_metrics import IDLE
from reportgen.core.pages import LEDGER_HREF, OP_PROFILE_CSV, timeline_href
from reportgen.core.steps.ledger import LEDGER_LABELS, RunLedger
from reportgen.core.tools.input_pipeline import EMPTY_INTERSECT_WARNING, NO_STEP_WARNING

MIN_STEPS = 3
MIN_INFERRED_RUNS = 3
SKEW_MIN_PS = 1_000_000_000  # 1 ms
SKEW_STEP_SHARE = 0.5  # of the median step time
UNATTRIBUTED_PERCENT = 5.0  # of the device time
OUTLIER_FACTOR = 2.0  # a step this many times the median of the others is the spread of a few steps (ours)
_DROPPED = re.compile(r"drop|lost|truncat|overflow|exceed|buffer (is )?full|too many events", re.IGNORECASE)

_STEP_MARKERS = ("Mark each step: Keras does it; in a custom loop wrap each step in "
                 "`with tf.profiler.experimental.Trace('train', step_num=step, _r=1):`.",
                 "Mark each step: wrap it in `with jax.profiler.StepTraceAnnotation('train', step_num=step):`.")


def _page_text(page: str) -> dict:
    """The number (or text) is written on this page."""
    return {"page_text": page}


def dropped_events(inputs: RunInputs) -> list[Finding]:
    """The profiler says it dropped or truncated events: every tool sees less than what ran."""
    view = inputs.overview
    if view is None:
        return []
    diagnostics = [m for m in [*view.errors, *view.warnings] if _DROPPED.search(m)]
    if not diagnostics:
        return []
    return [Finding(
        id="capture.dropped_events", severity="medium",
        title="The profiler dropped or truncated events: the numbers cover only part of what ran",
        estimate="Not a cost of the workload: what the pages show is incomplete by an amount the capture does "
                 "not record.",
        action=pick(inputs.framework,
                    "Capture fewer steps or fewer hosts at once, or raise the tracer's limits "
                    "(`tf.profiler.experimental.ProfilerOptions(host_tracer_level=…)`); GPU traces drop records "
                    "when CUPTI's buffers fill: profile a shorter window.",
                    "Trace a shorter window (fewer steps) or fewer hosts at once, and lower the Python tracer's "
                    "level (`jax.profiler.ProfileOptions().python_tracer_level = 0`)."),
        evidence=[Evidence("Profiler message", m, "", _page_text("overview.html"), inputs.page("overview"))
                  for m in diagnostics],
        links=[Link("Overview (diagnostics)", inputs.page("overview"))],
    )]


def _inferred_steps(inputs: RunInputs) -> tuple[list[Evidence], str]:
    """Steps inferred from the most repeated top-level XLA program, marked as inferred; and a summary."""
    runs = [(h, r) for h, f in inputs.facts.items() for r in f.module_runs if r.count >= MIN_INFERRED_RUNS]
    if not runs:
        return [], ""
    host, top = max(runs, key=lambda hr: (hr[1].count, hr[1].total_ps))
    each = top.total_ps / top.count / 1e9
    interval = top.mean_interval_ps / 1e9
    evidence = [Evidence(f"Runs of {top.name} on {top.plane} (inferred steps)", top.count, "count",
                         {"trace_total": {"host": host, "kind": "module_runs", "plane": top.plane,
                                          "name": top.name}}, ""),
                Evidence(f"Device time per run of {top.name} (inferred step time)", each, "ms",
                         {"trace_total": {"host": host, "kind": "module_runs", "plane": top.plane, "name": top.name,
                                          "field": "mean_duration"}}, ""),
                Evidence(f"Time from one run of {top.name} to the next (inferred)", interval, "ms",
                         {"trace_total": {"host": host, "kind": "module_runs", "plane": top.plane, "name": top.name,
                                          "field": "mean_interval"}}, "")]
    for k, (begin, end) in enumerate(top.first, start=1):
        evidence.append(Evidence(f"Inferred step {k}: run {k} of {top.name}", (end - begin) / 1e9, "ms",
                                 {"trace": {"host": host, "plane": top.plane, "t0_ps": begin, "t1_ps": end,
                                            "what": "event", "name": top.name}},
                                 timeline_href(host, begin, end, top.name) if "trace" in inputs.pages else ""))
    text = (f"; steps inferred from {top.count} runs of {top.name} on {top.plane} (one every {interval:.1f} ms, "
            f"{each:.1f} ms of device time each)")
    return evidence, text


def _no_steps_action(inputs: RunInputs) -> str:
    """Advice that fits what the capture already marks."""
    inferred = inputs.ledger.inferred_from if inputs.ledger is not None else ""
    if "Profiled batch" in inferred:
        return ("Keras 3's TensorBoard callback marks each profiled batch as `Profiled batch <n>`, which XProf does "
                "not take as a step; this report inferred the steps from them (the step ledger and the findings "
                "above use them). For XProf's own step analysis, wrap the step in `tf.profiler.experimental.Trace("
                "'train', step_num=step, _r=1)` in a custom training step.")
    if "_r=1" in inferred:
        return ("The capture has the program's `Trace(..., step_num=…, _r=1)` markers, but XProf's grouping did not "
                "take them as steps (it groups by the graph's own iteration events when they are there); this report "
                "inferred the steps from the markers. Markers outside `tf.function` (around the call, on the Python "
                "thread) are the ones XProf groups by.")
    return pick(inputs.framework, *_STEP_MARKERS)


def no_steps(inputs: RunInputs) -> list[Finding]:
    """No step markers: the step-time breakdown and the input analysis could not run."""
    view = inputs.overview
    if view is None or inputs.steps:
        return []
    inferred, text = _inferred_steps(inputs)
    warning = EMPTY_INTERSECT_WARNING if EMPTY_INTERSECT_WARNING in view.warnings else NO_STEP_WARNING
    training = bool(view.environment.get("is_training"))
    ledger = inputs.ledger
    if not inferred and ledger is not None and ledger.inferred_from and ledger.step_count:
        # The step ledger found steps of its own (not repeated device programs, said below): XProf's step analyses
        # have none, this report's do.
        count = ledger.step_count + len(ledger.startup)
        title = (f"No step markers XProf recognises: its step-time breakdown and input analysis have no steps; "
                 f"this report's step ledger inferred {count} from {ledger.inferred_from}")
        estimate = ("Not a cost of the workload: XProf's overview and input-pipeline pages give shares of the "
                    "capture instead of time per step; the step ledger and these findings use the inferred steps.")
    else:
        # Steps inferred from repeated device programs feed the step ledger and these findings: XProf's step
        # analyses are the ones without steps.
        title = ("No step markers: XProf's step-time breakdown and input analysis have no steps" + text if inferred
                 else "No step markers: the step-time breakdown and the input analysis could not run")
        estimate = ("Not a cost of the workload: without steps the report gives shares of the capture instead of "
                    "time per step." + (" The inferred steps are repeated runs of one top-level program, not "
                                        "markers." if inferred else ""))
    return [Finding(
        id="capture.no_steps", severity="medium" if training else "low",
        title=title,
        estimate=estimate,
        action=_no_steps_action(inputs) + (" Several hosts whose steps do not line up need their "
                                                         "clocks (or profiling start times) aligned."
                                                         if warning == EMPTY_INTERSECT_WARNING else ""),
        evidence=[Evidence("Steps", 0, "count", summary_source("overview", "steps"), inputs.page("overview")),
                  Evidence("XProf's diagnostic", warning, "", _page_text("overview.html"), inputs.page("overview")),
                  *inferred],
        links=[Link("Overview", inputs.page("overview")),
               *([Link("Inferred steps on the timeline", inferred[3].href)] if len(inferred) > 3 and inferred[3].href
                 else [])],
    )]


MIN_STEADY_STEPS = 5  # after a start-up step is set aside: fewer give no σ to judge the rest by (steps.variance's)


def _outlier(ledger: RunLedger) -> tuple[str, list[Evidence]]:
    """Of a few steps, the one much slower than the others and the cause that grew in it: with so few steps one
    outlier is most of the average, which every per-step share then carries."""
    steps = ledger.steps
    if len(steps) < 2:
        return "", []
    host, slow = max(steps, key=lambda hs: (hs[1].duration_ps, -hs[1].begin_ps))
    rest = [s for h, s in steps if s is not slow]
    if slow.duration_ps < OUTLIER_FACTOR * statistics.median(s.duration_ps for s in rest):
        return "", []
    grew = {k: slow.ps[k] - statistics.median(s.ps[k] for s in rest) for k in slow.ps}
    key = max(grew, key=lambda k: (grew[k], k))
    label = step_label(slow.name)
    text = (f"; one step, {label} ({ms_text(slow.duration_ps / 1e9)}), holds most of the spread: "
            f"{ms_text(grew[key] / 1e9)} more {LEDGER_LABELS[key].lower()} than the others' median")
    where = {"host": host, "step": slow.name, "begin_ps": slow.begin_ps}
    return text, [
        Evidence(f"{label.capitalize()}: step time", slow.duration_ps / 1e9, "ms",
                 summary_source("step_ledger", "per_step", where, "duration_ms"), LEDGER_HREF),
        Evidence(f"{label.capitalize()}: {LEDGER_LABELS[key].lower()} beyond the other steps' median", grew[key] / 1e9,
                 "ms", summary_source("step_ledger", "per_step", where, "ms", key), LEDGER_HREF)]


def too_few_steps(inputs: RunInputs) -> list[Finding]:
    """Fewer than three steps, or, where the ledger set a start-up step aside, fewer than five steady steps after
    it: averages and shares rest on too little to judge."""
    ledger = inputs.ledger
    if ledger is not None and ledger.step_count and ledger.startup:
        stats = ledger.steady_stats()
        count = int(stats["steps"])
        if count >= MIN_STEADY_STEPS:
            return []
        what = f"{count} steady step{'s' if count != 1 else ''} analysed (after the start-up step)"
        spread = (f"; they range from {ms_text(stats['minimum_ms'])} to {ms_text(stats['maximum_ms'])}"
                  if count > 1 and stats["maximum_ms"] >= 1.5 * stats["minimum_ms"] else "")
        evidence = [Evidence("Steady steps", count, "count", summary_source("step_ledger", "steady", "steps"),
                             LEDGER_HREF)] + [
            Evidence(label, stats[key], "ms", summary_source("step_ledger", "steady", key), LEDGER_HREF)
            for label, key in (("Average steady step", "average_ms"), ("Fastest", "minimum_ms"),
                               ("Slowest", "maximum_ms"))]
        links = [Link("Where the step goes (step ledger)", LEDGER_HREF)]
        outlier, outlier_evidence = _outlier(ledger)
        if outlier:
            spread += outlier
            evidence += outlier_evidence
    elif 0 < inputs.steps < MIN_STEPS:
        count, spread = inputs.steps, ""
        what = f"{count} step{'s' if count > 1 else ''} analysed"
        evidence = [inputs.steps_evidence(), inputs.step_time_evidence()]
        links = [Link("Overview", inputs.page("overview"))]
    else:
        return []
    return [Finding(
        id="capture.too_few_steps", severity="low",
        title=f"Only {what}: too few to judge step time and its variation{spread}",
        estimate="Not a cost of the workload: averages over so few steps (which may include warm-up) say little.",
        action=pick(inputs.framework,
                    "Profile at least 5–10 steps of the steady state: `tf.keras.callbacks.TensorBoard("
                    "profile_batch=(10, 20))`, or `tf.profiler.experimental.start/stop` around several steps "
                    "after warm-up.",
                    "Profile at least 5–10 steps of the steady state: start the trace after the first "
                    "(compiling) steps and stop it several steps later."),
        evidence=evidence, links=links,
    )]


def machine(host: str) -> str:
    """The machine a host file comes from: its name without the profiler server's port (`10.0.0.1_6009`,
    `localhost_6110`): several profiler processes of one machine share its clock."""
    return re.sub(r"[_:]\d+$", "", host)


def _communicate(inputs: RunInputs) -> bool:
    """Whether the hosts' devices exchange data (collectives), which is what makes their relative timing matter."""
    if inputs.ledger is not None and inputs.ledger.total_ps("device_collectives") > 0:
        return True
    return any(g.collective_ps > 0 for f in inputs.facts.values() for g in f.gpus)


def clock_skew(inputs: RunInputs) -> list[Finding]:
    """Hosts whose step markers disagree in time: clocks (or profiling start times) out of step. Only hosts on
    different machines have different clocks, and only hosts that communicate have to agree."""
    hosts = [(h, {name: (b, e) for name, b, e in f.steps}) for h, f in inputs.facts.items() if f.steps]
    if len(hosts) < 2 or len({machine(h) for h, _ in hosts}) < 2 or not _communicate(inputs):
        return []
    ref_host, ref = hosts[0]
    durations = [e - b for _, steps in hosts for b, e in steps.values()]
    threshold = max(SKEW_MIN_PS, SKEW_STEP_SHARE * statistics.median(durations))
    worst = None
    for host, steps in hosts[1:]:
        if machine(host) == machine(ref_host):
            continue
        common = sorted(set(steps) & set(ref))
        if not common:
            continue
        offset = statistics.median(steps[n][0] - ref[n][0] for n in common)
        if abs(offset) > threshold and (worst is None or abs(offset) > abs(worst[1])):
            worst = (host, offset, common[0])
    if worst is None:
        return []
    host, offset, step = worst
    evidence = [Evidence(f"Median offset of {host}'s steps from {ref_host}'s", offset / 1e9, "ms", None, ""),
                Evidence("Median step duration", statistics.median(durations) / 1e9, "ms", None, "")]
    for h, steps in ((ref_host, ref), (host, dict(hosts)[host])):
        begin, end = steps[step]
        evidence.append(Evidence(f"Step {step} starts on {h} at", begin / 1e9, "ms",
                                 {"trace": {"host": h, "plane": "", "t0_ps": begin, "t1_ps": end, "what": "step"}},
                                 timeline_href(h, begin, end) if "trace" in inputs.pages else ""))
    return [Finding(
        id="capture.clock_skew", severity="medium",
        title=f"Host {host}'s steps start {abs(offset) / 1e9:.1f} ms {'after' if offset > 0 else 'before'} the same "
              f"steps on {ref_host}: the hosts' clocks (or profile start times) disagree",
        estimate="Not a cost of the workload: views that line hosts up in time (combined steps, pod viewer, the "
                 "trace) put their events in the wrong places by this offset.",
        action="Synchronise the hosts' clocks (NTP/chrony) and start profiling on all hosts together (one "
               "`tf.profiler.experimental.client.trace` / `jax.profiler` call for all workers); if the clocks "
               "agree, the hosts really run out of step: look for a straggler before a collective.",
        evidence=evidence, links=[Link(f"Step {step} on {h}", e.href) for h, e in zip((ref_host, host), evidence[2:])
                                  if e.href],
    )]


def duplicate_hosts(inputs: RunInputs) -> list[Finding]:
    """Host files that hold the same events at the same picoseconds: one profile saved under several host names
    (or a file copied), not several hosts. The run's sums count it once per name and its per-host comparisons
    compare it with itself."""
    by_print: dict[tuple[int, int, int], list[str]] = {}
    for host, facts in inputs.facts.items():
        if facts.fingerprint[0]:
            by_print.setdefault(facts.fingerprint, []).append(host)
    groups = [hosts for hosts in by_print.values() if len(hosts) > 1]
    if not groups:
        return []
    first = groups[0]
    events = next(f.fingerprint[0] for h, f in inputs.facts.items() if h == first[0])
    copies = sum(len(g) - 1 for g in groups)
    return [Finding(
        id="capture.duplicate_hosts", severity="low",
        title=f"{copies + len(groups)} host files hold the same events: "
              + "; ".join(f"{', '.join(g[1:])} repeat{'s' if len(g) == 2 else ''} {g[0]}" for g in groups)
              + f" ({events:,} events at the same times)",
        estimate="Not a cost of the workload: one host's profile counted as several. Sums over the run's hosts (TF "
                 "stats, kernel stats, the pod viewer) count its events once per file, per-host comparisons "
                 "compare it with itself, and averages 'on each of N hosts' are one host's.",
        action="Read the run as one host. If the job ran on several machines, profile each of them (one "
               "`tf.profiler.experimental.client.trace` call with every worker's address, or `jax.profiler` "
               "started on every process) instead of copying one host's file under the others' names.",
        evidence=[Evidence("Host files with the same events", copies + len(groups), "count", None, ""),
                  Evidence(f"Events in {first[0]}", events, "count", None, "")],
    )]


MIN_KERNELS_FOR_PARTIAL = 100


def distinct_mixes(inputs: RunInputs) -> list:
    """Each host's GPU mix, a host file that repeats another's (byte-identical copies) counted once."""
    seen, out = set(), []
    for host, facts in inputs.facts.items():
        mix = facts.gpu_mix
        key = (mix.kernels, mix.kernel_ps, tuple(sorted(mix.op_type_ps.items())), tuple(facts.steps))
        if mix.kernels and key not in seen:
            seen.add(key)
            out.append((host, mix))
    return out


def partial_gpu_model(inputs: RunInputs) -> str:
    """The name scope that says the model is made of matmuls or convolutions, when the GPUs ran hundreds of kernels
    and not one of them a GEMM or convolution (the capture is partial); "" otherwise."""
    mixes = distinct_mixes(inputs)
    kernels = sum(m.kernels for _, m in mixes)
    if kernels < MIN_KERNELS_FOR_PARTIAL or any(m.matrix_kernels for _, m in mixes):
        return ""
    return next((m.matrix_model for _, m in mixes if m.matrix_model), "")


def partial_gpu_trace(inputs: RunInputs) -> list[Finding]:
    """The op names say the model is made of matmuls or convolutions, yet the GPUs ran hundreds of kernels and not
    one of them a GEMM or convolution: the capture holds only part of the work (dropped GPU events, or a trace
    window that missed it), and every share on the pages is of that part."""
    model = partial_gpu_model(inputs)
    if not model:
        return []
    mixes = distinct_mixes(inputs)
    kernels = sum(m.kernels for _, m in mixes)
    types = sorted({t for _, m in mixes for t in m.op_type_ps}, key=str)
    return [Finding(
        id="capture.partial_gpu_trace", severity="medium",
        title=f"The capture looks partial: {kernels:,} GPU kernels and not one matrix multiply or convolution, in "
              f"a model whose ops are named '{model}'",
        estimate="Not a cost of the workload: the pages' shares describe only the part of the step the capture "
                 "holds.",
        action="Capture again and check the profiler's messages for dropped GPU events: trace fewer steps at a "
               "time (the GPU tracer's event buffer fills on long traces) and start and stop the trace between "
               "steps, so that whole steps are in it. Until then, read the shares on these pages as shares of the "
               "captured part only.",
        evidence=[Evidence("GPU kernels in the capture", kernels, "count", None, inputs.page("kernel_stats")),
                  Evidence("Of them, GEMM or convolution kernels", 0, "count", None, inputs.page("kernel_stats")),
                  Evidence("Op types the GPUs ran", ", ".join(types[:8]), "", None, inputs.page("tf_stats"))],
        links=[Link("GPU kernel stats", inputs.page("kernel_stats"))],
    )]


def missing_hlo_metadata(inputs: RunInputs) -> list[Finding]:
    """Device ops whose HLO program is not in the capture: they cannot be named, categorised or costed."""
    data = inputs.op_profile
    if data is None:
        return []
    run = data.run
    # Program 0 holds the framework's own (non-XLA) device ops, which have no HLO to miss.
    records = run.records[(run.records["category"] != IDLE) & (run.records["occurrences"] > 0)
                          & (run.records["hlo_module_id"] != 0)]
    unknown = records[~records["hlo_module_id"].map(lambda p: (int(p) % (1 << 64)) in run.details.program_names)]
    total = float(run.op_stats.device_db.total_time_ps)
    if unknown.empty or total <= 0:
        return []
    share = 100.0 * float(unknown["self_time_ps"].sum()) / total
    if share < UNATTRIBUTED_PERCENT:
        return []
    programs = sorted({int(p) % (1 << 64) for p in unknown["hlo_module_id"]})
    return [Finding(
        id="capture.missing_hlo_metadata", severity="medium" if share >= 25.0 else "low",
        title=f"{share:.1f}% of device time is in ops of programs whose HLO is not in the capture",
        estimate="The device time of ops whose program id has no HLO module in the capture's metadata plane: "
                 "their FLOPs, bytes and source are unknown, so utilisation and op-level findings miss them.",
        action="Capture again with the programs' HLO: start the profiler before the programs are compiled (the "
               "first call of each jitted function / tf.function), so that the capture's `/host:metadata` plane "
               "holds their modules; do not strip that plane when copying captures.",
        evidence=[Evidence("Device time in ops of unknown programs (op profile node 'main')", share, "percent",
                           csv_source(OP_PROFILE_CSV, {"Path": "by_program > main"}, "Time (%)", "sum"),
                           inputs.page("op_profile")),
                  Evidence("Program ids without HLO", ", ".join(str(p) for p in programs), "", None, "")],
        links=[Link("Op profile", inputs.page("op_profile"))], percent_of_device_time=share,
    )]


__all__ = ["clock_skew", "distinct_mixes", "dropped_events", "missing_hlo_metadata", "no_steps", "partial_gpu_trace",
           "too_few_steps"]
