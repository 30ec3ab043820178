"""Device op metrics databases: one per GPU or TPU plane, then combined.

GPU (docs/xprof/op_stats.md §4.4): kernels annotated with a TF op (`tf_op`
stat, no `hlo_op`) become ops named `<tf op name>/<kernel name>`; XLA kernels
(`hlo_op`) count only when their HLO instruction is found in the capture's
HLO protos, so a capture without `/host:metadata` drops them, as XProf does.
The plane's total time is its first-to-last kernel span.

TPU (§4.5): every event of the `XLA Ops` line (nested for fusions) is an op
keyed by its metadata's (`program_id`, `symbol_id`); self time excludes
nested ops; the total is the span of the step and op lines. The busy/idle
duty cycle (§8.2) comes from the same lines.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from reportgen.capture import NO_STRING
from reportgen.core.events import schema
from reportgen.core.events.grouping import Grouping
from reportgen.core.events.nesting import line_parents, self_times
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import parse_tf_op_fullname
from reportgen.core.hlo.model import HloInstructionProto, HloModule, instruction_provenance, program_key
from reportgen.core.ops.op_metrics import OpMetricsDb, combine_dbs, metrics_frame, with_idle
from reportgen.core.steps.events import device_timespans


def _plane_id(table: EventTable, plane: int) -> int:
    return int(table.capture.planes["id"].iloc[plane])


# --- GPU ------------------------------------------------------------------------------------

_FUSION_CATEGORIES = {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                      "kCustom": "custom fusion"}
_DATA_FORMATTING = {"transpose", "copy", "reshape", "dynamic-reshape"}
_ELEMENTWISE = set("""abs add and atan2 cbrt ceil clamp compare complex convert cosine divide erf exponential
exponential-minus-one floor imag is-finite log log-plus-one logistic maximum minimum multiply negate not or
popcnt power real reduce-precision remainder round-nearest-afz round-nearest-even rsqrt select shift-left
shift-right-arithmetic shift-right-logical sign sine sqrt subtract tan tanh xor""".split())


def hlo_category(instruction: HloInstructionProto) -> str:
    """XProf's op category of an HLO instruction (op_stats.md §2.2; dilated
    convolutions are not told apart)."""
    opcode = instruction.opcode
    if opcode in _DATA_FORMATTING:
        return "data formatting"
    if opcode == "fusion":
        return _FUSION_CATEGORIES.get(instruction.fusion_kind, "fusion")
    if opcode in _ELEMENTWISE:
        return "non-fusion elementwise"
    return opcode


def _xla_kernel_runs(table: EventTable, grouping: Grouping, rows: np.ndarray, is_tf: np.ndarray,
                     modules: Mapping[int, HloModule]) -> pd.DataFrame:
    """XLA kernels whose HLO instruction is known, merged into one op execution
    per run of consecutive kernels (same line, same innermost HLO op and group,
    no TF-op kernel in between): XProf's HLOTracker. A run counts one occurrence
    per kernel, and its `flops` and `bytes_accessed` are those of its last kernel
    that has them (XProf keeps one kernel's value and multiplies it by the
    occurrences: an HLO op of several kernels, such as a cuDNN convolution, says
    each kernel's count as the op's)."""
    hlo_ids = table.str_stat_at("hlo_op", rows)
    program, has_program = table.int_stat_at("program_id", rows)
    has_hlo = hlo_ids != NO_STRING
    if not has_hlo.any() or not modules:
        return pd.DataFrame()
    # Innermost HLO op name: the last `::`-separated part of the stat.
    unique, inverse = np.unique(hlo_ids[has_hlo], return_inverse=True)
    innermost = np.array([str(table.capture.string(int(u))).split("::")[-1] for u in unique], dtype=object)
    op_name = np.full(len(rows), "", dtype=object)
    op_name[has_hlo] = innermost[inverse.reshape(-1)]
    pid = np.where(has_program, program, -1)
    known = np.zeros(len(rows), bool)
    for p in np.unique(pid[has_hlo]):
        module = modules.get(program_key(int(p)))
        if module is None or not module.instructions:
            continue
        sel = has_hlo & (pid == p)
        known[sel] = [n in module.instructions for n in op_name[sel]]
    considered = known | is_tf
    pos = np.flatnonzero(considered)
    if not known.any():
        return pd.DataFrame()
    lines = table.line[rows[pos]]
    group = grouping.group_id[rows[pos]]
    names = op_name[pos]
    tf = is_tf[pos]
    prev_same = np.zeros(len(pos), bool)
    prev_same[1:] = (lines[1:] == lines[:-1]) & (names[1:] == names[:-1]) & (group[1:] == group[:-1]) & ~tf[:-1]
    run = np.cumsum(~prev_same)
    xla = ~tf
    kernels = rows[pos][xla]
    flops, has_flops = table.int_stat("flops")
    nbytes, has_bytes = table.int_stat("bytes_accessed")
    # A kernel without the stat keeps the run's value so far: NaN, which "last" skips.
    frame = pd.DataFrame({"run": run[xla], "program": pid[pos][xla], "name": names[xla],
                          "dur": table.duration[kernels],
                          "flops": np.where(has_flops[kernels], flops[kernels], np.nan),
                          "bytes": np.where(has_bytes[kernels], nbytes[kernels], np.nan),
                          "eager": grouping.is_eager[kernels] == 1})
    runs = frame.groupby("run", sort=False).agg(program=("program", "first"), name=("name", "first"),
                                                dur=("dur", "sum"), kernels=("dur", "size"), flops=("flops", "last"),
                                                bytes=("bytes", "last"), eager=("eager", "last"))
    runs["flops"] = runs["flops"].fillna(0).astype(np.int64) * runs["kernels"]
    runs["bytes"] = runs["bytes"].fillna(0).astype(np.int64) * runs["kernels"]
    info = [modules[program_key(int(p))].instructions[n] for p, n in zip(runs["program"], runs["name"])]
    runs["category"] = [hlo_category(i) for i in info]
    runs["provenance"] = [instruction_provenance(i) for i in info]
    return runs.reset_index(drop=True)


def gpu_plane_op_metrics(table: EventTable, grouping: Grouping, plane: int,
                         modules: Mapping[int, HloModule] | None = None) -> OpMetricsDb:
    lines = table.lines_of_plane(plane)
    lines = lines[~table.derived_lines[lines]]
    rows = table.events_of_lines(lines)
    if len(rows) == 0:
        return _finalize_gpu(metrics_frame(name=np.zeros(0, object)), 0)
    # Kernel offsets are relative to their line; XProf compares offsets directly.
    offset = table.start[rows] - table.line_timestamp_ps[table.line[rows]]
    first, last = int(offset.min()), int((offset + table.duration[rows]).max())
    span = last - first if last else 0

    tf_op = table.str_stat_at("tf_op", rows)
    has_hlo = table.str_stat_at("hlo_op", rows) != NO_STRING
    is_tf = (tf_op != NO_STRING) & ~has_hlo
    # XLA kernels need the HLO instruction from the capture's HLO protos; without
    # them (no /host:metadata plane) they are not ops, as in XProf.
    xla = _xla_kernel_runs(table, grouping, rows, is_tf, modules or {})
    xla_metrics = _xla_metrics(xla)
    sel = np.flatnonzero(is_tf)
    if len(sel) == 0:
        return _finalize_gpu(xla_metrics, span)
    r = rows[sel]
    ops = pd.DataFrame({"tf_op": tf_op[sel], "md": table.md[r], "dur": table.duration[r],
                        "eager": grouping.is_eager[r] == 1})
    texts = {int(s): str(table.capture.string(int(s))) for s in np.unique(ops["tf_op"])}
    parsed = {s: parse_tf_op_fullname(t) for s, t in texts.items()}
    ops = ops[[bool(texts[int(s)]) for s in ops["tf_op"]]]
    if ops.empty:
        return _finalize_gpu(xla_metrics, span)
    ops["name"] = [f"{parsed[int(s)].name}/{table.md_names[m]}" for s, m in zip(ops["tf_op"], ops["md"])]
    ops["category"] = [parsed[int(s)].type for s in ops["tf_op"]]
    ops["provenance"] = [texts[int(s)] for s in ops["tf_op"]]
    agg = ops.groupby("name", sort=False).agg(
        category=("category", "first"), provenance=("provenance", "first"), is_eager=("eager", "first"),
        occurrences=("dur", "size"), time_ps=("dur", "sum"), min_time_ps=("dur", "min"),
    ).reset_index()
    metrics = metrics_frame(
        name=agg["name"].to_numpy(object), category=agg["category"].to_numpy(object),
        provenance=agg["provenance"].to_numpy(object), is_eager=agg["is_eager"].to_numpy(bool),
        occurrences=agg["occurrences"].to_numpy(np.int64), time_ps=agg["time_ps"].to_numpy(np.int64),
        self_time_ps=agg["time_ps"].to_numpy(np.int64), min_time_ps=agg["min_time_ps"].to_numpy(np.int64),
        num_cores=np.ones(len(agg), np.int64),
    )
    # Op order: first appearance; XLA and TF-op kernels are rarely mixed on one plane.
    return _finalize_gpu(pd.concat([xla_metrics, metrics], ignore_index=True), span)


def _xla_metrics(runs: pd.DataFrame) -> pd.DataFrame:
    if runs.empty:
        return metrics_frame(name=np.zeros(0, object))
    agg = runs.groupby(["program", "name"], sort=False).agg(
        category=("category", "first"), provenance=("provenance", "first"), is_eager=("eager", "first"),
        occurrences=("kernels", "sum"), time_ps=("dur", "sum"), min_time_ps=("dur", "min"), flops=("flops", "sum"),
        bytes_accessed=("bytes", "sum"),
    ).reset_index()
    return metrics_frame(
        hlo_module_id=agg["program"].to_numpy(np.int64), name=agg["name"].to_numpy(object),
        category=agg["category"].to_numpy(object), provenance=agg["provenance"].to_numpy(object),
        is_eager=agg["is_eager"].to_numpy(bool), occurrences=agg["occurrences"].to_numpy(np.int64),
        time_ps=agg["time_ps"].to_numpy(np.int64), self_time_ps=agg["time_ps"].to_numpy(np.int64),
        min_time_ps=agg["min_time_ps"].to_numpy(np.int64), flops=agg["flops"].to_numpy(np.int64),
        model_flops=agg["flops"].to_numpy(np.int64), bytes_accessed=agg["bytes_accessed"].to_numpy(np.int64),
        num_cores=np.ones(len(agg), np.int64),
    )


def _finalize_gpu(metrics: pd.DataFrame, span: int) -> OpMetricsDb:
    metrics, total, op_time = with_idle(metrics, span)
    return OpMetricsDb(metrics=metrics, total_time_ps=total, total_op_time_ps=op_time)


# --- TPU ------------------------------------------------------------------------------------

def _tpu_op_rows(table: EventTable, plane: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(op rows, device begin, device duration) of the plane's op lines, line after line."""
    lines = table.lines_of_plane(plane)
    lines = lines[np.isin(table.line_names[lines], schema.OP_LINE_NAMES)]
    rows = table.events_of_lines(lines)
    begin, duration = device_timespans(table, rows)
    return rows, begin, duration


def _tpu_self_times(table: EventTable, plane: int, rows, begin, duration) -> np.ndarray:
    lines = table.line[rows]
    new_line = np.concatenate([[True], lines[1:] != lines[:-1]]) if len(rows) else np.zeros(0, bool)
    pos = np.arange(len(rows))
    # Nesting by device timespans, in stored order (XProf's AncestorStack).
    parent = line_parents(pos, new_line, begin, begin + duration, np.zeros(len(rows), bool))
    return self_times(parent, duration)


def tpu_op_metrics_frame(table: EventTable, rows: np.ndarray, begin: np.ndarray, duration: np.ndarray,
                         self_ps: np.ndarray, step: np.ndarray | None = None) -> pd.DataFrame:
    """Ops of TPU op-line events keyed by metadata (program_id, symbol_id).

    With `step` (a group id per row), ops are kept apart per step and the
    frame gains a `step` column."""
    program, has_program = table.md_int_stat("program_id")
    symbol, has_symbol = table.md_int_stat("symbol_id")
    md = table.md[rows]
    keep = has_program[md] & has_symbol[md] & (symbol[md] != 0)
    if not keep.any():
        empty = metrics_frame(name=np.zeros(0, object))
        if step is not None:
            empty["step"] = np.zeros(0, np.int64)
        return empty
    md = md[keep]
    nocc = table.capture.events["num_occurrences"].to_numpy(np.int64)[rows[keep]]
    events = pd.DataFrame({
        "step": step[keep] if step is not None else 0, "program": program[md], "symbol": symbol[md], "md": md,
        "occ": np.maximum(1, nocc), "time": duration[keep], "self": self_ps[keep],
    })
    min_dur, has_min = table.int_stat("min_duration_ps", uint_ok=False)
    events["min"] = np.where(has_min[rows[keep]], min_dur[rows[keep]], duration[keep])
    agg = events.groupby(["step", "program", "symbol"], sort=False).agg(
        md=("md", "first"), occurrences=("occ", "sum"), time_ps=("time", "sum"), self_time_ps=("self", "sum"),
        min_time_ps=("min", "min"),
    ).reset_index()
    mds = agg["md"].to_numpy()
    display = table.md_display_names[mds]
    names = table.md_names[mds]
    has_display = display != ""
    strings = np.array(table.capture.strings + [""], dtype=object)

    def md_text(stat: str) -> np.ndarray:
        ids = table.md_str_stat(stat)[mds]
        return strings[np.where(ids < 0, len(strings) - 1, ids)]

    flops, _ = table.md_int_stat("flops")
    model_flops, _ = table.md_int_stat("model_flops")
    bytes_accessed, _ = table.md_int_stat("bytes_accessed")
    occ = agg["occurrences"].to_numpy(np.int64)
    f = flops[mds] * occ
    mf = model_flops[mds]
    frame = metrics_frame(
        hlo_module_id=agg["program"].to_numpy(np.int64),
        name=np.where(has_display, display, names).astype(object),
        long_name=np.where(has_display, names, "").astype(object),
        category=md_text("hlo_category"), provenance=md_text("tf_op"),
        occurrences=occ, time_ps=agg["time_ps"].to_numpy(np.int64),
        self_time_ps=agg["self_time_ps"].to_numpy(np.int64), min_time_ps=agg["min_time_ps"].to_numpy(np.int64),
        flops=f, model_flops=np.where(mf > 0, mf * occ, f), bytes_accessed=bytes_accessed[mds] * occ,
        num_cores=np.ones(len(agg), np.int64),
    )
    if step is not None:
        frame["step"] = agg["step"].to_numpy(np.int64)
    return frame


def tpu_plane_op_metrics(table: EventTable, plane: int) -> OpMetricsDb:
    rows, begin, duration = _tpu_op_rows(table, plane)
    self_ps = _tpu_self_times(table, plane, rows, begin, duration)
    metrics = tpu_op_metrics_frame(table, rows, begin, duration, self_ps)
    # Total time: span of the step and op lines' device timespans.
    lines = table.lines_of_plane(plane)
    step_lines = lines[np.isin(table.line_names[lines], [schema.STEP_LINE, schema.SPARSE_CORE_STEP_LINE])]
    srows = table.events_of_lines(step_lines)
    sb, sd = device_timespans(table, srows)
    all_b = np.concatenate([begin, sb])
    all_e = np.concatenate([begin + duration, sb + sd])
    with np.errstate(over="ignore"):  # absurd times wrap in int64, as XProf's arithmetic does
        span = int(all_e.max() - all_b.min()) if len(all_b) else 0
    metrics, total, op_time = with_idle(metrics, span)
    return OpMetricsDb(metrics=metrics, total_time_ps=total, total_op_time_ps=op_time)


def core_details(table: EventTable, plane: int) -> dict | None:
    """The plane's `core_details` stat (a CoreDetails, decoded by the loader) as a dict, or None."""
    stats = table.capture.stat_rows(table.capture.plane_stats, "core_details")
    sel = np.flatnonzero(stats.owner == plane)
    if len(sel) == 0:
        return None
    return table.capture.proto_stats.get(("core_details", int(stats.str_id[sel[0]])))


def _union_length(begin: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of intervals; touching intervals merge."""
    if len(begin) == 0:
        return 0
    order = np.argsort(begin, kind="stable")
    b, e = begin[order], end[order]
    run_end = np.maximum.accumulate(e)
    opens = np.concatenate([[True], b[1:] > run_end[:-1]])
    ids = np.cumsum(opens) - 1
    seg_b = b[opens]
    seg_e = np.zeros(ids[-1] + 1, np.int64)
    np.maximum.at(seg_e, ids, e)
    return int((seg_e - seg_b).sum())


def tpu_duty_cycle(table: EventTable, planes: list[int]) -> tuple[int, int]:
    """(busy ps, idle ps) over TPU planes: XLA Ops (and SparseCore ops) are
    active, module lines only widen the span; cores of a chip are unioned."""
    off_duty = {"infeed", "outfeed", "host send", "host send-done", "host recv", "host recv-done", "async-done",
                "megacore fusion"}
    chips: dict[object, tuple[list, list, list]] = {}
    busy = idle = 0
    category = table.str_stat("hlo_category")
    for plane in planes:
        lines = table.lines_of_plane(plane)
        names = table.line_names[lines]
        active_rows = table.events_of_lines(lines[np.isin(names, [schema.XLA_OP_LINE, schema.SPARSE_CORE_OP_LINE])])
        passive_rows = table.events_of_lines(
            lines[np.isin(names, [schema.XLA_MODULE_LINE, schema.SPARSE_CORE_MODULE_LINE])])
        is_xla = table.line_names[table.line[active_rows]] == schema.XLA_OP_LINE
        cats = table.strings(category[active_rows])
        off = is_xla & np.isin(cats, list(off_duty))
        act = active_rows[~off]
        all_rows = np.concatenate([active_rows, passive_rows])
        spans = (table.start[all_rows], table.end[all_rows])
        details = core_details(table, plane)
        key = ("chip", details.get("local_chip_id", 0)) if details is not None else ("plane", plane)
        if details is None:
            b, e = table.start[act], table.end[act]
            a = _union_length(b, e)
            total = _span(*spans)
            busy += a
            idle += total - a
            continue
        acc = chips.setdefault(key, ([], [], []))
        acc[0].append(table.start[act])
        acc[1].append(table.end[act])
        acc[2].append(spans)
    for b_list, e_list, span_list in chips.values():
        a = _union_length(np.concatenate(b_list), np.concatenate(e_list))
        total = _span(np.concatenate([s[0] for s in span_list]), np.concatenate([s[1] for s in span_list]))
        busy += a
        idle += total - a
    return busy, idle


def _span(begin: np.ndarray, end: np.ndarray) -> int:
    # Timespan::ExpandToInclude ignores empty spans (begin 0 and duration 0).
    keep = ~((begin == 0) & (end == 0))
    if not keep.any():
        return 0
    return int(end[keep].max() - begin[keep].min())


def device_op_metrics_db(table: EventTable, grouping: Grouping, modules: Mapping[int, HloModule] | None = None
                         ) -> tuple[OpMetricsDb, list[int], bool]:
    """(combined device DB, device plane rows, is_tpu). TPU planes take precedence over GPU planes.
    `modules`: the capture's HLO modules by program id (GPU XLA kernels need them)."""
    tpu = table.planes_named(lambda n: n.startswith(schema.TPU_PLANE_PREFIX))
    if tpu:
        cores = [p for p in tpu if not schema.SPARSE_CORE_RE.match(table.plane_names[p])]
        db = combine_dbs([tpu_plane_op_metrics(table, p) for p in cores])
        db.busy_time_ps, db.idle_time_ps = tpu_duty_cycle(table, tpu)
        return db, tpu, True
    gpu = table.planes_named(lambda n: n.startswith(schema.GPU_PLANE_PREFIX))
    if not gpu:
        return OpMetricsDb(), [], False
    return combine_dbs([gpu_plane_op_metrics(table, grouping, p, modules) for p in gpu]), gpu, False


def xla_gpu_costs_missing(device_db: OpMetricsDb, hardware_type: str) -> bool:
    """Whether the run's XLA ops on GPU carry no FLOP and no byte counts. XProf 2.24.2 computes them with XLA's
    HLO cost analysis of the capture's modules; reportgen reads them from the kernels' stats only and does not run
    XLA, so their FLOP rates, bandwidths and utilizations are 0 (the pages that show them say so)."""
    if hardware_type != "GPU":
        return False
    metrics = device_db.metrics
    xla = metrics["hlo_module_id"].to_numpy() != 0
    return bool(xla.any() and not metrics["flops"].to_numpy()[xla].any()
                and not metrics["bytes_accessed"].to_numpy()[xla].any())
