"""`tf.train.ProfilerHook` step stats: the op table (time per op and op type, by device) and one step per file.

The step files are Chrome trace JSON (`timeline-<step>.json`), read one at a time by the trace export
(`trace_export.py`), which hands each to `TimelineSteps.add` before dropping it: only each file's per-op
totals are kept. The result is the step stats page's part (`sections.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reportgen.legacy.chrome_trace import ChromeTrace, parse_chrome_trace
from reportgen.loaders.older_formats import timeline_step


@dataclass
class LegacyTimeline:
    sources: list[str]
    ops: pd.DataFrame  # device, op, op_type, occurrences, total_us, avg_us, percent
    steps: pd.DataFrame  # step, start_us, end_us, step_time_ms, ops


TIMELINE_OP_COLUMNS = ["device", "op", "op_type", "occurrences", "total_us", "avg_us", "percent_of_device"]


class TimelineSteps:
    """The op table (time per op and op type, by device) and one step per file,
    accumulated file by file: only each file's per-op totals are kept."""

    def __init__(self):
        self._totals: list[pd.DataFrame] = []
        self._steps: list[tuple] = []
        self._sources: list[str] = []

    @property
    def sources(self) -> list[str]:
        return list(self._sources)

    def add(self, trace: ChromeTrace) -> None:
        step = timeline_step(trace.source)
        step = len(self._steps) if step is None else step
        self._sources.append(trace.source)
        events = pd.DataFrame(trace.events)
        if events.empty or "ph" not in events:
            self._steps.append((step, 0.0, 0.0, 0.0, 0))
            return
        devices = {e.get("pid"): (e.get("args") or {}).get("name", str(e.get("pid")))
                   for e in trace.meta if e.get("name") == "process_name"}
        ops = events[events["ph"] == "X"].copy()
        if ops.empty:
            self._steps.append((step, 0.0, 0.0, 0.0, 0))
            return
        ops["ts"] = ops["ts"].astype(float)
        ops["dur"] = ops["dur"].astype(float)
        args = ops["args"] if "args" in ops else pd.Series([{}] * len(ops), index=ops.index)
        ops["op"] = [(a if isinstance(a, dict) else {}).get("name", n) for a, n in zip(args, ops["name"])]
        ops["op_type"] = [(a if isinstance(a, dict) else {}).get("op", n) for a, n in zip(args, ops["name"])]
        ops["device"] = ops["pid"].map(devices).fillna(ops["pid"].astype(str))
        self._totals.append(ops.groupby(["device", "op", "op_type"], sort=False)["dur"]
                            .agg(occurrences="size", total_us="sum").reset_index())
        start, end = ops["ts"].min(), (ops["ts"] + ops["dur"]).max()
        self._steps.append((step, start, end, (end - start) / 1e3, len(ops)))

    def result(self) -> LegacyTimeline:
        if self._totals:
            table = (pd.concat(self._totals, ignore_index=True)
                     .groupby(["device", "op", "op_type"], sort=False)[["occurrences", "total_us"]].sum()
                     .reset_index())
            table["avg_us"] = table["total_us"] / table["occurrences"]
            device_total = table.groupby("device")["total_us"].transform("sum")
            table["percent_of_device"] = 100 * table["total_us"] / device_total.where(device_total > 0, 1)
            table = table.sort_values(["device", "total_us"], ascending=[True, False], ignore_index=True)
        else:
            table = pd.DataFrame(columns=TIMELINE_OP_COLUMNS)
        step_frame = pd.DataFrame(self._steps, columns=["step", "start_us", "end_us", "step_time_ms", "ops"])
        return LegacyTimeline(sources=list(self._sources), ops=table[TIMELINE_OP_COLUMNS],
                              steps=step_frame.sort_values("step", ignore_index=True))


def timeline_from_chrome_traces(files: list[tuple[str, bytes]]) -> LegacyTimeline:
    """Op table (time per op and op type, by device) and one step per file."""
    steps = TimelineSteps()
    for name, data in files:
        steps.add(parse_chrome_trace(name, data))
    return steps.result()
