"""Compiled kernels for the sequential rules: per-line nesting and graph walks.

Everything here loops over events in numba; callers prepare and consume flat
numpy arrays. Rules (docs/xprof/op_stats.md §1.2, §4.3, §4.5):

* nesting: within a line, in stored order, an event's parent is the nearest
  still-open earlier event whose span includes it (inclusive at both ends);
  events that do not include the next one are closed. This is both XProf's
  grouping nesting and its `AncestorStack` (self time = duration − Σ direct
  children).
* op-stack replay: XProf's host op stack, where an end pops entries until its
  own begin is found (and empties the stack when it is not).
* breadth-first walks over the event forest (group propagation, ancestor
  searches).

The kernels allocate nothing: each public function allocates its kernel's
outputs and scratch arrays with numpy and passes them in. numba compiles its own
code for every `np.zeros` / `np.full` / `np.empty` dtype and shape a kernel
calls, 0.1–0.5 s each, and a machine's first build paid about 3 s of CPU for
those of this module alone.
"""

from __future__ import annotations

import numpy as np
from numba.core import types

from reportgen.kernels import array_type, kernel


def line_parents(rows: np.ndarray, new_line: np.ndarray, start: np.ndarray, end: np.ndarray,
                 skip: np.ndarray) -> np.ndarray:
    """Parent row (or -1) of each entry of `rows` (global event rows in stored
    order, line after line; `new_line[i]` marks the first row of a line).
    Rows with `skip` set neither get a parent nor become one."""
    # The kernel always sees read-only arrays: the capture's columns are read-only and arrays computed
    # by callers are not, and numba compiles one specialisation per flag (≈ 0.5 s more of a first build).
    n = len(rows)
    parent = np.full(n, -1, np.int64)
    _line_parents(*(_read_only(a) for a in (rows, new_line, start, end, skip)), parent, np.empty(n, np.int64))
    return parent


def _read_only(values: np.ndarray) -> np.ndarray:
    view = np.asarray(values).view()
    view.flags.writeable = False
    return view


@kernel()
def _line_parents(rows, new_line, start, end, skip, parent, stack):
    n = len(rows)
    depth = 0
    for i in range(n):
        if new_line[i]:
            depth = 0
        r = rows[i]
        if skip[i]:
            continue
        while depth > 0:
            top = stack[depth - 1]
            if start[top] <= start[r] and end[r] <= end[top]:
                parent[i] = top
                break
            depth -= 1
        stack[depth] = r
        depth += 1


def replay_op_stack(line_break: np.ndarray, ts: np.ndarray, act_id: np.ndarray,
                    is_begin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replay sorted begin/end activities of host ops, one line at a time.

    Returns, per activity, the completed op's duration and children time at
    its end activity (-1 duration where no op completes)."""
    n = len(ts)
    duration = np.full(n, -1, np.int64)
    children = np.zeros(n, np.int64)
    _replay_op_stack(line_break, ts, act_id, is_begin, duration, children,
                     np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64))
    return duration, children


@kernel()
def _replay_op_stack(line_break, ts, act_id, is_begin, duration, children, stack_id, stack_start, stack_children):
    n = len(ts)
    depth = 0
    for i in range(n):
        if line_break[i]:
            depth = 0
        if is_begin[i]:
            stack_id[depth] = act_id[i]
            stack_start[depth] = ts[i]
            stack_children[depth] = 0
            depth += 1
            continue
        found = -1
        while depth > 0:
            depth -= 1
            if stack_id[depth] == act_id[i]:
                found = depth
                break
        if found < 0:
            continue
        d = ts[i] - stack_start[found]
        if d < 0:
            d = 0
        duration[i] = d
        children[i] = stack_children[found]
        if depth > 0:
            stack_children[depth - 1] += d


def propagate_groups(child_ptr: np.ndarray, child_idx: np.ndarray, parent_ptr: np.ndarray,
                     parent_idx: np.ndarray, roots: np.ndarray, root_level: np.ndarray, is_root: np.ndarray,
                     force: bool, group: np.ndarray, first_id: int) -> np.ndarray:
    """XProf's CreateEventGroups over roots in processing order.

    A root is grouped when it has no group yet and no ancestor is a root of
    the same level (unless `force`: TF-loop iteration roots always take a new
    id). Grouping hands the next id (from `first_id`) to the root and,
    breadth-first, to every descendant without a group (`group` is updated in
    place). Returns the group id given to each root (-1 when skipped)."""
    n = len(group)
    given = np.full(len(roots), -1, np.int64)
    _propagate_groups(child_ptr, child_idx, parent_ptr, parent_idx, roots, root_level, is_root, force, group,
                      first_id, given, np.full(n, -1, np.int64), np.empty(n, np.int64))
    return given


@kernel()
def _propagate_groups(child_ptr, child_idx, parent_ptr, parent_idx, roots, root_level, is_root, force, group,
                      first_id, given, seen, queue):
    next_id = first_id
    for k in range(len(roots)):
        root = roots[k]
        if not force:
            if group[root] >= 0:
                continue
            # Ancestor search (excluding the root itself) for a same-level root.
            stamp = 2 * k
            seen[root] = stamp
            head = 0
            tail = 0
            for j in range(parent_ptr[root], parent_ptr[root + 1]):
                p = parent_idx[j]
                if seen[p] != stamp:
                    seen[p] = stamp
                    queue[tail] = p
                    tail += 1
            blocked = False
            while head < tail:
                node = queue[head]
                head += 1
                if is_root[node] and root_level[node] == root_level[root]:
                    blocked = True
                    break
                for j in range(parent_ptr[node], parent_ptr[node + 1]):
                    p = parent_idx[j]
                    if seen[p] != stamp:
                        seen[p] = stamp
                        queue[tail] = p
                        tail += 1
            if blocked:
                continue
        gid = next_id
        next_id += 1
        given[k] = gid
        stamp = 2 * k + 1
        seen[root] = stamp
        head = 0
        tail = 1
        queue[0] = root
        while head < tail:
            node = queue[head]
            head += 1
            if group[node] >= 0:
                continue
            group[node] = gid
            for j in range(child_ptr[node], child_ptr[node + 1]):
                c = child_idx[j]
                if seen[c] != stamp:
                    seen[c] = stamp
                    queue[tail] = c
                    tail += 1


def nearest_ancestor(parent_ptr: np.ndarray, parent_idx: np.ndarray, node: int, flag: np.ndarray) -> int:
    """First node (breadth-first over parents, the node itself first) with `flag` set, or -1."""
    n = len(flag)
    return _nearest_ancestor(parent_ptr, parent_idx, node, flag, np.zeros(n, np.bool_), np.empty(n, np.int64))


@kernel()
def _nearest_ancestor(parent_ptr, parent_idx, node, flag, seen, queue):
    queue[0] = node
    seen[node] = True
    head = 0
    tail = 1
    while head < tail:
        cur = queue[head]
        head += 1
        if flag[cur]:
            return cur
        for j in range(parent_ptr[cur], parent_ptr[cur + 1]):
            p = parent_idx[j]
            if not seen[p]:
                seen[p] = True
                queue[tail] = p
                tail += 1
    return -1


def nearest_source(child_ptr: np.ndarray, child_idx: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Multi-source breadth-first walk down the forest: for every node, the
    source (an index into `sources`) nearest above it, or -1."""
    n = len(child_ptr) - 1
    owner = np.full(n, -1, np.int64)
    _nearest_source(child_ptr, child_idx, sources, owner, np.empty(n, np.int64))
    return owner


@kernel()
def _nearest_source(child_ptr, child_idx, sources, owner, queue):
    tail = 0
    for k in range(len(sources)):
        s = sources[k]
        if owner[s] < 0:
            owner[s] = k
            queue[tail] = s
            tail += 1
    head = 0
    while head < tail:
        cur = queue[head]
        head += 1
        for j in range(child_ptr[cur], child_ptr[cur + 1]):
            c = child_idx[j]
            if owner[c] < 0:
                owner[c] = owner[cur]
                queue[tail] = c
                tail += 1


def csr(source: np.ndarray, target: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjacency lists (stable in edge order) of a directed edge list."""
    order = np.argsort(source, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(source, minlength=n), out=ptr[1:])
    return ptr, target[order].astype(np.int64)


def self_times(parent: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Duration minus the durations of direct children (parent given as positions), in int64 as XProf
    computes it: exact (a float sum loses picoseconds past 2^53) and wrapping on absurd durations."""
    has = parent >= 0
    children = np.zeros(len(duration), np.int64)
    np.add.at(children, parent[has], duration[has].astype(np.int64))
    return duration - children


def inherit_down(parent: np.ndarray, own: np.ndarray, async_flag: np.ndarray) -> np.ndarray:
    """Descendant-of-a-stage flags along nesting parents (positions, parents first):
    desc[i] = async[i] or own[parent] or desc[parent]."""
    desc = np.zeros(len(parent), np.bool_)
    _inherit_down(parent, own, async_flag, desc)
    return desc


@kernel()
def _inherit_down(parent, own, async_flag, desc):
    for i in range(len(parent)):
        d = async_flag[i]
        p = parent[i]
        if p >= 0 and (own[p] or desc[p]):
            d = True
        desc[i] = d


def sweep_step_spans(seg_start: np.ndarray, time: np.ndarray, is_start: np.ndarray, etype: np.ndarray,
                     step_begin: np.ndarray, step_end: np.ndarray,
                     n_types: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """XProf's non-overlapping conversion and step breakdown in one sweep.

    Boundaries are sorted per step segment (time asc; ends before starts; higher
    type first). For each step, every consecutive boundary pair becomes a span
    typed with the highest type open (XProf's PriorityTracker, quirks
    included); its overlap with the step time adds to that type. Returns
    (type_ps[step, type], present[step, type], span_ps[step, type]) where
    `present` marks types that produced a span (XProf creates the map key even
    for a zero overlap) and `span_ps` is the spans' full length."""
    shape = (len(seg_start) - 1, n_types)
    # Flat (step × type) arrays: one array type for the kernel to compile, not a second for 2-D.
    type_ps = np.zeros(shape[0] * n_types, np.int64)
    present = np.zeros(shape[0] * n_types, np.bool_)
    span_ps = np.zeros(shape[0] * n_types, np.int64)
    _sweep_step_spans(seg_start, time, is_start, etype, step_begin, step_end, n_types, type_ps, present, span_ps,
                      np.zeros(n_types, np.int64))
    return type_ps.reshape(shape), present.reshape(shape), span_ps.reshape(shape)


@kernel()
def _sweep_step_spans(seg_start, time, is_start, etype, step_begin, step_end, n_types, type_ps, present, span_ps,
                      count):
    for s in range(len(seg_start) - 1):
        lo = seg_start[s]
        hi = seg_start[s + 1]
        for k in range(n_types):
            count[k] = 0
        current = 0
        for i in range(lo, hi - 1):
            t = etype[i]
            if is_start[i]:
                count[t] += 1
                if t > current:
                    current = t
            else:
                count[t] -= 1
                if t == current and count[t] == 0:
                    current = 0
                    for k in range(t - 1, -1, -1):
                        if count[k] > 0:
                            current = k
                            break
            b = time[i]
            e = time[i + 1]
            if e < b:
                e = b
            cell = s * n_types + current
            present[cell] = True
            span_ps[cell] += e - b
            ob = b if b > step_begin[s] else step_begin[s]
            oe = e if e < step_end[s] else step_end[s]
            # Timespan overlap is inclusive: touching spans overlap by 0.
            if oe > ob:
                type_ps[cell] += oe - ob


def bucket_by_key(key: np.ndarray, n_keys: int, order: np.ndarray) -> np.ndarray:
    """Counting sort of row numbers by key (stable), into `order` (as long as `key`; int32 holds the
    row numbers of up to 2^31 rows in half the memory): start offsets per key."""
    start = np.zeros(n_keys + 1, np.int64)
    _bucket_by_key(key, n_keys, order, start, np.empty(n_keys, np.int64))
    return start


@kernel()
def _bucket_by_key(key, n_keys, order, start, fill):
    for k in key:
        start[k + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
        fill[k] = start[k]
    for i in range(len(key)):
        k = key[i]
        order[fill[k]] = i
        fill[k] += 1


_B, _I4, _I8 = types.boolean, types.int32, types.int64
# The argument types a build passes (line_parents passes read-only views): `precompile` compiles
# exactly these, ahead, and tests/test_kernels.py checks that a real build needs nothing else.
# inherit_down is left to compile where used: the bundled sample's hosts never reach it.
_A8 = array_type(_I8)
SIGNATURES = {
    _line_parents: (array_type(_I8, True), array_type(_B, True), array_type(_I8, True), array_type(_I8, True),
                    array_type(_B, True), _A8, _A8),
    _replay_op_stack: (array_type(_B), _A8, _A8, array_type(_B)) + (_A8,) * 5,
    _propagate_groups: (_A8,) * 6 + (array_type(_B), _B, _A8, _I8) + (_A8,) * 3,
    _nearest_ancestor: (_A8, _A8, _I8, array_type(_B), array_type(_B), _A8),
    _nearest_source: (_A8,) * 5,
    _sweep_step_spans: (_A8, _A8, array_type(_B)) + (_A8,) * 3 + (_I8, _A8, array_type(_B), _A8, _A8),
    _bucket_by_key: (array_type(_I4), _I8, array_type(_I4), _A8, _A8),
}


def precompile() -> None:
    """Compile the kernels for a build's argument types (the "analysis" group of `reportgen.kernels`)."""
    for dispatcher, signature in SIGNATURES.items():
        dispatcher.compile(signature)
