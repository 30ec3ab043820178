"""Where the capture marks its steps: the trace cuts chunks there and renames the markers.

The core's step database will replace this; until then the capture's own marks
are used, behind `capture_steps`:
* host: root events (`_r` stat, e.g. `Trace("train", step_num=…, _r=1)` or
  `jax.profiler.StepTraceAnnotation`) that no other root event on their line
  encloses; when some of them carry a step or iteration number, only those.
  XProf makes each one a step group and names it
  `<event name> <iter_num | step_num | group number>`, a name the trace viewer
  shows instead of the event's. (XProf decides top roots on its event forest,
  which also links threads; this is the capture-only approximation.)
* else a device's `Steps` line (the first device plane that has one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.capture import KIND_INT64, KIND_UINT64, HostCapture, search_owners
from reportgen.export import schema
from reportgen.export.columns import CaptureColumns
from reportgen.export.stat_select import EventStats, first_per_owner


@dataclass
class StepMarks:
    start_ps: np.ndarray  # int64, sorted
    end_ps: np.ndarray  # int64
    number: np.ndarray  # int64 step number as users know it
    rename_rows: np.ndarray  # event rows XProf shows under a step name (host roots)
    rename_to: list[str]  # that name, per rename row

    def __len__(self) -> int:
        return len(self.start_ps)

    @classmethod
    def empty(cls) -> StepMarks:
        e = np.zeros(0, dtype=np.int64)
        return cls(e, e, e, e, [])


def _int_stat(stats: EventStats, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stat = stats.get(name)
    ints = (stat.kind == KIND_INT64) | (stat.kind == KIND_UINT64)
    owners, first = first_per_owner(stat.owner[ints])
    values = stat.raw[ints][first]
    pos = search_owners(owners, rows)
    pos_c = np.minimum(pos, max(len(owners) - 1, 0))
    present = (pos < len(owners)) & (owners[pos_c] == rows) if len(owners) else np.zeros(len(rows), bool)
    return present, np.where(present, values[pos_c] if len(owners) else 0, 0)


def _outermost(line: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of intervals (sorted by line, start, longest first) not enclosed by an earlier one on their line."""
    if len(start) == 0:
        return np.zeros(0, dtype=bool)
    # Each line's running end (rows come sorted by line): one accumulate per line, not a pandas groupby's
    # set-up of ≈ 0.5 ms for each of a pod's thousands of hosts.
    first_of_line = np.concatenate([[True], line[1:] != line[:-1]])
    lines_at = [*np.flatnonzero(first_of_line).tolist(), len(line)]
    reach = np.empty_like(end)
    for a, b in zip(lines_at[:-1], lines_at[1:]):
        np.maximum.accumulate(end[a:b], out=reach[a:b])
    before = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    return first_of_line | (end > before)


def _host_roots(columns: CaptureColumns, stats: EventStats) -> StepMarks:
    host = columns.capture.plane_by_name(schema.HOST_THREADS_PLANE)
    if host is None:
        return StepMarks.empty()
    roots = stats.get(schema.STAT_IS_ROOT)
    if len(roots) == 0:
        return StepMarks.empty()
    rows = np.unique(roots.owner)
    rows = rows[columns.plane_of(rows) == host]
    if len(rows) == 0:
        return StepMarks.empty()
    line = columns.ev_line[rows]
    start = columns.ev_start[rows]
    end = start + columns.ev_duration[rows]
    order = np.lexsort((-end, start, line))
    rows, line, start, end = rows[order], line[order], start[order], end[order]
    keep = _outermost(line, start, end)
    rows, start, end = rows[keep], start[keep], end[keep]
    by_time = np.argsort(start, kind="stable")
    rows, start, end = rows[by_time], start[by_time], end[by_time]
    has_iter, iter_num = _int_stat(stats, schema.STAT_ITER_NUM, rows)
    has_step, step_num = _int_stat(stats, schema.STAT_STEP_NUM, rows)
    numbered = has_iter | has_step
    if numbered.any() and not numbered.all():
        # XProf connects unnumbered roots (e.g. tf.data FunctionRun) to the numbered
        # steps through its event forest; they are not steps of their own.
        rows, start, end = rows[numbered], start[numbered], end[numbered]
        iter_num, step_num, has_iter = iter_num[numbered], step_num[numbered], has_iter[numbered]
        has_step = has_step[numbered]
    number = np.where(has_iter, iter_num, np.where(has_step, step_num, np.arange(len(rows))))
    names = columns.md_names(columns.ev_md[rows])
    rename = [f"{n} {int(k)}" for n, k in zip(names, number)]
    return StepMarks(start, end, number.astype(np.int64), rows, rename)


def _device_steps_line(columns: CaptureColumns, stats: EventStats) -> StepMarks:
    planes = columns.plane_name
    for row in (k for k, name in enumerate(columns.line_name) if name == "Steps"):  # one turn per line
        if not str(planes[int(columns.line_plane[row])]).startswith("/device:"):
            continue
        first = int(columns.line_first[row])
        rows = np.arange(first, first + int(columns.line_count[row]), dtype=np.int64)
        if len(rows) == 0:
            continue
        start = columns.ev_start[rows]
        end = start + columns.ev_duration[rows]
        order = np.argsort(start, kind="stable")
        rows, start, end = rows[order], start[order], end[order]
        has_group, group = _int_stat(stats, schema.STAT_GROUP_ID, rows)
        number = np.where(has_group, group, np.arange(len(rows)))
        return StepMarks(start, end, number.astype(np.int64), np.zeros(0, np.int64), [])
    return StepMarks.empty()


def capture_steps(capture: HostCapture, stats: EventStats | None = None,
                  columns: CaptureColumns | None = None) -> StepMarks:
    """The steps the capture itself marks (host roots, else a device `Steps` line)."""
    stats = EventStats(capture) if stats is None else stats
    columns = CaptureColumns(capture) if columns is None else columns
    marks = _host_roots(columns, stats)
    return marks if len(marks) else _device_steps_line(columns, stats)
