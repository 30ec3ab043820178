"""Rules over the device ops (op profile and HLO op stats, all hosts combined): where the device time goes.

Shares are of the device's total time as the op profile counts it (idle included), the number its
category table and summary.json's `op_profile.categories` show.
"""

from __future__ import annotations

import math
import re

from reportgen.core.findings.inputs import RunInputs, pick
from reportgen.core.findings.model import Evidence, Finding, Link, csv_source, severity_for, summary_source
from reportgen.core.ops.op_metrics import IDLE
from reportgen.core.pages import HLO_STATS_CSV, hlo_op_anchor, timeline_href
from reportgen.core.tools.hlo_stats import ranked_ops
from reportgen.core.tools.op_profile import op_profile_summary

ASYNC_COPY_CATEGORIES = ("copy-start", "copy-done")
ASYNC_COPY_PERCENT = 10.0  # XProf's async-done rule
DATA_FORMATTING = "data formatting"
DATA_FORMATTING_PERCENT = 10.0
NON_MATRIX_SHARE = 50.0  # of the device's op time
NON_MATRIX_MIN_PERCENT = 10.0  # of the device's whole time
PADDING_RATIO = 1.25  # an op whose layout holds at least 25% padding elements
PADDING_PERCENT = 3.0  # of the device time wasted on padding
DEVICE_IDLE_PERCENT = 10.0  # XProf's TensorCore-idle-bound rule
TOP_OPS = 3
# Categories that are neither matrix work nor general compute: their own rules speak for them.
_NOT_COMPUTE = re.compile(r"copy-start|copy-done|data formatting|all-reduce|all-gather|reduce-scatter|all-to-all|"
                          r"collective|send|recv|infeed|outfeed|host|barrier", re.IGNORECASE)
_MATRIX = re.compile(r"convolution|dot|output fusion", re.IGNORECASE)
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
HOST_MEMORY_SPACE = "5"


def _categories(inputs: RunInputs) -> dict[str, float]:
    """Category → share of the device time (%), as summary.json's op_profile block rounds it."""
    if inputs.op_profile is None:
        return {}
    return {c.name: c.time_percent for c in op_profile_summary(inputs.op_profile).categories}


def _category_evidence(inputs: RunInputs, name: str, share: float) -> Evidence:
    return Evidence(f"'{name}' share of device time", share, "percent",
                    summary_source("op_profile", "categories", {"name": name}, "time_percent"),
                    inputs.page("op_profile"))


def _top_ops(inputs: RunInputs, categories) -> list[Evidence]:
    """The HLO ops of these categories with the most self time, each as its HLO op stats row."""
    if inputs.hlo_stats is None:
        return []
    table = inputs.hlo_stats.table
    rows = table[table["category"].isin(list(categories))].head(TOP_OPS)
    return [Evidence(f"{row.hlo_op_name} ({row.category}, {int(row.occurrences)} runs)",
                     float(row.total_self_time_percent), "percent",
                     csv_source(HLO_STATS_CSV, {"Rank": row.rank}, "Total self time (%)"),
                     inputs.page("hlo_stats", hlo_op_anchor(row.rank)))
            for row in rows.itertuples()]


def _op_links(inputs: RunInputs) -> list[Link]:
    links = (Link("Op profile", inputs.page("op_profile")), Link("HLO op stats", inputs.page("hlo_stats")))
    return [link for link in links if link.href]


def _shape(expression: str) -> str:
    """The result shape of an HLO text (`%x = f32[5,3]{1,0} op(...)` → `f32[5,3]{1,0}`)."""
    after = expression.split(" = ", 1)[-1]
    return after.split(" ", 1)[0] if after else ""


def tpu_async_copies(inputs: RunInputs) -> list[Finding]:
    """Asynchronous copies (copy-start/copy-done) take a large share of TPU time: the program waits on
    data movement, often between device memory and host memory."""
    if inputs.hardware != "TPU":
        return []
    shares = _categories(inputs)
    found = {name: shares[name] for name in ASYNC_COPY_CATEGORIES if name in shares}
    total = sum(found.values())
    if total < ASYNC_COPY_PERCENT:
        return []
    table = inputs.hlo_stats.table if inputs.hlo_stats is not None else None
    copies = table[table["category"].isin(list(ASYNC_COPY_CATEGORIES))] if table is not None else None
    to_host = copies is not None and any(HOST_MEMORY_SPACE in _MEMORY_SPACE.findall(e)
                                         for e in copies["hlo_op_expression"])
    top = copies.head(1) if copies is not None else None
    shape = _shape(str(top["hlo_op_expression"].iloc[0])) if top is not None and len(top) else ""
    where = "between device memory (HBM) and host memory (memory space S(5))" if to_host else "between memory spaces"
    idle = shares.get(IDLE, 0.0)
    ledger = inputs.ledger
    ledger_copies = ledger.percent("device_copies") if ledger is not None and ledger.step_count else None
    title = f"Asynchronous copies take {total:.1f}% of device time: the program waits on data moved {where}"
    jax = ("These copies move arrays " + where + (f", e.g. {shape}" if shape else "") + ". "
           + ("If the arrays fit in HBM, keep them there: drop `memory_kind='pinned_host'` / the offload policy "
              "(`jax.checkpoint` with an offload policy, host-offloaded optimizer state) for these arrays. "
              if to_host else "")
           + "Otherwise move fewer bytes (bf16 instead of f32) and give XLA independent work to overlap with each "
             "copy, so that its copy-done no longer waits.")
    tf = ("These copies move tensors " + where + ". Keep the tensors on the TPU between steps (no host round trip "
          "of variables or activations), move fewer bytes (bfloat16), and overlap transfers with computation.")
    evidence = [_category_evidence(inputs, name, share) for name, share in found.items()]
    evidence += _top_ops(inputs, ASYNC_COPY_CATEGORIES)
    moved = _bytes_per_call(inputs, copies) if copies is not None and to_host else None
    if moved is not None:
        program, per_call, call_ms, arrays, peak, capacity = moved
        evidence += [Evidence(f"Bytes each run of {program} moves between HBM and host memory, per chip", per_call,
                              "bytes", None, inputs.page("hlo_stats")),
                     Evidence("At its run time, per chip (GiB/s)", round(per_call / 2**30 / (call_ms / 1e3), 2), "",
                              None, inputs.page("hlo_stats"))]
        fit = ""
        if arrays and peak and capacity:
            evidence += [Evidence("Distinct arrays it keeps in host memory", arrays, "bytes", None, ""),
                         Evidence("Its peak in HBM (memory viewer)", peak, "bytes",
                                  summary_source("memory", "modules", program, "peak_bytes"),
                                  inputs.page("memory_viewer")),
                         Evidence("HBM capacity", capacity, "bytes", None, inputs.page("memory_profile"))]
            # Kept in HBM, the arrays need between the larger of the two (the peak may already hold them all while
            # they are in use) and their sum (it holds none of them).
            low, high = max(peak, arrays), peak + arrays
            sizes = (f" The program's HBM peak is {peak / 2**30:.1f} GiB and it keeps {arrays / 2**30:.1f} GiB in "
                     f"host memory; the chip has {capacity / 2**30:.2f} GiB of HBM")
            if high <= capacity:
                fit = sizes + ": both fit together, so keeping the arrays in HBM removes these transfers."
            elif low > capacity:
                fit = sizes + ": they cannot all stay in HBM; shard them over more chips or move fewer bytes per run."
            else:
                fit = (sizes + f": kept in HBM they would need between {low / 2**30:.1f} and {high / 2**30:.1f} GiB, "
                       "depending on how many of them the peak already holds while in use; the memory viewer's "
                       "buffers at the peak tell which.")
        title += (f": {per_call / 2**30:.1f} GiB per run of the program per chip "
                  f"({per_call / 2**30 / (call_ms / 1e3):.0f} GiB/s)")
        jax += fit
        devices = max((f.program_devices.get(program, 0) for f in inputs.facts.values()), default=0)
        if devices > 1 and any(program in f.replicated_programs for f in inputs.facts.values()):
            title += f", the same arrays on each of the {devices} devices it runs on (replicated, not sharded)"
            evidence.append(Evidence(f"Devices {program} runs on (its HLO module's device assignment)", devices,
                                     "count", None, inputs.page("hlo_stats")))
            jax += (f" Every parameter and output of {program} is replicated over its {devices} devices (the HLO "
                    "module's SPMD shardings): each chip holds and copies the whole arrays, so every chip moves the "
                    "same bytes. Sharded over the devices (`jax.device_put(x, NamedSharding(mesh, P('x')))` on a "
                    "dimension the computation splits along, or `in_shardings` of the `jax.jit`), each chip would "
                    f"hold and move about 1/{devices} of them, which may also let them stay in HBM.")
    return [Finding(
        id="tpu.async_copies_dominate", severity=severity_for(total), title=title,
        estimate="The op profile's time in copy-start and copy-done over the whole capture, as a share of the "
                 "device time: the time the TensorCores spend waiting for these copies. The op profile sums each "
                 "TensorCore's ops, its idle time in the total"
                 + (f" ({idle:.1f}% here)" if idle else "")
                 + ("; the step ledger's 'Device copies' is a share of the steps instead, read over all the host's "
                    f"TensorCores at once ({ledger_copies:.1f}% here): a moment when any of them runs a fusion counts "
                    "as compute there, so the two shares differ." if ledger_copies is not None else "."),
        action=pick(inputs.framework, tf, jax),
        evidence=evidence, links=_op_links(inputs), percent_of_device_time=total,
    )]


_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_RESULT_SHAPE = re.compile(r"=\s*(\w+)\[([\d,]*)\]")


def _shape_bytes(expression: str) -> int:
    """Bytes of an HLO op's (array) result, from its text: `%x = f32[5,1024]{…} copy-done(…)`."""
    m = _RESULT_SHAPE.search(expression)
    if m is None or m.group(1) not in _DTYPE_BYTES:
        return 0
    elements = 1
    for d in (m.group(2).split(",") if m.group(2) else []):
        elements *= int(d)
    return elements * _DTYPE_BYTES[m.group(1)]


def _bytes_per_call(inputs: RunInputs, copies) -> tuple[str, float, float, int, int, int] | None:
    """(the program, bytes its copies move per run and chip, its mean run time in ms, the distinct arrays' bytes,
    its HBM peak, the HBM capacity) for the program whose copy-done ops are the most, or None."""
    done = copies[copies["category"] == "copy-done"]
    if not len(done):
        return None
    runs = [m for f in inputs.facts.values() for m in f.module_runs]
    program_id = done.groupby("program_id")["self_time_us"].sum().idxmax() if "self_time_us" in done else \
        str(done["program_id"].iloc[0])
    mine = [m for m in runs if m.name.endswith(f"({program_id})")]
    count = sum(m.count for m in mine)
    if not count:
        return None
    sizes = [_shape_bytes(str(e)) for e in done[done["program_id"] == program_id]["hlo_op_expression"]]
    occurrences = done[done["program_id"] == program_id]["occurrences"].tolist()
    per_call = sum(b * o for b, o in zip(sizes, occurrences)) / count
    # The arrays that live in host memory: the copies whose result is in S(5) (each moves out and back once a run).
    expressions = done[done["program_id"] == program_id]["hlo_op_expression"].astype(str).tolist()
    offloaded = sum(b for b, e in zip(sizes, expressions) if f"S({HOST_MEMORY_SPACE})" in e.split(" copy-done(", 1)[0])
    call_ms = sum(m.total_ps for m in mine) / count / 1e9
    name = mine[0].name
    memory = inputs.memory_viewer or {}
    module = (memory.get("modules") or {}).get(name)
    hbm = [v for v in module.spaces if v.memory_space == 0] if module is not None else []
    peak = int(hbm[0].peak_bytes) if hbm else 0
    if not per_call or not call_ms:
        return None
    return name, per_call, call_ms, offloaded, peak, int(memory.get("capacity") or 0)


def tpu_non_matrix(inputs: RunInputs) -> list[Finding]:
    """Most TPU op time is neither matrix work (MXU) nor data movement: element-wise and reduction work."""
    if inputs.hardware != "TPU":
        return []
    shares = _categories(inputs)
    busy = {k: v for k, v in shares.items() if k != IDLE}
    op_time = sum(busy.values())
    compute = {k: v for k, v in busy.items() if not _NOT_COMPUTE.search(k)}
    matrix_names = [k for k in compute if _MATRIX.search(k)]
    matrix = sum(compute[k] for k in matrix_names)
    non_matrix = {k: v for k, v in compute.items() if not _MATRIX.search(k)}
    total = sum(non_matrix.values())
    if op_time <= 0 or 100.0 * total / op_time < NON_MATRIX_SHARE or total < NON_MATRIX_MIN_PERCENT:
        return []
    top = sorted(non_matrix.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    evidence = [_category_evidence(inputs, name, share) for name, share in top]
    evidence.append(Evidence("Matrix work (convolution, dot, output fusion) share of device time", matrix,
                             "percent", {"sum": [summary_source("op_profile", "categories", {"name": k},
                                                                "time_percent") for k in matrix_names]},
                             inputs.page("op_profile")))
    if inputs.op_profile is not None:
        flops = op_profile_summary(inputs.op_profile).flops_utilization_percent
        evidence.append(Evidence("FLOPS utilization", flops, "percent",
                                 summary_source("op_profile", "flops_utilization_percent"), inputs.page("op_profile")))
    evidence += _top_ops(inputs, [name for name, _ in top])
    return [Finding(
        id="tpu.non_matrix_ops_dominate", severity=severity_for(total),
        title=f"{total:.1f}% of device time goes to non-matrix ops ({', '.join(n for n, _ in top)}): the matrix "
              "units are mostly idle",
        estimate="The op profile's time in compute categories other than convolution, dot and output fusions, as a "
                 "share of the device time: the matrix units do no work while these run.",
        action="Element-wise, reduction and gather work runs on the vector units and is bound by HBM bandwidth "
               "(see the roofline page): fuse it into the neighbouring matmuls, halve its bytes with bfloat16, and "
               "grow the batch or feature sizes so that matrix work dominates.",
        evidence=evidence, links=_op_links(inputs), percent_of_device_time=total,
    )]


def data_formatting(inputs: RunInputs) -> list[Finding]:
    """Transposes, copies and reshapes (XLA's 'data formatting' ops) take a large share of device time."""
    share = _categories(inputs).get(DATA_FORMATTING, 0.0)
    if share < DATA_FORMATTING_PERCENT:
        return []
    return [Finding(
        id="device.data_formatting", severity=severity_for(share),
        title=f"Transposes, copies and reshapes ('data formatting') take {share:.1f}% of device time",
        estimate="The op profile's time in the 'data formatting' category as a share of the device time: moving "
                 "data between layouts, with no arithmetic.",
        action=pick(inputs.framework,
                    "Keep one layout end to end: avoid `tf.transpose` / reshapes between matmuls and convolutions "
                    "(use `tf.einsum` so XLA picks the layout), keep image data channels-last, and do layout "
                    "changes in the input pipeline rather than in the step.",
                    "Keep one layout end to end: express contractions with `jnp.einsum` / `lax.dot_general` "
                    "dimension numbers instead of `transpose` + `dot`, avoid reshapes that split or merge the "
                    "minor dimensions, and do layout changes once, outside the step."),
        evidence=[_category_evidence(inputs, DATA_FORMATTING, share), *_top_ops(inputs, [DATA_FORMATTING])],
        links=_op_links(inputs), percent_of_device_time=share,
    )]


def _padding(op) -> tuple[float, str]:
    """(padded / logical elements, "dim size→padded, …") of an HLO op's layout."""
    logical = math.prod(d.size for d in op.layout) if op.layout else 0
    padded = math.prod(d.padded for d in op.layout) if op.layout else 0
    dims = ", ".join(f"{d.size}→{d.padded}" for d in op.layout if d.padded != d.size)
    return (padded / logical if logical else 1.0), dims


def tpu_layout_padding(inputs: RunInputs) -> list[Finding]:
    """Ops whose tiled layouts pad their dimensions a lot: the padding is computed and moved for nothing."""
    if inputs.hardware != "TPU" or inputs.hlo_stats is None:
        return []
    run = inputs.hlo_stats.run
    ops = ranked_ops(run.records)
    table = inputs.hlo_stats.table
    total_ps = float(run.op_stats.device_db.total_time_ps)
    if total_ps <= 0:
        return []
    wasted, padded_rows = 0.0, []
    for i, op in enumerate(ops.itertuples()):
        hlo = run.details.hlo.get((int(op.hlo_module_id), op.name))
        if hlo is None or not hlo.layout:
            continue
        ratio, dims = _padding(hlo)
        if ratio < PADDING_RATIO:
            continue
        wasted += op.self_time_ps * (1.0 - 1.0 / ratio)
        padded_rows.append((i, ratio, dims, hlo.shape))
    share = 100.0 * wasted / total_ps
    if share < PADDING_PERCENT:
        return []
    evidence = []
    for i, ratio, dims, shape in padded_rows[:TOP_OPS]:
        row = table.iloc[i]
        evidence.append(Evidence(f"{row['hlo_op_name']} {shape}: dimensions padded {dims} ({ratio:.2f}× the "
                                 "elements)", float(row["total_self_time_percent"]), "percent",
                                 csv_source(HLO_STATS_CSV, {"Rank": row["rank"]}, "Total self time (%)"),
                                 inputs.page("hlo_stats", hlo_op_anchor(row["rank"]))))
    return [Finding(
        id="tpu.layout_padding", severity=severity_for(share),
        title=f"Tile padding wastes {share:.1f}% of device time: dimensions are padded up to the TPU's tiles",
        estimate="For each op whose layout pads at least 25% extra elements, its self time × the padded share of "
                 "its elements, summed, as a share of the device time.",
        action="Make the padded dimensions multiples of the tile the layout shows (the minor dimension of 128, "
               "the second-minor of 8 for 32-bit types, 16 for bfloat16): choose batch and feature sizes that are "
               "multiples of 128, or pad them once in the input rather than in every op.",
        evidence=evidence, links=_op_links(inputs), percent_of_device_time=share,
    )]


def tpu_device_idle(inputs: RunInputs) -> list[Finding]:
    """Without steps: the TPU idles between runs of its main program (or before them: compilation and setup;
    or at the capture's ends, which costs nothing)."""
    if inputs.hardware != "TPU" or inputs.steps or inputs.overview is None:
        return []
    idle = inputs.overview.stats["device_idle_percent"]
    if idle < DEVICE_IDLE_PERCENT:
        return []
    programs = [(h, p) for h, f in inputs.facts.items() for p in f.programs]
    evidence = [Evidence("Device idle time (overview)", idle, "percent",
                         summary_source("overview", "device_idle_percent"), inputs.page("overview"))]
    links = [Link("Overview", inputs.page("overview"))]
    host, worst = max(programs, key=lambda hp: (hp[1].idle_percent, hp[1].plane), default=("", None))
    steady = worst.steady_idle_percent if worst is not None else 0.0
    between = worst.idle_percent if worst is not None else 0.0
    if worst is not None:
        trace = {"host": host, "plane": worst.plane}
        evidence += [
            Evidence(f"Idle from the first to the last program run on {worst.plane}", between, "percent",
                     {"trace": {**trace, "what": "program_idle_percent"}}, ""),
            Evidence(f"Idle from the first run of its most run program on {worst.plane}", steady, "percent",
                     {"trace": {**trace, "t0_ps": worst.steady_first_ps, "what": "program_idle_percent"}}, "")]
        for begin, end in worst.gaps:
            evidence.append(Evidence(f"No program running on {worst.plane}", (end - begin) / 1e9, "ms",
                                     {"trace": {**trace, "t0_ps": begin, "t1_ps": end, "what": "program_gap"}},
                                     timeline_href(host, begin, end) if "trace" in inputs.pages else ""))
        links += [Link(f"Idle stretch of {(e - b) / 1e9:,.0f} ms on the timeline", timeline_href(host, b, e))
                  for b, e in worst.gaps if "trace" in inputs.pages]
    keep_fed = pick(inputs.framework,
                    "Keep the TPU fed: issue the next call before reading the previous results, batch requests, "
                    "and do host pre/post-processing on other threads.",
                    "Keep the TPU fed: JAX dispatches asynchronously, so do not wait on each result "
                    "(`block_until_ready`, `np.asarray`, printing) before issuing the next call; batch requests; "
                    "do host pre/post-processing on other threads.")
    steady_state = pick(inputs.framework,
                        "Trace only the steady state: start the profiler after warm-up and stop it after the last "
                        "step (`tf.profiler.experimental.start` / `stop`), so that the pages' shares describe the "
                        "work.",
                        "Trace only the steady state: start the trace after warm-up and stop it right after the "
                        "work (`jax.profiler.start_trace` / `stop_trace`), so that the pages' shares describe the "
                        "work.")
    if steady >= DEVICE_IDLE_PERCENT:
        return [Finding(
            id="device.idle", severity=severity_for(steady),
            title=f"The TPU idles {steady:.1f}% of the time between runs of its main program",
            estimate="The time no program ran on the idlest TPU core from the first run of its most run program to "
                     "its last run, as a share of that span.",
            action=keep_fed, evidence=evidence, links=links, percent_of_device_time=steady,
        )]
    if between >= DEVICE_IDLE_PERCENT:
        return [Finding(
            id="device.idle", severity="low",
            title=f"The TPU idled {between:.1f}% of the time between program runs, all before its main program "
                  "started running (warm-up)",
            estimate="The time no program ran on the idlest TPU core between its first and last program runs; the "
                     "stretches come before the steady state, which runs back to back: a one-off start-up cost.",
            action="Open the idle stretches on the timeline and look at the host threads: compiling (the first call "
                   "of each jitted function) and loading data. " + steady_state,
            evidence=evidence, links=links, percent_of_device_time=between,
        )]
    return [Finding(
        id="device.idle", severity="info",
        title=f"Device idle {idle:.1f}% of the capture, at its start and end (programs ran back to back)",
        estimate="XProf's device idle share; programs ran back to back, so this idle time is at the capture's ends "
                 "and costs the workload nothing.",
        action=steady_state, evidence=evidence, links=links, percent_of_device_time=idle,
    )]


def fp32_compute(inputs: RunInputs) -> list[Finding]:
    """Device compute almost all in 32-bit where 16-bit would run the matrix units faster."""
    view = inputs.overview
    if view is None or not inputs.steps or not view.stats["has_precision"] or view.analysis.tpu:
        return []
    if _xla_share_of_gpu_op_time(inputs) >= 50.0:
        return []
    low = view.stats["device_compute_16bit_percent"]
    high = view.stats["device_compute_32bit_percent"]
    compute_ms = view.analysis.categories["device_compute"].average
    if low >= 10.0 or compute_ms <= 0:
        return []
    # 16-bit matrix units run at least twice the 32-bit rate: half the 32-bit compute time is at stake.
    at_stake = compute_ms * high / 100.0 / 2.0
    share = 100.0 * at_stake / inputs.step_ms if inputs.step_ms else 0.0
    return [Finding(
        id="device.fp32_compute", severity=severity_for(share),
        title=f"{high:.1f}% of device compute runs in 32-bit: mixed precision would speed it up",
        estimate="Half of the 32-bit share of the device compute time per step: 16-bit matrix units run at "
                 "least twice as fast as 32-bit ones.",
        action=pick(inputs.framework,
                    "Use mixed precision: `tf.keras.mixed_precision.set_global_policy('mixed_float16')` on GPUs "
                    "(with the loss scaling Keras adds) or 'mixed_bfloat16' on TPUs; keep dimensions multiples of "
                    "8 so that TensorCores apply.",
                    "Compute in bfloat16 (or float16 with loss scaling): cast parameters and activations "
                    "(`x.astype(jnp.bfloat16)`, a jmp policy), keep the optimizer state in float32, and keep "
                    "dimensions multiples of 8."),
        evidence=[
            Evidence("Device compute in 16-bit", low, "percent", summary_source("overview",
                                                                                "device_compute_16bit_percent"),
                     inputs.page("overview")),
            Evidence("Device compute in 32-bit", high, "percent", summary_source("overview",
                                                                                 "device_compute_32bit_percent"),
                     inputs.page("overview")),
            Evidence("Device compute per step (average)", compute_ms, "ms",
                     summary_source("overview", "breakdown_ms", "device_compute"), inputs.page("overview")),
            inputs.step_time_evidence()],
        links=[Link("Overview", inputs.page("overview"))], ms_per_step=at_stake, percent_of_step=share,
        claims=["device_compute"],
    )]


def _xla_share_of_gpu_op_time(inputs: RunInputs) -> float:
    """The share (%) of a GPU run's device op time in XLA ops. XProf's 16-/32-bit split reads a kernel's `shape`
    stat or name ("half", "fp16"), which XLA's kernels do not carry: it counts them all as 32-bit, so a bfloat16
    JAX run shows 100% 32-bit compute (seen on a real H200 capture, tests/captures/jax_lm_h200). Where XLA ops
    hold most of the time the split says nothing about the run's precision, and the rule stays silent."""
    data = inputs.op_profile
    if data is None or data.run.hardware_type != "GPU":
        return 0.0
    metrics = data.run.op_stats.device_db.metrics
    busy = metrics["category"].to_numpy() != "IDLE"
    time = metrics["self_time_ps"].to_numpy()[busy]
    xla = metrics["hlo_module_id"].to_numpy()[busy] != 0
    total = float(time.sum())
    return 100.0 * float(time[xla].sum()) / total if total else 0.0


def outside_compilation(inputs: RunInputs) -> list[Finding]:
    """Ops outside the compiled device program (TF outside compilation) take a share of device op time."""
    view = inputs.overview
    if view is None or not view.top_ops_on_device:
        return []
    share = view.stats["device_op_time_outside_compilation_percent"]
    if share < 5.0:
        return []
    return [Finding(
        id="device.outside_compilation", severity=severity_for(share),
        title=f"{share:.1f}% of device op time is outside compilation: ops run on the host between device "
              "programs",
        estimate="XProf's share of device op time in ops marked as outside compilation; each one also costs a "
                 "round trip between device and host.",
        action="Find the ops the TF stats / HLO op stats pages mark as outside compilation and give them a "
               "device implementation (summaries, string ops, `tf.print`, Python callbacks are the usual "
               "culprits): move them out of the compiled step, or use TPU-compatible ops.",
        evidence=[Evidence("Device op time outside compilation", share, "percent",
                           summary_source("overview", "device_op_time_outside_compilation_percent"),
                           inputs.page("overview"))],
        links=[Link("Overview", inputs.page("overview"))], percent_of_device_time=share,
    )]


def eager_ops(inputs: RunInputs) -> list[Finding]:
    """Ops run eagerly (op by op from Python) instead of inside a compiled function."""
    view = inputs.overview
    if view is None:
        return []
    host, device = view.stats["host_op_time_eager_percent"], view.stats["device_op_time_eager_percent"]
    side, share = ("device", device) if device >= host else ("host", host)
    if share < 10.0:
        return []
    key = f"{side}_op_time_eager_percent"
    return [Finding(
        id="host.eager_ops", severity=severity_for(share),
        title=f"{share:.1f}% of {side} op time runs eagerly, op by op from Python",
        estimate=f"XProf's share of {side} op time in ops run eagerly; each pays Python and dispatch overhead "
                 "that a compiled function does not.",
        action=pick(inputs.framework,
                    "Wrap the training step in `tf.function` (Keras does unless `run_eagerly=True` — check "
                    "`model.compile`), and avoid eager tensors in the input path.",
                    "Wrap the step in `jax.jit`; call jitted functions on whole batches instead of looping over "
                    "elements in Python."),
        evidence=[Evidence(f"{side.capitalize()} op time eager", share, "percent", summary_source("overview", key),
                           inputs.page("overview"))],
        links=[Link("Overview", inputs.page("overview")), *([Link("TF stats", inputs.page("tf_stats"))]
                                                             if "tf_stats" in inputs.pages else [])],
        percent_of_step=None, percent_of_device_time=None,
    )]


def model_flops_utilization(inputs: RunInputs) -> list[Finding]:
    """Model FLOP utilisation of a GPU run: the matmul FLOPs of the step's program (from its HLO) per step time,
    against the GPU's peak (XProf's). Only where it can be said honestly: one run of the program per step, every
    loop's trip count known, a peak known."""
    ledger = inputs.ledger
    if ledger is None or not ledger.step_count or not ledger.has_device or inputs.hardware != "GPU" or \
            inputs.op_profile is None:
        return []
    peak = float(inputs.op_profile.run.op_stats.perf_env.peak_tera_flops_per_second) * 1e12
    if peak <= 0:
        return []
    # The step's program: the most executed program whose FLOPs are known, executed once per step of its host.
    candidates = [(f.program_executions.get(name.rsplit("(", 1)[0], 0), name, f) for f in inputs.facts.values()
                  for name in f.program_flops]
    if not candidates:
        return []
    count, program, facts = max(candidates, key=lambda c: (c[0], c[1]))
    if not count or count != len(facts.steps):
        return []
    flops = facts.program_flops[program]
    step_s = ledger.step_ms / 1e3
    rate = flops / step_s if step_s else 0.0
    mfu = 100.0 * rate / peak
    busy_ms = ledger.average_ms("device_compute")
    while_busy = 100.0 * flops / (busy_ms / 1e3) / peak if busy_ms else 0.0
    return [Finding(
        id="device.model_flops_utilization", severity="info",
        title=f"Model FLOP utilisation {mfu:.1f}%: {program}'s matrix multiplications do {flops / 1e12:.3g} TFLOP "
              f"per step in {ledger.step_ms:.3g} ms ({rate / 1e12:,.1f} TFLOP/s) against the GPU's "
              f"{peak / 1e12:,.1f} TFLOP/s",
        estimate="The FLOPs of the program's dots and cuBLAS GEMM calls (2·M·N·K each, a while loop's body counted "
                 "as often as its known trip count) from its optimised HLO, once per step (the capture runs it once "
                 "per step), over the average step time, against XProf's peak for this GPU (its SM count and clock "
                 "times the dense 16-bit TensorCore rate per SM): element-wise work and attention written as other "
                 f"ops are not counted, so this is a floor. While the GPU computes ({busy_ms:.3g} ms of the step) "
                 f"the rate is {while_busy:.1f}% of the peak.",
        action="Read it with the step ledger: time the GPU does not compute (the findings above) lowers it first; "
               "while it computes, small matrix shapes, element-wise work between the GEMMs and 32-bit math keep it "
               "under the peak. Larger batches or sequences per step and fused attention raise it.",
        evidence=[Evidence(f"Matmul FLOPs per run of {program} (its HLO)", flops, "", None, inputs.page("hlo_stats")),
                  Evidence(f"Runs of {program} in the capture", count, "count", None, ""),
                  Evidence("Average step time (step ledger's steps)", ledger.step_ms, "ms",
                           summary_source("step_ledger", "step_time_ms"), "index.html#step-ledger"),
                  Evidence("Device compute per step (step ledger)", busy_ms, "ms",
                           summary_source("step_ledger", "average_ms", "device_compute"), "index.html#step-ledger"),
                  Evidence("Peak FLOP rate (XProf's, FLOP/s)", peak, "", summary_source("op_profile", "peak_flop_rate"),
                           inputs.page("op_profile"))],
        links=[Link("Op profile", inputs.page("op_profile"))],
    )]


__all__ = ["data_formatting", "eager_ops", "fp32_compute", "model_flops_utilization", "outside_compilation",
           "tpu_async_copies", "tpu_device_idle", "tpu_layout_padding", "tpu_non_matrix"]
