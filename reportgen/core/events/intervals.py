"""Unions of time intervals, vectorised: busy time of a line or a device without counting overlaps twice."""

from __future__ import annotations

import numpy as np


def run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal consecutive `values` begins (the first at 0; none when empty)."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    return np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1])


def union_intervals(start: np.ndarray, end: np.ndarray, group: np.ndarray):
    """Merge overlapping [start, end) intervals within each group.

    Inputs sorted by (group, start). Returns merged (group, start, end).
    """
    if len(start) == 0:
        return group, start, end
    runs = run_starts(group)
    running_end = np.empty_like(end)
    for a, b in zip(runs, [*runs[1:], len(end)]):  # one turn per group, never per interval
        np.maximum.accumulate(end[a:b], out=running_end[a:b])
    prev_end = np.concatenate([[np.iinfo(np.int64).min], running_end[:-1]])
    new_group = np.zeros(len(start), bool)
    new_group[runs] = True
    opens = new_group | (start > prev_end)
    # A merged interval ends where its group's running end stands at its last member.
    last = np.concatenate([np.flatnonzero(opens)[1:] - 1, [len(start) - 1]])
    return group[opens], start[opens], running_end[last]


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals in any order, as sorted disjoint intervals."""
    order = np.argsort(start, kind="stable")
    _, s, e = union_intervals(start[order], end[order], np.zeros(len(order), np.int64))
    return s, e


def overlap_length(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> int:
    """Total length of disjoint sorted intervals inside [lo, hi) (the ones that reach it found by bisection)."""
    a, b = np.searchsorted(end, lo, side="right"), np.searchsorted(start, hi, side="left")
    return int(np.clip(np.minimum(end[a:b], hi) - np.maximum(start[a:b], lo), 0, None).sum())


def overlapping(start: np.ndarray, end: np.ndarray, windows_start: np.ndarray, windows_end: np.ndarray) -> np.ndarray:
    """Per interval [start, end): whether it overlaps one of the disjoint windows (sorted by start)."""
    last = np.searchsorted(windows_start, end, side="left") - 1  # the last window starting before the end
    ok = last >= 0
    return ok & (windows_end[np.maximum(last, 0)] > start)


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of the intersection of two unions of disjoint intervals: |A| + |B| − |A ∪ B|."""
    a_len = int((a[1] - a[0]).sum())
    b_len = int((b[1] - b[0]).sum())
    if a_len == 0 or b_len == 0:
        return 0
    s, e = merged(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return a_len + b_len - int((e - s).sum())
