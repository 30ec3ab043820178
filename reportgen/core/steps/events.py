"""Step events: each step's markers and typed time spans (docs/xprof/op_stats.md §5).

A host's step events say, per step (`group_id`), when it ran (markers: host
step annotations, device `Steps` line events) and what the time went to
(spans typed with XProf's event types: host compute, waiting for input,
device compute, memcpys, collectives …). Host threads give them on CPU-only
captures; GPU planes (kernels and their `Steps` line) otherwise.

Everything is held in flat tables of numpy columns (`Columns`: name → array,
all of one length), so steps of millions of events are classified without
Python loops, and a tiny host pays no DataFrame construction for tables that
only the step database reads back; `combine_union` / `combine_intersect` are
XProf's step-event combiners.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import NO_STRING
from reportgen.core.events import schema
from reportgen.core.events.grouping import Grouping
from reportgen.core.events.nesting import inherit_down, line_parents
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import MEMCPY_D2D, MEMCPY_D2H, MEMCPY_H2D, MEMCPY_H2H, TENSORFLOW, parse_tf_op_fullname

# XProf's EventType values divided by 10 (priority order: higher wins on overlap).
UNKNOWN_TIME = 0
HOST_COMPUTE = 1
HOST_PREPROCESS = 2
HOST_POSTPROCESS = 3
HOST_BATCH_FORMATION = 4
HOST_RUNTIME = 5
HOST_COMPILE = 6
HOST_TO_HOST = 7
HOST_TO_DEVICE = 8
HOST_PREPARE = 9
DEVICE_COLLECTIVES = 10
HOST_WAIT_INPUT = 11
DEVICE_TO_DEVICE = 12
DEVICE_TO_HOST = 13
DEVICE_COMPUTE_32 = 14
DEVICE_COMPUTE_16 = 15
DEVICE_WAIT_DEVICE = 16
DEVICE_WAIT_HOST = 17
N_EVENT_TYPES = 18

EXPLICIT_HOST_MARKER = 0
IMPLICIT_HOST_MARKER = 1
DEVICE_MARKER = 2

TRANSFER_KINDS = {HOST_TO_DEVICE: 0, DEVICE_TO_HOST: 1, DEVICE_TO_DEVICE: 2}


Columns = dict[str, np.ndarray]  # a table as numpy columns of one length


def _columns(**cols: np.ndarray) -> Columns:
    return cols


def row_count(table: Columns) -> int:
    return len(next(iter(table.values())))


def _select(table: Columns, keep: np.ndarray) -> Columns:
    return {name: column[keep] for name, column in table.items()}


def _concat(tables: list[Columns]) -> Columns:
    return {name: np.concatenate([t[name] for t in tables]) for name in tables[0]}


def empty_spans() -> Columns:
    return _columns(group=np.zeros(0, np.int64), type=np.zeros(0, np.int8), begin=np.zeros(0, np.int64),
                    end=np.zeros(0, np.int64))


def empty_markers() -> Columns:
    return _columns(group=np.zeros(0, np.int64), kind=np.zeros(0, np.int8), core=np.zeros(0, np.int64),
                    begin=np.zeros(0, np.int64), duration=np.zeros(0, np.int64), name=np.zeros(0, object))


def empty_transfers() -> Columns:
    return _columns(group=np.zeros(0, np.int64), kind=np.zeros(0, np.int8), duration=np.zeros(0, np.int64),
                    bytes=np.zeros(0, np.int64))


def empty_collectives() -> Columns:
    return _columns(group=np.zeros(0, np.int64), core=np.zeros(0, np.int64), start=np.zeros(0, np.int64),
                    end=np.zeros(0, np.int64))


@dataclass
class StepEvents:
    """Step events of one host (or several, once combined).

    groups:    the step ids present (sorted).
    spans:     group, type, begin, end — typed time spans (may overlap).
    markers:   group, kind (explicit/implicit host, device), core, begin, duration, name.
    names:     group → step name (first non-empty wins when combining).
    transfers: group, kind (0 H2D, 1 D2H, 2 D2D), duration, bytes — device memcpys.
    collectives: group, core, start, end — collective ops (GPU `nccl*` kernels).
    core_dbs:  (group, core) → per-core op metrics (TPU steps only).
    """

    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    spans: Columns = field(default_factory=empty_spans)
    markers: Columns = field(default_factory=empty_markers)
    names: dict[int, str] = field(default_factory=dict)
    transfers: Columns = field(default_factory=empty_transfers)
    collectives: Columns = field(default_factory=empty_collectives)
    core_dbs: dict = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return len(self.groups) == 0

    def restricted(self, groups: np.ndarray) -> StepEvents:
        keep = np.intersect1d(self.groups, groups)
        kept = set(keep.tolist())

        def within(table: Columns) -> Columns:
            return _select(table, np.isin(table["group"], keep))

        return StepEvents(
            groups=keep,
            spans=within(self.spans),
            markers=within(self.markers),
            names={g: n for g, n in self.names.items() if g in kept},
            transfers=within(self.transfers),
            collectives=within(self.collectives),
            core_dbs={k: v for k, v in self.core_dbs.items() if k[0] in kept},
        )


def combine_union(parts: list[StepEvents]) -> StepEvents:
    parts = [p for p in parts if not p.empty]
    if not parts:
        return StepEvents()
    if len(parts) == 1:
        return parts[0]
    names: dict[int, str] = {}
    for p in parts:
        for g, n in p.names.items():
            if not names.get(g):
                names[g] = n
    core_dbs: dict = {}
    for p in parts:
        core_dbs.update(p.core_dbs)
    return StepEvents(
        groups=np.unique(np.concatenate([p.groups for p in parts])),
        spans=_concat([p.spans for p in parts]),
        markers=_concat([p.markers for p in parts]),
        names=names,
        transfers=_concat([p.transfers for p in parts]),
        collectives=_concat([p.collectives for p in parts]),
        core_dbs=core_dbs,
    )


def combine_intersect(parts: list[StepEvents]) -> StepEvents:
    """XProf's IntersectCombineStepEvents applied in order (empty parts are skipped)."""
    result: StepEvents | None = None
    for p in parts:
        if p.empty:
            continue
        if result is None:
            result = p
            continue
        keep = np.intersect1d(result.groups, p.groups)
        result = combine_union([result.restricted(keep), p.restricted(keep)])
        result.groups = keep
    return result if result is not None else StepEvents()


# --- host threads --------------------------------------------------------------------------

def _is_explicit_marker_name(name: str) -> bool:
    return name.startswith(("train", "test", "TraceContext")) and "/" not in name


def _is_real_cpu_compute(name: str) -> bool:
    return not (name.startswith(("EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun"))
                or _is_explicit_marker_name(name))


def _cpu_event_type(name: str) -> int:
    """ClassifyCpuEvent without a device and not a root input-pipeline stage."""
    op = parse_tf_op_fullname(name)
    if (op.category == TENSORFLOW and op.type.startswith("InfeedEnqueue")) or op.category == MEMCPY_H2D:
        return HOST_TO_DEVICE
    if op.category == MEMCPY_H2H:
        return HOST_TO_HOST
    if name.lower().startswith("iteratorgetnext"):
        return HOST_WAIT_INPUT
    return HOST_COMPUTE


def host_step_events(table: EventTable, grouping: Grouping) -> StepEvents:
    plane = table.host_plane
    if plane is None:
        return StepEvents()
    lines = table.lines_of_plane(plane)
    rows = table.events_of_lines(lines)
    if len(rows) == 0:
        return StepEvents()

    # Per metadata row: marker / compute classification of the name.
    md_rows = table.mds_of(rows)
    md_explicit = np.zeros(len(table.md_names), bool)
    md_compute = np.zeros(len(table.md_names), bool)
    md_type = np.full(len(table.md_names), HOST_COMPUTE, np.int8)
    for md in md_rows:
        name = table.md_names[md]
        md_explicit[md] = _is_explicit_marker_name(name)
        md_compute[md] = _is_real_cpu_compute(name)
        md_type[md] = _cpu_event_type(name)
    etype = md_type[table.md[rows]]

    # Root input-pipeline stages wait for input (ClassifyCpuEvent).
    if (table.str_stat_at("_ipl_stage_name", rows) != NO_STRING).any():
        etype = _mark_root_stages(table, lines, rows, etype)

    group = grouping.group_id[rows]
    step_name = np.full(len(rows), "", dtype=object)
    if grouping.step_names:
        named_rows = np.fromiter(grouping.step_names, np.int64)
        pos = np.searchsorted(rows, named_rows)
        ok = (pos < len(rows)) & (rows[np.minimum(pos, len(rows) - 1)] == named_rows)
        step_name[pos[ok]] = [grouping.step_names[int(r)] for r in named_rows[ok]]
    grouped = group >= 0
    has_name = step_name != ""
    explicit = grouped & md_explicit[table.md[rows]]
    implicit = grouped & ~explicit & has_name
    compute = grouped & ~explicit & ~implicit & md_compute[table.md[rows]]

    marker_pos = np.flatnonzero(explicit | implicit)
    markers = _columns(
        group=group[marker_pos], kind=np.where(explicit[marker_pos], EXPLICIT_HOST_MARKER, IMPLICIT_HOST_MARKER)
        .astype(np.int8), core=np.full(len(marker_pos), -1, np.int64), begin=table.start[rows[marker_pos]],
        duration=table.duration[rows[marker_pos]], name=table.names_of(rows[marker_pos]),
    )
    span_pos = np.flatnonzero(compute)
    spans = _columns(group=group[span_pos], type=etype[span_pos], begin=table.start[rows[span_pos]],
                     end=table.end[rows[span_pos]])
    named = np.flatnonzero(grouped & has_name)
    names: dict[int, str] = {}
    for g, n in zip(group[named][::-1], step_name[named][::-1]):
        names[int(g)] = str(n)
    groups = np.unique(np.concatenate([group[marker_pos], group[span_pos], group[named]]))
    return StepEvents(groups=groups, spans=spans, markers=markers, names=names)


def _mark_root_stages(table: EventTable, lines: np.ndarray, rows: np.ndarray, etype: np.ndarray) -> np.ndarray:
    """Events that are input-pipeline stages not nested in another stage (same
    thread, or a producer elsewhere) are HOST_WAIT_INPUT."""
    new_line = np.zeros(len(rows), bool)
    starts = np.concatenate([[0], np.cumsum(table.line_count[lines])[:-1]])
    new_line[starts[table.line_count[lines] > 0]] = True
    parent_rows = line_parents(rows, new_line, table.start, table.end, np.zeros(len(rows), bool))
    pos_of_row = np.full(table.n, -1, np.int64)
    pos_of_row[rows] = np.arange(len(rows))
    parent = np.where(parent_rows >= 0, pos_of_row[np.maximum(parent_rows, 0)], -1)
    is_stage = np.zeros(len(rows), bool)
    names = table.str_stat_at("_ipl_stage_name", rows)
    text = table.strings(names)
    is_stage = (names != NO_STRING) & (text != "")
    # Consumers whose context matches any producer on the plane have an async stage parent.
    pt, has_pt = table.int_stat_at("_pt", rows)
    p, has_p = table.int_stat_at("_p", rows)
    ct, has_ct = table.int_stat_at("_ct", rows)
    c, has_c = table.int_stat_at("_c", rows)
    prod = has_pt & has_p
    producers = set(zip(pt[prod].tolist(), p[prod].tolist()))
    cons_pos = np.flatnonzero(has_ct & has_c)
    async_parent = np.zeros(len(rows), bool)
    async_parent[cons_pos] = [(a, b) in producers for a, b in zip(ct[cons_pos], c[cons_pos])]
    desc = inherit_down(parent, is_stage, async_parent)
    root_stage = is_stage & ~desc
    out = etype.copy()
    # Only HOST_COMPUTE events change: the earlier rules (infeed, memcpy) win.
    out[root_stage & (etype == HOST_COMPUTE)] = HOST_WAIT_INPUT
    return out


# --- GPU planes ----------------------------------------------------------------------------------

def _gpu_event_type(name: str, shape: str) -> int:
    op = parse_tf_op_fullname(name)
    if op.category == MEMCPY_H2D:
        return HOST_TO_DEVICE
    if op.category == MEMCPY_D2H:
        return DEVICE_TO_HOST
    if op.category == MEMCPY_D2D:
        return DEVICE_TO_DEVICE
    if name.lower().startswith("nccl"):
        return DEVICE_COLLECTIVES
    text = name if not shape else shape
    sixteen = ("half" in text or "fp16" in text) if not shape else "half" in shape
    return DEVICE_COMPUTE_16 if sixteen else DEVICE_COMPUTE_32


def memcpy_bytes(details: str) -> int:
    """`num_bytes` from a `memcpy_details` string (split on ':' and newlines), else 0."""
    parts = details.replace("\n", ":").split(":")
    for i in range(0, len(parts), 2):
        if parts[i] == "num_bytes":
            try:
                return int(parts[i + 1]) if i + 1 < len(parts) else 0
            except ValueError:
                return 0
    return 0


def device_timespans(table: EventTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """XProf's GetDeviceEventTimespan: device_offset/duration stats when both present."""
    off, has_off = table.int_stat_at("device_offset_ps", rows)
    dur, has_dur = table.int_stat_at("device_duration_ps", rows)
    both = has_off & has_dur
    begin = np.where(both, off, table.start[rows])
    duration = np.where(both, dur, table.duration[rows])
    return begin, duration


def gpu_step_events(table: EventTable, grouping: Grouping, plane: int) -> StepEvents:
    plane_id = int(table.capture.planes["id"].iloc[plane])
    lines = table.lines_of_plane(plane)
    step_lines = lines[table.line_ids[lines] == schema.THREAD_ID_STEP_INFO]
    op_lines = lines[~table.derived_lines[lines]]
    group_id = grouping.group_id

    if len(step_lines):
        marker_rows = table.events_of_lines(step_lines)
        marker_rows = marker_rows[group_id[marker_rows] >= 0]
        mb, md_ = device_timespans(table, marker_rows)
        markers = _columns(group=group_id[marker_rows], kind=np.full(len(marker_rows), DEVICE_MARKER, np.int8),
                           core=np.full(len(marker_rows), plane_id, np.int64), begin=mb, duration=md_,
                           name=table.names_of(marker_rows))
    else:
        markers = derived_step_markers(table, group_id, op_lines, plane_id)

    rows = table.events_of_lines(op_lines)
    corr, has_corr = table.int_stat_at("correlation_id", rows, uint_ok=False)
    typed = rows[has_corr & (corr >= 0) & (group_id[rows] >= 0)]
    if len(typed) == 0:
        return StepEvents()
    shapes = table.str_stat_at("shape", typed).astype(np.int64)
    # Classify each distinct (name, shape) pair once.
    pair = table.md[typed] * (len(table.capture.strings) + 2) + (shapes + 1)
    unique, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    kinds = np.array([
        _gpu_event_type(str(table.md_names[table.md[typed[i]]]),
                        str(table.capture.string(int(shapes[i]))) if shapes[i] >= 0 else "")
        for i in first
    ], np.int8)
    etype = kinds[inverse.reshape(-1)]
    spans = _columns(group=group_id[typed], type=etype, begin=table.start[typed], end=table.end[typed])

    is_transfer = np.isin(etype, list(TRANSFER_KINDS))
    tr = typed[is_transfer]
    details = table.str_stat_at("memcpy_details", tr)
    detail_ids, detail_inverse = np.unique(details, return_inverse=True)
    detail_bytes = np.array([memcpy_bytes(str(table.capture.string(int(d)))) if d >= 0 else 0 for d in detail_ids],
                            np.int64)
    kind_of_type = np.full(N_EVENT_TYPES, -1, np.int8)
    for t, k in TRANSFER_KINDS.items():
        kind_of_type[t] = k
    transfers = _columns(group=group_id[tr], kind=kind_of_type[etype[is_transfer]], duration=table.duration[tr],
                         bytes=detail_bytes[detail_inverse.reshape(-1)] if len(tr) else np.zeros(0, np.int64))
    coll = typed[etype == DEVICE_COLLECTIVES]
    line_ts = table.capture.lines["timestamp_ns"].to_numpy(np.int64)[table.line[coll]] * 1000
    collectives = _columns(group=group_id[coll], core=np.full(len(coll), plane_id, np.int64), start=table.start[coll],
                           end=table.end[coll] - line_ts)  # XProf uses EndOffsetPs here
    names = {}
    groups = np.intersect1d(np.unique(spans["group"]), np.unique(markers["group"]))
    result = StepEvents(groups=np.unique(spans["group"]), spans=spans, markers=markers, names=names,
                        transfers=transfers, collectives=collectives)
    return result.restricted(groups)


def derived_step_markers(table: EventTable, group_id: np.ndarray, lines: np.ndarray, core: int) -> Columns:
    """XProf's derived GPU `Steps` line (DeriveStepEventsFromGroups), for planes
    saved without one: the plane's grouped events in time order; each run of
    one group becomes a step event spanning the run."""
    rows = table.events_of_lines(lines)
    rows = rows[group_id[rows] >= 0]
    if len(rows) == 0:
        return empty_markers()
    order = np.lexsort((table.duration[rows], table.start[rows]))
    rows = rows[order]
    g = group_id[rows]
    run = np.cumsum(np.concatenate([[True], g[1:] != g[:-1]]))
    frame = pd.DataFrame({"run": run, "group": g, "begin": table.start[rows], "end": table.end[rows]})
    runs = frame.groupby("run", sort=True).agg(group=("group", "first"), begin=("begin", "min"), end=("end", "max"))
    return _columns(group=runs["group"].to_numpy(np.int64), kind=np.full(len(runs), DEVICE_MARKER, np.int8),
                  core=np.full(len(runs), core, np.int64), begin=runs["begin"].to_numpy(np.int64),
                  duration=(runs["end"] - runs["begin"]).to_numpy(np.int64),
                  name=runs["group"].astype(str).to_numpy(object))


def device_step_events(table: EventTable, grouping: Grouping) -> tuple[StepEvents, bool]:
    """(step events of the host, whether it has device planes) — XProf's
    ConvertXSpaceToOpStats step part for GPU and CPU-only captures (§5.5)."""
    gpu = table.planes_named(lambda name: name.startswith(schema.GPU_PLANE_PREFIX))
    if not gpu:
        return host_step_events(table, grouping), False
    return combine_union([gpu_step_events(table, grouping, p) for p in gpu]), True
