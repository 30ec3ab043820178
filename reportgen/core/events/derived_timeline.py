"""The rows XProf derives on each TPU core's timeline while it loads a capture (`DeriveLinesFromStats`).

XProf's trace viewer shows, under each TensorCore plane (`/device:TPU:<n>`),
rows that the capture file does not hold:

* **Framework Ops**: the framework op (`tf_op` stat of an XLA op) of each run
  of consecutive ops lowered from it, named by its op type;
* **Framework Name Scope**: the name scopes of those framework ops, one
  nested event per scope level;
* **Source code**: the `source` stat (file:line) of consecutive ops;
* **Host Offload Ops row <k>**: each `copy-start`/`copy-done` (and dynamic
  slice) pair whose operand lives in host memory (`S(5)` in the HLO text),
  from the start's beginning to the done's end, packed into as few rows as
  do not overlap (at most 41).

The plane's events (all lines, sorted by start, shorter first) are walked once;
asynchronous events (`_a`) are skipped. An op extends the previous event of a
row (or of a scope level) when it has the same name and the same step group
(`group_id`, XProf's grouping) and, without a group, starts within twice the
previous event's duration after its end; otherwise a new event starts, and
the deeper scope levels and the framework op row start afresh. When a stack of
name scopes ends, scopes of one timespan are shortened by 1 ns per level
(at most to 1 ns), as XProf does so that the viewer stacks them in order.

    derived = derived_tpu_lines(table, grouping)
    derived.lines[k]            # (plane row, thread id, row name)
    derived.line, derived.start_ps, derived.duration_ps, derived.name   # per event

Row ids (XProf's `kThreadId*`, from 0xdeadbeef) and names are XProf's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from reportgen.capture import KIND_REF, KIND_STR, HostCapture
from reportgen.core.events.grouping import Grouping
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import JAX, TENSORFLOW, TF_DATA, UNKNOWN, TfOp, name_scopes, parse_tf_op_fullname
from reportgen.kernels import kernel

THREAD_ID_DERIVED_MIN = 0xDEADBEEF
THREAD_ID_TF_NAME_SCOPE = THREAD_ID_DERIVED_MIN + 2
THREAD_ID_TF_OP = THREAD_ID_DERIVED_MIN + 3
THREAD_ID_SOURCE = THREAD_ID_DERIVED_MIN + 7
THREAD_ID_HOST_OFFLOAD_START = THREAD_ID_DERIVED_MIN + 8
THREAD_ID_HOST_OFFLOAD_END = THREAD_ID_DERIVED_MIN + 48
FRAMEWORK_OPS_LINE = "Framework Ops"
FRAMEWORK_NAME_SCOPE_LINE = "Framework Name Scope"
SOURCE_LINE = "Source code"
HOST_OFFLOAD_LINE = "Host Offload Ops"

TENSOR_CORE_PLANE = re.compile(r"/device:TPU:[0-9]*")
HOST_MEMORY_LABEL = "S(5)"  # XLA's host memory space in a shape's layout
HOST_OFFLOAD_KEYWORDS = ("copy-start", "copy-done", "dynamic-slice-start", "dynamic-slice-done",
                         "dynamic-update-slice-start", "dynamic-update-slice-done")
NO_GROUP = -1


@dataclass
class DerivedTimeline:
    """Rows (`lines`: plane row, thread id, name) and their events, row by row, each row's in time order."""

    lines: list[tuple[int, int, str]] = field(default_factory=list)
    line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # index into `lines`
    start_ps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    duration_ps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    name: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)


def tf_op_event_name(tf_op: TfOp) -> str:
    """The name XProf shows for a framework op event: its type (a tf.data op's iterator, an unknown
    op's whole name)."""
    if tf_op.category == UNKNOWN:
        return tf_op.name.rstrip(" \t\n\v\f\r")
    if tf_op.category == TF_DATA:
        return "Iterator::" + tf_op.name.split("::")[-1]
    return tf_op.type


class _Event:
    __slots__ = ("meta", "begin", "end", "group")

    def __init__(self, meta: str, begin: int, end: int, group: int):
        self.meta, self.begin, self.end, self.group = meta, begin, end, group


class _Row:
    """XProf's DerivedXLineBuilder: events by nesting level, each extended while ops continue it."""

    def __init__(self, dependents: tuple[_Row, ...] = ()):
        self.events: list[_Event] = []
        self.last: list[_Event | None] = []  # by level
        self.dependents = dependents

    def add(self, meta: str, begin: int, end: int, group: int, level: int = 0) -> None:
        while len(self.last) <= level:
            self.last.append(None)
        last = self.last[level]
        if last is not None and last.meta == meta and last.group == group and (
                group != NO_GROUP or last.end + 2 * (last.end - last.begin) >= begin):
            last.end = max(last.end, end)
            return
        self.reset(level)
        event = _Event(meta, begin, end, group)
        self.events.append(event)
        self.last[level] = event

    def add_levels(self, metas: list[str], begin: int, end: int, group: int) -> None:
        if not metas:
            return
        for level, meta in enumerate(metas):
            self.add(meta, begin, end, group, level)
        self.reset(len(metas))

    def reset(self, level: int) -> None:
        self._shorten_stack(level)
        for i in range(level, len(self.last)):
            self.last[i] = None
        if level == 0:
            for row in self.dependents:
                row.reset(0)

    def _shorten_stack(self, level: int) -> None:
        """AdjustDurationForTraceViewer: equal timespans stacked from `level` up end 1 ns earlier per level."""
        if level >= len(self.last) or self.last[level] is None:
            return
        top = level
        while top < len(self.last) and self.last[top] is not None:
            top += 1
        top -= 1
        if top <= level:
            return
        max_shrink_ns = (self.last[top].end - self.last[top].begin) // 1000 - 1
        shrink_ns = 0
        previous = None
        for i in range(level, top + 1):
            event = self.last[i]
            span = (event.begin, event.end)
            if shrink_ns < max_shrink_ns and previous == span:
                shrink_ns += 1
            previous = span
            if shrink_ns:
                event.end = max(event.begin, span[1] - 1000 * shrink_ns)


class _HostOffloadRows:
    """XProf's HostOffloadEventProcessor: start/done pairs of host-memory copies, packed into rows."""

    def __init__(self):
        self.pending: dict[str, list[tuple[int, int]]] = {}  # name → queue of start (begin, end)
        self.rows: list[list[_Event]] = []
        self.frontier: list[int] = []

    @staticmethod
    def event_name(op_name: str) -> str:
        parts = op_name.split(".")
        number = parts[-1] if len(parts) >= 2 else "0"
        for marker in ("-start", "-done"):
            at = op_name.find(marker)
            if at >= 0:
                return f"offload-{op_name[:at]}.{number}"
        return f"offload-{op_name}.{number}"

    def add(self, op_name: str, begin: int, end: int) -> None:
        name = self.event_name(op_name)
        queue = self.pending.setdefault(name, [])
        if "-start" in op_name:
            queue.append((begin, end))
            return
        if "-done" not in op_name or not queue:
            return  # a done whose start was not traced
        start_begin, _ = queue.pop(0)
        span_begin, span_end = start_begin, end
        chosen, lowest = -1, span_begin
        for i, frontier in enumerate(self.frontier):
            if frontier <= lowest:
                chosen, lowest = i, frontier
        if chosen == -1:
            if len(self.rows) < THREAD_ID_HOST_OFFLOAD_END - THREAD_ID_HOST_OFFLOAD_START + 1:
                self.rows.append([])
                self.frontier.append(span_end)
            chosen = len(self.rows) - 1
        self.frontier[chosen] = max(self.frontier[chosen], span_end)
        self.rows[chosen].append(_Event(name, span_begin, span_end, NO_GROUP))


def _last_metadata_text(table: EventTable, name: str) -> np.ndarray:
    """Per metadata row: the interned id of its last `name` stat's text (-1 when none or not text)."""
    capture = table.capture
    rows = capture.stat_rows(capture.metadata_stats, name)
    out = np.full(len(table.md_names), -1, np.int64)
    if len(rows):
        is_text = (rows.kind == KIND_STR) | (rows.kind == KIND_REF)
        out[rows.owner] = np.where(is_text, rows.str_id, -1)  # in order: the last stat of a name stays
    return out


def _merged_stat(table: EventTable, md_values: np.ndarray, name: str) -> np.ndarray:
    """Per event: its own last `name` stat where it has one, else its metadata's (XProf reads the
    metadata's stats, then the event's, keeping the last value seen)."""
    own = table.str_stat(name, last=True)
    present = np.zeros(table.n, bool)
    present[table.capture.event_stats.owner[table.stat_positions(name)]] = True
    return np.where(present, own.astype(np.int64), md_values[table.md])


def has_tensor_core_planes(capture: HostCapture) -> bool:
    """Whether any plane of the capture is a TPU TensorCore (`/device:TPU:<n>`). The names are read as a list:
    iterating the frame's column cost more than the check, twice per host of a pod's run."""
    return any(TENSOR_CORE_PLANE.fullmatch(name) for name in capture.planes["name"].tolist())


def derived_tpu_lines(table: EventTable, grouping: Grouping) -> DerivedTimeline:
    """The Framework Ops, Framework Name Scope, Source code and Host Offload Ops rows of every
    TensorCore plane of the capture (empty without one)."""
    planes = [p for p in table.planes_named(lambda name: TENSOR_CORE_PLANE.fullmatch(name) is not None)]
    out = DerivedTimeline()
    if not planes:
        return out
    line: list[int] = []
    start: list[int] = []
    duration: list[int] = []
    tf_op = _merged_stat(table, _last_metadata_text(table, "tf_op"), "tf_op")
    source = _merged_stat(table, _last_metadata_text(table, "source"), "source")
    md_async, md_has_async = table.md_int_stat("_a")
    ev_async, ev_has_async = table.int_stat("_a", last=True)
    is_async = np.where(ev_has_async, ev_async, np.where(md_has_async[table.md], md_async[table.md], 0)) != 0
    group = grouping.group_id
    strings = table.capture.strings
    lines_of_plane = table.capture.lines["plane"].to_numpy()
    for plane in planes:
        for tid, name, events, shown in _plane_rows(table, np.flatnonzero(lines_of_plane == plane), tf_op, source,
                                                    is_async, group, strings):
            line += [len(out.lines)] * len(events)
            out.lines.append((plane, tid, name))
            start += [e.begin for e in events]
            duration += [e.end - e.begin for e in events]
            out.name += [shown.get(e.meta) or e.meta for e in events]
    out.line = np.asarray(line, dtype=np.int64)
    out.start_ps = np.asarray(start, dtype=np.int64)
    out.duration_ps = np.asarray(duration, dtype=np.int64)
    return out


# --- XProf's event order --------------------------------------------------------------------------
# XProf walks a plane's events (collected line by line) after `std::sort` by start, shorter first.
# Equal events (same start and duration: ops clamped to a module boundary) keep the order that
# sort leaves them in, which decides how copy starts and dones pair up; so the sort is the C++
# standard library's (libstdc++: introsort, median-of-three pivot, insertion sort below 16
# elements, heap sort past 2·log2(n) levels), step for step.

_THRESHOLD = 16


@kernel()
def _before(a, b, begin, duration):
    return begin[a] < begin[b] or (begin[a] == begin[b] and duration[a] < duration[b])


@kernel()
def _sift(v, first, hole, length, value, begin, duration):
    """__adjust_heap then __push_heap on v[first:first + length]."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _before(v[first + child], v[first + child - 1], begin, duration):
            child -= 1
        v[first + hole] = v[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        v[first + hole] = v[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _before(v[first + parent], value, begin, duration):
        v[first + hole] = v[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    v[first + hole] = value


@kernel()
def _heap_sort(v, first, last, begin, duration):
    length = last - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _sift(v, first, parent, length, v[first + parent], begin, duration)
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        value = v[last]
        v[last] = v[first]
        _sift(v, first, 0, last - first, value, begin, duration)


@kernel()
def _linear_insert(v, last, begin, duration):
    value = v[last]
    nxt = last - 1
    while _before(value, v[nxt], begin, duration):
        v[last] = v[nxt]
        last = nxt
        nxt -= 1
    v[last] = value


@kernel()
def _insertion_sort(v, first, last, begin, duration):
    for i in range(first + 1, last):
        if _before(v[i], v[first], begin, duration):
            value = v[i]
            for k in range(i, first, -1):
                v[k] = v[k - 1]
            v[first] = value
        else:
            _linear_insert(v, i, begin, duration)


@kernel()
def xprof_event_order(begin, duration):
    """Positions 0…n-1 in the order libstdc++'s std::sort leaves them, comparing (begin, duration)."""
    n = len(begin)
    v = np.arange(n)
    if n < 2:
        return v
    depth = 0
    while (1 << (depth + 1)) <= n:
        depth += 1
    stack = [(0, n, 2 * depth)]
    while stack:
        first, last, limit = stack.pop()
        while last - first > _THRESHOLD:
            if limit == 0:
                _heap_sort(v, first, last, begin, duration)
                break
            limit -= 1
            a, b, c = first + 1, first + (last - first) // 2, last - 1
            if _before(v[a], v[b], begin, duration):
                pick = b if _before(v[b], v[c], begin, duration) else (c if _before(v[a], v[c], begin, duration) else a)
            elif _before(v[a], v[c], begin, duration):
                pick = a
            elif _before(v[b], v[c], begin, duration):
                pick = c
            else:
                pick = b
            v[first], v[pick] = v[pick], v[first]
            lo, hi = first + 1, last
            while True:
                while _before(v[lo], v[first], begin, duration):
                    lo += 1
                hi -= 1
                while _before(v[first], v[hi], begin, duration):
                    hi -= 1
                if not lo < hi:
                    break
                v[lo], v[hi] = v[hi], v[lo]
                lo += 1
            stack.append((lo, last, limit))
            last = lo
    if n > _THRESHOLD:
        _insertion_sort(v, 0, _THRESHOLD, begin, duration)
        for i in range(_THRESHOLD, n):
            _linear_insert(v, i, begin, duration)
    else:
        _insertion_sort(v, 0, n, begin, duration)
    return v


def _plane_rows(table: EventTable, lines: np.ndarray, tf_op: np.ndarray, source: np.ndarray,
                is_async: np.ndarray, group: np.ndarray, strings) -> list[tuple[int, str, list[_Event], dict]]:
    """One plane's derived rows: (thread id, row name, events in time order, shown name by metadata name)."""
    rows = table.events_of_lines(lines)  # line after line, as XProf collects them
    if len(rows) == 0:
        return []
    rows = rows[xprof_event_order(table.start[rows], table.duration[rows])]
    md = table.md[rows]
    offload_md = _host_offload_metadata(table, np.unique(md))
    wanted = ~is_async[rows] & ((tf_op[rows] >= 0) | (source[rows] >= 0) | np.isin(md, offload_md))
    rows = rows[wanted]

    display = {str(n): str(d) for n, d in zip(table.md_names[np.unique(md)], table.md_display_names[np.unique(md)])
               if d}
    tf_ops = _Row()
    scopes = _Row(dependents=(tf_ops,))
    sources = _Row()
    offload = _HostOffloadRows()
    offload_set = set(offload_md.tolist())
    parsed: dict[int, tuple[str, list[str]]] = {}
    for op_sid, source_sid, gid, event_md, start, length in zip(
            tf_op[rows].tolist(), source[rows].tolist(), group[rows].tolist(), table.md[rows].tolist(),
            table.start[rows].tolist(), table.duration[rows].tolist()):
        end = start + length
        if op_sid >= 0:
            entry = parsed.get(op_sid)
            if entry is None:
                full_name = strings[op_sid]
                op = parse_tf_op_fullname(full_name)
                scoped = name_scopes(op.name) if op.category in (TENSORFLOW, JAX) else []
                entry = parsed[op_sid] = (full_name, scoped)
                if full_name and not display.get(full_name):
                    display[full_name] = tf_op_event_name(op)
            full_name, scoped = entry
            if full_name:
                scopes.add_levels(scoped, start, end, gid)
                tf_ops.add(full_name, start, end, gid)
        if source_sid >= 0 and strings[source_sid]:
            sources.add(strings[source_sid], start, end, gid)
        if event_md in offload_set:
            offload.add(str(table.md_display_names[event_md] or table.md_names[event_md]), start, end)
    scopes.reset(0)

    rows_out = [(THREAD_ID_TF_NAME_SCOPE, FRAMEWORK_NAME_SCOPE_LINE, scopes.events),
                (THREAD_ID_TF_OP, FRAMEWORK_OPS_LINE, tf_ops.events),
                (THREAD_ID_SOURCE, SOURCE_LINE, sources.events)]
    rows_out += [(THREAD_ID_HOST_OFFLOAD_START + k, f"{HOST_OFFLOAD_LINE} row {k}", events)
                 for k, events in enumerate(offload.rows)]
    return [(tid, name, sorted(events, key=lambda e: (e.begin, e.begin - e.end)), display)
            for tid, name, events in rows_out if events]


def _host_offload_metadata(table: EventTable, md_rows: np.ndarray) -> np.ndarray:
    """Metadata rows whose events are host-offload copies: the display name holds a copy or dynamic-slice
    start/done, the name (the HLO text) the host memory space."""
    keep = []
    for row in md_rows.tolist():
        shown = table.md_display_names[row] or table.md_names[row]
        if HOST_MEMORY_LABEL in table.md_names[row] and any(k in shown for k in HOST_OFFLOAD_KEYWORDS):
            keep.append(row)
    return np.asarray(keep, dtype=np.int64)


__all__ = ["DerivedTimeline", "FRAMEWORK_NAME_SCOPE_LINE", "FRAMEWORK_OPS_LINE", "HOST_OFFLOAD_LINE", "SOURCE_LINE",
           "derived_tpu_lines", "has_tensor_core_planes", "tf_op_event_name", "xprof_event_order"]
