"""Time cut into equal slices, and how much of each slice a set of intervals covers: the busy heatmaps.

The inventory's busy chart (`core/tools/inventory.py`), the trace page's overview of each row
(`export/activity.py`) and the older timelines' overview (`legacy/timeline_chunks.py`) slice time alike, so
their heatmaps read the same. Plain numpy on plain arrays, below every package: the trace export may not
import `core/`, whose other interval unions (`core/events/intervals.py`) it has no use for.
"""

from __future__ import annotations

import numpy as np


def time_bins(t0: float, t1: float, bins: int) -> tuple[np.ndarray, float]:
    """`bins` equal time slices from `t0` to `t1` (t1 > t0): their edges, as floats, and their width (the busy
    heatmaps' slices).

    Far from the capture's start a short span is finer than floats resolve (at 2^60 ps one float step is 256 ps):
    the edges then collapse onto each other and their difference is 0. The width is then the span's own share,
    computed from `t0` and `t1` as given, so that the busy shares stay finite; the slices themselves say nothing
    in that case (each is empty)."""
    edges = np.linspace(t0, t1, bins + 1)
    width = float(edges[1] - edges[0])
    if not width > 0:
        width = (t1 - t0) / bins
    return edges, width


def covered_per_bin(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin between consecutive `edges`: how much of it the disjoint intervals [start, end) (sorted by start)
    cover, as floats (the busy heatmaps' share of each time slice)."""
    s, e = start.astype(np.float64), end.astype(np.float64)
    covered_before = np.concatenate([[0.0], np.cumsum(e - s)])
    idx = np.searchsorted(s, edges, side="right")  # intervals starting at or before each edge
    last = np.maximum(idx - 1, 0)
    partial = np.where(idx > 0, np.clip(edges - s[last], 0.0, (e - s)[last]), 0.0)
    return np.diff(np.where(idx > 0, covered_before[last] + partial, 0.0))
