"""Host op metrics database from the `/host:CPU` plane (docs/xprof/op_stats.md §4.3).

Framework ops on host threads are events whose name parses as a TF/JAX op,
tf.data iterator or memcpy (user TraceMes are not ops), input-pipeline stage
events (`_ipl_stage_id` + `_ipl_stage_cat`), and any event's `tf_op` stat.
Per thread (line), their begin/end activities are replayed on XProf's op
stack to get self time; each thread's span minus its op time is its IDLE
time. Threads are summed, so the host total time is the sum of per-thread
spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reportgen.capture import NO_STRING
from reportgen.core.events.intervals import run_starts
from reportgen.core.events.nesting import replay_op_stack
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import UNKNOWN, is_infeed_enqueue_type, parse_tf_op_fullname
from reportgen.core.frames import first_appearance_groups
from reportgen.core.ops.op_metrics import IDLE, OpMetricsDb, combine_dbs, idle_row, metrics_frame


def _op_catalog(table: EventTable, rows: np.ndarray):
    """Per event row: op index into a catalog of (hlo_module_id, name, type), or -1.

    Returns (op_of_event, op_of_tf_op_stat, catalog: its (hlo_module_id, name, type) keys in index order)."""
    catalog: dict[tuple[int, str, str], int] = {}

    def index(key: tuple[int, str, str]) -> int:
        if key not in catalog:
            catalog[key] = len(catalog)
        return catalog[key]

    # Ops named by their metadata: one parse per metadata row.
    md_op = np.full(len(table.md_names), -1, np.int64)
    for md in table.mds_of(rows):
        name = table.md_names[md]
        if not name:
            continue
        op = table.md_tf_op[md]
        if op.category != UNKNOWN:
            md_op[md] = index((0, op.name, op.type))
    op_of_event = md_op[table.md[rows]]

    # Input-pipeline stages are keyed by stage id, named after the event. XProf keeps stage ids and
    # metadata ids in one map (first sight wins), so an event whose metadata id equals a stage id
    # seen earlier is taken for that stage, and the other way round.
    stage_id, staged = table.int_stat_at("_ipl_stage_id", rows, uint_ok=False)
    if staged.any():
        has_cat = table.int_stat_at("_ipl_stage_cat", rows)[1]
        metadata_id = table.capture.events["metadata_id"].to_numpy(np.int64)[rows]
        key = np.where(staged, stage_id, metadata_id)
        named = table.names_of(rows) != ""
        defines = np.flatnonzero((staged & has_cat & named) | (~staged & (op_of_event >= 0)))
        first = pd.DataFrame({"key": key[defines], "pos": defines}).drop_duplicates("key")
        pos = first["pos"].to_numpy(np.int64)
        cats = table.strings(table.str_stat_at("_ipl_stage_cat", rows[pos]))
        names = table.names_of(rows[pos])
        key_op = [index((int(key[p]), str(names[i]), str(cats[i]))) if staged[p] else int(op_of_event[p])
                  for i, p in enumerate(pos)]
        found = pd.Index(first["key"].to_numpy(np.int64)).get_indexer(key)
        key_op = np.asarray(key_op + [-1], np.int64)  # found == -1 reads the trailing -1
        op_of_event = key_op[found]

    # A `tf_op` stat adds a second op activity on the same span.
    tf_op_ids = table.str_stat_at("tf_op", rows)
    op_of_stat = np.full(len(rows), -1, np.int64)
    with_stat = np.flatnonzero(tf_op_ids != NO_STRING)
    if len(with_stat):
        unique, inverse = np.unique(tf_op_ids[with_stat], return_inverse=True)
        op_of_unique = np.full(len(unique), -1, np.int64)
        for i, sid in enumerate(unique):
            text = str(table.capture.string(int(sid)))
            if text:
                op = parse_tf_op_fullname(text)
                op_of_unique[i] = index((0, op.name, op.type))
        op_of_stat[with_stat] = op_of_unique[inverse]

    return op_of_event, op_of_stat, list(catalog)


def host_op_metrics_db(table: EventTable, is_eager: np.ndarray) -> OpMetricsDb:
    """`is_eager`: per event 1/0 where grouping marked it, -1 elsewhere (XProf's `is_eager` stat)."""
    plane = table.host_plane
    if plane is None:
        return OpMetricsDb()
    lines = table.lines_of_plane(plane)
    lines = lines[~table.derived_lines[lines]]
    if len(lines) == 0:
        return OpMetricsDb()
    rows = table.events_of_lines(lines)
    op_of_event, op_of_stat, catalog = _op_catalog(table, rows)
    if not ((op_of_event >= 0).any() or (op_of_stat >= 0).any()):
        # No op on any thread: each adds an empty IDLE record, and combined they are one (a tiny host's
        # case, where building and combining a record per thread was most of its host database).
        return OpMetricsDb(metrics=idle_row(0))
    eager_of_event = is_eager[rows] == 1

    # Activities: for each event, [begin, end] of its own op then of its tf_op stat, in that
    # order; replayed line by line in time order, ties in that order (XProf's sort).
    acts = _activities(table, rows, op_of_event, op_of_stat, eager_of_event)
    duration, children = replay_op_stack(acts.line_break, acts.ts, acts.act, acts.begin)
    done = np.flatnonzero(duration >= 0)
    owner = acts.position[done]  # the activity's place before the sort: its event and slot
    # Columns of the completed activities (numpy: a DataFrame here cost more than a tiny host's ops).
    completed = {
        "line": acts.line[done], "op": acts.op[owner], "eager": acts.eager[owner],
        "time": duration[done], "self": duration[done] - children[done],
        "begin": acts.ts[done] - duration[done],
    }
    starts = np.flatnonzero(acts.line_break)
    ends = np.append(starts[1:], len(acts.ts)) - 1
    spans = dict(zip(acts.line[starts].tolist(), (acts.ts[ends] - acts.ts[starts]).tolist()))
    return combine_dbs(_line_dbs(completed, catalog, spans, lines), update_num_cores=False)


@dataclass
class _Activities:
    """Begin and end activities of the host ops, sorted by line, then time, then their order.

    `ts`, `act`, `begin`, `line` and `line_break` are in sorted order; `position` gives each
    sorted activity's place in the unsorted arrays `op` and `eager` (per event, in event order:
    its op's begin and end, then its tf_op's)."""

    ts: np.ndarray
    act: np.ndarray
    begin: np.ndarray
    line: np.ndarray
    line_break: np.ndarray
    position: np.ndarray
    op: np.ndarray
    eager: np.ndarray


def _activities(table: EventTable, rows: np.ndarray, op_of_event: np.ndarray, op_of_stat: np.ndarray,
                eager_of_event: np.ndarray) -> _Activities:
    """Each event's activities are laid out in their order (own op begin, end, then tf_op begin,
    end), events in row order, which groups them by line: a stable sort by time within each line
    then gives XProf's order. Line runs are mostly in time order already, which the stable sort
    (Timsort) exploits; nothing is sorted on three keys, and no table of every activity is made."""
    has_op, has_stat = op_of_event >= 0, op_of_stat >= 0
    count = 2 * has_op.astype(np.int64) + 2 * has_stat
    first = np.cumsum(count) - count
    n = int(count.sum())
    ts = np.empty(n, np.int64)
    act = np.empty(n, np.int64)
    op = np.empty(n, np.int64)
    eager = np.zeros(n, bool)
    begin = np.zeros(n, bool)
    for slot, has, ops in ((0, has_op, op_of_event), (1, has_stat, op_of_stat)):
        sel = np.flatnonzero(has)
        at = first[sel] + (2 * has_op[sel] if slot else 0)
        r = rows[sel]
        ts[at], ts[at + 1] = table.start[r], table.end[r]
        act[at] = act[at + 1] = 2 * sel + slot
        op[at] = op[at + 1] = ops[sel]
        if slot == 0:
            eager[at] = eager[at + 1] = eager_of_event[sel]
        begin[at] = True
    line_of_event = table.line[rows]
    line = np.repeat(line_of_event, count)
    runs = np.append(run_starts(line), n)
    position = np.empty(n, np.int64)
    for a, b in zip(runs[:-1], runs[1:]):  # one turn per line
        position[a:b] = a + np.argsort(ts[a:b], kind="stable")
    line_break = np.zeros(n, bool)
    line_break[runs[:-1]] = True
    return _Activities(ts=ts[position], act=act[position], begin=begin[position], line=line[position],
                       line_break=line_break, position=position, op=op, eager=eager)


def _line_op_totals(completed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per (line, op) pair, in order of first appearance: its line and op, occurrences, time, self
    time, min time and whether any occurrence was eager. In numpy (exact int64 sums): a pandas
    groupby with five named aggregations cost ≈ 7 ms however few the ops, most of a tiny host's db.
    `completed`: the completed activities' columns (line, op, eager, time, self)."""
    line = np.asarray(completed["line"], np.int64)
    op = np.asarray(completed["op"], np.int64)
    if len(line) == 0:
        empty = np.zeros(0, np.int64)
        return {"line": empty, "op": empty, "occurrences": empty, "time_ps": empty, "self_time_ps": empty,
                "min_time_ps": empty, "is_eager": np.zeros(0, bool)}
    first, group = first_appearance_groups((line - line.min()) * (int(op.max()) + 1) + op)
    n = len(first)
    time = np.asarray(completed["time"], np.int64)
    totals = {"line": line[first], "op": op[first],
              "occurrences": np.bincount(group, minlength=n).astype(np.int64)}
    for name, values in (("time_ps", time), ("self_time_ps", np.asarray(completed["self"], np.int64))):
        total = np.zeros(n, np.int64)
        np.add.at(total, group, values)
        totals[name] = total
    smallest = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(smallest, group, time)
    eager = np.zeros(n, bool)
    np.logical_or.at(eager, group, np.asarray(completed["eager"], bool))
    totals["min_time_ps"], totals["is_eager"] = smallest, eager
    return totals


def _line_dbs(completed: dict[str, np.ndarray], catalog: list[tuple[int, str, str]], spans: dict[int, int],
              lines: np.ndarray) -> list[OpMetricsDb]:
    """One database per line (thread); `spans`: line → last − first activity time, for lines with ops."""
    totals = _line_op_totals(completed)
    module_ids = np.array([key[0] for key in catalog], np.int64)
    names = np.array([key[1] for key in catalog], object)
    categories = np.array([key[2] for key in catalog], object)
    infeed = _host_infeed(completed, categories)
    out = []
    for line in lines.tolist():
        if line not in spans:
            # A thread without ops still adds an (empty) IDLE record.
            out.append(OpMetricsDb(metrics=idle_row(0)))
            continue
        at = np.flatnonzero(totals["line"] == line)
        ops = totals["op"][at]
        op_time = int(totals["self_time_ps"][at].sum())
        total = max(op_time, spans[line])

        def with_idle_row(values: np.ndarray, idle) -> np.ndarray:
            # The line's ops, then its IDLE record (XProf's AddIdleOp).
            return np.append(values, np.asarray([idle], values.dtype))

        metrics = metrics_frame(
            hlo_module_id=with_idle_row(module_ids[ops], 0), name=with_idle_row(names[ops], IDLE),
            category=with_idle_row(categories[ops], IDLE), is_eager=with_idle_row(totals["is_eager"][at], False),
            occurrences=with_idle_row(totals["occurrences"][at], 0),
            time_ps=with_idle_row(totals["time_ps"][at], total - op_time),
            self_time_ps=with_idle_row(totals["self_time_ps"][at], total - op_time),
            min_time_ps=with_idle_row(totals["min_time_ps"][at], 0),
            num_cores=with_idle_row(np.ones(len(ops), np.int64), 0),
        )
        dur, diff = infeed.get(line, (0, 0))
        out.append(OpMetricsDb(metrics=metrics, total_time_ps=total, total_op_time_ps=op_time,
                               host_infeed_enq_duration_ps=dur, host_infeed_enq_start_diff_ps=diff))
    return out


def _host_infeed(completed: dict[str, np.ndarray], categories: np.ndarray) -> dict[int, tuple[int, int]]:
    """Per line: Σ durations of all but the last InfeedEnqueue op, and last − first begin (lines with
    two or more). `categories`: each catalog op's type."""
    infeed_ops = np.flatnonzero([is_infeed_enqueue_type(str(t)) for t in categories])
    if len(infeed_ops) == 0:
        return {}
    sel = np.flatnonzero(np.isin(completed["op"], infeed_ops))
    # Each line's infeed activities in their order: a stable sort by line.
    sel = sel[np.argsort(completed["line"][sel], kind="stable")]
    line, time, begin = completed["line"][sel], completed["time"][sel], completed["begin"][sel]
    starts = run_starts(line)
    ends = np.append(starts[1:], len(sel))
    out = {}
    for a, b in zip(starts.tolist(), ends.tolist()):  # one turn per line
        if b - a >= 2:
            out[int(line[a])] = (int(time[a:b - 1].sum()), int(begin[b - 1] - begin[a]))
    return out


__all__ = ["host_op_metrics_db"]
