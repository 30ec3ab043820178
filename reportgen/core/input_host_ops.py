"""The host op metrics database: occurrences, total and self time of every op
run on the host threads (`/host:CPU`), as XProf builds it (op_stats.md §4.3).

Per thread, every event that names an op (a TF/JAX op, a tf.data iterator, a
memcpy, or an input-pipeline stage) opens and closes an activity; an event's
`tf_op` stat opens a second one over the same span. Activities are replayed
in time order on a stack: an end pops entries until its own begin is found
(entries above it are dropped, as XProf does when TraceMes overlap), the
op's self time is its span minus the spans of the ops completed directly
inside it, and each thread's idle time (its active span minus the ops' self
time) becomes the IDLE record. The replay is a compiled loop; everything
around it is vectorised over the decoded tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from reportgen.capture import KIND_INT64, KIND_REF, KIND_STR, HostCapture, StatTable
from reportgen.core.tf_op_names import (
    INPUT_PIPELINE,
    UNKNOWN,
    TfOp,
    is_infeed_enqueue_op,
    parse_tf_op_fullname,
)

HOST_PLANE = "/host:CPU"
IDLE = "IDLE"
# XProf's derived ("fake") thread ids, compared after truncation to int32 (xspace.md §5.2).
DERIVED_LINE_ID_MIN = -559038737
DERIVED_LINE_ID_MAX = -559038348

OP_COLUMNS = ["hlo_module_id", "name", "category", "occurrences", "time_ps", "self_time_ps"]


@dataclass
class HostOpMetricsDb:
    """Records keyed by (hlo_module_id, name); `category` is the op type
    (`Dataset` for tf.data iterators). The IDLE record is included."""

    ops: pd.DataFrame
    total_time_ps: int = 0
    total_op_time_ps: int = 0
    infeed_enqueue_duration_ps: int = 0
    infeed_enqueue_start_diff_ps: int = 0


def empty_host_op_metrics() -> HostOpMetricsDb:
    return HostOpMetricsDb(ops=pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in OP_COLUMNS}))


def _dtype(column: str) -> str:
    return "object" if column in ("name", "category") else "int64"


def is_derived_line_id(line_ids: np.ndarray) -> np.ndarray:
    as_int32 = line_ids.astype(np.int64).astype(np.int32)
    return (as_int32 >= DERIVED_LINE_ID_MIN) & (as_int32 <= DERIVED_LINE_ID_MAX)


def first_stat_per_event(stats: StatTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask over `rows`, position in `stats`) of the first stat each event carries.

    `rows` must be sorted. XProf's GetStat returns the first matching stat.
    """
    if len(stats) == 0 or len(rows) == 0:
        return np.zeros(len(rows), bool), np.zeros(len(rows), np.int64)
    owners, first = np.unique(stats.owner, return_index=True)
    pos = np.searchsorted(owners, rows)
    pos_c = np.minimum(pos, len(owners) - 1)
    present = owners[pos_c] == rows
    return present, first[pos_c]


def int_value(stats: StatTable, where: np.ndarray) -> np.ndarray:
    """XProf's IntValue(): the int64 value, 0 when the stat holds another kind."""
    return np.where(stats.kind[where] == KIND_INT64, stats.raw[where], 0)


def str_or_ref_value(capture: HostCapture, stats: StatTable, where: np.ndarray) -> list[str]:
    """XProf's StrOrRefValue(): the string or the referenced name, else ''."""
    kinds = stats.kind[where]
    sids = stats.str_id[where]
    return [capture.string(int(s)) if k in (KIND_STR, KIND_REF) else "" for k, s in zip(kinds, sids)]


@njit(cache=True)
def _replay(line, ts, pair, is_end, desc, infeed_desc):  # pragma: no cover - compiled
    """Replay sorted begin/end activities per line (see module docstring).

    Returns the completed ops (desc, duration, children time, line) in
    completion order and, per run of one line, (line, first ts, last ts,
    infeed-enqueue duration sum, infeed-enqueue start-diff sum).
    """
    n = len(ts)
    rec_desc = np.empty(n // 2 + 1, np.int64)
    rec_dur = np.empty(n // 2 + 1, np.int64)
    rec_children = np.empty(n // 2 + 1, np.int64)
    rec_line = np.empty(n // 2 + 1, np.int64)
    runs = np.empty((n + 1, 5), np.int64)
    stack_pair = np.empty(n + 1, np.int64)
    stack_start = np.empty(n + 1, np.int64)
    stack_children = np.empty(n + 1, np.int64)
    nrec = 0
    nrun = 0
    i = 0
    while i < n:
        current = line[i]
        top = 0
        last_begin = 0
        last_duration = 0
        infeed_duration = 0
        infeed_diff = 0
        j = i
        while j < n and line[j] == current:
            if not is_end[j]:
                stack_pair[top] = pair[j]
                stack_start[top] = ts[j]
                stack_children[top] = 0
                top += 1
            else:
                found = -1
                while top > 0:
                    top -= 1
                    if stack_pair[top] == pair[j]:
                        found = top
                        break
                if found >= 0:
                    duration = ts[j] - stack_start[found]
                    rec_desc[nrec] = desc[j]
                    rec_dur[nrec] = duration
                    rec_children[nrec] = stack_children[found]
                    rec_line[nrec] = current
                    nrec += 1
                    if top > 0:
                        stack_children[top - 1] += duration
                    if infeed_desc[desc[j]]:
                        if not (last_begin == 0 and last_duration == 0):
                            infeed_duration += last_duration
                            infeed_diff += stack_start[found] - last_begin
                        last_begin = stack_start[found]
                        last_duration = duration
            j += 1
        runs[nrun, 0] = current
        runs[nrun, 1] = ts[i]
        runs[nrun, 2] = ts[j - 1]
        runs[nrun, 3] = infeed_duration
        runs[nrun, 4] = infeed_diff
        nrun += 1
        i = j
    return rec_desc[:nrec], rec_dur[:nrec], rec_children[:nrec], rec_line[:nrec], runs[:nrun]


def _op_table(capture: HostCapture, rows: np.ndarray) -> tuple[list[TfOp], np.ndarray, np.ndarray]:
    """The ops the plane's events name, and each event's op (index or -1) for
    its own name and for its `tf_op` stat."""
    events = capture.events
    md = events["md"].to_numpy()[rows]
    metadata_id = events["metadata_id"].to_numpy()[rows]
    md_names = capture.event_metadata["name"].to_numpy()

    # One parse per distinct metadata row.
    unique_md, md_inverse = np.unique(md, return_inverse=True)
    parsed = [parse_tf_op_fullname(md_names[m]) for m in unique_md]
    md_is_op = np.array([p.category != UNKNOWN for p in parsed], dtype=bool)
    has_name = np.array([md_names[m] != "" for m in unique_md], dtype=bool)[md_inverse]

    stage_stats = capture.event_stat("_ipl_stage_id")
    cat_stats = capture.event_stat("_ipl_stage_cat")
    has_stage, stage_at = first_stat_per_event(stage_stats, rows)
    has_cat, cat_at = first_stat_per_event(cat_stats, rows)
    stage_id = np.where(has_stage, int_value(stage_stats, stage_at) if len(stage_stats) else 0, 0)

    # XProf keeps one op per key, first sight wins; keys are metadata ids for
    # named ops and stage ids for input-pipeline stages, in one map.
    md_candidate = has_name & ~has_stage & md_is_op[md_inverse]
    stage_candidate = has_name & has_stage & has_cat
    candidate = np.flatnonzero(md_candidate | stage_candidate)
    keys = np.where(has_stage, stage_id, metadata_id)
    table = pd.DataFrame({"key": keys[candidate], "pos": candidate}).drop_duplicates("key", keep="first")

    ops: list[TfOp] = []
    for pos in table["pos"].to_numpy():
        if has_stage[pos]:
            category = str_or_ref_value(capture, cat_stats, cat_at[pos : pos + 1])[0]
            ops.append(parse_tf_op_fullname(md_names[md[pos]], INPUT_PIPELINE, category, int(stage_id[pos])))
        else:
            ops.append(parsed[md_inverse[pos]])
    own_op = pd.Index(table["key"].to_numpy()).get_indexer(keys).astype(np.int64)

    # The `tf_op` stat opens a second activity named by the stat's value.
    tf_op_stats = capture.event_stat("tf_op")
    has_tf_op, tf_op_at = first_stat_per_event(tf_op_stats, rows)
    stat_op = np.full(len(rows), -1, dtype=np.int64)
    with_stat = np.flatnonzero(has_tf_op)
    if len(with_stat):
        at = tf_op_at[with_stat]
        is_text = np.isin(tf_op_stats.kind[at], (KIND_STR, KIND_REF))
        string_ids, inverse = np.unique(tf_op_stats.str_id[at][is_text], return_inverse=True)
        texts = [capture.string(int(sid)) for sid in string_ids]  # one parse per distinct value
        op_of_string = np.array([len(ops) + k if t else -1 for k, t in enumerate(texts)], dtype=np.int64)
        ops.extend(parse_tf_op_fullname(t) for t in texts)
        stat_op[with_stat[is_text]] = op_of_string[inverse]
    return ops, own_op, stat_op


def host_op_metrics_db(capture: HostCapture) -> HostOpMetricsDb:
    plane = capture.plane_by_name(HOST_PLANE)
    if plane is None:
        return empty_host_op_metrics()
    lines = capture.lines
    plane_lines = np.flatnonzero(lines["plane"].to_numpy() == plane)
    rows = np.flatnonzero(capture.events["plane"].to_numpy() == plane)
    if len(rows) == 0:
        return _finish(pd.DataFrame(columns=OP_COLUMNS), 0, 0, 0, has_lines=len(plane_lines) > 0)

    ops, own_op, stat_op = _op_table(capture, rows)
    events = capture.events
    line = events["line"].to_numpy()[rows]
    derived = is_derived_line_id(lines["id"].to_numpy())[line]
    start = events["start_ps"].to_numpy()[rows]
    end = start + events["duration_ps"].to_numpy()[rows]
    pos = np.arange(len(rows), dtype=np.int64)

    parts = []
    for op, slot in ((own_op, 0), (stat_op, 1)):
        sel = np.flatnonzero((op >= 0) & ~derived)
        for is_end, times in ((False, start), (True, end)):
            parts.append((line[sel], times[sel], 4 * pos[sel] + 2 * slot + is_end, 2 * pos[sel] + slot,
                          np.full(len(sel), is_end), op[sel]))
    act_line, act_ts, act_seq, act_pair, act_end, act_desc = (np.concatenate(c) for c in zip(*parts))
    if len(act_ts) == 0:
        return _finish(pd.DataFrame(columns=OP_COLUMNS), 0, 0, 0, has_lines=True)
    # Stable sort by time within each thread: ties keep the order events pushed them.
    order = np.lexsort((act_seq, act_ts, act_line))
    infeed_desc = np.array([is_infeed_enqueue_op(op.type) for op in ops], dtype=np.bool_)
    rec_desc, rec_dur, rec_children, rec_line, runs = _replay(
        act_line[order], act_ts[order], act_pair[order], act_end[order], act_desc[order], infeed_desc
    )

    # Per thread: total time = max(Σ self, active span); the rest is idle.
    rec_self = rec_dur - rec_children
    span = pd.Series(runs[:, 2] - runs[:, 1], index=runs[:, 0])
    op_time = pd.Series(rec_self).groupby(rec_line).sum().reindex(span.index, fill_value=0)
    total = np.maximum(op_time.to_numpy(), span.to_numpy())
    return _finish(
        _records_by_key(ops, rec_desc, rec_dur, rec_self),
        int(total.sum()),
        int(runs[:, 3].sum()),
        int(runs[:, 4].sum()),
        has_lines=True,
        total_op_time_ps=int(op_time.sum()),
    )


def _records_by_key(ops: list[TfOp], rec_desc: np.ndarray, rec_dur: np.ndarray, rec_self: np.ndarray) -> pd.DataFrame:
    """Completed ops merged by (hlo_module_id, name), in order of first completion;
    category = the first non-empty op type seen for the key."""
    if len(rec_desc) == 0:
        return pd.DataFrame(columns=OP_COLUMNS)
    descs = pd.DataFrame({"id": [op.id for op in ops], "name": [op.name for op in ops]})
    key_of_desc, _ = pd.MultiIndex.from_frame(descs).factorize()
    rec_key = key_of_desc[rec_desc]
    keys, first = np.unique(rec_key, return_index=True)
    n = int(keys.max()) + 1
    occurrences = np.bincount(rec_key, minlength=n)
    # Exact integer sums per key: sort by key, then add up each run.
    by_key = np.argsort(rec_key, kind="stable")
    starts = np.searchsorted(rec_key[by_key], keys)
    time_ps = np.zeros(n, np.int64)
    self_ps = np.zeros(n, np.int64)
    time_ps[keys] = np.add.reduceat(rec_dur[by_key], starts)
    self_ps[keys] = np.add.reduceat(rec_self[by_key], starts)
    types = np.array([op.type for op in ops], dtype=object)
    named = np.flatnonzero(types[rec_desc] != "")
    category = np.full(n, "", dtype=object)
    named_keys, named_first = np.unique(rec_key[named], return_index=True)
    category[named_keys] = types[rec_desc[named[named_first]]]
    order = keys[np.argsort(first, kind="stable")]
    first_desc = rec_desc[np.sort(first)]
    return pd.DataFrame(
        {
            "hlo_module_id": descs["id"].to_numpy()[first_desc],
            "name": descs["name"].to_numpy()[first_desc],
            "category": category[order],
            "occurrences": occurrences[order],
            "time_ps": time_ps[order],
            "self_time_ps": self_ps[order],
        }
    )


def _aggregate(records: pd.DataFrame) -> pd.DataFrame:
    """Merge databases' records by (hlo_module_id, name); category = first non-empty one seen."""
    if len(records) == 0:
        return pd.DataFrame(columns=OP_COLUMNS)
    key = ["hlo_module_id", "name"]
    grouped = records.groupby(key, sort=False)
    merged = grouped.agg(
        occurrences=("time_ps", "size"), time_ps=("time_ps", "sum"), self_time_ps=("self_time_ps", "sum")
    )
    named = records[records["category"] != ""].drop_duplicates(key).set_index(key)["category"]
    merged["category"] = named.reindex(merged.index).fillna("").to_numpy()
    merged["occurrences"] = grouped["occurrences"].sum()
    return merged.reset_index()[OP_COLUMNS]


def _finish(
    ops: pd.DataFrame,
    total_time_ps: int,
    infeed_duration_ps: int,
    infeed_diff_ps: int,
    has_lines: bool,
    total_op_time_ps: int = 0,
) -> HostOpMetricsDb:
    if has_lines:
        idle = total_time_ps - total_op_time_ps
        idle_row = pd.DataFrame([{"hlo_module_id": 0, "name": IDLE, "category": IDLE, "occurrences": 0,
                                  "time_ps": idle, "self_time_ps": idle}])
        ops = pd.concat([ops, idle_row], ignore_index=True) if len(ops) else idle_row
    ops = ops.astype({c: _dtype(c) for c in OP_COLUMNS})
    return HostOpMetricsDb(ops, total_time_ps, total_op_time_ps, infeed_duration_ps, infeed_diff_ps)


def combine_host_op_metrics(dbs: list[HostOpMetricsDb]) -> HostOpMetricsDb:
    """XProf's OpMetricsDbCombiner for host databases: records and totals add up."""
    frames = [db.ops for db in dbs if len(db.ops)]
    if not frames:
        return empty_host_op_metrics()
    merged = _aggregate(pd.concat(frames, ignore_index=True))
    return HostOpMetricsDb(
        ops=merged.astype({c: _dtype(c) for c in OP_COLUMNS}),
        total_time_ps=sum(db.total_time_ps for db in dbs),
        total_op_time_ps=sum(db.total_op_time_ps for db in dbs),
        infeed_enqueue_duration_ps=sum(db.infeed_enqueue_duration_ps for db in dbs),
        infeed_enqueue_start_diff_ps=sum(db.infeed_enqueue_start_diff_ps for db in dbs),
    )


def sorted_op_metrics(ops: pd.DataFrame) -> pd.DataFrame:
    """XProf's SortedOpMetricsDb: self time descending, then name ascending."""
    return ops.sort_values(["self_time_ps", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
