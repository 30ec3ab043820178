"""How busy each trace row is over time: the trace page's overview.

Computed on the events the trace holds (the regions XProf adds included, which
are the only spans on some thread-pool rows), per thread as the trace shows it:
the union of its event intervals (nested events count once), binned over the
exported time span. The result is numpy columns, not a frame: building a frame cost more than the rest of a
tiny host's activity, and a pod's run has thousands of hosts (the page reads it back as columns).
"""

from __future__ import annotations

import numpy as np

from reportgen.export.tables import TraceTables
from reportgen.timebins import covered_per_bin, time_bins

COLUMNS = ["label", "bin_start_ms", "bin_end_ms", "busy_percent"]


def _merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals sorted by start."""
    reach = np.maximum.accumulate(end)
    opens = np.concatenate([[True], start[1:] > reach[:-1]])
    group = np.cumsum(opens) - 1
    merged_end = np.zeros(group[-1] + 1, dtype=np.int64)
    np.maximum.at(merged_end, group, reach)
    return start[opens], merged_end


def row_activity(tables: TraceTables, bins: int = 200) -> tuple[dict[str, np.ndarray], list[str]]:
    """The busy share per trace row and time bin (COLUMNS, each row's bins in order), and the rows' distinct
    labels in order."""
    layout = tables.layout
    rows_of: list[tuple[str, np.ndarray, np.ndarray]] = []
    for proc in layout.processes:  # one loop turn per trace row, never per event
        groups = [(f"{proc.name} · {t.name}", t.lines) for t in proc.sorted_threads()]
        if proc.counter_lines:
            groups.append((f"{proc.name} · counters", proc.counter_lines))
        for label, lines in groups:
            rows = tables.rows_on_lines(lines)
            if len(rows):
                start = tables.start_ps(rows)
                order = np.argsort(start, kind="stable")
                rows_of.append((label, start[order], tables.end_ps(rows)[order]))
    if not rows_of:
        return {c: np.zeros(0, object if c == "label" else np.float64) for c in COLUMNS}, []
    t0 = min(int(s[0]) for _, s, _ in rows_of)
    t1 = max(max(int(e.max()) for _, _, e in rows_of), t0 + 1)
    edges, width = time_bins(t0, t1, bins)
    busy = [covered_per_bin(*_merged(start, end), edges) for _, start, end in rows_of]
    bin_of = np.tile(np.arange(bins), len(rows_of))
    columns = {
        "label": np.repeat(np.array([label for label, _, _ in rows_of], dtype=object), bins),
        "bin_start_ms": edges[bin_of] / 1e9,
        "bin_end_ms": edges[bin_of + 1] / 1e9,
        "busy_percent": 100.0 * np.concatenate(busy) / width,
    }
    return columns, list(dict.fromkeys(label for label, _, _ in rows_of))
