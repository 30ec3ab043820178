"""The iterator graph of one input pipeline, rebuilt from the trace.

Iterators name their caller (`parent_id`), so the pipeline is a tree from
its root iterator. Each node carries what it did in the pipeline's slowest
execution (calls, time, self time, whether it was on the critical path) and
over all executions; rows come out depth-first for an indented display.
"""

from __future__ import annotations

import pandas as pd

from reportgen.core.input.tf_data import InputPipeline, IteratorInfo, TfDataStats

TREE_COLUMNS = [
    "depth", "id", "name", "long_name", "dataset", "is_async", "called", "num_calls", "duration_ps", "self_time_ps",
    "self_percent", "is_blocking", "is_bottleneck", "total_self_time_ps", "bottleneck_count",
]


def pipeline_iterators(stats: TfDataStats, pipeline: InputPipeline) -> list[IteratorInfo]:
    """Every iterator of the pipeline, root first then depth-first."""
    return [stats.iterators[i] for i, _depth in _walk(stats, pipeline) if i in stats.iterators]


def _walk(stats: TfDataStats, pipeline: InputPipeline) -> list[tuple[int, int]]:
    """(iterator id, depth) depth-first from the root; children by first call in the slowest execution."""
    children: dict[int, list[int]] = {}
    for info in stats.iterators.values():
        if info.parent_id is not None:
            children.setdefault(info.parent_id, []).append(info.id)
    first_call = dict(zip(pipeline.slowest["id"], pipeline.slowest["start_ps"]))

    def key(i: int) -> tuple:
        return (first_call.get(i, float("inf")), str(i))

    order: list[tuple[int, int]] = []
    seen: set[int] = set()

    def walk_from(start: int, start_depth: int) -> None:
        stack = [(start, start_depth)]
        while stack:
            node, depth = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            order.append((node, depth))
            kids = sorted({k for k in children.get(node, []) if k not in seen}, key=key)
            stack.extend((k, depth + 1) for k in reversed(kids))

    walk_from(pipeline.id, 0)
    # Iterators the executions reached but whose caller chain the trace did not
    # show hang off the root.
    for stray in sorted(set(pipeline.iterator_totals["id"]) - seen, key=key):
        walk_from(stray, 1)
    return order


def iterator_tree(stats: TfDataStats, pipeline: InputPipeline) -> pd.DataFrame:
    slowest = pipeline.slowest.set_index("id")
    totals = pipeline.iterator_totals.set_index("id")
    total_self = totals["self_time_ps"].to_dict()
    bottleneck_counts = totals["bottleneck_count"].to_dict()
    latency = max(1, int(pipeline.executions["duration_ps"].iloc[0]))
    rows = []
    for iterator_id, depth in _walk(stats, pipeline):
        info = stats.iterators.get(iterator_id)
        in_slowest = iterator_id in slowest.index
        row = slowest.loc[iterator_id] if in_slowest else None
        rows.append(
            {
                "depth": depth,
                "id": iterator_id,
                "name": info.name if info else "",
                "long_name": info.long_name if info else "",
                "dataset": info.dataset if info else "",
                "is_async": bool(info.is_async) if info else False,
                "called": in_slowest,
                "num_calls": int(row["num_calls"]) if in_slowest else 0,
                "duration_ps": int(row["duration_ps"]) if in_slowest else 0,
                "self_time_ps": int(row["self_time_ps"]) if in_slowest else 0,
                "self_percent": 100.0 * int(row["self_time_ps"]) / latency if in_slowest else 0.0,
                "is_blocking": bool(row["is_blocking"]) if in_slowest else False,
                "is_bottleneck": iterator_id == pipeline.bottleneck_id and pipeline.bottleneck_latency_ps > 0,
                "total_self_time_ps": int(total_self.get(iterator_id, 0)),
                "bottleneck_count": int(bottleneck_counts.get(iterator_id, 0)),
            }
        )
    return pd.DataFrame(rows, columns=TREE_COLUMNS)
