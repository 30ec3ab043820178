"""Rules over GPU work: kernels (the kernel stats DB) and, Nsight Systems style, the GPUs' timelines (the
hosts' findings facts: busy time per step, idle gaps, synchronous and pageable copies, synchronisation calls,
collective kernels overlapping compute)."""

from __future__ import annotations

import re

import numpy as np

from reportgen.core.findings.capture import distinct_mixes
from reportgen.core.findings.facts import CopyStats, GpuActivity, StepShare
from reportgen.core.findings.inputs import RunInputs, pick
from reportgen.core.findings.model import Evidence, Finding, Link, csv_source, ms_text, severity_for, summary_source
from reportgen.core.pages import KERNEL_STATS_CSV, kernel_anchor, timeline_href
from reportgen.core.steps.ledger import DEVICE_KEYS, DISPATCH_NAMES, LEDGER_KEYS, LEDGER_LABELS

TENSOR_CORE_PERCENT = 10.0  # of GPU kernel time in eligible kernels that do not use TensorCores
TINY_KERNEL_US = 10.0  # kernels averaging less than this are launch-bound
TINY_LAUNCH_SHARE = 50.0  # … when they are this share of all launches
TINY_LAUNCHES_PER_STEP = 100
TINY_LAUNCHES_WITHOUT_STEPS = 1000
LAUNCH_OVERHEAD_US = 5.0  # a kernel launch's typical host cost (CUDA: a few µs)
COPY_PERCENT = 1.0  # synchronous or pageable copies, as a share of the step time (or of the GPU busy time)
SYNC_CALL_PERCENT = 5.0
LOW_UTILIZATION_PERCENT = 50.0  # Nsight Systems' GPU utilisation rule
GAP_PERCENT = 10.0  # long idle gaps as a share of the windows analysed
COLLECTIVE_SHARE = 5.0  # collectives as a share of the GPU's busy time
OVERLAP_PERCENT = 50.0  # of collective time overlapped by compute kernels
TOP = 3


def _kernel_rows(inputs: RunInputs, rows, label) -> list[Evidence]:
    return [Evidence(label(row), float(row.total_duration_us), "us",
                     csv_source(KERNEL_STATS_CSV, {"Rank": row.rank}, "Total Duration (\u03bcs)"),
                     inputs.page("kernel_stats", kernel_anchor(row.rank)))
            for row in rows.head(TOP).itertuples()]


# Kernels whose names say they run on TensorCores although XProf 2.24.2's list of name fragments (the kernel stats'
# "uses TensorCore" column, shown as XProf shows it) misses them: Ampere's and Hopper's cuDNN and cuBLAS kernels
# (`sm80_xmma_…`, `sm90_xmma_…`: TF32 or 16-bit MMA), Hopper's cuBLAS kernels (`nvjet_…`) and CUTLASS's
# (`…tensorop…`). Seen on a real H200 capture (tests/captures/jax_gpu_h200): without this, a run whose
# convolutions ran as TF32 TensorCore kernels was told to turn TensorCores on.
_TENSOR_CORE_KERNEL = re.compile(r"^(sm\d+_xmma_|nvjet_)|tensorop")


_HELPER_KERNEL = re.compile(r"(?i)convertTensor_kernel|init_device_workspace|nchwToNhwc|nhwcToNchw")


def tensor_cores_unused(inputs: RunInputs) -> list[Finding]:
    """Ops eligible for TensorCores whose kernels do not use them (by XProf's list or by the kernel's name)."""
    data = inputs.kernel_stats
    if data is None or not len(data.combined):
        return []
    table = data.combined
    total = float(table["total_duration_us"].sum())
    uses = table["is_kernel_using_tensor_core"].to_numpy(bool) | np.array(
        [bool(_TENSOR_CORE_KERNEL.search(name)) for name in table["kernel_name"].tolist()], bool)
    # An eligible op's helper kernels (cuDNN's layout conversions and workspace set-up) do no math TensorCores
    # could take: they are not counted as missed.
    helper = np.array([bool(_HELPER_KERNEL.search(name)) for name in table["kernel_name"].tolist()], bool)
    missed = table[table["is_op_tensor_core_eligible"].to_numpy(bool) & ~uses & ~helper]
    share = 100.0 * float(missed["total_duration_us"].sum()) / total if total else 0.0
    if share < TENSOR_CORE_PERCENT:
        return []
    tf32 = any("tf32" in name.lower() for name in table["kernel_name"].tolist())
    # Severity by what it costs the step: a share of kernel time is a share of the step only as far as the GPU
    # computes in the step (the step ledger's device compute).
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    severity = severity_for(share)
    at_stake_note = ""
    if ledger is not None and ledger.has_device:
        of_step = share * ledger.percent("device_compute") / 100.0
        severity = severity_for(of_step)
        at_stake_note = (f" The GPU computes {ledger.percent('device_compute'):.1f}% of the step (the step ledger), "
                         f"so these kernels are about {of_step:.1f}% of the step time.")
    return [Finding(
        id="gpu.tensor_cores_unused", severity=severity,
        title=f"{share:.1f}% of GPU kernel time is in matmul/convolution ops whose kernels do not use TensorCores",
        estimate="The kernel stats' time in kernels of TensorCore-eligible ops that do not use TensorCores, as a "
                 "share of all kernel time; TensorCores run such math several times faster. Kernels that the "
                 "kernel stats' column (XProf's list) misses but whose names say they use TensorCores "
                 "(sm80_xmma_…, sm90_xmma_…, nvjet_…, CUTLASS tensorop) count as using them." + at_stake_note,
        action=(pick(inputs.framework,
                     "TensorCores need 16-bit inputs (or TF32 on Ampere and later): use "
                     "`tf.keras.mixed_precision.set_global_policy('mixed_float16')`, and make batch, channel and "
                     "feature sizes multiples of 8.",
                     "TensorCores need 16-bit inputs (or TF32 on Ampere and later): compute in bfloat16/float16, "
                     "or allow TF32 (`jax.default_matmul_precision('tensorfloat32')`), and make dimensions "
                     "multiples of 8.") if not tf32 else
                "TF32 is already in use (the capture's `…tf32…` kernels): the kernels left without TensorCores are "
                "ops whose shapes do not fit them, typically a convolution over few input channels (3 for RGB) or "
                "odd sizes. Pad channels and feature sizes to multiples of 8, or compute in bfloat16/float16."),
        evidence=[Evidence("Kernel time in kernels XProf's list marks as using TensorCores (names not counted)",
                           float(_tensor_core_percent(table)), "percent",
                           summary_source("kernel_stats", "tensor_core_percent"), inputs.page("kernel_stats")),
                  Evidence("Kernel time in the kernel stats", total, "us", summary_source("kernel_stats", "total_us"),
                           inputs.page("kernel_stats")),
                  *_kernel_rows(inputs, missed, lambda r: f"{r.op_name}: {r.kernel_name} (no TensorCore)")],
        links=[Link("GPU kernel stats", inputs.page("kernel_stats"))], percent_of_device_time=share,
    )]


COPY_KERNEL_PERCENT = 5.0  # of GPU kernel time in copy kernels (ours)
_COPY_KERNEL = re.compile(r"(?i)^(memcpy|memset)\w*$|copy_kernel")  # XLA's memcpy128, memcpy32_post, …


def copy_kernels(inputs: RunInputs) -> list[Finding]:
    """Copy kernels (XLA's memcpy* inside the program: device-to-device copies, not host transfers) take a share of
    the GPU's time, most of their launches small."""
    data = inputs.kernel_stats
    if data is None or not len(data.combined):
        return []
    table = data.combined
    total = float(table["total_duration_us"].sum())
    copies = table[np.array([bool(_COPY_KERNEL.search(n)) for n in table["kernel_name"].tolist()], bool)]
    copy_us = float(copies["total_duration_us"].sum())
    share = 100.0 * copy_us / total if total else 0.0
    if share < COPY_KERNEL_PERCENT:
        return []
    launches = int(copies["occurrences"].sum())
    small = copies[copies["avg_duration_us"] < TINY_KERNEL_US]
    small_launches, small_us = int(small["occurrences"].sum()), float(small["total_duration_us"].sum())
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    severity, note = severity_for(share), ""
    if ledger is not None and ledger.has_device:
        of_step = share * ledger.percent("device_compute") / 100.0
        severity = severity_for(of_step)
        note = (f" The GPU computes {ledger.percent('device_compute'):.1f}% of the step (the step ledger), so these "
                f"copies are about {of_step:.1f}% of the step time.")
    names = sorted(set(copies["kernel_name"].tolist()))
    donated = any(f.aliased_programs for f in inputs.facts.values())
    if all(str(op) in ("", "XlaModule") for op in copies["op_name"].tolist()):
        note += (" The capture names no HLO op for them (their op is the module, `XlaModule`): the program's HLO "
                 "dump (`XLA_FLAGS=--xla_dump_to=DIR`) tells which ops copy.")
    return [Finding(
        id="gpu.copy_kernels", severity=severity,
        title=f"Copy kernels inside the program take {share:.1f}% of GPU kernel time ({', '.join(names[:3])}): "
              f"{launches:,} launches, {small_launches:,} of them under {TINY_KERNEL_US:g} µs",
        estimate="The kernel stats' time in copy kernels (device-to-device copies the compiled program runs: "
                 "`memcpy…`/`memset…` kernels, not host transfers) over the capture, as a share of all kernel "
                 f"time; the small ones (under {TINY_KERNEL_US:g} µs on average) take {small_us / 1e3:.2f} ms of "
                 f"the {copy_us / 1e3:.2f} ms." + note,
        action=pick(inputs.framework,
                    "Find the ops that copy (the trace view shows each kernel's op): layout changes between ops, "
                    "tensors copied to change their memory placement, or while loops carrying buffers; compiling the "
                    "step with XLA (`jit_compile=True`) lets it update in place and fuse the copies into neighbours.",
                    "Find the HLO ops behind them (HLO op stats: `copy`, `dynamic-update-slice`, `transpose`): "
                    "common sources are a while loop's carried buffers (`lax.scan` / `fori_loop`: XLA copies the "
                    "carry or a stacked slice each iteration when it cannot update in place), "
                    + ("" if donated else "arguments the program overwrites without being allowed to reuse them "
                       "(`jax.jit(..., donate_argnums=...)` for the parameters and optimizer state; no program of "
                       "this capture aliases an input to an output), ")
                    + "and layout changes between ops. Many small copies each cost a launch as well as their "
                    "bytes."),
        evidence=[Evidence("Kernel time in the kernel stats", total, "us", summary_source("kernel_stats", "total_us"),
                           inputs.page("kernel_stats")),
                  *_kernel_rows(inputs, copies.sort_values("total_duration_us", ascending=False, kind="stable"),
                                lambda r: f"{r.kernel_name} ({int(r.occurrences)} launches, "
                                          f"{float(r.avg_duration_us):.1f} µs each)")],
        links=[Link("GPU kernel stats", inputs.page("kernel_stats"))], percent_of_device_time=share,
    )]


def _tensor_core_percent(table) -> float:
    total = float(table["total_duration_us"].sum())
    used = float(table.loc[table["is_kernel_using_tensor_core"], "total_duration_us"].sum())
    return round(100.0 * used / total, 2) if total else 0.0


def tiny_kernels(inputs: RunInputs) -> list[Finding]:
    """Many tiny kernels: the GPU waits on the host launching them."""
    data = inputs.kernel_stats
    if data is None or not len(data.combined):
        return []
    table = data.combined
    launches = int(table["occurrences"].sum())
    tiny = table[table["avg_duration_us"] < TINY_KERNEL_US]
    count = int(tiny["occurrences"].sum())
    steps = inputs.steps
    per_step = count / steps if steps else count
    if not launches or 100.0 * count / launches < TINY_LAUNCH_SHARE or \
            per_step < (TINY_LAUNCHES_PER_STEP if steps else TINY_LAUNCHES_WITHOUT_STEPS):
        return []
    at_stake = per_step * LAUNCH_OVERHEAD_US / 1e3
    share = 100.0 * at_stake / inputs.step_ms if steps and inputs.step_ms else None
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    exposed_note = ""
    if ledger is not None and share is not None:
        # Launches the GPU does not wait for (it still runs earlier kernels) cost the step nothing: only the exposed
        # launch time, the step ledger's, is at stake.
        # A program's dispatch (JAX's PjitFunction, PJRT's Execute) is the host handing over a whole program, not
        # these kernels' launches: it is left out of what they cost.
        dispatch_ms = sum(ms for name, _, ms in ledger.top("kernel_launch") if DISPATCH_NAMES.search(name))
        exposed_ms = max(0.0, ledger.average_ms("kernel_launch") - dispatch_ms)
        if exposed_ms < at_stake:
            exposed_note = (f" Of the {ms_text(at_stake)} per step that estimate gives, the GPU waited on kernel "
                            f"launches {ms_text(exposed_ms)} (the step ledger's 'Op dispatch and kernel launch'"
                            + (f", less {ms_text(dispatch_ms)} of program dispatch" if dispatch_ms > 0 else "")
                            + "): the rest ran while the GPU was still busy, and costs nothing.")
            step_ms = ledger.step_ms
            at_stake, share = exposed_ms, 100.0 * exposed_ms / step_ms if step_ms else 0.0
    return [Finding(
        id="gpu.tiny_kernels", severity=severity_for(share) if share is not None else "low",
        title=f"{100.0 * count / launches:.0f}% of kernel launches are tiny (under {TINY_KERNEL_US:g} µs on average): "
              + (f"the GPU waits on kernel launches {share:.1f}% of the step" if exposed_note
                 else "the GPU is launch-bound"),
        estimate=f"{LAUNCH_OVERHEAD_US:g} µs of host launch overhead per tiny kernel"
                 + (", per step" if steps else " over the capture") + ": the time the launches take at best."
                 + exposed_note,
        action=pick(inputs.framework,
                    "Fuse them: compile the step with XLA (`tf.function(jit_compile=True)`), and grow the batch so "
                    "each kernel does more work.",
                    "Fuse them: keep the whole step under one `jax.jit` (no Python loop of small jitted calls), "
                    "and grow the batch so each kernel does more work."),
        evidence=[Evidence("Tiny kernel launches" + (" per step" if steps else ""), per_step, "count", None, ""),
                  Evidence("All kernel launches", launches, "count", None, inputs.page("kernel_stats")),
                  *_kernel_rows(inputs, tiny.sort_values("occurrences", ascending=False, kind="stable"),
                                lambda r: f"{r.kernel_name} ({int(r.occurrences)} launches)")],
        links=[Link("GPU kernel stats", inputs.page("kernel_stats"))],
        ms_per_step=at_stake if steps else None, percent_of_step=share,
        claims=["kernel_launch"] if steps else [],
    )]


def _per_step_share(inputs: RunInputs, total_ps: int, busy_ps: int) -> tuple[float | None, float]:
    """(ms per step or None, share of the step time or of the GPUs' busy time)."""
    steps = inputs.steps
    if steps and inputs.step_ms:
        ms = total_ps / 1e9 / steps
        return ms, 100.0 * ms / inputs.step_ms
    return None, 100.0 * total_ps / busy_ps if busy_ps else 0.0


def _copy_finding(inputs: RunInputs, kind: str, finding_id: str, title: str, action: str) -> list[Finding]:
    stats: dict[str, CopyStats] = {h: getattr(f, kind) for h, f in inputs.facts.items() if getattr(f, kind).count}
    if not stats:
        return []
    total = sum(s.duration_ps for s in stats.values())
    busy = sum(g.busy_ps for f in inputs.facts.values() for g in f.gpus)
    ms, share = _per_step_share(inputs, total, busy)
    if share < COPY_PERCENT:
        return []
    evidence = []
    for host, s in stats.items():
        evidence += [Evidence(f"Copies on {host}", s.count, "count", {"trace_total": {"host": host, "kind": kind}}),
                     Evidence(f"Their device time on {host}", s.duration_ps / 1e9, "ms",
                              {"trace_total": {"host": host, "kind": kind, "field": "duration"}}),
                     Evidence(f"Their bytes on {host}", s.bytes, "bytes",
                              {"trace_total": {"host": host, "kind": kind, "field": "bytes"}})]
        evidence += _event_evidence(inputs, host, s)
    return [Finding(
        id=finding_id, severity=severity_for(share), title=title.format(share=share), action=action,
        estimate=("The copies' device time per step, as a share of the step time." if ms is not None else
                  "The copies' device time as a share of the GPUs' busy time over the capture."),
        evidence=evidence, links=_timeline_links(inputs, stats), ms_per_step=ms,
        percent_of_step=share if ms is not None else None, percent_of_device_time=None if ms is not None else share,
        claims=["device_copies"] if ms is not None else [],
    )]


def _event_evidence(inputs: RunInputs, host: str, stats: CopyStats | StepShare) -> list[Evidence]:
    return [Evidence(f"{e.name} on {e.plane}" + (f" ({e.detail})" if e.detail else ""), e.duration_ps / 1e9, "ms",
                     {"trace": {"host": host, "plane": e.plane, "t0_ps": e.begin_ps,
                                "t1_ps": e.begin_ps + e.duration_ps, "what": "event", "name": e.name}},
                     timeline_href(host, e.begin_ps, e.begin_ps + e.duration_ps, e.name)
                     if "trace" in inputs.pages else "")
            for e in stats.longest]


def _timeline_links(inputs: RunInputs, stats: dict[str, CopyStats] | dict[str, StepShare]) -> list[Link]:
    if "trace" not in inputs.pages:
        return []
    return [Link(f"The longest on the timeline ({host})",
                 timeline_href(host, s.longest[0].begin_ps, s.longest[0].begin_ps + s.longest[0].duration_ps,
                               s.longest[0].name))
            for host, s in stats.items() if s.longest]


def sync_copies(inputs: RunInputs) -> list[Finding]:
    """Synchronous memcpy/memset: the host thread blocks until the copy is done."""
    return _copy_finding(
        inputs, "sync_copies", "gpu.synchronous_copies",
        "Synchronous GPU copies and memsets take {share:.1f}% of the time: the host blocks on each",
        pick(inputs.framework,
             "Make transfers asynchronous: feed the model from tf.data with `prefetch` (and "
             "`tf.data.experimental.prefetch_to_device` for GPU input), avoid `.numpy()` on GPU tensors inside "
             "the step, and keep constants on the device.",
             "Make transfers asynchronous: `jax.device_put` the next batch ahead of time, avoid reading arrays "
             "back with `np.asarray` / `float()` inside the loop, and keep constants on the device."),
    )


def pageable_copies(inputs: RunInputs) -> list[Finding]:
    """Copies from or to pageable host memory: staged through a bounce buffer, never overlapped."""
    return _copy_finding(
        inputs, "pageable_copies", "gpu.pageable_copies",
        "Copies between the GPU and pageable host memory take {share:.1f}% of the time",
        "Copy from pinned (page-locked) host memory so that transfers run asynchronously at full bandwidth: "
        "tf.data's `prefetch_to_device` / `copy_to_device` pin their buffers; in JAX, `jax.device_put` from "
        "arrays made by the input pipeline ahead of the step (or a pinned_host memory kind).",
    )


def sync_calls(inputs: RunInputs) -> list[Finding]:
    """Host threads waiting in stream/device/event synchronisation calls."""
    stats = {h: f.sync_calls for h, f in inputs.facts.items() if f.sync_calls.count}
    if not stats:
        return []
    total = sum(s.busy_ps for s in stats.values())
    window = sum(sum(e - b for _, b, e in inputs.facts[h].steps) for h in stats)
    count = sum(len(inputs.facts[h].steps) for h in stats)
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    claims = []
    if ledger is not None and count and window:
        # Only the part of the wait that held the step up (no device work at that moment) is at stake.
        ms, share, claims = ledger.average_ms("synchronization"), ledger.percent("synchronization"), \
            ["synchronization"]
    elif count and window:
        ms, share = total / 1e9 / count, 100.0 * total / window
    else:
        busy = sum(g.busy_ps for f in inputs.facts.values() for g in f.gpus)
        ms, share = None, 100.0 * total / busy if busy else 0.0
    if share < SYNC_CALL_PERCENT:
        return []
    evidence = []
    for host, s in stats.items():
        steps = inputs.facts[host].steps
        source = {"host": host, "kind": "sync_calls", "windows": [[b, e] for _, b, e in steps] if steps else None}
        evidence += [Evidence(f"Synchronisation calls on {host}", s.count, "count", {"trace_total": source}),
                     Evidence(f"Time in them on {host}", s.busy_ps / 1e9, "ms",
                              {"trace_total": {**source, "field": "busy"}})]
        evidence += _event_evidence(inputs, host, s)
    return [Finding(
        id="gpu.stream_synchronization", severity=severity_for(share),
        title=f"Host threads wait in GPU synchronisation calls for {share:.1f}% of the "
              + ("step time" if ms is not None else "GPUs' busy time"),
        estimate=("The time some host thread spent in cuda/hip *Synchronize calls inside the steps while no GPU ran "
                  "anything (the step ledger's 'Host waiting on the device'), per step." if claims else
                  "The time some host thread spent in cuda/hip *Synchronize calls inside the steps, per step."
                  if ms is not None else "The time in *Synchronize calls as a share of the GPUs' busy time."),
        action=pick(inputs.framework,
                    "Find what reads results back each step (`.numpy()`, printing tensors, Python conditions on "
                    "tensor values, metrics computed on the host) and do it every N steps, or inside the graph.",
                    "Find what waits for results each step (`block_until_ready`, `float(loss)`, `np.asarray`, "
                    "printing arrays, Python control flow on array values) and do it every N steps."),
        evidence=evidence, links=_timeline_links(inputs, stats), ms_per_step=ms,
        percent_of_step=share if ms is not None else None, percent_of_device_time=None if ms is not None else share,
        claims=claims,
    )]


def _windows_evidence(inputs: RunInputs, host: str, gpu: GpuActivity, worst: int = TOP) -> list[Evidence]:
    windows = sorted(gpu.windows, key=lambda w: (w.busy_percent, w.begin_ps))[:worst]
    label = "step" if inputs.steps else "slice of its active time"
    return [Evidence(f"{gpu.plane} busy in {label} {w.name}", w.busy_percent, "percent",
                     {"trace": {"host": host, "plane": gpu.plane, "t0_ps": w.begin_ps, "t1_ps": w.end_ps,
                                "what": "busy_percent"}},
                     timeline_href(host, w.begin_ps, w.end_ps) if "trace" in inputs.pages else "")
            for w in windows]


def _gap_evidence(inputs: RunInputs, host: str, gpu: GpuActivity) -> list[Evidence]:
    return [Evidence(f"{gpu.plane} idle", (end - begin) / 1e9, "ms",
                     {"trace": {"host": host, "plane": gpu.plane, "t0_ps": begin, "t1_ps": end, "what": "gap"}},
                     timeline_href(host, begin, end) if "trace" in inputs.pages else "")
            for begin, end in gpu.gaps]


def _gpus(inputs: RunInputs) -> list[tuple[str, GpuActivity]]:
    return [(h, g) for h, f in inputs.facts.items() for g in f.gpus if g.window_ps > 0]


def low_utilization(inputs: RunInputs) -> list[Finding]:
    """A GPU busy less than half of the time analysed (the steps, or its active span without steps)."""
    gpus = [(h, g) for h, g in _gpus(inputs) if 100.0 * g.busy_ps / g.window_ps < LOW_UTILIZATION_PERCENT]
    if not gpus:
        return []
    host, gpu = min(gpus, key=lambda hg: hg[1].busy_ps / hg[1].window_ps)
    busy = 100.0 * gpu.busy_ps / gpu.window_ps
    idle_ps = gpu.window_ps - gpu.busy_ps
    steps = len(gpu.windows) if inputs.steps else 0
    ms = idle_ps / 1e9 / steps if steps else None
    evidence = [Evidence(f"{gpu.plane} busy", busy, "percent",
                         {"trace": {"host": host, "plane": gpu.plane, "windows": [[w.begin_ps, w.end_ps]
                                                                                   for w in gpu.windows],
                                    "what": "busy_percent"}}, ""),
                *_windows_evidence(inputs, host, gpu), *_gap_evidence(inputs, host, gpu)]
    several_hosts = len({h for h, _ in gpus}) > 1
    others = [f"{g.plane}{f' on {h}' if several_hosts else ''}: {100.0 * g.busy_ps / g.window_ps:.0f}%"
              for h, g in gpus if g is not gpu]
    where = "the steps analysed" if inputs.steps else "its active time"
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    severity, stake = severity_for(100.0 - busy), 100.0 - busy
    estimate = ("The time no kernel or copy ran on the GPU inside the steps, per step." if ms is not None else
                "The share of the GPU's active span with no kernel or copy running.")
    if ledger is not None and ms is not None:
        # The idle time is split by cause in the step ledger, and each cause's finding carries its share.
        causes = [(k, ledger.percent(k)) for k in LEDGER_KEYS if k not in DEVICE_KEYS and ledger.percent(k) >= 1.0]
        causes.sort(key=lambda c: -c[1])
        evidence[1:1] = [Evidence(f"{LEDGER_LABELS[k]} (step ledger)", p, "percent",
                                  summary_source("step_ledger", "percent", k), "index.html#step-ledger")
                         for k, p in causes]
        estimate += (" Not counted again here: the step ledger splits this idle time by what the host threads did, "
                     "and the findings of those causes carry it.")
        severity, ms, stake = "info", None, None
    return [Finding(
        id="gpu.low_utilization", severity=severity,
        title=f"{gpu.plane} is busy only {busy:.0f}% of {where}" + (f" (also {', '.join(others)})" if others else ""),
        estimate=estimate,
        action=pick(inputs.framework,
                    "Find what the GPU waits for in its idle stretches on the timeline: input (see the input "
                    "pipeline page), host ops between kernels, or synchronisation; then grow the batch, compile "
                    "with XLA and prefetch to the device.",
                    "Find what the GPU waits for in its idle stretches on the timeline: Python between jitted "
                    "calls, input loading, or results read back; then keep the whole step in one `jax.jit`, "
                    "prefetch batches to the device and grow the batch."),
        evidence=evidence, links=[Link(e.label, e.href) for e in evidence[1:] if e.href][:TOP],
        ms_per_step=ms, percent_of_step=stake if ms is not None else None,
        percent_of_device_time=None if ms is not None or stake is None else stake,
    )]


def idle_gaps(inputs: RunInputs) -> list[Finding]:
    """A GPU idle with nothing on the host to explain it (the step ledger's 'Nothing identified'), with its long
    gaps; without the ledger (no steps), long idle stretches of a GPU that is otherwise busy (a GPU under 50% busy is
    then `gpu.low_utilization`'s)."""
    ledger = inputs.ledger if inputs.ledger is not None and inputs.ledger.step_count else None
    steps_known = bool(inputs.steps) or (ledger is not None and bool(ledger.inferred_from))
    if ledger is not None and steps_known:
        gpus = _gpus(inputs)
        if not gpus or ledger.percent("other") < GAP_PERCENT:
            return []
    else:
        ledger = None
        gpus = [(h, g) for h, g in _gpus(inputs) if 100.0 * g.busy_ps / g.window_ps >= LOW_UTILIZATION_PERCENT
                and 100.0 * g.gap_total_ps / g.window_ps >= GAP_PERCENT]
        if not gpus:
            return []
    host, gpu = max(gpus, key=lambda hg: hg[1].gap_total_ps / hg[1].window_ps)
    share = 100.0 * gpu.gap_total_ps / gpu.window_ps
    steps = len(gpu.windows) if inputs.steps else 0
    ms = gpu.gap_total_ps / 1e9 / steps if steps else None
    if ledger is not None:
        # The idle time the host threads explain (input, launches, host ops, …) is those findings'; what is left is
        # this one's.
        share, ms = ledger.percent("other"), ledger.average_ms("other")
    evidence = [Evidence(f"Idle stretches of 1 ms or more on {gpu.plane}, in all", gpu.gap_total_ps / 1e9, "ms",
                         {"trace": {"host": host, "plane": gpu.plane, "windows": [[w.begin_ps, w.end_ps]
                                                                                   for w in gpu.windows],
                                    "what": "gap_total"}}, ""),
                *_gap_evidence(inputs, host, gpu)]
    if ledger is not None:
        evidence.insert(0, Evidence("Device idle with no host activity identified, per step (step ledger)", ms, "ms",
                                    summary_source("step_ledger", "average_ms", "other"), "index.html#step-ledger"))
        title = (f"The GPU idles {share:.1f}% of the step time with no host activity to explain it"
                 + (f" ({gpu.plane}'s long gaps are below)" if gpu.gaps else ""))
        estimate = ("The step time in which no device ran and no host thread was waiting for input, compiling, "
                    "synchronising, launching, running ops or Python (the step ledger's 'Nothing identified'), per "
                    "step.")
    else:
        title = (f"{gpu.plane} sits idle in long stretches: {share:.1f}% of " +
                 ("the steps" if inputs.steps else "its active time") + " in gaps of 1 ms or more")
        estimate = ("The GPU's idle stretches of at least 1 ms inside the steps (per step), as a share of the step "
                    "time." if ms is not None else "The GPU's idle stretches of at least 1 ms as a share of its "
                                                       "active span.")
    return [Finding(
        id="gpu.idle_gaps", severity=severity_for(share),
        title=title,
        estimate=estimate,
        action="Open the longest gaps on the timeline and look at the host threads at that time: the GPU waits for "
               "whatever runs there (input, host ops, a synchronisation, Python). Overlap it with GPU work or "
               "remove it from the step.",
        evidence=evidence, links=[Link(f"Gap of {e.value:.1f} ms on the timeline", e.href) for e in evidence[1:]
                                  if e.href],
        ms_per_step=ms, percent_of_step=share if ms is not None else None,
        percent_of_device_time=None if ms is not None else share,
        claims=["other"] if ledger is not None else [],
    )]


def collective_overlap(inputs: RunInputs) -> list[Finding]:
    """On several GPUs, collectives that do not overlap computation: the GPUs wait on communication."""
    gpus = [(h, g) for h, g in _gpus(inputs) if g.busy_ps and g.collective_ps
            and 100.0 * g.collective_ps / g.busy_ps >= COLLECTIVE_SHARE]
    if len(_gpus(inputs)) < 2 or not gpus:
        return []
    exposed = {(h, g.plane): g.collective_ps - g.collective_overlap_ps for h, g in gpus}
    host, gpu = max(gpus, key=lambda hg: exposed[(hg[0], hg[1].plane)])
    overlap = 100.0 * gpu.collective_overlap_ps / gpu.collective_ps
    if overlap >= OVERLAP_PERCENT:
        return []
    waiting = exposed[(host, gpu.plane)]
    steps = len(gpu.windows) if inputs.steps else 0
    ms = waiting / 1e9 / steps if steps else None
    share = 100.0 * waiting / gpu.window_ps
    windows = {"host": host, "plane": gpu.plane, "windows": [[w.begin_ps, w.end_ps] for w in gpu.windows]}
    return [Finding(
        id="gpu.collectives_not_overlapped", severity=severity_for(share),
        title=f"Collectives on {gpu.plane} overlap computation only {overlap:.0f}% of their time",
        estimate="The collective kernels' time with no compute kernel running on the same GPU"
                 + (", per step." if ms is not None else ", as a share of the GPU's active span."),
        action=pick(inputs.framework,
                    "Overlap gradient all-reduce with the backward pass: Keras/`tf.distribute` does it for "
                    "gradients in buckets; avoid an explicit all-reduce after the whole backward pass, and run "
                    "NCCL on its own stream (the default).",
                    "Let XLA overlap collectives with compute (async collectives, the latency-hiding scheduler: "
                    "`--xla_gpu_enable_latency_hiding_scheduler=true` in XLA_FLAGS), and shard so that "
                    "collectives are fewer and larger."),
        evidence=[Evidence(f"Collective kernel time on {gpu.plane}", gpu.collective_ps / 1e9, "ms",
                           {"trace": {**windows, "what": "collective"}}, ""),
                  Evidence("Of it, overlapped by compute kernels", overlap, "percent",
                           {"trace": {**windows, "what": "collective_overlap_percent"}}, "")],
        links=[Link("Timeline", timeline_href(host))] if "trace" in inputs.pages else [],
        ms_per_step=ms, percent_of_step=share if ms is not None else None,
        percent_of_device_time=None if ms is not None else share,
        claims=["device_collectives"] if ms is not None else [],
    )]


ELEMENTWISE_PERCENT = 25.0
# Framework op types XLA fuses into their neighbours (element-wise math, casts, comparisons, dropout's masks).
_ELEMENTWISE = frozenset((
    "Cast", "Mul", "Add", "AddV2", "AddN", "Sub", "RealDiv", "Div", "DivNoNan", "Neg", "Reciprocal", "Square",
    "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Pow", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Gelu",
    "Softplus", "Erf", "Maximum", "Minimum", "Select", "SelectV2", "GreaterEqual", "Greater", "Less", "LessEqual",
    "Equal", "NotEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "BiasAdd", "BiasAddGrad", "ReluGrad",
    "TanhGrad", "SigmoidGrad", "SquaredDifference", "ZerosLike", "OnesLike", "Fill", "BroadcastTo", "Tile",
    "RandomUniform", "RandomStandardNormal", "StatelessRandomUniformV2", "Identity",
))


def unfused_elementwise(inputs: RunInputs) -> list[Finding]:
    """TensorFlow runs many small element-wise ops as kernels of their own on the GPU, which XLA would fuse."""
    # Where XLA already runs programs (an `XLA Modules` line), its fusion is in use: say nothing.
    if inputs.framework != "tensorflow" or any(f.module_runs for f in inputs.facts.values()):
        return []
    totals: dict[str, int] = {}
    kernels = kernel_ps = matrix = 0
    for _, mix in distinct_mixes(inputs):
        for op_type, ps in mix.op_type_ps.items():
            totals[op_type] = totals.get(op_type, 0) + ps
        kernels += mix.kernels
        kernel_ps += mix.kernel_ps
        matrix += mix.matrix_kernels
    total = sum(totals.values())
    elementwise = {t: ps for t, ps in totals.items() if t in _ELEMENTWISE}
    share = 100.0 * sum(elementwise.values()) / total if total else 0.0
    if share < ELEMENTWISE_PERCENT or not kernels:
        return []
    top = sorted(elementwise.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    named = ", ".join(f"{t} {100.0 * ps / total:.0f}%" for t, ps in top)
    evidence = [Evidence(f"{t}: share of the GPUs' op time", 100.0 * ps / total, "percent", None,
                         inputs.page("tf_stats")) for t, ps in top]
    evidence += [Evidence("GPU kernels in the capture", kernels, "count", None, inputs.page("kernel_stats")),
                 Evidence("Their average duration", kernel_ps / kernels / 1e6, "us", None, inputs.page("kernel_stats"))]
    # With no matrix kernel in the capture (capture.partial_gpu_trace), the shares are of a fragment: it is said,
    # at low severity.
    partial = matrix == 0
    return [Finding(
        id="gpu.unfused_elementwise", severity="low" if partial else severity_for(share),
        title=f"{share:.0f}% of the GPUs' op time is element-wise ops run one kernel each ({named})",
        estimate="The GPU time of element-wise op types (casts, arithmetic, comparisons, dropout's random masks) on "
                 "XProf's `TensorFlow Ops` lines, as a share of all op time on the GPUs: the work XLA fuses into "
                 "neighbouring kernels, so that their inputs and outputs stay in registers instead of memory."
                 + (" The capture holds no matrix kernel (see capture.partial_gpu_trace): this share is of the "
                    "captured part only." if partial else ""),
        action=f"Compile the step with XLA (`tf.function(jit_compile=True)`, or `model.compile(jit_compile=True)` in "
               f"Keras): it fuses these {kernels:,} kernels (about {kernel_ps / kernels / 1e6:.0f} µs each) into far "
               "fewer, including the per-step casts of float32 variables to float16 that a `mixed_float16` policy "
               "makes.",
        evidence=evidence, links=[Link("TF stats", inputs.page("tf_stats"))], percent_of_device_time=share,
    )]


__all__ = ["collective_overlap", "idle_gaps", "low_utilization", "pageable_copies", "sync_calls", "sync_copies",
           "tensor_cores_unused", "tiny_kernels", "unfused_elementwise", "copy_kernels"]
