"""Processes and threads of a host's trace, numbered and named as XProf's trace_viewer@ does.

* `/host:CPU…` planes (sorted by name) are processes 701, 702, …; device
  planes (GPU, else TPU) are `1 + plane id` (1 when that exceeds 500);
  `/device:CUSTOM:` planes are `501 + plane id`. Every pid carries the host
  offset (1000 for a host exported on its own). Planes without lines are left out.
* A line is a thread with tid `(uint32) display id` (display_id, else id) and the
  line's display name; lines with one tid share the thread (the last name wins).
  Lines without events and lines named `counters_…` are left out; the line named
  `_counters_` holds counter samples, which belong to the process only.
* Process name: `<host> <plane name>`; threads are ordered by tid.
* Rows XProf derives while loading a capture (`added`: plane, tid, name) are
  threads of their plane's process too, on lines numbered after the capture's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reportgen.capture import HostCapture
from reportgen.export import schema
from reportgen.export.columns import CaptureColumns

LINE_SKIPPED = 0
LINE_EVENTS = 1
LINE_COUNTERS = 2


@dataclass
class TraceThread:
    tid: int
    name: str
    lines: list[int] = field(default_factory=list)  # rows of capture.lines


@dataclass
class TraceProcess:
    pid: int
    name: str
    plane: int  # row of capture.planes
    threads: dict[int, TraceThread] = field(default_factory=dict)  # by tid
    counter_lines: list[int] = field(default_factory=list)

    def sorted_threads(self) -> list[TraceThread]:
        return [self.threads[t] for t in sorted(self.threads)]


@dataclass
class TraceLayout:
    processes: list[TraceProcess]  # by pid
    line_pid: np.ndarray  # int64 per line, -1 when the line is not exported
    line_tid: np.ndarray  # int64 per line (uint32 values)
    line_kind: np.ndarray  # int8 per line: LINE_SKIPPED / LINE_EVENTS / LINE_COUNTERS
    plane_is_host: np.ndarray  # bool per plane: XProf's IsHostPlane (flow direction)

    def process(self, pid: int) -> TraceProcess:
        return next(p for p in self.processes if p.pid == pid)


def _plane_pids(names: list[str], ids: list[int], host_offset: int) -> dict[int, int]:
    """Row of each converted plane → pid."""
    pids: dict[int, int] = {}
    host_rows = sorted((n, r) for r, n in enumerate(names) if n.startswith(schema.HOST_THREADS_PLANE))
    for i, (_name, row) in enumerate(host_rows):
        pids[row] = host_offset + schema.HOST_THREADS_PID + i
    device = [r for r, n in enumerate(names) if n.startswith(schema.GPU_PLANE_PREFIX)]
    if not device:
        device = [r for r, n in enumerate(names) if n.startswith(schema.TPU_PLANE_PREFIX)]
    for row in device:
        pid = schema.FIRST_DEVICE_PID + ids[row]
        if pid > schema.LAST_DEVICE_PID or pid < schema.FIRST_DEVICE_PID:
            pid = schema.FIRST_DEVICE_PID
        pids[row] = host_offset + pid
    for row, name in enumerate(names):
        if name.startswith(schema.CUSTOM_PLANE_PREFIX):
            pids[row] = host_offset + schema.FIRST_CUSTOM_PID + ids[row]
    return pids


def is_host_plane(name: str) -> bool:
    return name in schema.HOST_PLANE_NAMES or name.startswith(schema.HOST_PLANE_PREFIXES)


def build_layout(capture: HostCapture, host_offset: int = schema.PID_HOST_OFFSET,
                 added: list[tuple[int, int, str]] = (), columns: CaptureColumns | None = None) -> TraceLayout:
    """The layout; `added` rows (plane row, thread id, name) take lines `len(capture.lines) + k`."""
    columns = CaptureColumns(capture) if columns is None else columns
    planes = capture.planes
    lines = capture.lines
    names = columns.plane_name
    pids = _plane_pids(names, planes["id"].to_numpy().astype(np.int64).tolist(), host_offset)
    # Lines per plane (the planes' `line_count`), counted from a column read anyway.
    plane_lines = np.bincount(columns.line_plane, minlength=len(names))

    n_lines = len(lines)
    line_pid = np.full(n_lines + len(added), -1, dtype=np.int64)
    display = lines["display_id"].to_numpy().astype(np.int64)
    raw_id = lines["id"].to_numpy().astype(np.int64)
    line_tid = np.where(display != 0, display, raw_id).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    line_tid = np.concatenate([line_tid.astype(np.int64), [tid & 0xFFFFFFFF for _, tid, _ in added]]).astype(np.int64)
    line_kind = np.zeros(n_lines + len(added), dtype=np.int8)

    line_plane = columns.line_plane
    line_events = columns.line_count
    line_names = columns.line_name
    line_display = lines["display_name"].tolist()
    processes: dict[int, TraceProcess] = {}
    # Planes in XProf's conversion order: host planes by name, then devices, then custom.
    for row in sorted(pids, key=lambda r: (pids[r], r)):
        if plane_lines[row] == 0:
            continue
        pid = pids[row]
        proc = processes.get(pid)
        if proc is None:
            proc = processes[pid] = TraceProcess(pid=pid, name="", plane=row)
        proc.name = f"{capture.host} {names[row]}"  # several planes on one pid: the last name wins
        proc.plane = row
        for line in np.flatnonzero(line_plane == row):
            name = line_names[line]
            if line_events[line] == 0 or name.startswith(schema.SKIPPED_LINE_PREFIX):
                continue
            line_pid[line] = pid
            if name == schema.COUNTER_LINE:
                line_kind[line] = LINE_COUNTERS
                proc.counter_lines.append(int(line))
                continue
            line_kind[line] = LINE_EVENTS
            tid = int(line_tid[line])
            thread = proc.threads.get(tid)
            if thread is None:
                thread = proc.threads[tid] = TraceThread(tid=tid, name="")
            thread.name = line_display[line] or name
            thread.lines.append(int(line))
    by_plane = {proc.plane: proc for proc in processes.values()}
    for k, (plane, _tid, name) in enumerate(added):
        proc = by_plane.get(plane)
        if proc is None:
            continue
        line = n_lines + k
        line_pid[line] = proc.pid
        line_kind[line] = LINE_EVENTS
        thread = proc.threads.setdefault(int(line_tid[line]), TraceThread(tid=int(line_tid[line]), name=""))
        thread.name = name
        thread.lines.append(line)
    plane_is_host = np.array([is_host_plane(n) for n in names], dtype=bool)
    return TraceLayout(
        processes=[processes[p] for p in sorted(processes)],
        line_pid=line_pid,
        line_tid=line_tid,
        line_kind=line_kind,
        plane_is_host=plane_is_host,
    )
