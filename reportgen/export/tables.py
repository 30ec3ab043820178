"""Everything the compiled trace writers read, derived once per host from its capture.

The writers walk events by row and look their names, args and flows up in
these arrays; nothing here is per-event Python work. Names follow XProf:
an event shows its metadata's display name (the full name then goes to the
`long_name` arg, cut at 10,000 characters), a `step_name` stat renames it, and
a host step root shows its step group's name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.capture import KIND_DOUBLE, KIND_REF, KIND_STR, HostCapture
from reportgen.export import schema
from reportgen.export.columns import CaptureColumns
from reportgen.export.flows import EventFlows, event_flows
from reportgen.export.layout import LINE_SKIPPED, TraceLayout, build_layout
from reportgen.export.stat_select import EventStats, stat_starts
from reportgen.export.steps import StepMarks, capture_steps
from reportgen.export.strings import StringPool, double_table

ROLE_ARG = 0  # written as an arg
ROLE_HIDDEN = 1  # internal or consumed by the mapping (flow, _a): never an arg


@dataclass
class AddedRows:
    """Rows XProf derives while loading a capture, with their events (e.g. a TPU core's Framework Ops):
    `lines` are (plane row, thread id, name); per event, its row (index into `lines`), times and name."""

    lines: list[tuple[int, int, str]]
    line: np.ndarray  # int64
    start_ps: np.ndarray  # int64
    duration_ps: np.ndarray  # int64
    name: list[str]

    def __len__(self) -> int:
        return len(self.name)


@dataclass
class SyntheticEvents:
    """Events XProf adds while loading the capture: ThreadpoolListener::Region spans on the capture's
    lines, then the events of added rows (on lines numbered after the capture's)."""

    line: np.ndarray  # int64
    start_ps: np.ndarray  # int64
    duration_ps: np.ndarray  # int64
    name_sid: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.line)


@dataclass
class TraceTables:
    capture: HostCapture
    columns: CaptureColumns
    layout: TraceLayout
    pool: StringPool
    flows: EventFlows
    steps: StepMarks
    exported: np.ndarray  # event rows written, sorted; synthetic events follow as n_events + j
    name_sid: np.ndarray  # int32 per event row: the name the trace shows
    md_long_sid: np.ndarray  # int32 per metadata row: `long_name` arg, -1 when none
    role: np.ndarray  # int8 per string id (stat names)
    ev_stat_start: np.ndarray  # int64, n_events + 1: event row → its stats
    md_stat_start: np.ndarray  # int64, n_metadata + 1
    double_keys: np.ndarray  # int64 sorted bit patterns of double stat values
    double_sid: np.ndarray  # int32, their JSON text in the pool
    cat_sid: np.ndarray  # int32 per context type, -1 when XProf writes no category
    long_name_sid: int  # the arg name "long_name"
    synthetic: SyntheticEvents

    @property
    def n_events(self) -> int:
        return self.capture.event_count

    @property
    def event_total(self) -> int:
        return len(self.exported)

    def start_ps(self, rows: np.ndarray) -> np.ndarray:
        """Start of exported rows (synthetic ones included)."""
        if len(self.synthetic) == 0:  # most hosts: every row is the capture's
            return self.columns.ev_start[rows]
        n = self.n_events
        real = rows < n
        out = np.empty(len(rows), dtype=np.int64)
        out[real] = self.columns.ev_start[rows[real]]
        out[~real] = self.synthetic.start_ps[rows[~real] - n]
        return out

    def end_ps(self, rows: np.ndarray) -> np.ndarray:
        cols = self.columns
        if len(self.synthetic) == 0:
            return cols.ev_start[rows] + cols.ev_duration[rows]
        n = self.n_events
        real = rows < n
        out = np.empty(len(rows), dtype=np.int64)
        out[real] = cols.ev_start[rows[real]] + cols.ev_duration[rows[real]]
        out[~real] = self.synthetic.start_ps[rows[~real] - n] + self.synthetic.duration_ps[rows[~real] - n]
        return out

    def rows_on_lines(self, lines: list[int]) -> np.ndarray:
        """Exported rows on these lines (each line's events are one block of the capture's table; an
        added row's are synthetic)."""
        first, count = self.columns.line_first, self.columns.line_count
        synthetic = len(self.synthetic) > 0
        parts = []
        for line in lines:
            if line < len(first):
                lo, hi = np.searchsorted(self.exported, [first[line], first[line] + count[line]])
                parts.append(self.exported[lo:hi])
            if synthetic:
                parts.append(self.n_events + np.flatnonzero(self.synthetic.line == line))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def line_of(self, rows: np.ndarray) -> np.ndarray:
        if len(self.synthetic) == 0:
            return self.columns.ev_line[rows].astype(np.int64)
        n = self.n_events
        real = rows < n
        out = np.empty(len(rows), dtype=np.int64)
        out[real] = self.columns.ev_line[rows[real]]
        out[~real] = self.synthetic.line[rows[~real] - n]
        return out


def _stat_starts(owner: np.ndarray, n_owners: int) -> np.ndarray:
    """Row → first stat row (stats are stored grouped by owner, in owner order)."""
    starts = stat_starts(owner, n_owners)
    if starts[0] < 0:
        raise ValueError("stats are expected grouped by owner, in owner order")
    return starts


def _threadpool_regions(columns: CaptureColumns, stats: EventStats, exported_lines: np.ndarray,
                        pool: StringPool) -> SyntheticEvents:
    """XProf's ThreadpoolLineMutator: a Region from each StopRegion back to the last StartRegion
    (with a `_c` stat, at a non-zero time) before it on the same line."""
    empty = SyntheticEvents(*(np.zeros(0, np.int64) for _ in range(3)), np.zeros(0, np.int32))
    start_md = columns.md_named([schema.THREADPOOL_START_REGION])
    if len(start_md) == 0:
        return empty
    stop_md = columns.md_named([schema.THREADPOOL_STOP_REGION])
    if len(stop_md) == 0:
        return empty
    md = columns.ev_md
    start_ps = columns.ev_start
    consumer = stats.get(schema.STAT_CONSUMER_ID).owner
    is_start = np.isin(md, start_md)
    is_start[np.setdiff1d(np.flatnonzero(is_start), consumer)] = False
    is_stop = np.isin(md, stop_md)
    if not is_start.any() or not is_stop.any():
        return empty
    rows = np.arange(len(md))
    last_start = np.maximum.accumulate(np.where(is_start, rows, -1))
    line = columns.ev_line
    stops = np.flatnonzero(is_stop)
    opener = last_start[stops]
    ok = opener >= 0
    ok[ok] = line[opener[ok]] == line[stops[ok]]
    ok[ok] &= start_ps[opener[ok]] != 0
    ok &= np.isin(line[stops], exported_lines)
    stops, opener = stops[ok], opener[ok]
    sid = pool.add(schema.THREADPOOL_REGION)
    return SyntheticEvents(
        line=line[stops].astype(np.int64),
        start_ps=start_ps[opener],
        duration_ps=start_ps[stops] - start_ps[opener],
        name_sid=np.full(len(stops), sid, dtype=np.int32),
    )


def _roles(capture: HostCapture, n_strings: int) -> np.ndarray:
    role = np.zeros(n_strings, dtype=np.int8)
    for name in (*schema.INTERNAL_STATS, schema.STAT_FLOW, schema.STAT_IS_ASYNC):
        sid = capture.string_id(name)
        if sid >= 0:
            role[sid] = ROLE_HIDDEN
    return role


def _names(columns: CaptureColumns, stats: EventStats, pool: StringPool,
           steps: StepMarks) -> tuple[np.ndarray, np.ndarray]:
    capture = columns.capture
    # A display name is an interned string like any other (the empty one included): comparing ids
    # spares comparing the column's texts.
    has_display = columns.md_display_name_id != capture.string_id("")
    name_id = columns.md_name_id
    md_name = np.where(has_display, columns.md_display_name_id, name_id).astype(np.int32)
    md_long = np.where(has_display, name_id, -1).astype(np.int32)
    if has_display.any():  # without display names no name goes to `long_name`
        too_long = has_display & (capture.event_metadata["name"].str.len().to_numpy() > schema.MAX_LONG_NAME)
        for row in np.flatnonzero(too_long):
            md_long[row] = pool.add(columns.md_names([row])[0][: schema.MAX_LONG_NAME] + schema.LONG_NAME_SUFFIX)
    name_sid = md_name[columns.ev_md]
    # step_name (string or ref) renames its event.
    stat = stats.get(schema.STAT_STEP_NAME)
    text_kind = (stat.kind == KIND_STR) | (stat.kind == KIND_REF)
    owners, sids = stat.owner[text_kind], stat.str_id[text_kind]
    if len(sids):
        distinct = np.unique(sids)
        non_empty = np.array([bool(pool.text(int(s))) for s in distinct], dtype=bool)
        keep = np.isin(sids, distinct[non_empty])
        name_sid[owners[keep]] = sids[keep]
    if len(steps.rename_rows):
        name_sid[steps.rename_rows] = [pool.add(t) for t in steps.rename_to]
    return name_sid, md_long


def _added_events(added: AddedRows | None, n_lines: int, layout: TraceLayout, pool: StringPool) -> SyntheticEvents:
    if added is None or len(added) == 0:
        return SyntheticEvents(*(np.zeros(0, np.int64) for _ in range(3)), np.zeros(0, np.int32))
    lines = n_lines + np.asarray(added.line, dtype=np.int64)
    keep = layout.line_kind[lines] != LINE_SKIPPED  # rows of a plane that is not exported
    sids = np.array([pool.add(name) for name in added.name], dtype=np.int32)
    return SyntheticEvents(line=lines[keep], start_ps=np.asarray(added.start_ps, np.int64)[keep],
                           duration_ps=np.asarray(added.duration_ps, np.int64)[keep], name_sid=sids[keep])


def build_tables(capture: HostCapture, steps: StepMarks | None = None, added: AddedRows | None = None) -> TraceTables:
    """The trace mapping of one host. `steps` defaults to what the capture marks itself; `added`: rows
    XProf derives while loading the capture (their events are written like the capture's)."""
    columns = CaptureColumns(capture)
    layout = build_layout(capture, added=added.lines if added is not None else (), columns=columns)
    pool = StringPool(capture.strings)
    stats = EventStats(capture)
    steps = capture_steps(capture, stats, columns) if steps is None else steps
    n_md = len(capture.event_metadata)
    keep = layout.line_kind[columns.ev_line] != LINE_SKIPPED
    internal = columns.md_named(schema.INTERNAL_EVENTS)
    if len(internal):
        internal_md = np.zeros(n_md, dtype=bool)
        internal_md[internal] = True
        keep &= ~internal_md[columns.ev_md]
    exported_lines = np.flatnonzero(layout.line_kind != LINE_SKIPPED)
    regions = _threadpool_regions(columns, stats, exported_lines, pool)
    derived = _added_events(added, len(capture.lines), layout, pool)
    synthetic = SyntheticEvents(*(np.concatenate([getattr(regions, f), getattr(derived, f)])
                                  for f in ("line", "start_ps", "duration_ps", "name_sid")))
    exported = np.concatenate([np.flatnonzero(keep), capture.event_count + np.arange(len(synthetic))])

    name_sid, md_long = _names(columns, stats, pool, steps)
    doubles = np.concatenate([
        capture.event_stats.raw[capture.event_stats.kind == KIND_DOUBLE],
        capture.metadata_stats.raw[capture.metadata_stats.kind == KIND_DOUBLE],
    ])
    double_keys, double_texts = double_table(doubles)
    double_sid = np.array([pool.add_json(t) for t in double_texts], dtype=np.int32)
    names = [schema.CONTEXT_NAMES[c] for c in range(schema.LAST_CONTEXT_TYPE + 1)]
    cat_sid = np.array([pool.add(n) if n else -1 for n in names], dtype=np.int32)
    return TraceTables(
        capture=capture,
        columns=columns,
        layout=layout,
        pool=pool,
        flows=event_flows(capture, layout, stats, columns),
        steps=steps,
        exported=exported.astype(np.int64),
        name_sid=name_sid,
        md_long_sid=md_long,
        role=_roles(capture, len(capture.strings)),
        ev_stat_start=_stat_starts(capture.event_stats.owner, capture.event_count),
        md_stat_start=_stat_starts(capture.metadata_stats.owner, n_md),
        double_keys=double_keys,
        double_sid=double_sid,
        cat_sid=cat_sid,
        long_name_sid=pool.add("long_name"),
        synthetic=synthetic,
    )
