"""Where the trace is cut into chunk files.

Chunks hold whole events: an event belongs to the chunk in whose time range it
starts (a cut at time t puts events starting before t in one chunk and the
rest, t included, in the next), so no event is lost or written twice. Cuts go
on step starts where the capture has steps, packing as many whole steps as the
caps allow; a step larger than a chunk, or a capture without steps, is cut on
time. Events that share a start time are never split (a chunk may then exceed
the event cap, the only way to keep them whole).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_CHUNK_EVENTS = 1_000_000
MAX_CHUNK_BYTES = 100_000_000


@dataclass
class ChunkPlan:
    order: np.ndarray  # exported rows by start time
    start_ps: np.ndarray  # their start times (sorted)
    bounds: list[tuple[int, int]]  # [lo, hi) into `order`, one per chunk
    cuts_ps: list[int]  # time of each interior cut

    def rows(self, k: int) -> np.ndarray:
        """The rows of chunk k, in row order (events grouped by line, as in the capture)."""
        lo, hi = self.bounds[k]
        return np.sort(self.order[lo:hi])

    def __len__(self) -> int:
        return len(self.bounds)


def _time_cut(ts: np.ndarray, lo: int, hi_cap: int) -> int:
    """The last index ≤ hi_cap that does not split events starting at the same time."""
    hi = int(np.searchsorted(ts, ts[hi_cap], side="left"))
    if hi <= lo:  # lo..hi_cap all start together: keep them whole, past the cap
        hi = int(np.searchsorted(ts, ts[lo], side="right"))
    return hi


def plan_chunks(rows: np.ndarray, start_ps: np.ndarray, row_bytes: np.ndarray, step_starts_ps: np.ndarray,
                max_events: int = MAX_CHUNK_EVENTS, max_bytes: int = MAX_CHUNK_BYTES) -> ChunkPlan:
    """Cut `rows` (with their start times and estimated JSON bytes) into chunks."""
    if max_events < 1 or max_bytes < 1:
        raise ValueError("chunk caps must be positive")
    order_idx = np.argsort(start_ps, kind="stable")
    order = rows[order_idx]
    ts = start_ps[order_idx]
    n = len(ts)
    if n == 0:
        return ChunkPlan(order, ts, [], [])
    if n <= max_events and int(row_bytes.sum(dtype=np.int64)) <= max_bytes:
        return ChunkPlan(order, ts, [(0, n)], [])  # one chunk holds every row: no cut to look for
    cum_bytes = np.cumsum(row_bytes[order_idx].astype(np.int64))
    step_pos = np.unique(np.searchsorted(ts, np.unique(step_starts_ps), side="left"))
    step_pos = step_pos[(step_pos > 0) & (step_pos < n)]

    bounds: list[tuple[int, int]] = []
    cuts: list[int] = []
    lo = 0
    while lo < n:
        before = int(cum_bytes[lo - 1]) if lo else 0
        hi_cap = min(lo + max_events, int(np.searchsorted(cum_bytes, before + max_bytes, side="right")))
        hi_cap = max(hi_cap, lo + 1)
        if hi_cap >= n:
            bounds.append((lo, n))
            break
        # The last step start that keeps this chunk within its caps, if any.
        k = int(np.searchsorted(step_pos, hi_cap, side="right")) - 1
        hi = int(step_pos[k]) if k >= 0 and step_pos[k] > lo else _time_cut(ts, lo, hi_cap)
        if hi >= n:
            bounds.append((lo, n))
            break
        bounds.append((lo, hi))
        cuts.append(int(ts[hi]))
        lo = hi
    return ChunkPlan(order, ts, bounds, cuts)


def chunk_steps(plan: ChunkPlan, k: int, step_starts: np.ndarray, step_ends: np.ndarray,
                step_numbers: np.ndarray) -> tuple[int | None, int | None]:
    """First and last step of chunk k: the steps starting in its time range, else the step it lies in."""
    if len(step_starts) == 0:
        return None, None
    t0 = plan.cuts_ps[k - 1] if k > 0 else np.iinfo(np.int64).min
    t1 = plan.cuts_ps[k] if k < len(plan.cuts_ps) else np.iinfo(np.int64).max
    inside = np.flatnonzero((step_starts >= t0) & (step_starts < t1))
    if len(inside):
        return int(step_numbers[inside[0]]), int(step_numbers[inside[-1]])
    lo = plan.start_ps[plan.bounds[k][0]]
    running = np.flatnonzero((step_starts <= lo) & (step_ends > lo))
    if len(running):
        return int(step_numbers[running[-1]]), int(step_numbers[running[-1]])
    return None, None
