"""Event grouping: which step (`group_id`) each event belongs to.

XProf's `GroupTfEvents` (docs/xprof/op_stats.md §1.2) builds a forest over all
events of a host: nesting within each line, inter-thread links (executor →
iterator by `id`+`iter_num`, kernel launch → kernel by `correlation_id`) and
producer/consumer context links (`_pt/_p` → `_ct/_c`). Root events (`_r` stat,
the level preprocessing gives `ProcessBatch`/`BatchingSessionRun`, or
`TraceContext`) are taken by root level, then time; each one not already
covered by a same-level root ancestor opens a group that spreads breadth-first
to every descendant without one. The group's name is `<root name> <step_num>`
(or `<graph_type> …`), and TF ops learn whether they ran eagerly.

Captures that were grouped when saved (every host and device plane already
declares a `group_id` stat) are read as they are. TPU captures follow
`GroupTpuEventsOSS` (§1.3) as far as device grouping lines go.

Everything is arrays over `EventTable` rows; the breadth-first walks run in
`nesting.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import NO_STRING
from reportgen.core.events import schema
from reportgen.core.events.nesting import csr, line_parents, nearest_ancestor, nearest_source, propagate_groups
from reportgen.core.events.table import EventTable

CONTEXT_GROUP_LIMIT = 64


@dataclass
class Grouping:
    """Per-event grouping results, aligned with `EventTable` rows.

    group_id:   step group of each event, -1 when none.
    step_names: event row → the `step_name` it carries: XProf adds it to
                user-defined roots (and device `Steps` events) only.
    is_eager:   per event, 1/0 where XProf writes `is_eager`, -1 elsewhere.
    group_names: group id → group name (e.g. "train 6").
    """

    group_id: np.ndarray
    step_names: dict[int, str]
    is_eager: np.ndarray
    group_names: dict[int, str] = field(default_factory=dict)


def _planes_with_stat_metadata(table: EventTable, name: str) -> set[int]:
    """The planes that declare a stat named `name` (the columns read once, compared in numpy: a pandas
    comparison per plane cost more than a tiny host's grouping)."""
    smd = table.capture.stat_metadata
    named = smd["name"].to_numpy(object) == name
    return set(smd["plane"].to_numpy(np.int64)[named].tolist())


def is_already_grouped(table: EventTable) -> bool:
    """Every host and device plane declares a `group_id` stat (xspace.md §4 classification)."""
    host_prefixes = ("/host:CPU", "Host CPUs", "/host:tfstreamz", "/host:metadata", "Syscalls",
                     "/host:python-tracer", "/host:CUPTI", "/host:__ScopeRangeCallStack__")
    grouped = _planes_with_stat_metadata(table, "group_id")
    if not grouped:
        return False  # a plane to check lacks it, or there is none to check: not grouped either way
    checked = False
    for plane, name in enumerate(table.plane_names):
        is_host = name.startswith(host_prefixes)
        is_device = not is_host and (name.startswith("/device") or name.startswith("#Chip")
                                     or name.startswith("/custom:"))
        if not (is_host or is_device):
            continue
        checked = True
        if plane not in grouped:
            return False
    return checked


def has_tf_loop_ops(table: EventTable) -> bool:
    return bool((table.md_types == schema.TF_LOOP_OP).any())


def group_events(table: EventTable) -> Grouping:
    """Group ids for every event of the capture (see module docstring)."""
    n = table.n
    if is_already_grouped(table):
        return _stored_grouping(table)
    if has_tf_loop_ops(table):
        return Grouping(np.full(n, -1, np.int64), {}, np.full(n, -1, np.int8))
    grouping = _group_forest(table, table.planes_named(lambda name: name.startswith(schema.TPU_PLANE_PREFIX)))
    # XProf derives its timelines (this step among them) only for captures it grouped itself.
    _group_ungrouped_gpu_events(table, grouping.group_id)
    return grouping


def _group_ungrouped_gpu_events(table: EventTable, group_id: np.ndarray) -> None:
    """XProf's `ProcessUngroupedEvents`, run on every GPU plane before its `Steps` line is derived: in time
    order over the plane's own lines (start, then the longer first), an event without a group takes the group
    of the last grouped event before it. A transfer or memset that no launch links to a step (JAX's host-to-
    device copies of the next batch) thereby joins the step before it, whose device span, step time and
    device time it lengthens."""
    for plane in table.planes_named(lambda name: name.startswith(schema.GPU_PLANE_PREFIX)):
        lines = table.lines_of_plane(plane)
        rows = table.events_of_lines(lines[~table.derived_lines[lines]])
        groups = group_id[rows]
        if len(rows) == 0 or not (groups < 0).any() or not (groups >= 0).any():
            continue
        order = np.lexsort((-table.duration[rows], table.start[rows]))
        rows, groups = rows[order], groups[order]
        # Forward fill: each row's last grouped position at or before it.
        last = np.maximum.accumulate(np.where(groups >= 0, np.arange(len(rows)), -1))
        fill = (groups < 0) & (last >= 0)
        group_id[rows[fill]] = groups[last[fill]]


def _stored_grouping(table: EventTable) -> Grouping:
    gid, has = table.int_stat("group_id", uint_ok=False)
    group_id = np.where(has, gid, -1)
    ids = table.str_stat("step_name")
    named = np.flatnonzero(ids != NO_STRING)
    step_names = {int(r): str(table.capture.string(int(ids[r]))) for r in named}
    eager, has_eager = table.int_stat("is_eager", uint_ok=False)
    is_eager = np.where(has_eager, (eager != 0).astype(np.int8), -1).astype(np.int8)
    group_names: dict[int, str] = {}
    for row in named[::-1]:
        if group_id[row] >= 0:
            group_names[int(group_id[row])] = step_names[int(row)]
    return Grouping(group_id, step_names, is_eager, group_names)


# --- building the forest ----------------------------------------------------------------

def _event_types(table: EventTable) -> np.ndarray:
    """XProf's grouping type: metadata type, else KernelLaunch/Execute by correlation id."""
    types = table.types.copy()
    _, has_corr = table.int_stat("correlation_id")
    untyped = (types == schema.UNTYPED) & has_corr
    on_host = table.plane == (table.host_plane if table.host_plane is not None else -1)
    types[untyped & on_host] = schema.KERNEL_LAUNCH
    types[untyped & ~on_host] = schema.KERNEL_EXECUTE
    return types


def _nesting_edges(table: EventTable, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = table.events_of_lines(lines)
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    new_line = np.zeros(len(rows), bool)
    starts = np.concatenate([[0], np.cumsum(table.line_count[lines])[:-1]])
    new_line[starts[table.line_count[lines] > 0]] = True
    is_async, has_async = table.int_stat("_a", uint_ok=False)
    skip = (has_async & (is_async != 0))[rows]
    parent = line_parents(rows, new_line, table.start, table.end, skip)
    has = parent >= 0
    return parent[has], rows[has]


def _stat_key_frame(table: EventTable, rows: np.ndarray, names: list[str]) -> pd.DataFrame | None:
    """Rows that carry every stat in `names`, with the IntOrUint values (None when no row does)."""
    if len(rows) == 0:  # most hosts have no such event: no frame to build
        return None
    frame = {"row": rows}
    keep = np.ones(len(rows), bool)
    for name in names:
        values, present = table.int_stat(name)
        keep &= present[rows]
        frame[name] = values[rows]
    if not keep.any():
        return None
    return pd.DataFrame({name: column[keep] for name, column in frame.items()})


def _inter_thread_edges(table: EventTable, types: np.ndarray, nodes: np.ndarray):
    rules = [
        (schema.EXECUTOR_STATE_PROCESS, schema.ITERATOR_GET_NEXT, ["id", "iter_num"]),
        (schema.EXECUTOR_STATE_PROCESS, schema.ITERATOR_GET_NEXT_AS_OPTIONAL, ["id", "iter_num"]),
        (schema.KERNEL_LAUNCH, schema.KERNEL_EXECUTE, ["correlation_id"]),
    ]
    sources, targets = [], []
    node_types = types[nodes]
    for parent_type, child_type, stats in rules:
        parents = _stat_key_frame(table, nodes[node_types == parent_type], stats)
        children = _stat_key_frame(table, nodes[node_types == child_type], stats)
        if parents is None or children is None:
            continue
        # The last parent with a given key wins (XProf fills a map in event order).
        parents = parents.drop_duplicates(stats, keep="last")
        linked = children.merge(parents, on=stats, suffixes=("_child", "_parent"))
        sources.append(linked["row_parent"].to_numpy(np.int64))
        targets.append(linked["row_child"].to_numpy(np.int64))
    return sources, targets


def _plane_pids(table: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """Per plane: process_id stat (IntValue) and whether present."""
    rows = table.capture.stat_rows(table.capture.plane_stats, "process_id")
    n = len(table.plane_names)
    pid = np.zeros(n, np.int64)
    has = np.zeros(n, bool)
    for owner, kind, raw in zip(rows.owner[::-1], rows.kind[::-1], rows.raw[::-1]):
        pid[owner] = raw if kind == 3 else 0
        has[owner] = True
    return pid, has


def _context_edges(table: EventTable, nodes: np.ndarray, owner: np.ndarray):
    """Producer → consumer edges of XProf's context groups.

    `owner` maps an event to the node that carries its context stats (itself,
    except on TPU planes where device events lend theirs to a grouping event)."""
    plane_pid, plane_has_pid = _plane_pids(table)
    pt, has_pt = table.int_stat("_pt", uint_ok=False)
    p, has_p = table.int_stat("_p")
    ct, has_ct = table.int_stat("_ct", uint_ok=False)
    c, has_c = table.int_stat("_c")
    cpid, has_cpid = table.int_stat("_pid", uint_ok=False)
    prod = nodes[(has_pt & has_p)[nodes]]
    cons = nodes[(has_ct & has_c)[nodes]]
    if len(prod) == 0 or len(cons) == 0:
        return [], []
    # A producer keeps its plane's pid; a consumer's `_pid` overrides it.
    prod_has_pid = plane_has_pid[table.plane[prod]]
    cons_has_pid = has_cpid[cons] | plane_has_pid[table.plane[cons]]
    cons_pid = np.where(has_cpid[cons], cpid[cons], plane_pid[table.plane[cons]]).astype(np.int32)
    producers = pd.DataFrame({
        "type": pt[prod], "id": p[prod], "has_pid": prod_has_pid,
        "pid": np.where(prod_has_pid, plane_pid[table.plane[prod]].astype(np.int32), 0), "node": owner[prod],
    })
    consumers = pd.DataFrame({
        "type": ct[cons], "id": c[cons], "has_pid": cons_has_pid,
        "pid": np.where(cons_has_pid, cons_pid, 0), "node": owner[cons],
    })
    keys = ["type", "id", "has_pid", "pid"]
    sizes = pd.concat(
        [producers.groupby(keys).size().rename("n_prod"), consumers.groupby(keys).size().rename("n_cons")], axis=1
    ).dropna()
    too_big = sizes[(sizes["n_prod"] >= CONTEXT_GROUP_LIMIT) & (sizes["n_cons"] >= CONTEXT_GROUP_LIMIT)]
    linked = producers.merge(consumers, on=keys, suffixes=("_p", "_c"))
    if len(too_big):
        linked = linked[~linked.set_index(keys).index.isin(too_big.index)]
    return [linked["node_p"].to_numpy(np.int64)], [linked["node_c"].to_numpy(np.int64)]


def _tf_data_step_ids(table: EventTable, types: np.ndarray) -> np.ndarray:
    ids, has = table.int_stat("id", uint_ok=False)
    sel = (types == schema.TF_DATA_CAPTURED_FUNCTION) & has
    return np.unique(ids[sel])


def _tf_loop_roots(table: EventTable, types: np.ndarray, tf_data_ids: np.ndarray):
    """Root events of TF while-loop iterations and the iteration edges, if any loop exists."""
    step_id, has_id = table.int_stat("id", uint_ok=False)
    iter_num, has_iter = table.int_stat("iter_num", uint_ok=False)
    sel = np.flatnonzero((types == schema.EXECUTOR_STATE_PROCESS) & has_id & has_iter)
    sel = sel[~np.isin(step_id[sel], tf_data_ids)]
    if len(sel) == 0:
        return None
    frame = pd.DataFrame({"row": sel, "step": step_id[sel], "iter": iter_num[sel], "ts": table.start[sel]})
    per_loop = frame.groupby("step")["iter"].agg(["nunique", "max", "min"])
    trivial = (per_loop["nunique"] == 1) & (per_loop["min"] == 0)
    loops = per_loop.index[~trivial]
    frame = frame[frame["step"].isin(loops)]
    if frame.empty:
        return None
    first = frame.loc[frame.groupby(["step", "iter"])["ts"].idxmin()]
    first = first.sort_values("ts", kind="stable")
    roots = first["row"].to_numpy(np.int64)
    joined = frame.merge(first[["step", "iter", "row"]], on=["step", "iter"], suffixes=("", "_root"))
    joined = joined[joined["row"] != joined["row_root"]]
    return roots, joined["row_root"].to_numpy(np.int64), joined["row"].to_numpy(np.int64)


def _root_levels(table: EventTable, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(root level, is a root) per event: the `_r` stat, the level XProf's
    preprocessing gives serving/batching events, or 1 for `TraceContext`."""
    level_values, has_level = table.int_stat("_r", uint_ok=False)
    is_root = has_level.copy()
    level = np.where(has_level, level_values, 0)
    md_level = np.zeros(len(table.md_names), np.int64)
    for name, marker_level in schema.ROOT_MARKER_LEVELS.items():
        md_level[table.md_names == name] = marker_level
    marked = md_level[table.md] > 0
    level[marked] = md_level[table.md[marked]]
    is_root |= marked
    legacy = (types == schema.TRACE_CONTEXT) & ~is_root
    is_root |= legacy
    level[legacy] = 1
    return level, is_root


def _group_forest(table: EventTable, tpu_planes: list[int]) -> Grouping:
    n = table.n
    types = _event_types(table)
    all_lines = np.arange(len(table.line_ids))
    tpu_set = set(tpu_planes)
    cpu_lines = all_lines[~np.isin(table.line_planes, list(tpu_set))] if tpu_set else all_lines
    src, dst = _nesting_edges(table, cpu_lines)
    sources, targets = [src], [dst]
    nodes = table.events_of_lines(cpu_lines)

    # TPU planes: the grouping line's events are the nodes; events of other
    # lines inside a grouping event lend it their context stats.
    owner = np.arange(n)
    tpu_grouping_rows: list[np.ndarray] = []
    if tpu_set:
        tpu_nodes, owner = _tpu_grouping_nodes(table, tpu_planes, owner, tpu_grouping_rows)
        context_nodes = np.sort(np.concatenate([nodes, tpu_nodes]))
    else:
        context_nodes = nodes
    is_node = np.zeros(n, bool)
    is_node[nodes] = True
    for rows in tpu_grouping_rows:
        is_node[rows] = True
    node_rows = np.flatnonzero(is_node)

    s, t = _inter_thread_edges(table, types, node_rows)
    sources += s
    targets += t
    s, t = _context_edges(table, context_nodes, owner)
    sources += s
    targets += t

    tf_data_ids = _tf_data_step_ids(table, types)
    loop = _tf_loop_roots(table, types, tf_data_ids)
    if loop is not None:
        roots, loop_src, loop_dst = loop
        sources.append(loop_src)
        targets.append(loop_dst)
    edge_src = np.concatenate(sources) if sources else np.zeros(0, np.int64)
    edge_dst = np.concatenate(targets) if targets else np.zeros(0, np.int64)
    child_ptr, child_idx = csr(edge_src, edge_dst, n)
    parent_ptr, parent_idx = csr(edge_dst, edge_src, n)

    level, is_root = _root_levels(table, types)
    is_root &= is_node
    group = np.full(n, -1, np.int64)

    if loop is None:
        step_ids, has_step_id = table.int_stat("id", uint_ok=False)
        root_rows = np.flatnonzero(is_root & ~(has_step_id & np.isin(step_ids, tf_data_ids)))
        order = np.lexsort((table.start[root_rows], -level[root_rows]))
        roots = root_rows[order]
        force = False
    else:
        force = True
    given = propagate_groups(child_ptr, child_idx, parent_ptr, parent_idx, roots.astype(np.int64),
                             level.astype(np.int64), is_root, force, group, 0)

    processed = [(int(r), int(g)) for r, g in zip(roots, given) if g >= 0]
    next_id = max((g for _, g in processed), default=-1) + 1
    if tpu_grouping_rows:
        processed += _group_tpu_lockstep(child_ptr, child_idx, parent_ptr, parent_idx, tpu_grouping_rows,
                                         level, is_root, group, next_id)

    step_names: dict[int, str] = {}
    group_names: dict[int, str] = {}
    name_of = _GroupNamer(table, parent_ptr, parent_idx)
    for root, gid in processed:
        name = name_of(root, gid)
        group_names[gid] = name
        if not _is_implicit_root(table, root):
            step_names[root] = name

    is_eager = _eager_flags(table, types, child_ptr, child_idx)
    result = Grouping(group, step_names, is_eager, group_names)
    if tpu_set:
        _group_tpu_lines(table, tpu_planes, result)
    return result


def _is_implicit_root(table: EventTable, row: int) -> bool:
    if table.types[row] in schema.IMPLICIT_ROOT_TYPES:
        return True
    line_name = table.line_names[table.line[row]]
    return line_name in (schema.STEP_LINE, schema.SPARSE_CORE_STEP_LINE, schema.XLA_MODULE_LINE,
                         schema.SPARSE_CORE_MODULE_LINE)


class _GroupNamer:
    """XProf's GetGroupName: `graph_type` or root name prefix, then iter/step number."""

    def __init__(self, table: EventTable, parent_ptr: np.ndarray, parent_idx: np.ndarray) -> None:
        self.table = table
        self.parent_ptr = parent_ptr
        self.parent_idx = parent_idx
        self.graph_type = table.str_stat("graph_type")
        self.has_graph_type = table.int_stat("graph_type")[1]
        self.iter_num = table.int_stat("iter_num", uint_ok=False)
        self.step_num = table.int_stat("step_num", uint_ok=False)

    def _context(self, root: int, present: np.ndarray) -> int:
        if not present.any():
            return -1
        return int(nearest_ancestor(self.parent_ptr, self.parent_idx, root, present))

    def __call__(self, root: int, gid: int) -> str:
        prefix = ""
        found = self._context(root, self.has_graph_type)
        if found >= 0:
            prefix = str(self.table.capture.string(int(self.graph_type[found]))) + " "
        elif not _is_implicit_root(self.table, root):
            prefix = str(self.table.names_of(root)) + " "
        number = gid
        for values, present in (self.iter_num, self.step_num):
            found = self._context(root, present)
            if found >= 0:
                number = int(values[found])
                break
        return f"{prefix}{number}"


def _eager_flags(table: EventTable, types: np.ndarray, child_ptr, child_idx) -> np.ndarray:
    """`is_eager` on TfOpRun and KernelExecute events: the nearest EagerExecute
    above them (itself included) exists and is not a compiled function."""
    out = np.full(table.n, -1, np.int8)
    marked = (types == schema.TF_OP_RUN) | (types == schema.KERNEL_EXECUTE)
    if not marked.any():
        return out
    out[marked] = 0
    sources = np.flatnonzero(types == schema.EAGER_EXECUTE)
    if len(sources) == 0:
        return out
    is_func, has_is_func = table.int_stat("is_func", uint_ok=False)
    # IsCompiledFunc: no is_func stat, or a non-zero one.
    eager_source = has_is_func[sources] & (is_func[sources] == 0)
    owner = nearest_source(child_ptr, child_idx, sources.astype(np.int64))
    rows = np.flatnonzero(marked & (owner >= 0))
    out[rows] = eager_source[owner[rows]].astype(np.int8)
    return out


# --- TPU (GroupTpuEventsOSS) ---------------------------------------------------------------

def _grouping_line(table: EventTable, plane: int) -> int | None:
    lines = table.lines_of_plane(plane)
    names = table.line_names[lines]
    step = [ln for ln, nm in zip(lines, names) if nm in (schema.STEP_LINE, schema.SPARSE_CORE_STEP_LINE)]
    module = [ln for ln, nm in zip(lines, names) if nm in (schema.XLA_MODULE_LINE, schema.SPARSE_CORE_MODULE_LINE)]
    if step and table.line_count[step[-1]] > 0:
        return int(step[-1])
    if module and table.line_count[module[-1]] > 0:
        return int(module[-1])
    return None


def _tpu_grouping_nodes(table: EventTable, tpu_planes: list[int], owner: np.ndarray, grouping_rows: list):
    """Grouping-line events become nodes; other events included in one lend it their context stats."""
    nodes = []
    owner = owner.copy()
    for plane in tpu_planes:
        line = _grouping_line(table, plane)
        if line is None:
            continue
        parents = table.events_of_lines(np.array([line]))
        is_core = bool(schema.TPU_CORE_RE.match(table.plane_names[plane]))
        if is_core:
            grouping_rows.append(parents)
        nodes.append(parents)
        others = table.events_of_lines(np.array([ln for ln in table.lines_of_plane(plane) if ln != line]))
        if len(others) == 0 or len(parents) == 0:
            continue
        # First grouping event ending after the event's begin; it must include it.
        p_end = table.end[parents]
        idx = np.searchsorted(p_end, table.start[others], side="right")
        ok = idx < len(parents)
        cand = parents[np.minimum(idx, len(parents) - 1)]
        inside = ok & (table.start[cand] <= table.start[others]) & (table.end[others] <= table.end[cand])
        owner[others[inside]] = cand[inside]
        nodes.append(others[inside])
    all_nodes = np.concatenate(nodes) if nodes else np.zeros(0, np.int64)
    return np.unique(all_nodes), owner


def _group_tpu_lockstep(child_ptr, child_idx, parent_ptr, parent_idx, per_core: list[np.ndarray], level,
                        is_root, group, first_id: int) -> list[tuple[int, int]]:
    """When no TensorCore grouping event was grouped from the host, group each
    core's grouping events in order, every core starting from the same id."""
    if any((group[rows] >= 0).any() for rows in per_core):
        return []
    processed = []
    for rows in per_core:
        given = propagate_groups(child_ptr, child_idx, parent_ptr, parent_idx, rows.astype(np.int64),
                                 level.astype(np.int64), is_root, False, group, first_id)
        processed += [(int(r), int(g)) for r, g in zip(rows, given) if g >= 0]
    return processed


def _group_tpu_lines(table: EventTable, tpu_planes: list[int], grouping: Grouping) -> None:
    """Per TPU plane: merge consecutive same-group step events; other lines'
    events take the group of the grouping event they overlap."""
    for plane in tpu_planes:
        line = _grouping_line(table, plane)
        if line is None:
            continue
        parents = table.events_of_lines(np.array([line]))
        pg = grouping.group_id[parents]
        for other in table.lines_of_plane(plane):
            if other == line:
                continue
            rows = table.events_of_lines(np.array([other]))
            if len(rows) == 0:
                continue
            idx = np.searchsorted(table.end[parents], table.start[rows], side="left")
            ok = idx < len(parents)
            cand = np.minimum(idx, len(parents) - 1)
            overlaps = ok & (table.start[parents][cand] <= table.end[rows])
            grouping.group_id[rows[overlaps]] = np.where(pg[cand[overlaps]] >= 0, pg[cand[overlaps]], -1)
        if table.line_names[line] in (schema.STEP_LINE, schema.SPARSE_CORE_STEP_LINE):
            for row in parents:
                gid = int(grouping.group_id[row])
                if gid in grouping.group_names:
                    grouping.step_names[int(row)] = grouping.group_names[gid]
