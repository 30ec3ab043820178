"""Rules over the step-time breakdown: where each step's time goes, besides computing on the device.

They read the run's step analysis (the overview's and the input pipeline's, all hosts combined) and the
input pipeline's tf.data analysis; every time they quote is one of XProf's step-time categories,
averaged over the steps the overview keeps.
"""

from __future__ import annotations

import dataclasses
import re
import statistics

from reportgen.core.findings.capture import partial_gpu_model
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
    LEDGER_HREF,
    OVERVIEW_STEPS_CSV,
    TF_DATA_ITERATORS_CSV,
    iterator_anchor,
    step_anchor,
    timeline_href,
)
from reportgen.core.steps.categories import CATEGORY_LABELS
from reportgen.core.steps.ledger import LEDGER_LABELS, RunLedger
from reportgen.core.tools.input_pipeline import MODERATELY_INPUT_BOUND
from reportgen.core.tools.overview import TPU_BREAKDOWN, TPU_CATEGORIES

ENQUEUE_SHARE = 30.0  # XProf's data-transfer-bound rule: enqueuing is this share of the input time
PY_FUNCTION_SHARE = 10.0  # of the input wait: a tf.py_function in the pipeline worth naming
SATURATED_THREADS = 1.5  # tf.data threads busy on average during the input wait: parallelism already in use
TPU_IDLE_PERCENT = 10.0  # XProf's TensorCore-idle-bound rule
KERNEL_LAUNCH_PERCENT = 3.0  # XProf's kernel-launch statement (moderate from 3%, high from 15%)
HOST_COMPUTE_PERCENT = 10.0
ALL_OTHERS_PERCENT = 10.0
COMMUNICATION_PERCENT = 10.0
COMPILE_PERCENT = 1.0
VARIANCE_PERCENT = 20.0  # coefficient of variation of the step time
MIN_STEPS_FOR_VARIANCE = 5  # fewer steps give no meaningful σ (ours)
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
                       extra: list[Evidence] | None = None, claims: list[str] | None = None) -> Finding:
    share = _share(inputs, key)
    return Finding(
        id=finding_id, severity=severity_for(share), title=title, estimate=estimate, action=action,
        evidence=[_category_evidence(inputs, key), inputs.step_time_evidence(), inputs.steps_evidence(),
                  *(extra or []), *_top_steps(inputs, key)],
        links=[Link("Step-time breakdown (overview)", inputs.page("overview"))],
        ms_per_step=inputs.overview.analysis.categories[key].average, percent_of_step=share, claims=claims or [],
    )


def _estimate(label: str, inputs: RunInputs) -> str:
    return (f"XProf's '{label}' time per step, averaged over the {inputs.steps} steps analysed: the time each "
            "step would save if it went away.")


# --- input --------------------------------------------------------------------------------------------------

def _advice_text(advice) -> str:
    return " ".join(a.text + (f" (`{a.code}`)" if a.code else "") for a in advice)


def _input_action(inputs: RunInputs, ledger: RunLedger | None) -> str:
    """What to do about an input wait the tf.data analysis has no bottleneck for, from what the trace shows."""
    framework = inputs.framework
    if ledger is not None and ledger.python_generator:
        return ("A Python generator feeds the pipeline (`tf.data.Dataset.from_generator`, its next() called through "
                "RemoteCall): it runs under the GIL, one element at a time, and the step waits for it. Produce the "
                "data with TensorFlow ops instead (`from_tensor_slices` over arrays, TFRecord files read with "
                "`interleave(..., num_parallel_calls=tf.data.AUTOTUNE)`), or shard the source over several "
                "generators read in parallel with `interleave`; a larger prefetch cannot help while the generator is "
                "slower than the step.")
    if ledger is not None and ledger.distributed_iterator and framework == "tensorflow":
        focus = inputs.input_pipeline.focus if inputs.input_pipeline is not None else None
        unseen = focus is None or focus.is_device_pipeline  # XProf's analysis found only the per-device pipelines
        return ("The step waits on tf.distribute's multi-device iterator: each replica's prefetch buffer runs dry "
                "because the dataset feeding it produces batches more slowly than the replicas take them. Speed up "
                "that dataset (parallel `map`, `cache()` of the deterministic part, `prefetch(tf.data.AUTOTUNE)` "
                "before `experimental_distribute_dataset` or inside the `distribute_datasets_from_function` "
                "input function)." + (" The capture holds the replicas' side of the iterator only (its per-device "
                                      "prefetch and the RemoteCalls to the worker), not that dataset's own "
                                      "iterators: profile the worker's input pipeline itself to see which of its "
                                      "stages is slow." if unseen else ""))
    named = [name for name, _, _ in ledger.top("input")] if ledger is not None else []
    if framework == "jax" or (named and not any("Iterator" in n for n in named)):
        where = f" (the trace shows {', '.join(f'`{_shown(n)}`' for n in named[:2])} inside each step)" if named else ""
        return ("The next batch is loaded inside the step, while the compiled program waits" + where + ": load and "
                "transfer it while the current step runs — a background thread that fills a small queue, or a "
                "prefetching loader (grain with worker processes, or tf.data with `.prefetch()` and "
                "`.as_numpy_iterator()`) — and put it on the device ahead of the call (`jax.device_put`, or flax's "
                "`jax_utils.prefetch_to_device`).")
    return pick(framework,
                "Build the input with tf.data: parallel map (`num_parallel_calls=tf.data.AUTOTUNE`), "
                "`cache()` what does not change, `prefetch(tf.data.AUTOTUNE)` last, and check the input "
                "pipeline page's host-side breakdown for what the host spends its time on.",
                "Load and preprocess the next batches while the device computes: a loader with worker "
                "processes (e.g. grain or tf.data with `.prefetch`), then put them on the device ahead of "
                "time (`jax.device_put` of the next batch, or flax's `prefetch_to_device`).")


def _same(a: float, b: float) -> bool:
    """Two measures of one quantity that agree within 1%: said once."""
    return abs(a - b) <= 0.01 * abs(b)


def input_bound(inputs: RunInputs) -> list[Finding]:
    """The step waits for input: the step ledger's consumer-side wait (XProf's input share beside it), with the
    tf.data bottleneck where the tf.data analysis found one."""
    view = inputs.overview
    ledger = _ledger(inputs)
    xprof_percent = view.analysis.bottleneck.input_percent if inputs.steps else None
    percent = ledger.percent("input") if ledger is not None else xprof_percent
    if percent is None or percent < MODERATELY_INPUT_BOUND or _blocking_loop(inputs):
        return []
    key = "tc_infeed" if view is not None and view.analysis.tpu else "input"
    # The measure the finding states comes first (the ledger's, where there is one); XProf's own figures follow it.
    evidence: list[Evidence] = _ledger_evidence(inputs, ("input",)) + [_ledger_step_evidence(inputs)] \
        if ledger is not None else []
    if inputs.steps:
        # XProf's input time and step time, unless they are the ledger's, already said above, within 1%.
        xprof = _category_evidence(inputs, key)
        if ledger is None:
            evidence.append(xprof)
        elif not _same(xprof.value, ledger.average_ms("input")):
            evidence.append(dataclasses.replace(xprof, label=xprof.label.replace(" (average)", " (XProf's breakdown)")))
        xprof_step = inputs.step_time_evidence()
        if ledger is None or not _same(xprof_step.value, ledger.step_ms):
            evidence.append(xprof_step)
    if xprof_percent is not None:
        evidence += [Evidence("Share of the step time waiting for input (XProf)", xprof_percent, "percent",
                              summary_source("overview", "input_percent"), inputs.page("input_pipeline", "summary")),
                     Evidence("XProf's classification (input-bound)", view.analysis.bottleneck.input_bound, "",
                              summary_source("overview", "input_bound"), inputs.page("input_pipeline", "summary"))]
    links = [Link("Input pipeline analysis", inputs.page("input_pipeline", "summary"))]
    data = inputs.input_pipeline
    top = data.bottleneck_summary if data is not None else None
    focus = data.focus if data is not None else None
    breakdown = view.analysis.input_breakdown if view is not None else None
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
        self_percent = float(focus.tree["self_percent"].iloc[position]) if position is not None else None
        if self_percent is not None and self_percent <= 100.0:
            evidence.append(Evidence(f"{short} share of that execution", self_percent, "percent",
                                     csv_source(TF_DATA_ITERATORS_CSV, {"Iterator": name},
                                                "Self time (% of execution)"), href))
        elif self_percent is not None:
            # XProf sums an iterator's self time over its calls; calls that run at once on several threads add up
            # past the execution's wall time. What that says is how many threads its work kept busy on average.
            evidence.append(Evidence(f"{short}: threads its calls kept busy on average during that execution (self "
                                     "time summed over its concurrent calls ÷ the execution's wall time)",
                                     round(self_percent / 100.0, 2), "", None, href))
        links.insert(0, Link(f"tf.data bottleneck: {short}", href))
        finding_id = "input.tf_data_bottleneck"
        title = (f"The step waits for input {percent:.1f}% of the time; the tf.data bottleneck is {short} "
                 f"({name})")
        action = _advice_text(focus.advice) or _input_action(inputs, ledger)
    else:
        finding_id = "input.bound"
        title = f"The step waits for input {percent:.1f}% of the time"
        if ledger is not None and ledger.python_generator:
            title += ": a Python generator feeds tf.data"
        elif ledger is not None and ledger.distributed_iterator and framework == "tensorflow":
            title += " from tf.distribute's multi-device iterator"
        elif ledger is not None and ledger.top("input"):
            title += f" ({_shown(ledger.top('input')[0][0])})"
        action = _input_action(inputs, ledger)
    python_share = ledger.input_python_percent if ledger is not None else None
    if python_share is not None and python_share >= PY_FUNCTION_SHARE:
        evidence.append(Evidence("Share of the input wait with a tf.py_function running", python_share,
                                 "percent", summary_source("step_ledger", "input_python_percent"), LEDGER_HREF))
        title += f"; a Python function inside tf.data runs {python_share:.0f}% of the wait"
        if ledger.python_generator:
            # from_generator's next() is the py_function here: whether it computes (GIL held) or waits (sleep, I/O:
            # GIL released) the trace does not say, and the two call for different fixes.
            action = (f"The pipeline's Python generator (`from_generator`: its next() runs as a py_function) runs "
                      f"during {python_share:.0f}% of the wait; the trace does not say whether it computes or waits. "
                      "While it computes in Python it holds the GIL: produce the data with TensorFlow ops or offline. "
                      "While it waits (sleep, I/O, a network read) it releases the GIL: read several generators at "
                      "once, `tf.data.Dataset.range(k).interleave(lambda i: tf.data.Dataset.from_generator(gen, "
                      "args=(i,), output_signature=...), num_parallel_calls=k)`. A larger prefetch cannot help while "
                      "the generator is slower than the step.")
        else:
            action = (f"A Python function inside the pipeline (`tf.py_function` / `tf.numpy_function`: EagerPyFunc or "
                  f"PyFunc ops) runs during {python_share:.0f}% of the wait. While it computes in Python it holds the "
                  "GIL, so parallel map calls overlap only its waiting (I/O, sleeps, NumPy that releases the GIL), "
                  "not its Python work: rewrite it with TensorFlow ops (tf.image, tf.strings, tf.io) or do that work "
                  "offline and store its result; until then, the parallelism below helps only as far as it waits. "
                  + action)
    busy_threads = ledger.producer_threads_busy if ledger is not None else None
    if busy_threads is not None and busy_threads >= SATURATED_THREADS:
        evidence.append(Evidence("tf.data's threads busy while the step waited (threads, on average)",
                                 busy_threads, "", summary_source("step_ledger", "tf_data_threads_busy"),
                                 LEDGER_HREF))
        action += (f" While the step waited, tf.data's own threads were already busy: {busy_threads:.1f} of them "
                   "on average (their events' wall time: a function that sleeps or waits on I/O counts too). If that "
                   "is computation and the host has no more idle cores, more parallelism cannot shorten the wait: "
                   "cache the deterministic part, preprocess offline, or use a host with more cores.")
    if enqueue_share >= ENQUEUE_SHARE:
        action += (f" Enqueuing data onto the device is {enqueue_share:.0f}% of the input time: send fewer, larger "
                   "transfers and overlap them with computation (prefetch to the device).")
    if ledger is not None:
        estimate = ("The time the step's consumer waited for the next batch (tf.data's GetNext ops, a generator's "
                    "calls, the program's own data-loading annotations) while no device or compiled program ran, "
                    f"per step over the {_steps_counted(inputs)}: the time each step would save if the next batch "
                    "were always ready.")
        if xprof_percent is not None and abs(xprof_percent - percent) >= 1.0:
            estimate += (f" XProf's input share is {xprof_percent:.1f}%: its step breakdown counts only the input ops "
                         "it types on the step's own events, so it misses waits on other threads and in Python.")
        ms = ledger.average_ms("input")
    else:
        steps_label = _label(key, view.analysis.tpu)
        estimate = (f"XProf's input time per step ('{steps_label}'), averaged over the {inputs.steps} steps "
                    "analysed: the time each step would save if the next batch were always ready.")
        ms = view.analysis.categories[key].average
    step_rows = _top_steps(inputs, key) if inputs.steps and (xprof_percent or 0) > 0 else []
    return [Finding(
        id=finding_id, severity=severity_for(percent), title=title, estimate=estimate, action=action,
        evidence=[*evidence, *step_rows], links=links, ms_per_step=ms, percent_of_step=percent,
        claims=["input"] if ledger is not None else [],
    )]


COMPUTE_BOUND_PERCENT = 75.0  # of the step: the model's own compute (ours)


def compute_bound(inputs: RunInputs) -> list[Finding]:
    """A positive finding: the step is the model's compute and the input keeps up, so the input side has nothing to
    fix. On a host without a device the framework ops and the compiled program are the compute."""
    ledger = _ledger(inputs)
    if ledger is None:
        return []
    keys = ("device_compute",) if ledger.has_device else ("compiled_program", "host_compute")
    share = sum(ledger.percent(k) for k in keys)
    waiting = ledger.percent("input")
    if share < COMPUTE_BOUND_PERCENT or waiting >= MODERATELY_INPUT_BOUND:
        return []
    held = [k for k in keys if ledger.percent(k) > 0]
    # The compiled program's contributors are the runtime's events (ThunkExecutor…), not ops: its ops are on the
    # HLO pages. Framework ops and device kernels are named.
    named = [(name, ms) for k in held if k != "compiled_program" for name, _, ms in ledger.top(k)][:3]
    where = ", ".join(f"`{_shown(n)}`" for n, _ in named) or \
        ("the compiled XLA program's HLO ops" if "compiled_program" in held else "")
    device = "the device" if ledger.has_device else "the CPU"
    # The compiled program's time is its whole span on the host (the runtime's ThunkExecutor events), its waits for
    # its own worker threads included: its HLO ops cover less of it. Said as what it is, not as the ops' compute.
    what = "the model's compute"
    if "compiled_program" in held:
        what = ("the compiled XLA program" + (" and framework ops" if "host_compute" in held else "")
                + " (its whole run, waits for its own threads included)")
    return [Finding(
        id="steps.compute_bound", severity="info",
        title=f"Compute-bound: {what} takes {share:.1f}% of the step on {device}, and the step waits "
              f"for input {waiting:.1f}% of it: nothing to fix on the input side",
        estimate="Nothing at stake: a statement of where the step goes (the step ledger's "
                 + " and ".join(f"'{LEDGER_LABELS[k]}'" for k in held) + f" against its 'Waiting for input', over the "
                 f"{_steps_counted(inputs)}).",
        action=("A faster step needs cheaper compute, not a faster input pipeline: start from the ops that take the "
                "step" + (f" ({where})" if where else "") + " on the op pages, and from the batch size and numeric "
                "precision; input-side changes (more parallelism, prefetch, cache) cannot shorten this step."),
        evidence=[*_ledger_evidence(inputs, (*held, "input")), _ledger_step_evidence(inputs)],
        links=[Link("Where the step goes (step ledger)", LEDGER_HREF)],
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
        claims=["other"],
    )]


# --- the step ledger: causes read from the host threads ---------------------------------------------------

_JAX_DISPATCH = re.compile(r"^PjitFunction\(|PjRt\w*::Execute|PJRT_LoadedExecutable_Execute")
# JAX's host-to-device transfer of a batch (the Python tracer's event), and the dispatch of its little program.
_JAX_TRANSFER = re.compile(r"^\$\S*(api|array_constructors|lax_numpy)\.py:\d+ (device_put|asarray|array)$|"
                           r"^PjitFunction\(|^H2D Dispatch$")


def _shown(name: str) -> str:
    """A contributor's name for a sentence: a Python function as `batch (capture.py:45)`, others as they are."""
    if name.startswith("$") and " " in name:
        where, _, function = name[1:].partition(" ")
        return f"{function} ({where})"
    return name


def _ledger(inputs: RunInputs) -> RunLedger | None:
    ledger = inputs.ledger
    return ledger if ledger is not None and ledger.step_count else None


def _ledger_evidence(inputs: RunInputs, keys: tuple[str, ...], top: int = TOP_STEPS) -> list[Evidence]:
    """Each cause's exposed time per step (the ledger's average) and the names that held most of it."""
    ledger = inputs.ledger
    evidence = [Evidence(f"{LEDGER_LABELS[k]} per step (step ledger)", ledger.average_ms(k), "ms",
                         summary_source("step_ledger", "average_ms", k), LEDGER_HREF) for k in keys]
    for key in keys:
        evidence += [Evidence(f"{name}: its part of that per step ({count:,} events)", ms, "ms",
                              summary_source("step_ledger", "top", key, {"name": name}, "ms_per_step"), LEDGER_HREF)
                     for name, count, ms in ledger.top(key)[:top] if ms > 0]
    return evidence


def _steps_counted(inputs: RunInputs) -> str:
    ledger = inputs.ledger
    how = f" (steps inferred from {ledger.inferred_from})" if ledger.inferred_from else ""
    counts = [len(h.steps) for h in ledger.hosts if h.steps]
    if len(counts) > 1 and len(set(counts)) == 1:
        # Each host's steps are its own (a step of two hosts is two measures of one step): said per host, so that
        # it reads as the overview's step count does.
        return f"{counts[0]} step{'s' if counts[0] != 1 else ''} on each of {len(counts)} hosts{how}"
    return f"{ledger.step_count} step{'s' if ledger.step_count != 1 else ''}{how}"


def _ledger_finding(inputs: RunInputs, keys: tuple[str, ...], finding_id: str, title: str, estimate: str,
                    action: str, threshold: float, extra: list[Evidence] | None = None) -> list[Finding]:
    """A finding whose time at stake is these ledger causes, when they reach `threshold` % of the step."""
    ledger = _ledger(inputs)
    if ledger is None:
        return []
    share = sum(ledger.percent(k) for k in keys)
    if share < threshold:
        return []
    ms = sum(ledger.average_ms(k) for k in keys)
    return [Finding(
        id=finding_id, severity=severity_for(share), title=title.format(share=share, ms=ms_text(ms)),
        estimate=estimate + f" Averaged over the {_steps_counted(inputs)}; each moment of a step is counted under "
                            "one cause only (the step ledger's precedence, docs/findings.md).",
        action=action, evidence=[*_ledger_evidence(inputs, keys), *(extra or []), _ledger_step_evidence(inputs)],
        links=[Link("Where the step goes (step ledger)", LEDGER_HREF)],
        ms_per_step=ms, percent_of_step=share, claims=list(keys))]


def _ledger_step_evidence(inputs: RunInputs) -> Evidence:
    return Evidence("Average step time (step ledger's steps)", inputs.ledger.step_ms, "ms",
                    summary_source("step_ledger", "step_time_ms"), LEDGER_HREF)


def kernel_launch(inputs: RunInputs) -> list[Finding]:
    """The device idles while the host dispatches ops and launches kernels (the step waits on launches)."""
    ledger = _ledger(inputs)
    if ledger is None or not ledger.has_device or inputs.hardware == "TPU" or _blocking_loop(inputs):
        return []
    tf_data = inputs.overview is not None and inputs.overview.analysis.input_breakdown is not None and \
        inputs.overview.analysis.input_breakdown.uses_tf_data
    threads = ""
    if tf_data and not ledger.gpu_private_threads:
        threads = (" The host also runs tf.data: set `TF_GPU_THREAD_MODE=gpu_private` so that launches get their "
                   "own threads.")
    elif ledger.gpu_private_threads:
        threads = " (`TF_GPU_THREAD_MODE=gpu_private` is already in effect: the launch threads are tf_gpu_private_*.)"
    named = [name for name, _, _ in ledger.top("kernel_launch")]
    jax_dispatch = ("Launch fewer, larger kernels: put more of the step under one `jax.jit` (no Python loop of "
                    "small jitted calls) so that XLA fuses it, and grow the batch so each launch does more work.")
    if any(_JAX_DISPATCH.search(n) for n in named[:3]):
        jax_dispatch = ("Most of it is JAX dispatching the step's program (`" + next(
            n for n in named if _JAX_DISPATCH.search(n)) + "`) while the GPU waits: the loop blocks on each step's "
                        "result (`block_until_ready`, `float(loss)`, printing), so the next step's dispatch cannot "
                        "overlap this step's GPU work. Read results every N steps instead and let dispatch run ahead; "
                        "with many small programs per step, put them under one `jax.jit`.")
    # On a capture that lost GPU events, "no GPU ran anything" may be kernels the trace dropped: the time is an
    # upper bound, said so and ranked low.
    partial = bool(partial_gpu_model(inputs))
    found = _ledger_finding(
        inputs, ("kernel_launch",), "gpu.kernel_launch_bound",
        "The GPU waits on op dispatch and kernel launches {share:.1f}% of the step time ({ms} per step)"
        + (", at most: the capture looks partial" if partial else ""),
        "The time the host threads spent dispatching ops that launch GPU work and in launch API calls (events with "
        "a correlation id) while no GPU of the host ran anything: XProf's 'Kernel launch', measured on the "
        "timeline (XProf's step breakdown of XSpace captures never fills it)."
        + (" The capture holds no matrix kernel of a model made of them (capture.partial_gpu_trace): some of the "
           "stretches with no GPU work recorded may be kernels the trace lost, so this is an upper bound." if partial
           else ""),
        pick(inputs.framework,
             "Launch fewer, larger kernels: compile the step with XLA (`tf.function(jit_compile=True)`), which "
             "fuses the many small element-wise ops the ops named here launch, and grow the batch so each launch "
             "does more work." + threads,
             jax_dispatch)
        + (" Confirm it on a whole capture first (capture.partial_gpu_trace)." if partial else ""),
        KERNEL_LAUNCH_PERCENT)
    if partial:
        found = [dataclasses.replace(f, severity="low") for f in found]
    return found


def _blocking_loop(inputs: RunInputs) -> bool:
    """A JAX loop on a device whose step waits, with the device idle, only for the next batch's transfer and the
    step's own dispatch: the host prepares step n+1 only once step n's result is back, so both are one cause."""
    ledger = _ledger(inputs)
    if ledger is None or not ledger.has_device or inputs.framework == "tensorflow":  # PjitFunction is JAX's
        return False
    launch = [name for name, _, ms in ledger.top("kernel_launch") if ms > 0]
    waits = [name for name, _, ms in ledger.top("input") if ms > 0]
    return bool(launch and waits and _JAX_DISPATCH.search(launch[0]) and all(_JAX_TRANSFER.search(n) for n in waits))


def blocking_loop(inputs: RunInputs) -> list[Finding]:
    """The device idles at each step boundary while the host transfers the next batch and dispatches the next
    step: the loop waits for each step's result before it prepares the next one. One cause, said once."""
    if not _blocking_loop(inputs):
        return []
    ledger = inputs.ledger
    dispatch = next(n for n, _, _ in ledger.top("kernel_launch") if _JAX_DISPATCH.search(n))
    transfer = next(_shown(n) for n, _, _ in ledger.top("input"))
    return _ledger_finding(
        inputs, ("kernel_launch", "input"), "host.blocking_loop",
        "The device waits for the host between steps {share:.1f}% of the step time ({ms} per step): the next "
        f"batch's transfer (`{transfer}`) and the step's dispatch (`{dispatch}`) start only once the previous step "
        "has finished",
        "The time the host spent transferring the next batch to the device (JAX's asarray / device_put) and "
        "dispatching the step's program while no device of the host ran anything: the step ledger's 'Waiting for "
        "input' and 'Op dispatch and kernel launch', which here are one cause.",
        "The loop waits for each step's result before it prepares the next step (`block_until_ready`, "
        "`float(loss)`, printing or logging a value every step), so neither the transfer nor the dispatch can "
        "overlap the device's work. Read results every N steps instead and let JAX's asynchronous dispatch run "
        "ahead; transfer the next batch before waiting (`jax.device_put(next_batch)` issued while the current step "
        "runs).",
        KERNEL_LAUNCH_PERCENT)


def host_compute(inputs: RunInputs) -> list[Finding]:
    """The device idles while framework ops compute on the host (ops without device kernels)."""
    ledger = _ledger(inputs)
    if ledger is None or not ledger.has_device:
        return []
    return _ledger_finding(
        inputs, ("host_compute",), "host.compute_in_step",
        "Host ops run while the device idles, {share:.1f}% of the step time ({ms} per step)",
        "The time framework ops that launch no device work ran on host threads while no device of the host ran "
        "anything (input, launches and synchronisation counted before them): XProf's 'Host compute', measured "
        "on the timeline.",
        pick(inputs.framework,
             "Give the ops named here a device kernel or move them into the compiled step "
             "(`tf.function(jit_compile=True)`), or into the tf.data pipeline where they overlap the device; ops "
             "without a GPU kernel (string ops, some casts, Python functions) run on the host.",
             "Move host-side NumPy/Python work into the jitted step (jnp instead of np), or into the input loader "
             "where it overlaps the device."),
        HOST_COMPUTE_PERCENT)


_PROFILER_FRAME = re.compile(r"^\$\S*profiler\.py:\d+ ")
DISPATCH_PERCENT = 10.0  # of the step, on a CPU-only JAX run (ours: as host compute)


def cpu_dispatch(inputs: RunInputs) -> list[Finding]:
    """On a CPU-only JAX run, the step goes to dispatching jitted calls (PjitFunction, PJRT's Execute) rather than
    to the compiled programs they run: many small programs, or one too small for its call's fixed cost."""
    ledger = _ledger(inputs)
    if ledger is None or ledger.has_device or inputs.framework != "jax":
        return []
    calls = [(name, count) for name, count, _ in ledger.top("kernel_launch") if _JAX_DISPATCH.search(name)]
    if not calls:
        return []
    per_step = max(count for _, count in calls) / ledger.step_count
    program = ledger.average_ms("compiled_program")
    many = per_step >= 2.5
    action = (f"About {per_step:.0f} jitted calls per step, each with its own dispatch (argument checks, buffers, "
              "the launch on XLA's threads: tens of µs however small its program), around programs that run "
              f"{ms_text(program)} per step in all. Put the step under one `jax.jit` (calling the small jitted "
              "functions from inside it lets XLA fuse them into one program), and run several steps per call where "
              "they are this short (`lax.scan` or `lax.fori_loop` over a stack of batches)." if many else
              f"One jitted call per step, whose dispatch costs about as much as a program that runs "
              f"{ms_text(program)}: give each call more work (a bigger batch, or several steps per call with "
              "`lax.scan` / `lax.fori_loop` over a stack of batches).")
    return _ledger_finding(
        inputs, ("kernel_launch",), "host.dispatch_in_step",
        "Dispatching jitted calls takes {share:.1f}% of the step on the CPU ({ms} per step)"
        + (f", {per_step:.0f} calls a step" if many else ""),
        "The time the host spent in JAX's and PJRT's dispatch of compiled programs (`PjitFunction`, "
        "`…::Execute`) while none of them ran: the step ledger's 'Op dispatch and kernel launch', a wait of the "
        "dispatch for the program's own threads left out.",
        action, DISPATCH_PERCENT,
        [Evidence("Jitted calls per step", per_step, "count", None, LEDGER_HREF),
         _category_evidence_ledger(inputs, "compiled_program")])


def _category_evidence_ledger(inputs: RunInputs, key: str) -> Evidence:
    return Evidence(f"{LEDGER_LABELS[key]} per step (step ledger)", inputs.ledger.average_ms(key), "ms",
                    summary_source("step_ledger", "average_ms", key), LEDGER_HREF)


PYTHON_PERCENT = 10.0


def python_in_step(inputs: RunInputs) -> list[Finding]:
    """Python functions (the Python tracer's events) run while no device work, compiled program, input wait or op
    does: the step waits on Python."""
    ledger = _ledger(inputs)
    if ledger is None:
        return []
    # The profiler's own Python (a StepTraceAnnotation's __init__) is not the program's.
    named = ", ".join([f"`{_shown(name)}`" for name, _, _ in ledger.top("python")
                       if not _PROFILER_FRAME.search(name)][:3])
    where = "the device" if ledger.has_device else "the compiled program"
    # The Python tracer names a C function or method called from Python with no file (`$<unknown> astype`).
    native = [(name, ms) for name, _, ms in ledger.top("python") if name.startswith("$<unknown> ")]
    first = ""
    if native and sum(ms for _, ms in native) >= 0.5 * ledger.average_ms("python"):
        calls = ", ".join(f"`{_shown(n).split(' (')[0]}`" for n, _ in native[:3])
        first = (f"Most of it is native code called from Python ({calls}: NumPy's array methods or another C "
                 "extension, which the tracer records without a file): array work on the host in each step. If it "
                 "makes or converts the batch, it is input work: do it in the loader (a background thread or a "
                 "prefetching pipeline), ahead of the step. ")
    return _ledger_finding(
        inputs, ("python",), "host.python_in_step",
        "The step waits on Python {share:.1f}% of the time ({ms} per step)" + (f": {named}" if named else ""),
        f"The time Python functions ran (the Python tracer's events) while {where} did not and no input wait, "
        "compilation, launch or framework op was under way.",
        first + pick(inputs.framework,
             "Run the step as a `tf.function` so that Python runs once per trace, not once per step; move "
             "per-step Python work (metrics, logging, data conversion) out of the step or every N steps.",
             "Put more of the step under `jax.jit` so that Python runs once per compile, not per step; keep "
             "per-step Python (logging, metrics, conversions with NumPy) out of the loop or every N steps, and let "
             "dispatch run ahead (no `block_until_ready` or `float(...)` on each step's results)."),
        PYTHON_PERCENT)


def _unattributed_action(inputs: RunInputs) -> str:
    """Where untraced step time comes from, for what the capture already records (the Python tracer on or off,
    the step already a tf.function)."""
    ledger = inputs.ledger
    traced = ledger.python_traced
    if "Profiled batch" in ledger.inferred_from:
        tensorflow = ("Keras 3 runs Python around each call of its train function (`multi_step_on_iterator`): "
                      "callbacks, logs and the progress bar, which the profiler records only with its Python tracer "
                      "(`tf.profiler.experimental.ProfilerOptions(python_tracer_level=1)`). "
                      "`model.compile(..., steps_per_execution=N)` runs N batches per call, so that Python runs "
                      "once per N; fewer per-batch callbacks and `verbose=2` cut it too.")
    elif ledger.eager_ops and not ledger.tf_function:
        tensorflow = ("The step runs op by op from Python (eager execution: `EagerLocalExecute: …` events, no "
                      "tf.function): these stretches are the Python between its ops, paid for every op of every "
                      "step. Wrap the step in `tf.function` (Keras: leave `run_eagerly` off) so that it runs as one "
                      "graph and Python runs once per trace.")
    elif ledger.tf_function:
        tensorflow = ("The step already runs as a tf.function: these stretches are Python around its call (the "
                      "call's own argument handling, the loop, per-step logging and metrics)"
                      + ("" if traced else ", which the profiler records only with its Python tracer "
                         "(`tf.profiler.experimental.ProfilerOptions(python_tracer_level=1)`)")
                      + f". With a step of {ms_text(ledger.step_ms)}, run several steps per call (a loop over "
                      "`tf.range` inside the tf.function, Keras' `steps_per_execution`) so that Python runs once per "
                      "several steps.")
    else:
        tensorflow = ("Look at the host threads on the timeline in these stretches: eager Python between ops (run "
                      "the step as one `tf.function`, Keras `steps_per_execution`), logging and metrics in the "
                      "per-step path, or another process holding the CPU.")
    if traced:
        jax = ("The Python tracer is on, so these stretches are native code it does not record, called from the "
               "step: NumPy or another C extension (making or converting a batch), or another process holding the "
               "CPU. Find them on the timeline (the main thread's gaps); batch making in NumPy belongs in a "
               "background thread or a prefetching loader, off the step.")
    else:
        jax = ("Look at the timeline between the jitted calls: Python work outside `jax.jit`, which the profiler "
               "records only with its Python tracer (`options = jax.profiler.ProfileOptions(); "
               "options.python_tracer_level = 1`, passed as `jax.profiler.trace(dir, profiler_options=options)`), "
               "device-to-host reads (`float(loss)`, `.item()`) every step, or another process holding the CPU.")
    held = ledger.other_python_percent
    if held is not None and held >= GIL_HELD_PERCENT:
        tensorflow = (f"A Python function inside tf.data (`tf.py_function` / `tf.numpy_function`) runs during "
                      f"{held:.0f}% of these stretches: while it computes it holds the GIL, and the step's own Python "
                      "(the loop, the tf.function's call, fetching the batch) waits for it, untraced. It is the input "
                      "pipeline's cost: rewriting that function with TensorFlow ops, or doing its work offline (the "
                      "input finding), removes this wait too. " + tensorflow)
    return pick(inputs.framework, tensorflow, jax)


GIL_HELD_PERCENT = 50.0  # of the unidentified time, with a tf.py_function running: the GIL's wait (ours)


def all_others(inputs: RunInputs) -> list[Finding]:
    """Step time in which the timeline shows nothing the ledger can name: no device work, no compiled program, no
    input wait, no framework op, no compilation, no Python function. On hosts with a device the idle gaps'
    finding says it with the gaps (gpu.idle_gaps)."""
    ledger = _ledger(inputs)
    if ledger is None or ledger.has_device or (inputs.overview is not None and inputs.overview.analysis.tpu):
        return []
    xprof = []
    if inputs.steps:
        xprof = [_category_evidence(inputs, "other")]
    found = _ledger_finding(
        inputs, ("other",), "host.unattributed_step_time",
        "{share:.1f}% of the step time shows no recorded activity: the step waits on something the profiler "
        "does not trace",
        "The step time in which no thread ran a compiled program, a framework op, an input wait, a compilation or "
        "a traced Python function (the step ledger's 'Nothing identified').",
        _unattributed_action(inputs),
        ALL_OTHERS_PERCENT, xprof)
    held = ledger.other_python_percent
    if found and inputs.framework == "tensorflow" and held is not None and held >= GIL_HELD_PERCENT:
        # The same cause as the input finding's py_function: said here, ranked below it.
        found = [dataclasses.replace(
            f, title=f.title + f"; a tf.py_function of the input pipeline runs during {held:.0f}% of it (the GIL)",
            severity="medium" if f.severity == "high" else f.severity) for f in found]
    return found


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
    finding.claims = ["device_collectives", "device_copies"]
    return [finding]


ONE_STEP_COMPILE = 0.9  # of the steps' compilation, in one step: one recompile, not recompiling every step (ours)


def _one_compiling_step(ledger: RunLedger) -> tuple[str, int] | None:
    """(step name, its compile ps) when one step of several holds nearly all of the steps' compilation."""
    total = ledger.total_ps("compilation")
    if ledger.step_count < MIN_STEPS_FOR_VARIANCE or not total:
        return None
    _, step = max(ledger.steps, key=lambda hs: (hs[1].ps["compilation"], -hs[1].begin_ps))
    return (step.name, step.ps["compilation"]) if step.ps["compilation"] >= ONE_STEP_COMPILE * total else None


def compilation(inputs: RunInputs) -> list[Finding]:
    """XLA compilation inside the analysed steps that holds the step up: something is recompiled while training.
    When one step holds it all, it is one recompile: said with that step, and ranked at most medium (its cost per
    step falls as the run goes on unless the shapes change again)."""
    ledger = _ledger(inputs)
    once = _one_compiling_step(ledger) if ledger is not None else None
    title = "Compilation holds up the steps ({share:.1f}% of the step time): something is recompiled while training"
    extra: list[Evidence] = []
    if once is not None:
        name, ps = once
        title = (f"One step recompiles: {step_label(name)} spent {ms_text(ps / 1e9)} compiling, {{share:.1f}}% of "
                 f"the average step time over the {ledger.step_count} steps")
        extra = [Evidence(f"Compilation in {step_label(name)}", ps / 1e9, "ms", None, LEDGER_HREF)]
    found = _ledger_finding(
        inputs, ("compilation",), "host.compilation_in_steps", title,
        "The time host threads spent compiling (JAX's backend_compile, PJRT and XLA compilers, TF's XlaCompile) "
        "inside the steps while nothing counted before it (device work, the compiled program, input) ran, a "
        "dispatch that compiled (a jit cache miss) counted whole, its tracing and lowering too: XProf's "
        "'Compilation', measured on the timeline.",
        pick(inputs.framework,
             "Stop retracing: give the `tf.function` an `input_signature` (or `reduce_retracing=True`), pass "
             "tensors rather than Python numbers, and keep batch shapes fixed (`drop_remainder=True`).",
             "Stop recompiling: keep shapes, dtypes and shardings fixed (pad the last batch; feed a jitted function "
             "arrays placed as in its first call — an output fed back with another sharding than the warm-up's "
             "input is a new signature), mark Python configuration as `static_argnums` only when it does not "
             "change, and find the cause with `jax.config.update('jax_explain_cache_misses', True)` / "
             "`jax_log_compiles`.")
        + (" Only this step compiled: an argument's shape or dtype changed (a smaller "
           "batch, a new sequence length); each new shape compiles again, so pad to a few fixed sizes or drop the "
           "remainder." if once is not None else ""),
        COMPILE_PERCENT, extra)
    if once is not None:
        found = [dataclasses.replace(f, severity="medium") if f.severity == "high" else f for f in found]
    return found


# The work a loop repeats identically each step: the same programs, ops and dispatches.
_STEADY_WORK = ("device_compute", "compiled_program", "host_compute", "kernel_launch")
JITTER_STEP_PS = 1_000_000_000  # 1 ms: below it, the same work's spread is scheduling jitter as much as load (ours)
CONTENTION_FACTOR = 0.5  # the steady work of the slow steps took this much longer than in the fastest (ours)


def _variance_cause(inputs: RunInputs) -> tuple[str, list[Evidence], bool, str]:
    """What grew in the slowest steps against the fastest one, by ledger cause, what that points to, and whether it
    is contention (the same work run slower: a property of the machine while it was profiled, not of the program)."""
    generic = ("Compare the slowest steps with a fast one on the timeline: periodic work (checkpoints, evaluation, "
               "logging, garbage collection), input stalls on some batches, or shapes that change between steps "
               "(recompilation) are the usual causes.")
    ledger = _ledger(inputs)
    if ledger is None or ledger.step_count < MIN_STEPS_FOR_VARIANCE:
        return generic, [], False, ""
    steps = sorted((s for _, s in ledger.steps), key=lambda s: (s.duration_ps, s.begin_ps))
    fastest, slow = steps[0], steps[-TOP_STEPS:]
    grew = {k: sum(s.ps[k] for s in slow) / len(slow) - fastest.ps[k] for k in fastest.ps}
    extra = sum(s.duration_ps for s in slow) / len(slow) - fastest.duration_ps
    if extra <= 0:
        return generic, [], False, ""
    key = max(grew, key=lambda k: (grew[k], k))
    evidence = [Evidence(f"{LEDGER_LABELS[k]}: the {len(slow)} slowest steps against the fastest", grew[k] / 1e9,
                         "ms", None, LEDGER_HREF)
                for k in sorted(grew, key=lambda k: -grew[k])[:3] if grew[k] > 0]
    elsewhere = sum(v for k, v in grew.items() if k not in _STEADY_WORK and v > 0)
    # The same executable (or ops) taking half again as long with no compilation added: nothing in the program
    # changed, the machine did. Other work (input made in Python) slows with it and is no counter-argument.
    slower = fastest.ps[key] > 0 and grew[key] >= CONTENTION_FACTOR * fastest.ps[key]
    if key in _STEADY_WORK and grew["compilation"] < 0.1 * extra and (elsewhere < 0.25 * extra or slower) and \
            fastest.duration_ps < JITTER_STEP_PS:
        return (f"The slowest steps do the same work, only slower ({LEDGER_LABELS[key].lower()} grew by "
                f"{ms_text(grew[key] / 1e9)}), on steps under a millisecond: that much spread comes from the "
                "operating system's scheduling and the profiler itself as much as from other processes. Not a cost "
                "to chase before the step itself is made larger or cheaper."), evidence, True, "jitter"
    if key in _STEADY_WORK and grew["compilation"] < 0.1 * extra and (elsewhere < 0.25 * extra or slower):
        return (f"The slowest steps do the same work, only slower: {LEDGER_LABELS[key].lower()} grew by "
                f"{ms_text(grew[key] / 1e9)} with no compilation added. That is contention: other "
                "processes competing for the machine's CPUs (or memory bandwidth, or a throttled device). Profile "
                "again on an idle machine before optimising, and keep other jobs off it while profiling."), evidence, \
            True, key
    if key == "input":
        return (f"The slowest steps wait longer for input (+{ms_text(grew[key] / 1e9)}): some batches take longer "
                "to produce (larger elements, cache misses, file reads). See the input finding and the input "
                "pipeline page."), evidence, False, key
    if key == "compilation":
        return (f"The slowest steps compile (+{ms_text(grew[key] / 1e9)}): shapes or Python values change between "
                "steps and trigger recompilation (see host.compilation_in_steps)."), evidence, False, key
    return (f"The slowest steps spend {ms_text(grew[key] / 1e9)} more in {LEDGER_LABELS[key].lower()}: look at "
            "them on the timeline for periodic work (checkpoints, evaluation, logging, garbage collection)."), \
        evidence, False, key


def startup(inputs: RunInputs) -> list[Finding]:
    """A host's first analysed step holds one-off work (tracing, a compile, the iterator's set-up): said once, with
    its time, and left out of every per-step share (the ledger's steady steps)."""
    ledger = _ledger(inputs)
    if ledger is None or not ledger.startup:
        return []
    host, first = ledger.startup[0]
    steady = ledger.steady_stats()
    extra_ms = first.duration_ps / 1e9 - steady["average_ms"]
    where = {"host": host.host, "step": first.name}
    evidence = [
        Evidence(f"Start-up step ({step_label(first.name)}) on {host.host}", first.duration_ps / 1e9, "ms",
                 summary_source("step_ledger", "startup", where, "duration_ms"), LEDGER_HREF),
        Evidence("Average steady step (step ledger)", steady["average_ms"], "ms",
                 summary_source("step_ledger", "steady", "average_ms"), LEDGER_HREF),
        Evidence("Steady steps", steady["steps"], "count", summary_source("step_ledger", "steady", "steps"),
                 LEDGER_HREF),
    ]
    grew = sorted(((k, first.ps[k] / 1e9 - ledger.average_ms(k)) for k in first.ps), key=lambda kv: -kv[1])
    causes = [(k, ms) for k, ms in grew if ms >= 0.1 * extra_ms][:2]
    evidence += [Evidence(f"{LEDGER_LABELS[k]} in the start-up step", first.ps[k] / 1e9, "ms",
                          summary_source("step_ledger", "startup", where, "ms", k), LEDGER_HREF) for k, _ in causes]
    evidence += [Evidence(f"{_shown(name)}: longer in the start-up step than in any later step by", ps / 1e9, "ms",
                          summary_source("step_ledger", "startup", where, "one_off", {"name": name}, "ms"),
                          LEDGER_HREF) for name, ps in host.one_off]
    held = ", ".join(f"{LEDGER_LABELS[k].lower()} {ms_text(first.ps[k] / 1e9)}" for k, _ in causes)
    named = ", ".join(f"`{_shown(n)}` (+{ms_text(ps / 1e9)})" for n, ps in host.one_off)
    compiles = any(k == "compilation" for k, _ in causes)
    if compiles:
        action = pick(inputs.framework,
                      "A function compiled in the first step: expected once per signature. If it compiles again in "
                      "later captures, something retraces (new Python values or shapes): give the `tf.function` an "
                      "`input_signature`.",
                      "A function compiled in the first step. If it was already called before the trace (a "
                      "warm-up), this is a recompile: the first step's arguments differ from the warm-up's in shape, "
                      "dtype or sharding (an output fed back with another sharding than the warm-up's input is a new "
                      "signature); `jax.config.update('jax_explain_cache_misses', True)` says which. Otherwise it is "
                      "the first call's compile, once per run (`jax.jit(f).lower(...).compile()` ahead of the loop "
                      "moves it out of the first step).")
    else:
        # The trace cannot tell which one-off work it is: a function's first call (tracing, instantiating it),
        # an iterator's creation, caches warming, or the profiler's own start in the first traced step (a profile
        # that starts mid-run, as Keras's `profile_batch` does, still has a slower first step).
        action = ("Nothing to fix per step: one-off work paid once in the first traced step, such as a function's "
                  "first call (tracing and instantiating it), creating the input iterator, warming caches, or the "
                  "profiler's own start when the trace begins mid-run. For pages that describe the steady state "
                  "only, start the trace one or two steps later than now (Keras: a later first batch in "
                  "`profile_batch`, within the epoch; `jax.profiler.start_trace` after the first steps).")
    return [Finding(
        id="steps.startup", severity="info",
        title=f"The first step ({step_label(first.name)}) is start-up: {ms_text(first.duration_ps / 1e9)} against "
              f"{ms_text(steady['average_ms'])} for a steady step" + (f"; of it {held}" if held else "") +
              (f" ({named})" if named else ""),
        estimate=f"A one-off cost of {ms_text(extra_ms)} (the start-up step less an average steady step), paid "
                 f"once: the step ledger and every per-step share of these findings cover the {steady['steps']} "
                 "steps after it only (XProf's step analysis also leaves out the steps it cannot take whole).",
        action=action, evidence=evidence, links=[Link("Where the step goes (step ledger)", LEDGER_HREF)],
    )]


BETWEEN_STEPS_COMPILE_MS = 1.0


def compilation_between_steps(inputs: RunInputs) -> list[Finding]:
    """A compilation between two analysed steps: a jitted function first called, or recompiled, mid-training. It
    costs the run once, not each step, so it claims no share of the step."""
    found = [(h, f.compilation_between) for h, f in inputs.facts.items() if f.compilation_between.count]
    total_ms = sum(s.busy_ps for _, s in found) / 1e9
    if total_ms < BETWEEN_STEPS_COMPILE_MS:
        return []
    evidence = [Evidence(f"{e.name} on {host}", e.duration_ps / 1e9, "ms",
                         {"trace": {"host": host, "plane": e.plane, "t0_ps": e.begin_ps,
                                    "t1_ps": e.begin_ps + e.duration_ps, "what": "event", "name": e.name}},
                         timeline_href(host, e.begin_ps, e.begin_ps + e.duration_ps, e.name)
                         if "trace" in inputs.pages else "")
                for host, share in found for e in share.longest]
    longest = max(evidence, key=lambda e: e.value)
    return [Finding(
        id="host.compilation_between_steps", severity="low" if total_ms >= (inputs.step_ms or 0.0) else "info",
        title=f"{ms_text(total_ms)} of compilation between the analysed steps (the longest: {longest.label}, "
              f"{ms_text(longest.value)}): a function first compiled, or recompiled, mid-training",
        estimate="The time host threads spent compiling in the gaps between analysed steps: a one-off cost of the "
                 "run (the steps themselves do not contain it, so it is no share of the step time).",
        action=pick(inputs.framework,
                    "If it repeats in later captures, something retraces between steps (a `tf.function` called "
                    "with new Python values or shapes, an evaluation or callback graph): give it an "
                    "`input_signature`; if it is the first call of an evaluation or logging function, it is "
                    "expected once.",
                    "If it repeats, something recompiles between steps (`jax_log_compiles` shows what); if it is "
                    "the first call of an evaluation or metrics function, compile it before training "
                    "(`jax.jit(f).lower(...).compile()`) or accept it once."),
        evidence=evidence, links=[Link(f"On the timeline: {longest.label}", longest.href)] if longest.href else [],
    )]


def step_variance(inputs: RunInputs) -> list[Finding]:
    """Step times vary a lot: some steps are much slower than the others. Over XProf's steps, or, where the ledger
    set a start-up step aside, over the steady steps after it (a first step's one-off work is not variation)."""
    ledger = _ledger(inputs)
    steady = ledger is not None and bool(ledger.startup)
    if steady:
        stats = ledger.steady_stats()
        count, average, sd = stats["steps"], stats["average_ms"], stats["standard_deviation_ms"]
        minimum, maximum = stats["minimum_ms"], stats["maximum_ms"]

        def stat(label: str, key: str, value: float) -> Evidence:
            return Evidence(label, value, "ms", summary_source("step_ledger", "steady", key), LEDGER_HREF)
        rows = sorted(ledger.steps, key=lambda hs: (-hs[1].duration_ps, hs[1].begin_ps))[:TOP_STEPS]
        slow = [Evidence(step_label(s.name).capitalize(), s.duration_ps / 1e9, "ms",
                         summary_source("step_ledger", "per_step", {"host": h, "step": s.name, "begin_ps": s.begin_ps},
                                        "duration_ms"),
                         LEDGER_HREF) for h, s in rows]
        first = [stat("Average steady step (step ledger)", "average_ms", average),
                 stat("Standard deviation", "standard_deviation_ms", sd), stat("Fastest step", "minimum_ms", minimum),
                 stat("Slowest step", "maximum_ms", maximum),
                 Evidence("Steady steps", count, "count", summary_source("step_ledger", "steady", "steps"),
                          LEDGER_HREF)]
        slowest_name = rows[0][1].name
    else:
        if inputs.steps < MIN_STEPS_FOR_VARIANCE:
            return []
        summary = inputs.overview.analysis.step_time
        count, average, sd = inputs.steps, summary.average, summary.standard_deviation
        minimum, maximum = summary.minimum, summary.maximum
        view = inputs.overview
        steps = view.steps.sort_values(["step_time_ms", "step_num"], ascending=[False, True], kind="stable")
        slow = [Evidence(step_label(str(row.step_name)).capitalize(), float(row.step_time_ms), "ms",
                         csv_source(OVERVIEW_STEPS_CSV, {"Host": view.label, "Step id": row.step_num},
                                    "Step time (ms)"), inputs.page("overview", step_anchor(row.step_num)))
                for row in steps.head(TOP_STEPS).itertuples()]
        first = [inputs.step_time_evidence(),
                 Evidence("Standard deviation", sd, "ms",
                          summary_source("overview", "step_time_ms", "standard_deviation"), inputs.page("overview")),
                 Evidence("Fastest step", minimum, "ms", summary_source("overview", "step_time_ms", "minimum"),
                          inputs.page("overview")),
                 Evidence("Slowest step", maximum, "ms", summary_source("overview", "step_time_ms", "maximum"),
                          inputs.page("overview")),
                 inputs.steps_evidence()]
        slowest_name = str(steps.iloc[0]["step_name"])
    if count < MIN_STEPS_FOR_VARIANCE or not average or sd != sd:
        return []
    variation = 100.0 * sd / average
    if variation < VARIANCE_PERCENT:
        return []
    lost = average - minimum
    share = 100.0 * lost / average
    links = [Link("Steps (overview)", inputs.page("overview"))] if inputs.steps else []
    window = _step_window(inputs, slowest_name)
    if window is not None and "trace" in inputs.pages:
        host, begin, end = window
        links.append(Link(f"Slowest step on the timeline ({step_label(slowest_name)})",
                          timeline_href(host, begin, end)))
    action, cause_evidence, contention, cause = _variance_cause(inputs)
    over = " steady" if steady else ""
    severity = severity_for(share)
    if contention and severity == "high":
        # The slow steps measure the machine, not the program: worth a second profile before any change, not the
        # top of the list of what to fix.
        severity = "medium"
    if cause in ("input", "compilation", "jitter") and severity in ("high", "medium"):
        # The slow steps' extra time is the input wait or the compile, which that cause's finding already ranks by
        # its cost: the spread is a symptom of it, said without a second alarm.
        severity = "low"
    outlier = _one_step_spread(ledger) if ledger is not None else ""
    return [Finding(
        id="steps.variance", severity=severity,
        title=f"Step time varies by {variation:.0f}% (σ {ms_text(sd)} around {ms_text(average)})"
              + (" over the steps after start-up" if steady else "")
              + (f": the slowest step took {maximum / minimum:.1f}× the fastest's time for the same work (contention "
                 "on the machine)" if contention and minimum > 0 and cause != "jitter" else "")
              + (": the same work, sub-millisecond steps" if cause == "jitter" else "") + outlier,
        estimate=f"The average{over} step time minus the fastest step's ({ms_text(lost)}, {share:.0f}% of the "
                 "average): what each step would save if all ran like the fastest one. Its time lies inside the "
                 "causes the step ledger gives it to, so it is not added to the other findings' shares."
                 + (" The start-up step is left out (steps.startup)." if steady else ""),
        action=action, evidence=[*first, *slow, *cause_evidence],
        # Not a share of the step to add to the others': the slow steps' extra time is already counted under the
        # causes that grew in them (the share is in the evidence).
        links=links, ms_per_step=None, percent_of_step=None,
    )]


ONE_STEP_SPREAD = 0.75  # of the steps' squared deviations from their mean, held by one step (ours)


def _one_step_spread(ledger: RunLedger) -> str:
    """"; one step, … holds most of it" when one step makes most of the spread (a single recompile, a one-off
    stall): a σ then describes that step, not a spread over the run."""
    times = [(s.duration_ps, h, s) for h, s in ledger.steps]
    if len(times) < 3:
        return ""
    mean = sum(t for t, _, _ in times) / len(times)
    squares = [(t - mean) ** 2 for t, _, _ in times]
    total = sum(squares)
    k = max(range(len(times)), key=lambda i: squares[i])
    if not total or squares[k] < ONE_STEP_SPREAD * total:
        return ""
    step = times[k][2]
    return f"; one step, {step_label(step.name)} ({ms_text(step.duration_ps / 1e9)}), makes most of it"


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


__all__ = ["all_others", "blocking_loop", "communication", "compilation", "compilation_between_steps",
           "compute_bound", "host_compute", "input_bound", "kernel_launch", "python_in_step", "startup",
           "step_variance",
           "straggler_hosts", "tpu_host_round_trips"]
