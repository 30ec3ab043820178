"""Step groups (`group_id`) of host and GPU events, as XProf's preprocessing assigns them.

XProf groups a capture before most tools read it (TSL `GroupTfEvents`, see
docs/xprof/op_stats.md §1.2): events form a forest, linked by nesting on a
thread, by a few inter-thread rules and by producer/consumer context stats;
each root event (`_r` stat, or a `TraceContext` event) gives its
descendants a group id. Tools then read `group_id` like any other stat.

`event_group_ids(capture)` returns that id per event row (-1: ungrouped).
When the capture was already grouped by the profiler (every host and device
plane declares a `group_id` stat) the stored ids are used, as XProf does.
TPU device planes are left out of the forest here (their grouping by the
`Steps`/`XLA Modules` lines only affects device events).

The forest can hold millions of events, so nesting, linking and the
breadth-first propagation run as compiled loops over flat arrays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit

from reportgen.capture import KIND_INT64, HostCapture
from reportgen.core.stat_columns import int_column

HOST_PLANE = "/host:CPU"
TPU_PLANE_PREFIX = "/device:TPU:"
_HOST_PLANE_PREFIXES = (
    "/host:CPU", "Host CPUs", "/host:tfstreamz", "/host:metadata", "Syscalls", "/host:python-tracer",
    "/host:CUPTI", "/host:__ScopeRangeCallStack__",
)
_TF_LOOP_OPS = {"WhileOp-EvalCond", "WhileOp-StartBody", "ForOp", "ParallelForOp", "ForeverOp"}
# Root levels the TraceMe mutators give to serving/batching events without `_r`.
_IMPLICIT_ROOT_LEVELS = {"ProcessBatch": 2, "OrbaxServing::ProcessBatch": 2, "BatchingSessionRun": 1}
_TF_DATA_FUNCTIONS = {
    "InstantiatedCapturedFunction::Run", "InstantiatedCapturedFunction::RunWithBorrowedArgs",
    "InstantiatedCapturedFunction::RunInstantiated", "InstantiatedCapturedFunction::RunAsync",
}
_MAX_CONTEXT_FANOUT = 64


def _is_host_plane(name: str) -> bool:
    return name.startswith(_HOST_PLANE_PREFIXES)


def _is_device_plane(name: str) -> bool:
    if _is_host_plane(name):
        return False
    return name.startswith(("/device", "#Chip", "/custom:"))


def already_grouped(capture: HostCapture) -> bool:
    """Every host and device plane declares a `group_id` stat (XProf then skips grouping)."""
    with_group = set(capture.stat_metadata.loc[capture.stat_metadata["name"] == "group_id", "plane"])
    planes = [p for p, name in enumerate(capture.planes["name"]) if _is_host_plane(name) or _is_device_plane(name)]
    return bool(planes) and all(p in with_group for p in planes)


@njit(cache=True)
def _nesting_parents(first, count, start, end, skip):
    """Parent of each event by containment on its line (XProf ConnectIntraThread)."""
    parent = np.full(len(start), -1, dtype=np.int64)
    stack = np.empty(len(start), dtype=np.int64)
    for line in range(len(first)):
        top = 0
        for i in range(first[line], first[line] + count[line]):
            if skip[i]:
                continue
            while top > 0:
                p = stack[top - 1]
                if start[p] <= start[i] and end[i] <= end[p]:
                    parent[i] = p
                    break
                top -= 1
            stack[top] = i
            top += 1
    return parent


@njit(cache=True)
def _propagate(roots, levels, is_root, child_ptr, child_idx, parent_ptr, parent_idx, n):
    """Assign group ids root by root, breadth first (XProf CreateEventGroups)."""
    group = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=np.int64)  # visit stamp per BFS
    queue = np.empty(n, dtype=np.int64)
    stamp = 0
    next_group = 0
    for r in range(len(roots)):
        root = roots[r]
        if group[root] >= 0:
            continue
        # Skip a root below another root of the same level: that one groups it.
        stamp += 1
        head = 0
        tail = 0
        seen[root] = stamp
        for k in range(parent_ptr[root], parent_ptr[root + 1]):
            p = parent_idx[k]
            if seen[p] != stamp:
                seen[p] = stamp
                queue[tail] = p
                tail += 1
        shadowed = False
        while head < tail:
            node = queue[head]
            head += 1
            if is_root[node] and levels[node] == levels[root]:
                shadowed = True
                break
            for k in range(parent_ptr[node], parent_ptr[node + 1]):
                p = parent_idx[k]
                if seen[p] != stamp:
                    seen[p] = stamp
                    queue[tail] = p
                    tail += 1
        if shadowed:
            continue
        gid = next_group
        next_group += 1
        stamp += 1
        head = 0
        tail = 1
        queue[0] = root
        seen[root] = stamp
        while head < tail:
            node = queue[head]
            head += 1
            if group[node] >= 0:
                continue  # already in another group: neither overwritten nor traversed
            group[node] = gid
            for k in range(child_ptr[node], child_ptr[node + 1]):
                c = child_idx[k]
                if seen[c] != stamp:
                    seen[c] = stamp
                    queue[tail] = c
                    tail += 1
    return group


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(ptr, src + 1, 1)
    return np.cumsum(ptr), dst[order].astype(np.int64)


def _match_edges(parent_rows: np.ndarray, parent_keys: np.ndarray, child_rows: np.ndarray,
                 child_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Link each child to the (last) parent with the same key tuple."""
    if len(parent_rows) == 0 or len(child_rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    parents = pd.DataFrame(parent_keys).assign(row=parent_rows).drop_duplicates(
        subset=list(range(parent_keys.shape[1])), keep="last")
    children = pd.DataFrame(child_keys).assign(child=child_rows)
    joined = children.merge(parents, on=list(range(parent_keys.shape[1])), how="inner")
    return joined["row"].to_numpy(np.int64), joined["child"].to_numpy(np.int64)


def _context_edges(capture: HostCapture, in_forest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Producer (`_pt`,`_p`) → consumer (`_ct`,`_c`) links, split by pid."""
    has_pt, pt = int_column(capture, "_pt")
    has_p, p = int_column(capture, "_p", accept_uint=True)
    has_ct, ct = int_column(capture, "_ct")
    has_c, c = int_column(capture, "_c", accept_uint=True)
    plane_pid = _plane_pids(capture)
    ev_plane = capture.events["plane"].to_numpy()
    has_pid, pid = int_column(capture, "_pid")
    pid_known = plane_pid[ev_plane] != _NO_PID
    pid_value = np.where(pid_known, plane_pid[ev_plane], _NO_PID)
    consumer_pid = np.where(has_pid, pid.astype(np.int32).astype(np.int64), pid_value)
    producers = np.flatnonzero(has_pt & has_p & in_forest)
    consumers = np.flatnonzero(has_ct & has_c & in_forest)
    if len(producers) == 0 or len(consumers) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    prod = pd.DataFrame({"type": pt[producers], "id": p[producers], "pid": pid_value[producers], "row": producers})
    cons = pd.DataFrame({"type": ct[consumers], "id": c[consumers], "pid": consumer_pid[consumers],
                         "child": consumers})
    keys = ["type", "id", "pid"]
    n_prod = prod.groupby(keys).size().rename("n_prod")
    n_cons = cons.groupby(keys).size().rename("n_cons")
    sizes = pd.concat([n_prod, n_cons], axis=1).fillna(0)
    crowded = sizes[(sizes["n_prod"] >= _MAX_CONTEXT_FANOUT) & (sizes["n_cons"] >= _MAX_CONTEXT_FANOUT)].index
    joined = prod.merge(cons, on=keys, how="inner")
    if len(crowded):
        joined = joined[~joined.set_index(keys).index.isin(crowded)]
    return joined["row"].to_numpy(np.int64), joined["child"].to_numpy(np.int64)


_NO_PID = np.iinfo(np.int64).min


def _plane_pids(capture: HostCapture) -> np.ndarray:
    pids = np.full(len(capture.planes), _NO_PID, dtype=np.int64)
    stats = capture.plane_stats
    sel = stats.select(stats.key == capture.string_id("process_id"))
    ints = np.where(sel.kind == KIND_INT64, sel.raw, 0)  # IntValue
    for owner, value in zip(sel.owner, ints):
        pids[int(owner)] = np.int64(value).astype(np.int32)
    return pids


def event_group_ids(capture: HostCapture) -> np.ndarray:
    """`group_id` of every event row after XProf's grouping; -1 when none."""
    n = len(capture.events)
    if already_grouped(capture):
        has, value = int_column(capture, "group_id")
        return np.where(has, value, -1)
    names = capture.event_metadata["name"]
    if names.isin(_TF_LOOP_OPS).any():
        return np.full(n, -1, dtype=np.int64)
    if n == 0:
        return np.zeros(0, dtype=np.int64)

    ev = capture.events
    md_names = names.to_numpy()[ev["md"].to_numpy()]
    plane_names = capture.planes["name"].to_numpy()
    ev_plane = ev["plane"].to_numpy()
    in_forest = ~pd.Series(plane_names).str.startswith(TPU_PLANE_PREFIX).to_numpy()[ev_plane]
    in_forest &= ev["num_occurrences"].to_numpy() == 0
    start = ev["start_ps"].to_numpy()
    end = start + ev["duration_ps"].to_numpy()

    has_async, is_async = int_column(capture, "_a")
    lines = capture.lines
    parent = _nesting_parents(
        lines["first_event"].to_numpy(np.int64), lines["event_count"].to_numpy(np.int64),
        start, end, ~in_forest | (has_async & (is_async != 0)),
    )
    nested = np.flatnonzero(parent >= 0)
    src = [parent[nested]]
    dst = [nested]

    # Inter-thread rules (XProf CreateInterThreadConnectInfoList).
    has_id, step_id = int_column(capture, "id", accept_uint=True)
    has_iter, iter_num = int_column(capture, "iter_num", accept_uint=True)
    executor = np.flatnonzero((md_names == "ExecutorState::Process") & has_id & has_iter & in_forest)
    for child_name in ("IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute"):
        child = np.flatnonzero((md_names == child_name) & has_id & has_iter & in_forest)
        s, d = _match_edges(executor, np.stack([step_id[executor], iter_num[executor]], 1),
                            child, np.stack([step_id[child], iter_num[child]], 1))
        src.append(s)
        dst.append(d)
    has_corr, corr = int_column(capture, "correlation_id", accept_uint=True)
    on_host = plane_names[ev_plane] == HOST_PLANE
    launch = np.flatnonzero(has_corr & on_host & in_forest)
    execute = np.flatnonzero(has_corr & ~on_host & in_forest)
    s, d = _match_edges(launch, corr[launch, None], execute, corr[execute, None])
    src.append(s)
    dst.append(d)
    s, d = _context_edges(capture, in_forest)
    src.append(s)
    dst.append(d)
    src = np.concatenate(src)
    dst = np.concatenate(dst)
    child_ptr, child_idx = _csr(src, dst, n)
    parent_ptr, parent_idx = _csr(dst, src, n)

    # Roots: `_r` (IntValue), else `TraceContext` (level 1) or a batching marker.
    has_r, level = int_column(capture, "_r")
    level = level.copy()
    implicit = ~has_r & pd.Series(md_names).map(_IMPLICIT_ROOT_LEVELS).notna().to_numpy()
    level[implicit] = pd.Series(md_names[implicit]).map(_IMPLICIT_ROOT_LEVELS).to_numpy(np.int64)
    legacy = ~has_r & ~implicit & (md_names == "TraceContext")
    level[legacy] = 1
    is_root = (level != 0) & in_forest
    # Roots that are tf.data function runs are not steps.
    _, step_int = int_column(capture, "id")
    tf_data = has_id & np.isin(md_names, list(_TF_DATA_FUNCTIONS))
    excluded = has_id & np.isin(step_int, np.unique(step_int[tf_data]))
    roots = np.flatnonzero(is_root & ~excluded)
    order = np.lexsort((start[roots], -level[roots]))
    return _propagate(roots[order], level, is_root, child_ptr, child_idx, parent_ptr, parent_idx, n)


__all__ = ["already_grouped", "event_group_ids"]
