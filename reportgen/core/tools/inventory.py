"""What a capture holds: planes, lines, event counts, time spans, line activity.

Line activity is the union of a line's event intervals (nested events are
not counted twice), binned over the capture's time span.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import HostCapture
from reportgen.core.events.intervals import run_starts, union_intervals
from reportgen.core.ops.perf_env import plane_stats
from reportgen.timebins import covered_per_bin, time_bins


def _timed_events(capture: HostCapture) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(line, start, end) of the events that are not aggregates (num_occurrences 0), in stored order:
    line after line, each line's events together."""
    ev = capture.events
    line, start = ev["line"].to_numpy(), ev["start_ps"].to_numpy()
    end = start + ev["duration_ps"].to_numpy()
    timed = ev["num_occurrences"].to_numpy() == 0
    if not timed.all():
        line, start, end = line[timed], start[timed], end[timed]
    return line, start, end


def line_inventory(capture: HostCapture) -> pd.DataFrame:
    """One row per line: plane name, line name, events, first/last time (ps)."""
    lines = capture.lines
    line, start, end = _timed_events(capture)
    if len(line) and not (line[1:] >= line[:-1]).all():  # lines are stored one after the other
        order = np.argsort(line, kind="stable")
        line, start, end = line[order], start[order], end[order]
    runs = run_starts(line)
    first = np.zeros(len(lines), np.int64)
    last = np.zeros(len(lines), np.int64)
    timed = np.zeros(len(lines), bool)
    if len(runs):
        at = line[runs]
        first[at], last[at], timed[at] = np.minimum.reduceat(start, runs), np.maximum.reduceat(end, runs), True
    if not timed.all():  # a line without timed events has no span (NaN, as a left join gives)
        first, last = np.where(timed, first, np.nan), np.where(timed, last, np.nan)
    return pd.DataFrame(
        {
            "plane": capture.planes["name"].to_numpy()[lines["plane"].to_numpy()] if len(lines) else (
                np.array([], dtype=object)),
            "line_id": lines["id"].to_numpy(),
            "line": np.array([d or n for d, n in zip(lines["display_name"], lines["name"])], dtype=object),
            "events": lines["event_count"].to_numpy(),
            "first_ps": first,
            "last_ps": last,
        }
    )


def plane_inventory(capture: HostCapture) -> pd.DataFrame:
    """One row per plane: id, name, lines, events."""
    lines_per_plane = capture.lines.groupby("plane").size()
    events_per_plane = capture.events.groupby("plane").size()
    planes = capture.planes
    return pd.DataFrame(
        {
            "plane_id": planes["id"],
            "plane": planes["name"],
            "lines": lines_per_plane.reindex(planes.index, fill_value=0).to_numpy(),
            "events": events_per_plane.reindex(planes.index, fill_value=0).to_numpy(),
        }
    )


def _by_line_then_start(line: np.ndarray, start: np.ndarray) -> bool:
    same_line = line[1:] == line[:-1]
    return bool((line[1:] >= line[:-1]).all() and (start[1:] >= start[:-1])[same_line].all())


def line_activity(capture: HostCapture, bins: int = 100, labels: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Busy share of each line in each of `bins` equal time slices, as numpy columns (a frame cost more than
    the rest of a tiny host's activity, and a pod's run has thousands of hosts).

    Columns: line (row index in capture.lines), bin, bin_start_ms, bin_end_ms,
    busy_ms, busy_percent, and with `labels` (one per row of capture.lines) the line's label.
    """
    line, start, end = _timed_events(capture)
    if len(line) == 0:
        empty = {"line": np.zeros(0, np.int64), "bin": np.zeros(0, np.int64), "bin_start_ms": np.zeros(0),
                 "bin_end_ms": np.zeros(0), "busy_ms": np.zeros(0), "busy_percent": np.zeros(0)}
        return empty | ({"label": np.zeros(0, object)} if labels is not None else {})
    if not _by_line_then_start(line, start):  # profilers write them so; sort only when not
        order = np.lexsort((start, line))
        line, start, end = line[order], start[order], end[order]
    g, s, e = union_intervals(start, end, line)
    t0, t1 = int(start.min()), int(end.max())
    edges, width = time_bins(t0, max(t1, t0 + 1), bins)
    first = run_starts(g)  # the merged intervals come grouped by line, in line order
    lines = g[first]
    busy = np.empty((len(lines), bins))
    for row, (a, b) in enumerate(zip(first, [*first[1:], len(g)])):  # one turn per line, never per event
        busy[row] = covered_per_bin(s[a:b], e[a:b], edges)
    bin_of = np.tile(np.arange(bins), len(lines))
    busy_ps = busy.reshape(-1)
    line_of = np.repeat(lines, bins)
    columns = {
        "line": line_of, "bin": bin_of,
        "bin_start_ms": (edges[bin_of] - t0) / 1e9, "bin_end_ms": (edges[bin_of + 1] - t0) / 1e9,
        "busy_ms": busy_ps / 1e9, "busy_percent": 100.0 * busy_ps / width,
    }
    if labels is not None:
        columns["label"] = labels[line_of]
    return columns


ACTIVITY_BINS = 100


@dataclass
class HostInventory:
    lines: pd.DataFrame  # plane, line_id, line, events, first_ps, last_ps
    activity: dict[str, np.ndarray]  # line_activity's columns, with the lines' labels
    empty_planes: list[str]
    csv: str = ""  # this host's line table, written by the host stage (relative to the run folder)
    dropped: dict = field(default_factory=dict)  # events the loader left out, {reason: count}
    # When the profiler started, ns since the epoch (the `Task Environment` plane's profile_start_time); None when
    # the capture does not say. Event times are relative to the session, so this is the capture's only date.
    profile_start_ns: int | None = None


TASK_ENVIRONMENT = "Task Environment"


def host_inventory(capture: HostCapture) -> HostInventory:
    """The host's lines with events and their activity, and its planes without lines."""
    lines = line_inventory(capture)
    # Built from lists: pandas' column arithmetic costs ≈ 0.5 ms a call on a tiny host's few lines.
    labels = np.array([f"{plane} · {line}" for plane, line in zip(lines["plane"].tolist(), lines["line"].tolist())],
                      dtype=object)
    activity = line_activity(capture, ACTIVITY_BINS, labels)
    planes_with_lines = set(lines["plane"])
    empty = [p for p in capture.planes["name"] if p not in planes_with_lines]
    return HostInventory(lines=lines, activity=activity, empty_planes=empty, dropped=dict(capture.dropped),
                         profile_start_ns=profile_start_ns(capture))


def profile_start_ns(capture: HostCapture) -> int | None:
    """The capture's profile_start_time (ns since the epoch) from its `Task Environment` plane, else None."""
    names = capture.planes["name"].tolist()
    if TASK_ENVIRONMENT not in names:
        return None
    value = plane_stats(capture, names.index(TASK_ENVIRONMENT)).get("profile_start_time")
    return int(value) if isinstance(value, int) and value > 0 else None
