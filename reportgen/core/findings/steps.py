"""Rules over the step-time breakdown: where each step's time goes, besides computing on the device.

They read the run's step analysis (the overview's and the input pipeline's, all hosts combined) and the
input pipeline's tf.data analysis; every time they quote is one of XProf's step-time categories,
averaged over the steps the overview keeps.
"""

from __future__ import annotations

import statistics

from reportgen.core.findings.inputs import RunInputs, pick
from reportgen.core.findings.model import (
    Evidence,
    Finding,
    Link,
    csv_source,
    ms_text,
    severity_for,
    step_label,
    summary_source,
)
from reportgen.core.pages import (
    OVERVIEW_STEPS_CSV,
    TF_DATA_ITERATORS_CSV,
    iterator_anchor,
    step_anchor,
    timeline_href,
)
from reportgen.core.steps.categories import CATEGORY_LABELS
from reportgen.core.tools.input_pipeline import MODERATELY_INPUT_BOUND
from reportgen.core.tools.overview import TPU_BREAKDOWN, TPU_CATEGORIES

ENQUEUE_SHARE = 30.0  # XProf's data-transfer-bound rule: enqueuing is this share of the input time
TPU_IDLE_PERCENT = 10.0  # XProf's TensorCore-idle-bound rule
KERNEL_LAUNCH_PERCENT = 3.0  # XProf's kernel-launch statement (moderate from 3%, high from 15%)
HOST_COMPUTE_PERCENT = 10.0
ALL_OTHERS_PERCENT = 10.0
COMMUNICATION_PERCENT = 10.0
COMPILE_PERCENT = 1.0
VARIANCE_PERCENT = 20.0  # coefficient of variation of the step time
MIN_STEPS_FOR_VARIANCE = 3
STRAGGLER_SCORE = 3.5  # modified z-score (XProf's straggler detection)
MIN_HOSTS_FOR_STRAGGLERS = 3
TOP_STEPS = 3

_TPU_LABELS = dict(TPU_CATEGORIES)


def _label(key: str, tpu: bool) -> str:
    return _TPU_LABELS[key] if tpu else CATEGORY_LABELS[key]


def _summary_key(key: str) -> str:
    """The summary.json `breakdown_ms` key of a step category (TPU categories map onto the generic keys)."""
    return TPU_BREAKDOWN.get(key, key)


def _category_evidence(inputs: RunInputs, key: str) -> Evidence:
    view = inputs.overview
    return Evidence(f"{_label(key, view.analysis.tpu)} per step (average)", view.analysis.categories[key].average,
                    "ms", summary_source("overview", "breakdown_ms", _summary_key(key)), inputs.page("overview"))


def _share(inputs: RunInputs, key: str) -> float:
    return 100.0 * inputs.overview.analysis.categories[key].average / inputs.step_ms if inputs.step_ms else 0.0


def _top_steps(inputs: RunInputs, key: str, count: int = TOP_STEPS) -> list[Evidence]:
    """The steps with the most time in `key`, each as its row of the overview's steps table."""
    view = inputs.overview
    steps = view.steps.sort_values([key, "step_num"], ascending=[False, True], kind="stable").head(count)
    label = f"{_label(key, view.analysis.tpu)} (ms)"
    return [Evidence(step_label(str(row.step_name)).capitalize(), float(getattr(row, key)), "ms",
                     csv_source(OVERVIEW_STEPS_CSV, {"Host": view.label, "Step id": row.step_num}, label),
                     inputs.page("overview", step_anchor(row.step_num)))
            for row in steps.itertuples() if getattr(row, key) > 0]


def _breakdown_finding(inputs: RunInputs, key: str, finding_id: str, title: str, estimate: str, action: str,
                       extra: list[Evidence] | None = None) -> Finding:
    share = _share(inputs, key)
    return Finding(
        id=finding_id, severity=severity_for(share), title=title, estimate=estimate, action=action,
        evidence=[_category_evidence(inputs, key), inputs.step_time_evidence(), inputs.steps_evidence(),
                  *(extra or []), *_top_steps(inputs, key)],
        links=[Link("Step-time breakdown (overview)", inputs.page("overview"))],
        ms_per_step=inputs.overview.analysis.categories[key].average, percent_of_step=share,
    )


def _estimate(label: str, inputs: RunInputs) -> str:
    return (f"XProf's '{label}' time per step, averaged over the {inputs.steps} steps analysed: the time each "
            "step would save if it went away.")


# --- input --------------------------------------------------------------------------------------------------

def _advice_text(advice) -> str:
    return " ".join(a.text + (f" (`{a.code}`)" if a.code else "") for a in advice)


def input_bound(inputs: RunInputs) -> list[Finding]:
    """The step waits for input (XProf: MODERATELY or HIGHLY input-bound), with the tf.data bottleneck."""
    view = inputs.overview
    if not inputs.steps:
        return []
    percent = view.analysis.bottleneck.input_percent
    if percent < MODERATELY_INPUT_BOUND:
        return []
    key = "tc_infeed" if view.analysis.tpu else "input"
    evidence = [Evidence("Share of the step time waiting for input", percent, "percent",
                         summary_source("overview", "input_percent"), inputs.page("input_pipeline", "summary")),
                Evidence("XProf's classification (input-bound)", view.analysis.bottleneck.input_bound, "",
                         summary_source("overview", "input_bound"), inputs.page("input_pipeline", "summary"))]
    links = [Link("Input pipeline analysis", inputs.page("input_pipeline", "summary"))]
    data = inputs.input_pipeline
    top = data.bottleneck_summary if data is not None else None
    focus = data.focus if data is not None else None
    breakdown = view.analysis.input_breakdown
    enqueue_share = 0.0
    if breakdown is not None:
        by_key = breakdown.by_key()
        total = sum(by_key.values())
        enqueue_share = 100.0 * by_key["enqueue"] / total if total else 0.0
        for name, label in (("preprocessing", "Host time preprocessing input (over the capture)"),
                            ("enqueue", "Host time enqueuing input onto the device (over the capture)")):
            if by_key[name] > 0:
                evidence.append(Evidence(label, round(by_key[name] / 1e3, 6), "ms",
                                         summary_source("input_pipeline", "host_ms", name),
                                         inputs.page("input_pipeline", "host-side")))
    framework = inputs.framework
    if top is not None and focus is not None and focus.bottleneck is not None:
        name = top["iterator"]
        short = name.rsplit("::", 1)[-1]
        position = next((i for i, long_name in enumerate(focus.tree["long_name"]) if long_name == name), None)
        href = inputs.page("input_pipeline", iterator_anchor(position) if position is not None else "tf-data")
        evidence += [
            Evidence("tf.data bottleneck (XProf)", name, "", summary_source("input_pipeline", "bottleneck", "iterator"),
                     href),
            Evidence(f"{short} self time in the slowest execution of {top['input_pipeline']}", top["latency_ms"], "ms",
                     summary_source("input_pipeline", "bottleneck", "latency_ms"), href),
            Evidence(f"Slowest execution of {top['input_pipeline']}", top["max_latency_ms"], "ms",
                     summary_source("input_pipeline", "bottleneck", "max_latency_ms"), inputs.page("input_pipeline",
                                                                                                     "tf-data")),
        ]
        if position is not None:
            evidence.append(Evidence(f"{short} share of that execution",
                                     float(focus.tree["self_percent"].iloc[position]), "percent",
                                     csv_source(TF_DATA_ITERATORS_CSV, {"Iterator": name},
                                                "Self time (% of execution)"), href))
        links.insert(0, Link(f"tf.data bottleneck: {short}", href))
        finding_id = "input.tf_data_bottleneck"
        title = (f"The step waits for input {percent:.1f}% of the time; the tf.data bottleneck is {short} "
                 f"({name})")
        action = _advice_text(focus.advice) or pick(
            framework, "Parallelize and prefetch the input pipeline (tf.data.AUTOTUNE).",
            "Prefetch batches to the device and parallelize loading.")
    else:
        finding_id = "input.bound"
        title = f"The step waits for input {percent:.1f}% of the time"
        action = pick(framework,
                      "Build the input with tf.data: parallel map (`num_parallel_calls=tf.data.AUTOTUNE`), "
                      "`cache()` what does not change, `prefetch(tf.data.AUTOTUNE)` last, and check the input "
                      "pipeline page's host-side breakdown for what the host spends its time on.",
                      "Load and preprocess the next batches while the device computes: a loader with worker "
                      "processes (e.g. grain or tf.data with `.prefetch`), then put them on the device ahead of "
                      "time (`jax.device_put` of the next batch, or flax's `prefetch_to_device`).")
    if enqueue_share >= ENQUEUE_SHARE:
        action += (f" Enqueuing data onto the device is {enqueue_share:.0f}% of the input time: send fewer, larger "
                   "transfers and overlap them with computation (prefetch to the device).")
    steps_label = _label(key, view.analysis.tpu)
    return [Finding(
        id=finding_id, severity=severity_for(percent), title=title,
        estimate=(f"XProf's input time per step ('{steps_label}'), averaged over the {inputs.steps} steps analysed: "
                  "the time each step would save if the next batch were always ready."),
        action=action,
        evidence=[_category_evidence(inputs, key), inputs.step_time_evidence(), *evidence, *_top_steps(inputs, key)],
        links=links, ms_per_step=view.analysis.categories[key].average, percent_of_step=percent,
    )]


def tpu_host_round_trips(inputs: RunInputs) -> list[Finding]:
    """TPU steps where the TensorCore sits idle, waiting for the host between steps (not for input)."""
    view = inputs.overview
    if not inputs.steps or not view.analysis.tpu or _share(inputs, "tc_idle") < TPU_IDLE_PERCENT:
        return []
    share = _share(inputs, "tc_idle")
    return [_breakdown_finding(
        inputs, "tc_idle", "tpu.host_round_trips",
        f"The TensorCore is idle {share:.1f}% of each step waiting for the host (not for input): too few steps "
        "run per call to the device",
        _estimate("TensorCore idle", inputs),
        pick(inputs.framework,
             "Run several steps per call to the TPU: `model.compile(..., steps_per_execution=N)` in Keras, or a "
             "loop of steps inside one `tf.function` (host training loop); avoid reading values back "
             "(`.numpy()`) every step.",
             "Run several steps per call to the device: put the step in `jax.lax.scan` / `fori_loop` over a "
             "stack of batches inside one `jax.jit`, and do not read results back every step (`float(loss)`, "
             "`np.asarray`, `block_until_ready`) — log every N steps instead."),
    )]


# --- the other step categories ------------------------------------------------------------------------------

def _host_work(inputs: RunInputs, kind: str, exposed: bool) -> tuple[float, float, list[Evidence]]:
    """(ms per step, % of the step time, evidence) of one kind of host-thread work inside the hosts' steps,
    measured on the timeline (`exposed`: only while nothing more important ran)."""
    total = window = count = 0
    evidence = []
    for host, facts in inputs.facts.items():
        share = getattr(facts, kind)
        if not facts.steps or not share.count:
            continue
        ps = share.exposed_ps if exposed else share.busy_ps
        total += ps
        window += sum(e - b for _, b, e in facts.steps)
        count += len(facts.steps)
        source = {"host": host, "kind": kind, "windows": [[b, e] for _, b, e in facts.steps]}
        evidence += [Evidence(f"Events on {host}'s threads inside its {len(facts.steps)} steps", share.count, "count",
                              {"trace_total": source}, ""),
                     Evidence(f"Time in them on {host}" + (" while nothing more important ran" if exposed else ""),
                              ps / 1e9, "ms",
                              {"trace_total": {**source, "field": "exposed" if exposed else "busy"}}, "")]
        evidence += [Evidence(f"{e.name} on {host}", e.duration_ps / 1e9, "ms",
                              {"trace": {"host": host, "plane": e.plane, "t0_ps": e.begin_ps,
                                         "t1_ps": e.begin_ps + e.duration_ps, "what": "event", "name": e.name}},
                              timeline_href(host, e.begin_ps, e.begin_ps + e.duration_ps, e.name)
                              if "trace" in inputs.pages else "")
                     for e in share.longest]
    if not count or not window:
        return 0.0, 0.0, []
    return total / 1e9 / count, 100.0 * total / window, evidence


def _timeline_finding(inputs: RunInputs, kind: str, exposed: bool, finding_id: str, title: str, estimate: str,
                      action: str, threshold: float) -> list[Finding]:
    ms, share, evidence = _host_work(inputs, kind, exposed)
    if share < threshold:
        return []
    links = [Link(f"Longest on the timeline: {e.label}", e.href) for e in evidence if e.href][:1]
    return [Finding(id=finding_id, severity=severity_for(share), title=title.format(share=share), estimate=estimate,
                    action=action, evidence=[*evidence, inputs.step_time_evidence()], links=links,
                    ms_per_step=ms, percent_of_step=share)]


def kernel_launch(inputs: RunInputs) -> list[Finding]:
    """Host threads launching GPU work while the GPU has nothing to run (the step waits on launches)."""
    if inputs.hardware != "GPU":
        return []
    tf_data = inputs.overview is not None and inputs.overview.analysis.input_breakdown is not None and \
        inputs.overview.analysis.input_breakdown.uses_tf_data
    return _timeline_finding(
        inputs, "launches", True, "gpu.kernel_launch_bound",
        "The GPU waits on kernel launches {share:.1f}% of the step time",
        "The time host threads spent in kernel-launch and copy API calls (events with a correlation id) inside the "
        "steps while no GPU of the host ran anything, per step: XProf's 'Kernel launch' time, measured on the "
        "timeline.",
        pick(inputs.framework,
             "Launch fewer, larger kernels: compile the step with XLA (`tf.function(jit_compile=True)`) and grow "
             "the batch so each launch does more work."
             + (" The host also runs tf.data: set `TF_GPU_THREAD_MODE=gpu_private` so that launches get their "
                "own threads." if tf_data else ""),
             "Launch fewer, larger kernels: put more of the step under one `jax.jit` (no Python loop of small "
             "jitted calls) so that XLA fuses it, and grow the batch so each launch does more work."),
        KERNEL_LAUNCH_PERCENT)


def host_compute(inputs: RunInputs) -> list[Finding]:
    """On a GPU host, framework ops running on host threads while the GPU has nothing to run."""
    if inputs.hardware != "GPU":
        return []
    return _timeline_finding(
        inputs, "host_ops", True, "host.compute_in_step",
        "Host ops run while the GPU idles, {share:.1f}% of the step time",
        "The time framework ops ran on host threads inside the steps while no GPU of the host ran anything and "
        "no launch call was under way, per step: XProf's 'Host compute' time, measured on the timeline.",
        pick(inputs.framework,
             "Find these ops in the TF stats page (host rows) and on the timeline: give them a GPU kernel or move "
             "them into the compiled step (`tf.function(jit_compile=True)`), or into the tf.data pipeline where "
             "they overlap the GPU; ops without a GPU kernel (string ops, some casts, Python functions) run on "
             "the host.",
             "Move host-side NumPy/Python work into the jitted step (jnp instead of np), or into the input loader "
             "where it overlaps the device."),
        HOST_COMPUTE_PERCENT)


def all_others(inputs: RunInputs) -> list[Finding]:
    """XProf cannot attribute a share of the step to any op ('All others'): Python, dispatch, waiting. On GPU
    hosts, the part the launch and host-op findings measure on the timeline is theirs, not this one's."""
    if not inputs.steps or inputs.overview.analysis.tpu:
        return []
    other_ms = inputs.overview.analysis.categories["other"].average
    explained_ms, explained = 0.0, []
    if inputs.hardware == "GPU":
        for kind, label in (("launches", "kernel launches"), ("host_ops", "host ops")):
            ms, _, _ = _host_work(inputs, kind, True)
            if ms > 0:
                explained_ms += ms
                explained.append(Evidence(f"Of it, the GPU waiting on {label} (per step, on the timeline)", ms, "ms",
                                          None, ""))
    remainder = max(0.0, other_ms - explained_ms)
    share = 100.0 * remainder / inputs.step_ms if inputs.step_ms else 0.0
    if share < ALL_OTHERS_PERCENT:
        return []
    xprof_share = _share(inputs, "other")
    finding = _breakdown_finding(
        inputs, "other", "host.unattributed_step_time",
        f"{xprof_share:.1f}% of the step time is spent outside any op ('All others'): Python, dispatch or waiting",
        "XProf's 'All others' time per step, averaged over the steps analysed"
        + (", minus the part the kernel-launch and host-op findings count" if explained else "")
        + ": the time each step would save if it went away.",
        pick(inputs.framework,
             "Look at the host threads on the timeline for the gaps between ops: run the step as one "
             "`tf.function` (no eager Python between ops), use Keras `steps_per_execution`, and keep logging and "
             "metrics out of the per-step path.",
             "Look at the timeline between the jitted calls: put the whole step (forward, backward, update) in one "
             "`jax.jit`, avoid Python work and device-to-host reads (`float(loss)`, `.item()`, printing) every "
             "step, and keep dispatch asynchronous."),
        explained,
    )
    finding.ms_per_step, finding.percent_of_step, finding.severity = remainder, share, severity_for(share)
    return [finding]


def communication(inputs: RunInputs) -> list[Finding]:
    """Device-to-device copies and collectives take a large share of the step."""
    if not inputs.steps or inputs.overview.analysis.tpu:
        return []
    view = inputs.overview
    ms = view.analysis.categories["device_to_device"].average + view.analysis.categories["device_collectives"].average
    share = 100.0 * ms / inputs.step_ms if inputs.step_ms else 0.0
    if share < COMMUNICATION_PERCENT:
        return []
    key = "device_collectives" if view.analysis.categories["device_collectives"].average >= \
        view.analysis.categories["device_to_device"].average else "device_to_device"
    finding = _breakdown_finding(
        inputs, key, "device.communication",
        f"Device-to-device transfers and collectives take {share:.1f}% of the step time",
        "XProf's 'Device to device' and 'Device collective communication' time per step, averaged over the "
        f"{inputs.steps} steps analysed.",
        pick(inputs.framework,
             "Overlap communication with computation and send less: all-reduce gradients in larger buckets, in "
             "16-bit (`tf.distribute` with mixed precision), keep variables on the device that uses them, and "
             "check that collectives use NCCL (`tf.distribute.MirroredStrategy` / `MultiWorkerMirroredStrategy` "
             "with `CommunicationImplementation.NCCL`).",
             "Shard so that collectives are fewer and larger (data parallelism over the batch, parameters "
             "replicated or FSDP-sharded), keep arrays on the device that uses them (no `jax.device_put` between "
             "devices in the step), and let XLA overlap collectives with compute (async collectives)."),
    )
    other = "device_to_device" if key == "device_collectives" else "device_collectives"
    finding.evidence.insert(1, _category_evidence(inputs, other))
    finding.ms_per_step, finding.percent_of_step = ms, share
    finding.severity = severity_for(share)
    return [finding]


def compilation(inputs: RunInputs) -> list[Finding]:
    """XLA compilation inside the analysed steps: something is recompiled while training."""
    return _timeline_finding(
        inputs, "compilation", False, "host.compilation_in_steps",
        "Compilation runs inside the steps ({share:.1f}% of the step time): something is recompiled while training",
        "The time host threads spent compiling (JAX's backend_compile, PJRT and XLA compilers, TF's XlaCompile) "
        "inside the steps, per step: XProf's 'Compilation' time, measured on the timeline.",
        pick(inputs.framework,
             "Stop retracing: give the `tf.function` an `input_signature` (or `reduce_retracing=True`), pass "
             "tensors rather than Python numbers, and keep batch shapes fixed (`drop_remainder=True`).",
             "Stop recompiling: keep shapes and dtypes fixed (pad the last batch), mark Python configuration as "
             "`static_argnums` only when it does not change, and find the cause with "
             "`jax.config.update('jax_explain_cache_misses', True)` / `jax_log_compiles`."),
        COMPILE_PERCENT)


def step_variance(inputs: RunInputs) -> list[Finding]:
    """Step times vary a lot: some steps are much slower than the others."""
    if inputs.steps < MIN_STEPS_FOR_VARIANCE:
        return []
    summary = inputs.overview.analysis.step_time
    if not summary.average or summary.standard_deviation != summary.standard_deviation:
        return []
    variation = 100.0 * summary.standard_deviation / summary.average
    if variation < VARIANCE_PERCENT:
        return []
    lost = summary.average - summary.minimum
    share = 100.0 * lost / summary.average
    view = inputs.overview
    steps = view.steps.sort_values(["step_time_ms", "step_num"], ascending=[False, True], kind="stable")
    slow = [Evidence(step_label(str(row.step_name)).capitalize(), float(row.step_time_ms), "ms",
                     csv_source(OVERVIEW_STEPS_CSV, {"Host": view.label, "Step id": row.step_num}, "Step time (ms)"),
                     inputs.page("overview", step_anchor(row.step_num)))
            for row in steps.head(TOP_STEPS).itertuples()]
    links = [Link("Steps (overview)", inputs.page("overview"))]
    slowest = steps.iloc[0]
    window = _step_window(inputs, str(slowest["step_name"]))
    if window is not None and "trace" in inputs.pages:
        host, begin, end = window
        links.append(Link(f"Slowest step on the timeline ({step_label(str(slowest['step_name']))})",
                          timeline_href(host, begin, end)))
    return [Finding(
        id="steps.variance", severity=severity_for(share),
        title=f"Step time varies by {variation:.0f}% (σ {ms_text(summary.standard_deviation)} around "
              f"{ms_text(summary.average)})",
        estimate="The average step time minus the fastest step's: what each step would save if all ran like the "
                 "fastest one.",
        action="Compare the slowest steps with a fast one on the timeline: periodic work (checkpoints, "
               "evaluation, logging, garbage collection), input stalls on some batches, or shapes that change "
               "between steps (recompilation) are the usual causes.",
        evidence=[
            inputs.step_time_evidence(),
            Evidence("Standard deviation", summary.standard_deviation, "ms",
                     summary_source("overview", "step_time_ms", "standard_deviation"), inputs.page("overview")),
            Evidence("Fastest step", summary.minimum, "ms", summary_source("overview", "step_time_ms", "minimum"),
                     inputs.page("overview")),
            Evidence("Slowest step", summary.maximum, "ms", summary_source("overview", "step_time_ms", "maximum"),
                     inputs.page("overview")),
            inputs.steps_evidence(), *slow],
        links=links, ms_per_step=lost, percent_of_step=share,
    )]


def _step_window(inputs: RunInputs, name: str) -> tuple[str, int, int] | None:
    """(host, begin, end) of the step of this name on the first host that has it."""
    for host, facts in inputs.facts.items():
        for step_name, begin, end in facts.steps:
            if step_name == name:
                return host, begin, end
    return None


def straggler_hosts(inputs: RunInputs) -> list[Finding]:
    """With three hosts or more, a host whose steps are much slower than the others' (modified z-score)."""
    hosts = {h: v for h, v in inputs.host_views.items() if len(v.analysis.steps)}
    if len(hosts) < MIN_HOSTS_FOR_STRAGGLERS:
        return []
    averages = {h: float(v.analysis.step_time.average) for h, v in hosts.items()}
    median = statistics.median(averages.values())
    mad = statistics.median(abs(a - median) for a in averages.values())
    stragglers = []
    for host, average in averages.items():
        if mad == 0:
            score = float("inf") if average - median > 1e-9 else 0.0
        else:
            score = 0.6745 * (average - median) / mad
        if score > STRAGGLER_SCORE:
            stragglers.append((host, average, score))
    if not stragglers:
        return []
    stragglers.sort(key=lambda s: -s[1])
    slow_host, slow_average, _ = stragglers[0]
    lost = slow_average - median
    share = 100.0 * lost / slow_average if slow_average else 0.0
    evidence = [Evidence(f"Average step time on {h}", a, "ms",
                         csv_source(OVERVIEW_STEPS_CSV, {"Host": h}, "Step time (ms)", "mean"),
                         inputs.page("overview"))
                for h, a in sorted(averages.items(), key=lambda kv: -kv[1])]
    return [Finding(
        id="steps.straggler_host", severity=severity_for(share),
        title=f"Host {slow_host} is a straggler: its steps average {ms_text(slow_average)} against "
              f"{ms_text(median)} on the median host",
        estimate="The straggler's average step time minus the median host's: in synchronous training every host "
                 "waits for the slowest one each step.",
        action="Look at what differs on that host: its input pipeline (input pipeline page, per host), other "
               "processes competing for its CPUs, a slower or throttled device, or an unbalanced share of the "
               "data.",
        evidence=[*evidence, Evidence("Median of the hosts' averages", median, "ms", None, "")],
        links=[Link("Each host's steps (overview)", inputs.page("overview"))],
        ms_per_step=lost, percent_of_step=share,
    )]


__all__ = ["all_others", "communication", "compilation", "host_compute", "input_bound", "kernel_launch",
           "step_variance", "straggler_hosts", "tpu_host_round_trips"]
