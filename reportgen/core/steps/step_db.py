"""The step database: one row per step (and core) with its time breakdown.

From step events (docs/xprof/op_stats.md §5.6–5.8): the step time is the
longest host or device marker; typed spans are made non-overlapping (the
higher-priority type wins) and their overlap with the step time is summed
per type, the rest of the step being "unknown". Steps without markers or
that are not well formed (no host compute on CPU, no device compute with a
device) are dropped, as XProf does.

`StepDb.steps` columns: step_num, core, name, begin_ps, duration_ps, and for
generic (CPU/GPU) steps one column per event type (`t0` … `t17`, picoseconds,
see `step_events` for the type numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from reportgen.core.events.nesting import sweep_step_spans
from reportgen.core.frames import empty_frame, first_appearance_groups
from reportgen.core.steps.events import (
    DEVICE_COMPUTE_16,
    DEVICE_COMPUTE_32,
    DEVICE_MARKER,
    HOST_COMPUTE,
    N_EVENT_TYPES,
    UNKNOWN_TIME,
    StepEvents,
    row_count,
)

TYPE_COLUMNS = [f"t{i}" for i in range(N_EVENT_TYPES)]
DEFAULT_GPU_CORE = 1  # XProf's kDefaultGpuLocalCoreId: every generic step lives on core 1


@empty_frame
def empty_steps() -> pd.DataFrame:
    cols = {"step_num": np.zeros(0, np.int64), "core": np.zeros(0, np.int64), "name": np.zeros(0, object),
            "begin_ps": np.zeros(0, np.int64), "duration_ps": np.zeros(0, np.int64)}
    cols.update({c: np.zeros(0, np.int64) for c in TYPE_COLUMNS})
    return pd.DataFrame(cols)


@dataclass
class StepDb:
    """Steps of a host (or a run once combined), in step order.

    kind: "generic" (CPU/GPU: `t*` columns) or "tpu" (`category_ps` per step and core).
    category_ps: for TPU steps, (step_num, core) → {category: ps}.
    """

    steps: pd.DataFrame = field(default_factory=empty_steps)
    kind: str = "generic"
    category_ps: dict = field(default_factory=dict)
    use_incomplete_step: bool = False
    empty_intersect: bool = False
    num_steps_dropped: int = 0

    # A StepDb's steps are not changed once it is made: what is read from them is kept (a pod's run combines
    # thousands of hosts' step tables, once for each step rule the pages use).
    @cached_property
    def step_numbers(self) -> list[int]:
        return list(dict.fromkeys(self.steps["step_num"].tolist()))

    @cached_property
    def step_of_row(self) -> np.ndarray:
        """Each row's step, numbered in order of first appearance (the order of `step_numbers`)."""
        return first_appearance_groups(self.steps["step_num"].to_numpy(np.int64))[1]

    @cached_property
    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Per step, in order of first appearance: (begin, end) over its cores (0, 0 when begin ≥ end)."""
        s = self.steps
        if s.empty:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # In numpy (a pandas groupby per host cost more than a tiny host's whole combine).
        begin = s["begin_ps"].to_numpy(np.int64)
        end = begin + s["duration_ps"].to_numpy(np.int64)
        group = self.step_of_row
        steps = int(group.max()) + 1
        b = np.full(steps, np.iinfo(np.int64).max)
        e = np.full(steps, np.iinfo(np.int64).min)
        np.minimum.at(b, group, begin)
        np.maximum.at(e, group, end)
        empty = b >= e
        return np.where(empty, 0, b), np.where(empty, 0, e)

    def __len__(self) -> int:
        return len(self.step_numbers)

    def drop_first_and_last(self, threshold: int = 5) -> StepDb:
        """XProf 2.24.2's default (`maybe_drop_incomplete_steps`): with more than
        `threshold` steps, the first and the last are dropped."""
        numbers = self.step_numbers
        if len(numbers) <= threshold:
            return self
        keep = set(numbers[1:-1])
        return StepDb(self.steps[self.steps["step_num"].isin(keep)].reset_index(drop=True), self.kind,
                      {k: v for k, v in self.category_ps.items() if k[0] in keep}, self.use_incomplete_step,
                      self.empty_intersect, self.num_steps_dropped)


def _longest_marker(group: np.ndarray, begin_of: np.ndarray, length: np.ndarray,
                    groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group of `groups` (sorted): (begin, duration) of its longest marker (markers' `group`,
    `begin_of`, `length`), the first of equals; (0, 0) where it has none."""
    begin = np.zeros(len(groups), np.int64)
    duration = np.zeros(len(groups), np.int64)
    if len(group) == 0 or len(groups) == 0:
        return begin, duration
    order = np.lexsort((np.arange(len(group)), -length, group))
    sorted_group = group[order]
    first = np.ones(len(order), bool)
    first[1:] = sorted_group[1:] != sorted_group[:-1]
    pick = order[first]
    at = np.minimum(np.searchsorted(groups, group[pick]), len(groups) - 1)
    known = groups[at] == group[pick]
    begin[at[known]] = begin_of[pick[known]]
    duration[at[known]] = length[pick[known]]
    return begin, duration


def step_times(events: StepEvents) -> tuple[np.ndarray, np.ndarray]:
    """Per group: XProf's StepTime (begin, end) from the longest host and device markers (in numpy: a
    pandas sort and reindex per kind cost ≈ 4 ms however few the steps)."""
    groups = events.groups
    m = events.markers
    if row_count(m) == 0:
        return np.zeros(len(groups), np.int64), np.zeros(len(groups), np.int64)
    on_device = m["kind"] == DEVICE_MARKER
    group = m["group"].astype(np.int64, copy=False)
    begin = m["begin"].astype(np.int64, copy=False)
    length = m["duration"].astype(np.int64, copy=False)
    on_host = ~on_device
    hb, hd = _longest_marker(group[on_host], begin[on_host], length[on_host], groups)
    db, dd = _longest_marker(group[on_device], begin[on_device], length[on_device], groups)
    he, de = hb + hd, db + dd
    device_empty = (db == 0) & (de == 0)
    host_includes = (hb <= db) & (de <= he)
    use_host = device_empty | host_includes
    return np.where(use_host, hb, db), np.where(use_host, he, de)


def generic_step_db(events: StepEvents, has_device: bool) -> tuple[StepDb, int, int]:
    """(step DB, compute_16bit_ps, compute_32bit_ps) for CPU/GPU step events."""
    groups = events.groups
    if len(groups) == 0:
        return StepDb(), 0, 0
    begin, end = step_times(events)
    spans = events.spans
    gidx = np.searchsorted(groups, spans["group"].astype(np.int64, copy=False))
    k = len(gidx)
    seg = np.concatenate([gidx, gidx])
    time = np.concatenate([spans["begin"], spans["end"]]).astype(np.int64, copy=False)
    is_start = np.concatenate([np.ones(k, bool), np.zeros(k, bool)])
    etype = np.concatenate([spans["type"].astype(np.int64)] * 2)
    order = np.lexsort((-etype, is_start, time, seg))
    seg_start = np.searchsorted(seg[order], np.arange(len(groups) + 1))
    type_ps, present, span_ps = sweep_step_spans(seg_start, time[order], is_start[order], etype[order], begin, end,
                                                 N_EVENT_TYPES)
    duration = end - begin
    total = type_ps.sum(axis=1)
    short = total < duration
    type_ps[short, UNKNOWN_TIME] += duration[short] - total[short]
    present[short, UNKNOWN_TIME] = True
    if has_device:
        well_formed = present[:, DEVICE_COMPUTE_16] | present[:, DEVICE_COMPUTE_32]
    else:
        well_formed = present[:, HOST_COMPUTE]
    keep = well_formed & (duration > 0)
    # The int64 columns as one block, then the name: a frame from 23 separate columns cost ≈ 0.1 ms more,
    # a third of a tiny host's step database.
    numbers = np.empty((int(keep.sum()), 4 + N_EVENT_TYPES), np.int64)
    numbers[:, 0], numbers[:, 1] = groups[keep], DEFAULT_GPU_CORE
    numbers[:, 2], numbers[:, 3], numbers[:, 4:] = begin[keep], duration[keep], type_ps[keep]
    steps = pd.DataFrame(numbers, columns=["step_num", "core", "begin_ps", "duration_ps", *TYPE_COLUMNS], copy=False)
    steps.insert(2, "name", np.array([events.names.get(int(g), "") for g in groups[keep]], object))
    return StepDb(steps=steps), int(span_ps[:, DEVICE_COMPUTE_16].sum()), int(span_ps[:, DEVICE_COMPUTE_32].sum())
