"""Which event encloses which on the same thread, as XProf's event forest nests them.

Walking a line's events in stored order (start ascending, longer first), an
event's parent is the nearest still-open earlier event whose span includes
it, ends inclusive; events that do not fit are closed. Events flagged async
(`_a`) are neither nested nor parents (TSL `ConnectIntraThread`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _parents(line, begin, end, skip):  # pragma: no cover - compiled
    n = len(begin)
    parent = np.full(n, -1, np.int64)
    stack = np.empty(n + 1, np.int64)
    top = 0
    for i in range(n):
        if i > 0 and line[i] != line[i - 1]:
            top = 0
        if skip[i]:
            continue
        while top > 0:
            p = stack[top - 1]
            if begin[p] <= begin[i] and end[i] <= end[p]:
                parent[i] = p
                break
            top -= 1
        stack[top] = i
        top += 1
    return parent


def nesting_parents(line: np.ndarray, begin: np.ndarray, end: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Parent position of every event (-1 for none). Inputs are aligned arrays
    of events grouped by line, each line in stored order."""
    if len(begin) == 0:
        return np.zeros(0, np.int64)
    return _parents(
        np.ascontiguousarray(line, dtype=np.int64),
        np.ascontiguousarray(begin, dtype=np.int64),
        np.ascontiguousarray(end, dtype=np.int64),
        np.ascontiguousarray(skip, dtype=np.bool_),
    )
