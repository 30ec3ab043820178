"""Per-event stat values as dense columns (one entry per event row).

XProf reads a stat through `XEventVisitor`, which looks at the event's own
stats and then at its metadata's stats. These helpers do the same for a
whole capture at once, so tools filter and aggregate with numpy instead of
visiting events one by one. Where an event carries a stat twice, the later
one wins (XProf's `ForEachStat` overwrite order).
"""

from __future__ import annotations

import numpy as np

from reportgen.capture import KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64, HostCapture, StatTable

NO_STRING = -1


def _select(capture: HostCapture, stats: StatTable, name: str) -> StatTable:
    sid = capture.string_id(name)
    return stats.select(stats.key == sid) if sid >= 0 else stats.select(np.zeros(len(stats), dtype=bool))


def _scatter(n: int, owner: np.ndarray, values: np.ndarray, fill, dtype) -> tuple[np.ndarray, np.ndarray]:
    has = np.zeros(n, dtype=bool)
    out = np.full(n, fill, dtype=dtype)
    has[owner] = True
    out[owner] = values  # numpy assigns in order: the last duplicate wins
    return has, out


def _event_and_metadata(capture: HostCapture, name: str):
    """(event rows, StatTable) of `name`: event stats, then metadata stats for events without one."""
    n = len(capture.events)
    own = _select(capture, capture.event_stats, name)
    md_stats = _select(capture, capture.metadata_stats, name)
    if len(md_stats) == 0:
        return own.owner, own
    md_rows = capture.events["md"].to_numpy()
    # Metadata row -> position of its (last) stat.
    md_pos = np.full(len(capture.event_metadata), -1, dtype=np.int64)
    md_pos[md_stats.owner] = np.arange(len(md_stats))
    has_own = np.zeros(n, dtype=bool)
    has_own[own.owner] = True
    inherit = np.flatnonzero(~has_own & (md_pos[md_rows] >= 0))
    pos = md_pos[md_rows[inherit]]
    merged = StatTable(
        np.concatenate([own.owner, inherit]),
        np.concatenate([own.key, md_stats.key[pos]]),
        np.concatenate([own.kind, md_stats.kind[pos]]),
        np.concatenate([own.raw, md_stats.raw[pos]]),
        np.concatenate([own.str_id, md_stats.str_id[pos]]),
    )
    return merged.owner, merged


def int_column(capture: HostCapture, name: str, *, accept_uint: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(has stat, value) per event.

    `IntValue` semantics by default: only int64 values are read, a stat of
    another kind is present but reads 0. `accept_uint=True` gives
    `IntOrUintValue` (uint64 bit patterns kept as int64).
    """
    owner, st = _event_and_metadata(capture, name)
    ok = (st.kind == KIND_INT64) | ((st.kind == KIND_UINT64) if accept_uint else False)
    return _scatter(len(capture.events), owner, np.where(ok, st.raw, 0), 0, np.int64)


def double_column(capture: HostCapture, name: str) -> tuple[np.ndarray, np.ndarray]:
    """`DoubleValue` semantics: the double when stored as one, else 0.0."""
    owner, st = _event_and_metadata(capture, name)
    values = np.where(st.kind == KIND_DOUBLE, st.raw, 0).view(np.float64)
    return _scatter(len(capture.events), owner, values, 0.0, np.float64)


def string_column(capture: HostCapture, name: str) -> tuple[np.ndarray, np.ndarray]:
    """`StrOrRefValue` semantics: interned string id per event (NO_STRING when absent)."""
    owner, st = _event_and_metadata(capture, name)
    ok = (st.kind == KIND_STR) | (st.kind == KIND_REF)
    return _scatter(len(capture.events), owner, np.where(ok, st.str_id, NO_STRING), NO_STRING, np.int64)


__all__ = ["double_column", "int_column", "string_column", "NO_STRING"]
