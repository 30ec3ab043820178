"""The few event stats the trace mapping reads, selected from the capture in one pass.

`capture.event_stat(name)` scans every stat of the capture (20 M rows on a
large one) per name; the mapping reads about twenty names, so they are picked
out together, once.
"""

from __future__ import annotations

import numpy as np

from reportgen.capture import HostCapture, StatTable
from reportgen.export import schema


def first_per_owner(owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct owners, index of each one's first row) for rows in owner order, without a sort."""
    if len(owner) == 0:
        return owner[:0], np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
    return owner[first], first


STARTS_PIECE = 1 << 20  # stats counted at a time (see stat_starts)


def stat_starts(owner: np.ndarray, n_owners: int) -> np.ndarray:
    """Owner row → its first stat row (n_owners + 1 entries); -1 in [0] when owners are out of order
    (or out of range)."""
    starts = np.zeros(n_owners + 1, np.int64)
    if len(owner) and (owner[0] < 0 or owner[-1] >= n_owners or (owner[1:] < owner[:-1]).any()):
        starts[0] = -1
        return starts
    # Counted piece by piece: np.bincount converts its input to int64 first, which for the
    # 20 M stats of a large capture is 160 MB at once. Owners are sorted, so a piece's counts
    # are a window of the result.
    for a in range(0, len(owner), STARTS_PIECE):
        piece = owner[a : a + STARTS_PIECE]
        low = int(piece[0])
        counts = np.bincount(piece - low)
        starts[low + 1 : low + 1 + len(counts)] += counts
    np.cumsum(starts, out=starts)
    return starts


class EventStats:
    """The rows of the selected stats are found in one pass; each stat's table is taken out of them on its
    first `get` (a host without connected events asks for 11 of the 19 names; taking one out is five copies)."""

    def __init__(self, capture: HostCapture, names: tuple[str, ...] = schema.TRACE_STAT_NAMES):
        self.capture = capture
        self._tables: dict[str, StatTable] = {}
        stats = capture.event_stats
        self._sids = {name: capture.string_id(name) for name in names}
        wanted = np.array([s for s in self._sids.values() if s >= 0], dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int32)
        if len(wanted):
            lut = np.zeros(len(capture.strings), dtype=bool)
            lut[wanted] = True
            self._rows = np.flatnonzero(lut[stats.key])
            self._keys = stats.key[self._rows]

    def get(self, name: str) -> StatTable:
        """The rows of one stat (a name not selected up front is scanned for)."""
        table = self._tables.get(name)
        if table is None:
            sid = self._sids.get(name)
            if sid is None:
                table = self.capture.event_stat(name)
            else:
                rows = self._rows
                table = self.capture.event_stats.select(rows[self._keys == sid] if sid >= 0 else rows[:0])
            self._tables[name] = table
        return table
