"""The decoded form of one host's capture: columnar tables, no protobuf objects.

Every tool reads a `HostCapture`; nothing downstream of the loaders touches
bytes. Ids are resolved once here so that tools filter with vectorised
comparisons instead of per-plane dictionary lookups:

* every string (event names, stat names, string and ref stat values) is
  interned into one table, `strings`, and columns hold its index;
* events point at their metadata row (`md`), their line and their plane;
* stats are in long form with their event row and the interned stat name
  (`key`), whichever plane they came from.

Times are picoseconds relative to the profile start, as in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # a HostCapture holds frames, but the kernels' modules import this one without pandas
    import pandas as pd

__all__ = [
    "HostCapture",
    "search_owners",
    "StatTable",
    "KIND_BYTES",
    "KIND_DOUBLE",
    "KIND_INT64",
    "KIND_REF",
    "KIND_STR",
    "KIND_UINT64",
    "KIND_NONE",
]

# Stat value kinds (`StatTable.kind`), in XStat's oneof field order. Defined here, with the data they describe:
# the decoder (`loaders/wire.py`) writes them, every tool reads them, and reading a capture's columns must not
# load the decoder and its compiled kernels.
KIND_NONE = 0
KIND_DOUBLE = 1
KIND_UINT64 = 2
KIND_INT64 = 3
KIND_STR = 4
KIND_BYTES = 5
KIND_REF = 6

NO_STRING = -1


def search_owners(owners: np.ndarray, rows: np.ndarray, side: str = "left") -> np.ndarray:
    """`np.searchsorted(owners, rows, side)` for a sorted column of rows (a stat table's `owner`, int32) and
    rows to find in it, searched in the column's own type. Given int64 rows, numpy first copies the whole
    column to int64, on every call: 83 ms for the 20 M stats of the ×200 benchmark capture, where the
    tf.data analysis looks up a few iterators' parameters. Rows outside the column's type (none, where
    rows are numbered in it) are searched as numpy would."""
    rows = np.asarray(rows)
    if rows.dtype != owners.dtype and owners.dtype.kind == "i" and rows.dtype.kind in "iu" and rows.size:
        limits = np.iinfo(owners.dtype)
        if limits.min <= rows.min() and rows.max() <= limits.max:
            rows = rows.astype(owners.dtype)
    return np.searchsorted(owners, rows, side=side)


@dataclass
class StatTable:
    """Stats in long form. `owner` is the row of the event / metadata / plane.

    `raw` holds the int64 value, the uint64 bit pattern, the double's bit
    pattern or the referenced stat-metadata id, by `kind`; `str_id` indexes
    `HostCapture.strings` for string, bytes and (resolved) ref values.
    """

    owner: np.ndarray  # int32
    key: np.ndarray  # int32, interned stat name
    kind: np.ndarray  # int8
    raw: np.ndarray  # int64
    str_id: np.ndarray  # int32 (NO_STRING when not a string)

    def __len__(self) -> int:
        return len(self.owner)

    def select(self, mask: np.ndarray) -> StatTable:
        return StatTable(*(col[mask] for col in (self.owner, self.key, self.kind, self.raw, self.str_id)))

    def int_values(self) -> np.ndarray:
        """IntOrUint semantics: int64 and uint64 (reinterpreted) values; 0 otherwise."""
        ints = (self.kind == KIND_INT64) | (self.kind == KIND_UINT64)
        return np.where(ints, self.raw, 0)

    def double_values(self) -> np.ndarray:
        """Doubles as stored; int64/uint64 converted; NaN for strings."""
        out = self.raw.view(np.float64).copy()
        out[self.kind == KIND_INT64] = self.raw[self.kind == KIND_INT64]
        out[self.kind == KIND_UINT64] = self.raw[self.kind == KIND_UINT64].view(np.uint64)
        out[(self.kind != KIND_DOUBLE) & (self.kind != KIND_INT64) & (self.kind != KIND_UINT64)] = np.nan
        return out

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            {"owner": self.owner, "key": self.key, "kind": self.kind, "raw": self.raw, "str_id": self.str_id},
            copy=False,
        )


@dataclass
class HostCapture:
    """One `<host>.xplane.pb`, decoded into tables.

    planes:         one row per plane: id, name, first_line, line_count
    lines:          one row per line: plane, id, display_id, name, display_name,
                    timestamp_ns, duration_ps, first_event, event_count
    events:         one row per event: plane, line, md (row of event_metadata),
                    metadata_id, start_ps (absolute: timestamp_ns*1000 + offset),
                    duration_ps, num_occurrences (0 unless aggregated);
                    plane, line and md are int32 (row numbers), the rest int64
    event_stats:    StatTable, owner = event row; rows in event order (owner never
                    decreases), each event's stats in file order
    event_metadata: plane, id, name, display_name, name_id (interned name),
                    display_name_id, child_ids (tuple)
    metadata_stats: StatTable, owner = event_metadata row
    stat_metadata:  plane, id, name
    plane_stats:    StatTable, owner = plane row
    strings:        interned strings (bytes values stay `bytes`)
    proto_stats:    proto-valued stats decoded into plain Python (`core_details`,
                    `memory_access_breakdown`), by (stat name, string id)
    dropped:        events left out by the loader, {reason: count} (see loaders/xspace.py)
    """

    path: str
    host: str
    size_bytes: int
    hostnames: list[str]
    errors: list[str]
    warnings: list[str]
    planes: pd.DataFrame
    lines: pd.DataFrame
    events: pd.DataFrame
    event_stats: StatTable
    event_metadata: pd.DataFrame
    metadata_stats: StatTable
    stat_metadata: pd.DataFrame
    plane_stats: StatTable
    strings: list
    _string_index: dict = field(default_factory=dict, repr=False)
    # Bytes stats that hold serialized protos, decoded by the loader (loaders/stat_protos.py):
    # {(stat name, value's string id): plain value}.
    proto_stats: dict = field(default_factory=dict, repr=False)
    # Events the loader left out ({reason: count}, read as "<count> events <reason>"): times no time line
    # can hold.
    dropped: dict = field(default_factory=dict)
    # Plane name → its first row, made on first use (`plane_by_name`).
    _plane_rows: dict | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self._string_index:
            self._string_index = {s: i for i, s in enumerate(self.strings)}

    # --- string interning -------------------------------------------------
    def string_id(self, text: str) -> int:
        """Index of `text` in `strings`, or NO_STRING when the capture never uses it."""
        return self._string_index.get(text, NO_STRING)

    def string(self, sid: int) -> str | bytes:
        return "" if sid == NO_STRING else self.strings[sid]

    # --- conveniences used by many tools ------------------------------------
    @property
    def event_count(self) -> int:
        return len(self.events)

    def plane_rows(self, prefix: str) -> pd.DataFrame:
        """Planes whose name starts with `prefix` (e.g. "/device:GPU:")."""
        return self.planes[self.planes["name"].str.startswith(prefix)]

    def plane_by_name(self, name: str) -> int | None:
        # A dict made once: comparing the name column costs ≈ 0.3 ms a call, and a host's stage asks
        # about ten times (a pod's run has thousands of tiny hosts).
        if self._plane_rows is None:
            rows: dict = {}
            for row, plane in zip(self.planes.index.tolist(), self.planes["name"].tolist()):
                rows.setdefault(plane, int(row))
            self._plane_rows = rows
        return self._plane_rows.get(name)

    def stat_rows(self, stats: StatTable, name: str) -> StatTable:
        """The rows of `stats` whose stat name is `name` (empty when absent)."""
        sid = self.string_id(name)
        return stats.select(stats.key == sid)

    def event_stat(self, name: str) -> StatTable:
        return self.stat_rows(self.event_stats, name)

    def time_span_ps(self) -> tuple[int, int]:
        """(first event start, last event end) over timed events, in ps."""
        ev = self.events
        timed = ev["num_occurrences"].to_numpy() == 0
        if not timed.any():
            return 0, 0
        start, duration = ev["start_ps"].to_numpy(), ev["duration_ps"].to_numpy()
        if not timed.all():  # aggregated events have no time: copy only when there are some
            start, duration = start[timed], duration[timed]
        end = np.add(start, duration)
        return int(start.min()), int(end.max())
