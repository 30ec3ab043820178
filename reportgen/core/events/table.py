"""Per-event columns of one capture, as the core reads them.

`EventTable` wraps a `HostCapture` and hands out numpy columns aligned with
`capture.events` rows: times, plane/line classification, event types, and any
event stat by name (`int_stat`, `str_stat`). Stat columns are extracted once
and cached, so every rule that needs `group_id` or `correlation_id` shares one
vectorised pass over the long stat table.

Stat reading follows XProf's visitor (docs/xprof/xspace.md §2): an event's
stat is looked up among its own stats only (never its metadata's);
`IntOrUint` reads both integer kinds, `IntValue` only int64. When an event
carries the same stat twice, `GetStat` (the default here) sees the first
one, while converters that walk `ForEachStat` and keep what they see (memory
profile, kernel stats) end with the last one: `last=True`.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from reportgen.capture import (
    KIND_DOUBLE,
    KIND_INT64,
    KIND_REF,
    KIND_STR,
    KIND_UINT64,
    NO_STRING,
    HostCapture,
    StatTable,
    search_owners,
)
from reportgen.core.events import schema
from reportgen.core.events.nesting import bucket_by_key
from reportgen.core.events.tf_op import TENSORFLOW, TF_DATA, parse_tf_op_fullname


def _scatter(out: np.ndarray, owner: np.ndarray, values: np.ndarray, last: bool) -> None:
    """out[owner] = values where an owner listed twice keeps its first value, or its last."""
    if last:
        out[owner] = values  # numpy assigns in order: the last duplicate stays
    else:
        out[owner[::-1]] = values[::-1]


class EventTable:
    def __init__(self, capture: HostCapture) -> None:
        self.capture = capture
        ev = capture.events
        self.n = len(ev)
        self.plane = ev["plane"].to_numpy(np.int64)
        self.line = ev["line"].to_numpy(np.int64)
        self.md = ev["md"].to_numpy(np.int64)
        self.start = ev["start_ps"].to_numpy(np.int64)
        self.duration = ev["duration_ps"].to_numpy(np.int64)
        self.end = self.start + self.duration
        self._int_cache: dict[tuple[str, bool, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._str_cache: dict[tuple[str, bool], np.ndarray] = {}
        self._double_cache: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}

    # --- planes and lines -----------------------------------------------------------
    @cached_property
    def plane_names(self) -> list[str]:
        return list(self.capture.planes["name"])

    def planes_named(self, predicate) -> list[int]:
        return [i for i, name in enumerate(self.plane_names) if predicate(name)]

    @cached_property
    def host_plane(self) -> int | None:
        return self.capture.plane_by_name(schema.HOST_PLANE)

    @cached_property
    def line_first(self) -> np.ndarray:
        return self.capture.lines["first_event"].to_numpy(np.int64)

    @cached_property
    def line_count(self) -> np.ndarray:
        return self.capture.lines["event_count"].to_numpy(np.int64)

    @cached_property
    def line_ids(self) -> np.ndarray:
        return self.capture.lines["id"].to_numpy(np.int64)

    @cached_property
    def line_names(self) -> np.ndarray:
        return self.capture.lines["name"].to_numpy(object)

    @cached_property
    def line_planes(self) -> np.ndarray:
        return self.capture.lines["plane"].to_numpy(np.int64)

    @cached_property
    def derived_lines(self) -> np.ndarray:
        """Per line: is its id one of XProf's derived ("fake") line ids."""
        as_int32 = ((self.line_ids + 2**31) % 2**32) - 2**31
        return (as_int32 >= schema.DERIVED_MIN) & (as_int32 <= schema.DERIVED_MAX)

    @cached_property
    def _lines_by_plane(self) -> tuple[np.ndarray, np.ndarray]:
        """(lines ordered by plane, first position of each plane in it): a plane's lines without a scan of
        every line, which per plane made the planes of a wide capture quadratic."""
        order = np.argsort(self.line_planes, kind="stable")
        n_planes = max(len(self.capture.planes), int(self.line_planes.max()) + 1 if len(order) else 0)
        starts = np.zeros(n_planes + 1, np.int64)
        np.cumsum(np.bincount(self.line_planes, minlength=n_planes), out=starts[1:])
        return order, starts

    @cached_property
    def line_timestamp_ps(self) -> np.ndarray:
        """Per line: its timestamp, in ps (events' offsets are relative to it)."""
        return self.capture.lines["timestamp_ns"].to_numpy(np.int64) * 1000

    def lines_of_plane(self, plane: int) -> np.ndarray:
        """The plane's lines, in stored order."""
        order, starts = self._lines_by_plane
        if plane < 0 or plane + 1 >= len(starts):
            return np.zeros(0, np.int64)
        return order[starts[plane]:starts[plane + 1]]

    def events_of_lines(self, lines: np.ndarray) -> np.ndarray:
        """Rows of the events of `lines`, line after line, in stored order."""
        if len(lines) == 0:
            return np.zeros(0, np.int64)
        first = self.line_first[lines]
        count = self.line_count[lines]
        return np.repeat(first - np.concatenate([[0], np.cumsum(count)[:-1]]), count) + np.arange(count.sum())

    # --- metadata -----------------------------------------------------------------
    @cached_property
    def md_names(self) -> np.ndarray:
        return self.capture.event_metadata["name"].to_numpy(object)

    @cached_property
    def md_display_names(self) -> np.ndarray:
        return self.capture.event_metadata["display_name"].to_numpy(object)

    @cached_property
    def md_types(self) -> np.ndarray:
        """Event type code of each metadata row, from its name (xspace.md §2.7)."""
        out = np.full(len(self.md_names), schema.UNTYPED, dtype=np.int8)
        for row, name in enumerate(self.md_names):
            code = schema.NAMED_EVENT_TYPES.get(name)
            if code is None:
                if name in schema.OTHER_HOST_EVENT_NAMES:
                    code = schema.OTHER
                else:
                    category = parse_tf_op_fullname(name).category
                    code = (
                        schema.TF_OP_RUN if category == TENSORFLOW
                        else schema.ITERATOR if category == TF_DATA
                        else schema.UNTYPED
                    )
            out[row] = code
        return out

    def mds_of(self, rows: np.ndarray) -> np.ndarray:
        """The metadata rows of the events `rows`, each once, ascending (`np.unique(md[rows])`, by
        counting: metadata rows are few)."""
        return np.flatnonzero(np.bincount(self.md[rows], minlength=len(self.md_names)))

    @cached_property
    def md_tf_op(self) -> list:
        """Parsed `ParseTfOpFullname` of each metadata name."""
        return [parse_tf_op_fullname(name) for name in self.md_names]

    @cached_property
    def types(self) -> np.ndarray:
        """Per event: its metadata's type (KernelLaunch/Execute not included)."""
        return self.md_types[self.md]

    def names_of(self, rows) -> np.ndarray:
        """The names of events `rows` (not kept for every event: 8 bytes each)."""
        return self.md_names[self.md[rows]]

    # --- event stats --------------------------------------------------------------------
    @cached_property
    def _stat_buckets(self) -> tuple[np.ndarray, np.ndarray]:
        """Event stat rows grouped by stat name, once (a counting sort), so that
        each stat column costs only its own rows."""
        stats = self.capture.event_stats
        order = np.empty(len(stats), np.int32 if len(stats) < 2**31 else np.int64)
        start = bucket_by_key(stats.key, len(self.capture.strings), order)
        return order, start

    def stat_positions(self, name: str) -> np.ndarray:
        """Positions in `capture.event_stats` of the stats named `name`, in file order."""
        sid = self.capture.string_id(name)
        if sid == NO_STRING or len(self.capture.event_stats) == 0:
            return np.zeros(0, np.int64)
        order, start = self._stat_buckets
        return order[start[sid]:start[sid + 1]]

    def _rows(self, name: str) -> StatTable:
        stats = self.capture.event_stats
        rows = self.stat_positions(name)
        return StatTable(stats.owner[rows], stats.key[rows], stats.kind[rows], stats.raw[rows], stats.str_id[rows])

    def forget_stats(self) -> None:
        """Drop the cached stat columns (each holds a value per event): a section that needs one
        again extracts it again. Between the host stage's sections, whose stats hardly overlap."""
        self._int_cache.clear()
        self._str_cache.clear()
        self._double_cache.clear()

    def _pick(self, name: str, rows: np.ndarray, last: bool) -> tuple[np.ndarray, np.ndarray]:
        """For each of `rows` (event rows): whether it carries a stat named `name`, and the position in
        `capture.event_stats` of its first such stat (`last`: of its last one; any position where
        it has none).

        Stats are stored in file order, so each event's are one run of its owner's rows: only the
        owners of this stat's rows are read, and the other columns at the positions picked.
        """
        positions = self.stat_positions(name)
        rows = np.asarray(rows, dtype=np.int64)
        if len(positions) == 0 or len(rows) == 0:
            return np.zeros(len(rows), bool), np.zeros(len(rows), np.int64)
        owner = self.capture.event_stats.owner[positions]
        if len(owner) == len(rows) and np.array_equal(owner, rows):
            # Each of `rows` carries the stat once, in this order (a memory event's dozen stats, read for
            # every memory event): the positions are the answer, first and last alike. Two searches per
            # stat were 0.36 s of the ×200 benchmark capture's memory profile.
            return np.ones(len(rows), bool), positions
        first = search_owners(owner, rows, side="left")
        present = first < len(owner)
        present[present] = owner[first[present]] == rows[present]
        if last:
            first = search_owners(owner, rows, side="right") - 1
        return present, positions[np.where(present, first, 0)]

    def int_stat_at(self, name: str, rows: np.ndarray, uint_ok: bool = True,
                    last: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """`int_stat(name, uint_ok, last)` at `rows` only, without a column for every event: for a
        stat read on a few events (memory events, kernels)."""
        present, pick = self._pick(name, rows, last)
        values = np.zeros(len(present), np.int64)
        if present.any():
            stats = self.capture.event_stats
            kind = stats.kind[pick]
            ints = (kind == KIND_INT64) | (kind == KIND_UINT64) if uint_ok else kind == KIND_INT64
            values = np.where(present & ints, stats.raw[pick], 0)
        return values, present

    def str_stat_at(self, name: str, rows: np.ndarray, last: bool = False) -> np.ndarray:
        """`str_stat(name, last)` at `rows` only (see `int_stat_at`)."""
        present, pick = self._pick(name, rows, last)
        out = np.full(len(present), NO_STRING, np.int32)
        if present.any():
            stats = self.capture.event_stats
            kind = stats.kind[pick]
            is_text = present & ((kind == KIND_STR) | (kind == KIND_REF))
            out[is_text] = stats.str_id[pick[is_text]]
        return out

    def double_stat_at(self, name: str, rows: np.ndarray, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """`double_stat(name, last)` at `rows` only (see `int_stat_at`)."""
        present, pick = self._pick(name, rows, last)
        values = np.zeros(len(present), np.float64)
        if present.any():
            stats = self.capture.event_stats
            is_double = present & (stats.kind[pick] == KIND_DOUBLE)
            values[is_double] = stats.raw[pick[is_double]].view(np.float64)
        return values, present

    def has_stat(self, name: str) -> bool:
        return self.capture.string_id(name) != NO_STRING and len(self._rows(name)) > 0

    def int_stat(self, name: str, uint_ok: bool = True, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(values, present) per event. `uint_ok=False` reads XProf's IntValue (int64
        only; another kind is present but reads 0). `last`: see the module docstring."""
        key = (name, uint_ok, last)
        if key not in self._int_cache:
            rows = self._rows(name)
            values = np.zeros(self.n, np.int64)
            present = np.zeros(self.n, bool)
            if len(rows):
                kinds = (rows.kind == KIND_INT64) | (rows.kind == KIND_UINT64) if uint_ok else rows.kind == KIND_INT64
                _scatter(values, rows.owner, np.where(kinds, rows.raw, 0), last)
                present[rows.owner] = True
            self._int_cache[key] = (values, present)
        return self._int_cache[key]

    def str_stat(self, name: str, last: bool = False) -> np.ndarray:
        """Interned string id per event (string or resolved ref value); NO_STRING otherwise."""
        key = (name, last)
        if key not in self._str_cache:
            rows = self._rows(name)
            out = np.full(self.n, NO_STRING, np.int32)
            if len(rows):
                is_text = (rows.kind == KIND_STR) | (rows.kind == KIND_REF)
                _scatter(out, rows.owner, np.where(is_text, rows.str_id, NO_STRING), last)
            self._str_cache[key] = out
        return self._str_cache[key]

    def stat_present(self, name: str) -> np.ndarray:
        return self.int_stat(name)[1]

    def double_stat(self, name: str, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """XProf's DoubleValue: the double case only (0.0 otherwise)."""
        key = (name, last)
        if key not in self._double_cache:
            rows = self._rows(name)
            values = np.zeros(self.n, np.float64)
            present = np.zeros(self.n, bool)
            if len(rows):
                _scatter(values, rows.owner, np.where(rows.kind == KIND_DOUBLE, rows.raw, 0).view(np.float64), last)
                present[rows.owner] = True
            self._double_cache[key] = (values, present)
        return self._double_cache[key]

    @cached_property
    def _string_array(self) -> np.ndarray:
        """The interned strings with a trailing '' that NO_STRING maps to."""
        table = np.empty(len(self.capture.strings) + 1, dtype=object)
        table[:-1] = self.capture.strings
        table[-1] = ""
        return table

    def strings(self, ids: np.ndarray) -> np.ndarray:
        """Interned ids → Python strings ('' for NO_STRING)."""
        table = self._string_array
        return table[np.where(ids < 0, len(table) - 1, ids)]

    # --- metadata stats -------------------------------------------------------------------
    def md_int_stat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        rows = self.capture.stat_rows(self.capture.metadata_stats, name)
        n = len(self.md_names)
        values = np.zeros(n, np.int64)
        present = np.zeros(n, bool)
        if len(rows):
            ints = (rows.kind == KIND_INT64) | (rows.kind == KIND_UINT64)
            values[rows.owner[::-1]] = np.where(ints, rows.raw, 0)[::-1]
            present[rows.owner] = True
        return values, present

    def md_str_stat(self, name: str) -> np.ndarray:
        rows = self.capture.stat_rows(self.capture.metadata_stats, name)
        out = np.full(len(self.md_names), NO_STRING, np.int32)
        if len(rows):
            is_text = (rows.kind == KIND_STR) | (rows.kind == KIND_REF)
            out[rows.owner[::-1]] = np.where(is_text, rows.str_id, NO_STRING)[::-1]
        return out
