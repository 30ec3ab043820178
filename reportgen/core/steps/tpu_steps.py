"""TPU steps (docs/xprof/op_stats.md §5.4, §5.7 TPU path).

Each TensorCore's `Steps` line gives device step markers (consecutive events
of one group merged, as XProf's grouping does); its op line gives, per
step, an op database whose categories make the step breakdown. Steps must
appear on every core (intersection). A TPU capture without a `Steps` line
(e.g. an inference server) has no steps, as in XProf.

Not reproduced: XProf's host-input fix-up of TPU idle time
(`MayFixTpuStepAnalysis`, §5.9), which needs steps fed from the host.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reportgen.core.events import schema
from reportgen.core.events.grouping import Grouping
from reportgen.core.events.nesting import line_parents, self_times
from reportgen.core.events.table import EventTable
from reportgen.core.ops.device_db import tpu_op_metrics_frame
from reportgen.core.ops.op_metrics import with_idle
from reportgen.core.steps.events import (
    DEVICE_MARKER,
    Columns,
    StepEvents,
    combine_intersect,
    device_timespans,
    row_count,
)
from reportgen.core.steps.step_db import StepDb, empty_steps


def _merged_step_markers(table: EventTable, grouping: Grouping, line: int, core: int) -> Columns:
    rows = table.events_of_lines(np.array([line]))
    group = grouping.group_id[rows]
    begin, duration = device_timespans(table, rows)
    frame = pd.DataFrame({"group": group, "begin": begin, "end": begin + duration, "name": table.names_of(rows)})
    if (group >= 0).any():
        # Consecutive events of one group are one step; ungrouped events are dropped.
        run = np.concatenate([[True], group[1:] != group[:-1]]).cumsum()
        frame = frame.assign(run=run)[group >= 0]
        frame = frame.groupby("run", sort=False).agg(group=("group", "first"), begin=("begin", "min"),
                                                     end=("end", "max"), name=("name", "first"))
    frame = frame[frame["group"] >= 0]
    return {"group": frame["group"].to_numpy(np.int64), "kind": np.full(len(frame), DEVICE_MARKER, np.int8),
            "core": np.full(len(frame), core, np.int64), "begin": frame["begin"].to_numpy(np.int64),
            "duration": (frame["end"] - frame["begin"]).to_numpy(np.int64), "name": frame["name"].to_numpy(object)}


def _core_step_events(table: EventTable, grouping: Grouping, plane: int) -> StepEvents:
    core = int(table.capture.planes["id"].iloc[plane])
    lines = table.lines_of_plane(plane)
    names = table.line_names[lines]
    step_lines = lines[names == schema.STEP_LINE]
    op_lines = lines[np.isin(names, schema.OP_LINE_NAMES)]
    markers = (_merged_step_markers(table, grouping, int(step_lines[-1]), core) if len(step_lines)
               else StepEvents().markers)
    rows = table.events_of_lines(op_lines)
    rows = rows[grouping.group_id[rows] >= 0]
    if len(rows) == 0 or row_count(markers) == 0:
        # Steps need both ops and markers on the core (XProf intersects them).
        return StepEvents()
    begin, duration = device_timespans(table, rows)
    lines_of = table.line[rows]
    new_line = np.concatenate([[True], lines_of[1:] != lines_of[:-1]])
    parent = line_parents(np.arange(len(rows)), new_line, begin, begin + duration, np.zeros(len(rows), bool))
    self_ps = self_times(parent, duration)
    group = grouping.group_id[rows]
    frame = tpu_op_metrics_frame(table, rows, begin, duration, self_ps, step=group)
    core_dbs = {(int(g), core): part.drop(columns="step") for g, part in frame.groupby("step", sort=False)}
    events = StepEvents(groups=np.unique(group), markers=markers, core_dbs=core_dbs)
    return events.restricted(np.unique(markers["group"]))


def tpu_step_db(table: EventTable, grouping: Grouping, planes: list[int]) -> StepDb:
    cores = [p for p in planes if schema.TPU_CORE_RE.match(table.plane_names[p])]
    events = combine_intersect([_core_step_events(table, grouping, p) for p in cores])
    if events.empty:
        return StepDb(kind="tpu")
    rows, category_ps = [], {}
    marker_group, marker_begin, marker_duration = (events.markers[c] for c in ("group", "begin", "duration"))
    for g in events.groups:
        mine = np.flatnonzero(marker_group == g)
        if len(mine) == 0:
            continue
        longest = mine[np.argmax(marker_duration[mine])]  # the first of the longest
        begin, duration = int(marker_begin[longest]), int(marker_duration[longest])
        if duration == 0:
            continue
        for (group, core), metrics in events.core_dbs.items():
            if group != g:
                continue
            full, _, _ = with_idle(metrics, duration)
            category_ps[(int(g), core)] = full.groupby("category")["self_time_ps"].sum().to_dict()
            rows.append({"step_num": int(g), "core": core, "name": events.names.get(int(g), ""),
                         "begin_ps": begin, "duration_ps": duration})
    steps = pd.DataFrame(rows) if rows else empty_steps()
    return StepDb(steps=steps, kind="tpu", category_ps=category_ps)
