"""tf.data bottleneck analysis: input pipelines, their executions and the
iterator that holds each execution back (tf_data_bottleneck.md).

Every `Iterator::…` event on the host threads is one call of one iterator
(its `id` stat; `parent_id` names the iterator that calls it). A *root*
iterator event (`Iterator::Root`, two name components) is one execution of an
input pipeline, i.e. one GetNext. An iterator's children are the tf.data
events nested directly inside it on the same thread, plus, for asynchronous
iterators (prefetch, parallel map, map-and-batch…), the producer iterators
that computed the elements it consumed: a `…Produce` event's first iterator
child is keyed by (its `parent_id`, the produce `element_id`) and joined to
the iterator around the matching `…Consume` event.

For one execution each reachable iterator call adds its duration, its self
time (duration minus the overlap with its tf.data children) and one call to
its iterator; a call is *blocking* (on the critical path) when every call
above it overlaps its parent in time, i.e. the consumer was waiting for it.
The bottleneck is the blocking iterator with the largest self time.

Deliberate difference from XProf: XProf reads `id`, `parent_id` and
`element_id` with IntValue(), which yields 0 for the ids TensorFlow stores
as uint64 (those above 2^63), so distinct iterators collapse onto id 0.
Here ids are the full 64-bit values. XProf also numbers pipelines in hash
order; here they are numbered by their first execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.capture import KIND_INT64, KIND_UINT64, HostCapture, search_owners
from reportgen.core.events.nesting import line_parents
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import TF_DATA

SLOW_CALL_THRESHOLD_PS = 50 * 1_000_000  # 50 µs, from the TF data performance guide
MAX_DEPTH = 100
DEVICE_SECOND_ITERATOR = "Iterator::Prefetch::Generator"
ASYNC_ITERATORS = frozenset(
    {"Prefetch", "ParallelInterleave", "ParallelMap", "ParseExample", "MapAndBatch", "DataService",
     "LegacyParallelInterleave", "ParallelBatch"}
)
_STAGES = ("Prefetch", "ParallelInterleave", "ParallelMap", "MapAndBatch", "ParseExample", "ParallelBatch")
PRODUCE_EVENTS = tuple(s + "Produce" for s in _STAGES)
CONSUME_EVENTS = tuple(s + "Consume" for s in _STAGES)
HOST = "HOST"
DEVICE = "DEVICE"
ITERATOR_STAT_COLUMNS = ["id", "start_ps", "duration_ps", "self_time_ps", "is_blocking", "num_calls"]


@dataclass
class IteratorInfo:
    """What the trace says about one iterator (from its first call)."""

    id: int
    parent_id: int | None
    name: str  # last component of the long name, e.g. MapAndBatch
    long_name: str  # Iterator::Root::MapAndBatch
    is_async: bool
    dataset: str = ""  # the `name` stat: the dataset op(s), e.g. fused(MapDataset:3,BatchDatasetV2:4)
    params: dict[str, str] = field(default_factory=dict)  # the call's other stats (parallelism, …)


@dataclass
class InputPipeline:
    id: int  # the root iterator's id
    name: str  # Host:0, Device:0
    type: str  # HOST or DEVICE
    # One row per execution, slowest first: start_ps, duration_ps,
    # bottleneck_id, bottleneck_latency_ps.
    executions: pd.DataFrame
    # Iterator stats of the slowest execution (ITERATOR_STAT_COLUMNS).
    slowest: pd.DataFrame
    # Per iterator over all executions: id, self_time_ps, duration_ps,
    # num_calls, bottleneck_count.
    iterator_totals: pd.DataFrame

    @property
    def count(self) -> int:
        return len(self.executions)

    @property
    def avg_latency_ps(self) -> int:
        return int(self.executions["duration_ps"].sum()) // max(1, self.count)

    @property
    def min_latency_ps(self) -> int:
        return int(self.executions["duration_ps"].min())

    @property
    def max_latency_ps(self) -> int:
        return int(self.executions["duration_ps"].max())

    @property
    def num_slow_calls(self) -> int:
        return int((self.executions["duration_ps"] > SLOW_CALL_THRESHOLD_PS).sum())

    @property
    def bottleneck_id(self) -> int:
        return int(self.executions["bottleneck_id"].iloc[0])

    @property
    def bottleneck_latency_ps(self) -> int:
        return int(self.executions["bottleneck_latency_ps"].iloc[0])


@dataclass
class TfDataStats:
    host: str
    iterators: dict[int, IteratorInfo] = field(default_factory=dict)
    pipelines: list[InputPipeline] = field(default_factory=list)

    @property
    def has_events(self) -> bool:
        return bool(self.pipelines)


def iterator_name(long_name: str) -> str:
    """`Iterator::Root::Prefetch::MapAndBatch` → `MapAndBatch` (XProf's IteratorName)."""
    return long_name.rsplit("::", 1)[-1]


@dataclass
class _PlaneEvents:
    """The host plane's events, aligned arrays in stored order."""

    rows: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    md: np.ndarray  # metadata row
    md_names: np.ndarray  # object, per metadata row
    tf_data: np.ndarray
    parent: np.ndarray
    produce_type: np.ndarray  # int8: index in PRODUCE_EVENTS, -1 for other events
    consume_type: np.ndarray  # int8: index in CONSUME_EVENTS, -1 for other events

    def name(self, pos: int) -> str:
        return str(self.md_names[self.md[pos]])


def tf_data_stats(table: EventTable, host: str) -> TfDataStats:
    result = TfDataStats(host=host)
    plane = table.host_plane
    if plane is None:
        return result
    rows = table.events_of_lines(table.lines_of_plane(plane))
    md = table.md[rows]
    # Per metadata row (few), then per event through its metadata row: no sort of the events.
    present = table.mds_of(rows)
    md_tf_data = np.zeros(len(table.md_names), bool)
    md_tf_data[present] = [table.md_tf_op[m].category == TF_DATA for m in present]
    if not md_tf_data.any():
        return result

    md_names = table.md_names
    begin = table.start[rows]
    end = table.end[rows]
    line = table.line[rows]
    # XProf's IntValue of `_a`: only int64 values mark an event asynchronous.
    async_value, is_async = table.int_stat_at("_a", rows, uint_ok=False)
    skip = is_async & (async_value != 0)
    new_line = np.concatenate([[True], line[1:] != line[:-1]]) if len(line) else np.zeros(0, bool)
    parent = line_parents(np.arange(len(rows), dtype=np.int64), new_line, begin, end, skip)
    del line
    ev = _PlaneEvents(rows, begin, end, md, md_names, md_tf_data[md], parent,
                      _name_index(md_names, PRODUCE_EVENTS)[md], _name_index(md_names, CONSUME_EVENTS)[md])

    # Iterator ids are 64-bit and stored as int64 or uint64 (same bits).
    ids, has_id = table.int_stat_at("id", rows)
    parent_ids, has_parent = table.int_stat_at("parent_id", rows)
    element, has_element = table.int_stat_at("element_id", rows)

    device_second = (md_names == DEVICE_SECOND_ITERATOR)[md]
    iterator_event = ev.tf_data & ~device_second
    result.iterators, device_pipeline_ids = _iterator_metadata(
        table.capture, ev, iterator_event, device_second, has_id, ids, has_parent, parent_ids
    )

    edge_parent, edge_child = _tf_data_edges(ev, has_id, ids, has_parent, parent_ids, has_element, element)
    overlap = np.maximum(
        0, np.minimum(end[edge_parent], end[edge_child]) - np.maximum(begin[edge_parent], begin[edge_child])
    )
    self_time = (end - begin) - np.bincount(edge_parent, weights=overlap, minlength=len(rows)).astype(np.int64)

    md_depth_2 = np.zeros(len(md_names), bool)  # `Iterator::<name>`: a pipeline's root iterator
    md_depth_2[present] = [len(md_names[m].split("::")) == 2 for m in present]
    roots = np.flatnonzero(iterator_event & md_depth_2[md] & has_id)
    visits = _visit_executions(roots, has_id, edge_parent, edge_child, overlap, len(rows))
    stats = _iterator_stats(visits, ids, begin, end, self_time)
    bottlenecks = _bottlenecks(stats, len(roots))
    result.pipelines = _pipelines(roots, ids[roots], begin, end, stats, bottlenecks, device_pipeline_ids)
    return result


def _iterator_metadata(capture, ev, iterator_event, device_second, has_id, ids, has_parent, parent_ids):
    """First call of every iterator (and the device pipelines' roots)."""
    iterators: dict[int, IteratorInfo] = {}
    device_pipeline_ids: set[int] = set()
    frame = pd.DataFrame({"pos": np.arange(len(ev.rows)), "id": ids})
    firsts = frame[iterator_event & has_id].drop_duplicates("id")
    second = frame[device_second & has_id].drop_duplicates("id")
    second = second[~second["id"].isin(firsts["id"])]
    positions = np.concatenate([firsts["pos"].to_numpy(), second["pos"].to_numpy()])
    params = _event_params(capture, ev.rows[positions])
    for k, pos in enumerate(positions):
        long_name = ev.name(pos)
        name = iterator_name(long_name)
        info_params = params.get(int(ev.rows[pos]), {})
        info = IteratorInfo(
            id=int(ids[pos]),
            parent_id=int(parent_ids[pos]) if has_parent[pos] else None,
            name=name,
            long_name=long_name,
            is_async=name in ASYNC_ITERATORS,
            dataset=info_params.pop("name", ""),
            params=info_params,
        )
        iterators[info.id] = info
        if k >= len(firsts) and info.parent_id is not None:
            device_pipeline_ids.add(info.parent_id)
    return iterators, device_pipeline_ids


def _event_params(capture: HostCapture, event_rows: np.ndarray) -> dict[int, dict[str, str]]:
    """The stats of a few events as text, by event row (ids left out)."""
    stats = capture.event_stats
    # Stats are stored in event order: each event's stats are one contiguous slice.
    wanted = np.unique(event_rows)
    first = search_owners(stats.owner, wanted, side="left")
    last = search_owners(stats.owner, wanted, side="right")
    sel = np.concatenate([np.arange(a, b) for a, b in zip(first, last)]) if len(wanted) else np.zeros(0, np.int64)
    out: dict[int, dict[str, str]] = {}
    for i in sel:
        key = str(capture.string(int(stats.key[i])))
        if key in ("id", "parent_id"):
            continue
        if stats.str_id[i] >= 0:
            value = capture.string(int(stats.str_id[i]))
            text = value if isinstance(value, str) else "<opaque bytes>"
        elif stats.kind[i] == KIND_UINT64:
            text = str(int(np.int64(stats.raw[i]).view(np.uint64)))
        elif stats.kind[i] == KIND_INT64:
            text = str(int(stats.raw[i]))
        else:
            text = f"{float(np.int64(stats.raw[i]).view(np.float64)):g}"
        out.setdefault(int(stats.owner[i]), {}).setdefault(key, text)
    return out


def _tf_data_edges(ev: _PlaneEvents, has_id, ids, has_parent, parent_ids, has_element, element):
    """Parent → child edges between tf.data events, each parent's children in XProf's order:
    same-thread nesting first, then producer iterators matched to its consume events."""
    positions = np.arange(len(ev.rows))
    nested = positions[(ev.parent >= 0) & ev.tf_data]
    nested = nested[ev.tf_data[ev.parent[nested]]]
    frames = [pd.DataFrame({"parent": ev.parent[nested], "rank": 0, "order": nested, "child": nested})]

    produce_type, consume_type = ev.produce_type, ev.consume_type

    # Producer iterators: the first tf.data child of each produce event.
    children = positions[(ev.parent >= 0) & ev.tf_data]
    children = children[produce_type[ev.parent[children]] >= 0]
    first = pd.DataFrame({"produce": ev.parent[children], "child": children}).drop_duplicates("produce")
    first = first[has_element[first["produce"].to_numpy()] & has_parent[first["child"].to_numpy()]]
    producers = pd.DataFrame(
        {
            "iterator": parent_ids[first["child"].to_numpy()],
            "element": element[first["produce"].to_numpy()],
            "p_type": produce_type[first["produce"].to_numpy()],
            "p_order": first["produce"].to_numpy(),
            "child": first["child"].to_numpy(),
        }
    )
    # Consumer iterators: the iterator a consume event is nested in.
    consumes = positions[(consume_type >= 0) & has_element & (ev.parent >= 0)]
    consumer = ev.parent[consumes] if len(consumes) else consumes
    ok = ev.tf_data[consumer] & has_id[consumer]
    consumes, consumer = consumes[ok], consumer[ok]
    consumers = pd.DataFrame(
        {"iterator": ids[consumer], "element": element[consumes], "c_type": consume_type[consumes],
         "c_order": consumes, "parent": consumer}
    )
    if len(producers) and len(consumers):
        links = consumers.merge(producers, on=["iterator", "element"])
        links = links.sort_values(["c_type", "c_order", "p_type", "p_order"], kind="stable")
        frames.append(pd.DataFrame({"parent": links["parent"].to_numpy(), "rank": 1,
                                    "order": np.arange(len(links)), "child": links["child"].to_numpy()}))
    edges = pd.concat(frames, ignore_index=True).sort_values(["parent", "rank", "order"], kind="stable")
    return edges["parent"].to_numpy(np.int64), edges["child"].to_numpy(np.int64)


def _name_index(names: np.ndarray, wanted: tuple[str, ...]) -> np.ndarray:
    """Position of each (distinct) name in `wanted`, -1 when absent."""
    lookup = {name: i for i, name in enumerate(wanted)}
    return np.array([lookup.get(n, -1) for n in names], dtype=np.int8)


def _visit_executions(roots, has_id, edge_parent, edge_child, overlap, n_events) -> pd.DataFrame:
    """Every iterator call each execution reaches, with whether it is blocking.

    XProf recurses depth-first from each root; the same calls are reached
    here level by level for all executions at once.
    """
    ptr = np.zeros(n_events + 1, dtype=np.int64)
    np.add.at(ptr, edge_parent + 1, 1)
    ptr = np.cumsum(ptr)
    execution = np.arange(len(roots), dtype=np.int64)
    node = roots.astype(np.int64)
    blocking = np.ones(len(roots), dtype=bool)
    levels = []
    for level in range(MAX_DEPTH + 1):
        keep = has_id[node]  # a call without an id is neither counted nor descended into
        execution, node, blocking = execution[keep], node[keep], blocking[keep]
        if len(node) == 0:
            break
        levels.append(pd.DataFrame({"execution": execution, "node": node, "blocking": blocking, "level": level}))
        if level == MAX_DEPTH:
            break
        degree = ptr[node + 1] - ptr[node]
        source = np.repeat(np.arange(len(node)), degree)
        offset = np.arange(len(source)) - np.repeat(np.cumsum(degree) - degree, degree)
        edge = ptr[node][source] + offset
        execution = execution[source]
        blocking = blocking[source] & (overlap[edge] > 0)
        node = edge_child[edge]
    if not levels:
        return pd.DataFrame({"execution": [], "node": [], "blocking": [], "level": []})
    return pd.concat(levels, ignore_index=True)


def _iterator_stats(visits: pd.DataFrame, ids, begin, end, self_time) -> pd.DataFrame:
    """Per (execution, iterator): XProf's IteratorStat."""
    node = visits["node"].to_numpy(np.int64)
    frame = pd.DataFrame(
        {
            "execution": visits["execution"].to_numpy(np.int64),
            "id": ids[node],
            "start_ps": begin[node],
            "duration_ps": end[node] - begin[node],
            "self_time_ps": self_time[node],
            "is_blocking": visits["blocking"].to_numpy(bool),
        }
    )
    grouped = frame.groupby(["execution", "id"], sort=False)
    return grouped.agg(
        start_ps=("start_ps", "first"),
        duration_ps=("duration_ps", "sum"),
        self_time_ps=("self_time_ps", "sum"),
        is_blocking=("is_blocking", "any"),
        num_calls=("start_ps", "size"),
    ).reset_index()


def _bottlenecks(stats: pd.DataFrame, executions: int) -> pd.DataFrame:
    """Per execution: the blocking iterator with the largest self time (0, 0 if none)."""
    out = pd.DataFrame({"bottleneck_id": np.zeros(executions, np.int64),
                        "bottleneck_latency_ps": np.zeros(executions, np.int64)})
    candidates = stats[stats["is_blocking"] & (stats["self_time_ps"] > 0)]
    if len(candidates):
        best = candidates.loc[candidates.groupby("execution", sort=False)["self_time_ps"].idxmax()]
        out.loc[best["execution"].to_numpy(), "bottleneck_id"] = best["id"].to_numpy()
        out.loc[best["execution"].to_numpy(), "bottleneck_latency_ps"] = best["self_time_ps"].to_numpy()
    return out


def _pipelines(roots, root_ids, begin, end, stats, bottlenecks, device_pipeline_ids) -> list[InputPipeline]:
    """One InputPipeline per root iterator id, in order of first execution.

    Every grouping is done once for all pipelines (a tiled capture has
    hundreds of them): per-pipeline boolean filters made this quadratic."""
    executions = pd.DataFrame(
        {"pipeline": root_ids, "start_ps": begin[roots], "duration_ps": end[roots] - begin[roots]}
    ).join(bottlenecks)
    order = executions.groupby("pipeline", sort=False)["start_ps"].min().sort_values(kind="stable")
    # Slowest first, ties by start: one stable sort, then split per pipeline (groups keep that order).
    ranked = executions.sort_values(["duration_ps", "start_ps"], ascending=[False, True], kind="stable")
    ranked_rows = ranked.groupby("pipeline", sort=False).indices
    ranked_index = ranked.index.to_numpy()
    ranked = ranked.drop(columns="pipeline")
    stat_rows = stats.groupby("execution", sort=False).indices
    iterator_stats = stats[ITERATOR_STAT_COLUMNS]
    totals = _iterator_totals(stats, executions)
    total_rows = totals.groupby("pipeline", sort=False).indices
    totals = totals.drop(columns="pipeline")
    no_rows = np.zeros(0, np.int64)
    pipelines = []
    counters = {HOST: 0, DEVICE: 0}
    for pipeline_id in order.index:
        kind = DEVICE if pipeline_id in device_pipeline_ids else HOST
        name = f"{'Device' if kind == DEVICE else 'Host'}:{counters[kind]}"
        counters[kind] += 1
        mine = ranked_rows[pipeline_id]
        slowest = iterator_stats.iloc[stat_rows.get(ranked_index[mine[0]], no_rows)].reset_index(drop=True)
        pipelines.append(
            InputPipeline(
                id=int(pipeline_id),
                name=name,
                type=kind,
                executions=ranked.iloc[mine].reset_index(drop=True),
                slowest=slowest,
                iterator_totals=totals.iloc[total_rows.get(pipeline_id, no_rows)].reset_index(drop=True),
            )
        )
    return pipelines


def _iterator_totals(stats: pd.DataFrame, executions: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline and iterator, over all of the pipeline's executions: self time, duration,
    calls, and how many executions it was the bottleneck of (rows in first-seen order)."""
    pipeline = executions["pipeline"].to_numpy()
    totals = stats.assign(pipeline=pipeline[stats["execution"].to_numpy()]).groupby(
        ["pipeline", "id"], sort=False).agg(
        self_time_ps=("self_time_ps", "sum"), duration_ps=("duration_ps", "sum"), num_calls=("num_calls", "sum")
    )
    blocked = executions[executions["bottleneck_latency_ps"] > 0]
    counts = blocked.groupby(["pipeline", "bottleneck_id"], sort=False).size()
    counts.index = counts.index.set_names(["pipeline", "id"])
    totals["bottleneck_count"] = counts.reindex(totals.index, fill_value=0).to_numpy(np.int64)
    return totals.reset_index()


# --- the run-level analysis ----------------------------------------------------------


@dataclass
class BottleneckCandidate:
    """XProf's TfDataBottleneckAnalysis row: one host pipeline's slowest execution."""

    host: str
    input_pipeline: str
    pipeline_id: int
    max_latency_ps: int
    iterator_id: int
    iterator_name: str
    iterator_long_name: str
    iterator_latency_ps: int


@dataclass
class TfDataAnalysis:
    candidates: list[BottleneckCandidate]
    is_input_bound: bool
    summary: str

    @property
    def top(self) -> BottleneckCandidate | None:
        return self.candidates[0] if self.candidates else None


SUMMARY_SLOW = (
    "Your profile has a tf.data input pipeline slower than 50 us. For each slow input pipeline, below shows a "
    "bottleneck in the input pipeline and a suggestion on how to fix it."
)
SUMMARY_FAST = (
    "Your profile does not have any tf.data input pipeline slower than 50 us. Your job could be still input "
    "bound if this profile didn't capture all workers."
)
SUMMARY_NONE = (
    "No tf.data activity captured in your profile. If your job uses tf.data, try to capture a longer profile."
)


def bottleneck_analysis(stats: list[TfDataStats]) -> TfDataAnalysis:
    """XProf's CombinedTfDataStats: host pipelines (device ones are ignored),
    slowest first, and the summary statement."""
    candidates = []
    for host_stats in stats:
        for pipeline in host_stats.pipelines:
            if pipeline.type != HOST:
                continue
            info = host_stats.iterators.get(pipeline.bottleneck_id)
            candidates.append(
                BottleneckCandidate(
                    host=host_stats.host,
                    input_pipeline=pipeline.name,
                    pipeline_id=pipeline.id,
                    max_latency_ps=pipeline.max_latency_ps,
                    iterator_id=pipeline.bottleneck_id,
                    iterator_name=info.name if info else "",
                    iterator_long_name=info.long_name if info else "",
                    iterator_latency_ps=pipeline.bottleneck_latency_ps,
                )
            )
    candidates.sort(key=lambda c: -c.max_latency_ps)
    worst = candidates[0].max_latency_ps if candidates else 0
    if worst > SLOW_CALL_THRESHOLD_PS:
        return TfDataAnalysis(candidates, True, SUMMARY_SLOW)
    if worst > 0:
        return TfDataAnalysis(candidates, False, SUMMARY_FAST)
    return TfDataAnalysis(candidates, False, SUMMARY_NONE)
