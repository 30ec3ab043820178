"""Op metrics databases: XProf's `OpMetricsDb` as a DataFrame plus totals.

One row per op, keyed by (`hlo_module_id`, `name`) in order of first
appearance, with XProf's fields (docs/xprof/op_stats.md §4.1):

    hlo_module_id, name, category, provenance, long_name, is_eager,
    occurrences, time_ps (inclusive), self_time_ps, min_time_ps,
    flops, model_flops, bytes_accessed (totals over occurrences), num_cores

An `IDLE` row (category `IDLE`, 0 occurrences) carries the time not covered
by any op. Databases combine across threads, devices and hosts with
`combine_dbs` (XProf's OpMetricsDbCombiner), and a device database folds into
framework ops with `framework_op_db` (§4.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.events.tf_op import UNKNOWN_TYPE, parse_tf_op_fullname
from reportgen.core.frames import concat_rows, empty_frame

IDLE = "IDLE"

TEXT_COLUMNS = ["name", "category", "provenance", "long_name"]
SUM_COLUMNS = ["occurrences", "time_ps", "self_time_ps", "flops", "model_flops", "bytes_accessed"]
COLUMNS = ["hlo_module_id", "name", "category", "provenance", "long_name", "is_eager", *SUM_COLUMNS,
           "min_time_ps", "num_cores"]
KEY = ["hlo_module_id", "name"]


@empty_frame
def empty_metrics() -> pd.DataFrame:
    # Each column typed from the start: a frame changed after construction keeps unconsolidated blocks,
    # which every copy of it consolidated again (≈ 0.08 ms a copy instead of 0.02).
    return pd.DataFrame({c: pd.Series(dtype=object if c in TEXT_COLUMNS else bool if c == "is_eager" else np.int64)
                         for c in COLUMNS})


def metrics_frame(**columns) -> pd.DataFrame:
    """A metrics frame from partial columns; missing ones are '' / 0 / False, others than COLUMNS left out."""
    n = len(next(iter(columns.values())))
    out = {}
    for col in COLUMNS:  # in COLUMNS' order: selecting them afterwards cost as much again as the frame
        if col in columns:
            out[col] = columns[col]
        elif col in TEXT_COLUMNS:
            out[col] = np.full(n, "", object)
        elif col == "is_eager":
            out[col] = np.zeros(n, bool)
        else:
            out[col] = np.zeros(n, np.int64)
    return pd.DataFrame(out)


@dataclass
class OpMetricsDb:
    metrics: pd.DataFrame = field(default_factory=empty_metrics)
    total_time_ps: int = 0
    total_op_time_ps: int = 0
    idle_time_ps: int = 0  # TPU duty cycle only
    busy_time_ps: int = 0  # TPU duty cycle only
    compute_16bit_ps: int = 0  # precision stats (device DB)
    compute_32bit_ps: int = 0
    host_infeed_enq_duration_ps: int = 0
    host_infeed_enq_start_diff_ps: int = 0

    @property
    def idle_ratio(self) -> float:
        """XProf's IdleTimeRatio: 1 − op time / total time (SafeDivide)."""
        return 1.0 - safe_divide(self.total_op_time_ps, self.total_time_ps)

    def without_idle(self) -> pd.DataFrame:
        return self.metrics[self.metrics["category"] != IDLE]

    def sorted(self, limit: int | None = None) -> pd.DataFrame:
        """XProf's SortedOpMetricsDb: self time desc, then name asc (IDLE included)."""
        out = self.metrics.sort_values(["self_time_ps", "name"], ascending=[False, True], kind="stable")
        return out if limit is None else out.head(limit)


def device_ps_by_program(db: OpMetricsDb) -> dict[int, int]:
    """Each program's device time on this database: its ops' self times (IDLE aside), by unsigned program id.
    Empty on a capture without device ops (CPU)."""
    ops = db.without_idle()
    if ops.empty or "hlo_module_id" not in ops:
        return {}
    by_program: dict[int, int] = {}
    for program, self_ps in zip(ops["hlo_module_id"].tolist(), ops["self_time_ps"].tolist()):
        key = int(program) % (1 << 64)
        by_program[key] = by_program.get(key, 0) + int(self_ps)
    return by_program


def safe_divide(a: float, b: float) -> float:
    return 0.0 if abs(b) < 1e-10 else a / b


def idle_row(idle_ps: int) -> pd.DataFrame:
    """XProf's IDLE record of `idle_ps` (0 for a thread or device without time: every thread of a
    tiny host, so that one is built once and copied)."""
    if idle_ps == 0:
        return _empty_idle_row()
    return metrics_frame(name=np.array([IDLE], object), category=np.array([IDLE], object),
                         time_ps=np.array([idle_ps], np.int64), self_time_ps=np.array([idle_ps], np.int64))


@empty_frame
def _empty_idle_row() -> pd.DataFrame:
    return metrics_frame(name=np.array([IDLE], object), category=np.array([IDLE], object),
                         time_ps=np.zeros(1, np.int64), self_time_ps=np.zeros(1, np.int64))


def with_idle(metrics: pd.DataFrame, total_time_ps: int) -> tuple[pd.DataFrame, int, int]:
    """SetTotalTimePs + AddIdleOp: (metrics with an IDLE row, total time, total op time)."""
    op_time = int(metrics["self_time_ps"].sum())
    total = max(op_time, int(total_time_ps))
    return pd.concat([metrics, idle_row(total - op_time)], ignore_index=True), total, op_time


def combine_metrics(frames: list[pd.DataFrame], update_num_cores: bool) -> pd.DataFrame:
    """Merge records by (hlo_module_id, name), keeping first-appearance order."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_metrics()
    if len(frames) == 1 and (update_num_cores or _distinct_keys(frames[0])):
        # Nothing to merge (a host of one thread: the groupby below costs ≈ 15 ms, most of a tiny host's core).
        return frames[0].reset_index(drop=True)
    all_rows = concat_rows(frames)
    grouped = all_rows.groupby(KEY, sort=False)
    out = grouped[SUM_COLUMNS].sum()
    for col in ["category", "provenance", "long_name"]:
        # Metadata is copied from the first record that has it.
        text = all_rows[col].where(all_rows[col] != "")
        out[col] = text.groupby([all_rows[k] for k in KEY], sort=False).first().reindex(out.index).fillna("")
    out["is_eager"] = grouped["is_eager"].any()
    with_occ = all_rows[all_rows["occurrences"] > 0]
    mins = with_occ.groupby(KEY, sort=False)["min_time_ps"].min()
    out["min_time_ps"] = mins.reindex(out.index).fillna(grouped["min_time_ps"].last()).astype(np.int64)
    out["num_cores"] = grouped["num_cores"].sum() if update_num_cores else grouped["num_cores"].first()
    return out.reset_index()[COLUMNS]


def _distinct_keys(frame: pd.DataFrame) -> bool:
    keys = zip(frame["hlo_module_id"].to_numpy(), frame["name"].to_numpy())
    return len(set(keys)) == len(frame)


def combine_dbs(dbs: list[OpMetricsDb], update_num_cores: bool = True) -> OpMetricsDb:
    return OpMetricsDb(
        metrics=combine_metrics([d.metrics for d in dbs], update_num_cores),
        total_time_ps=sum(d.total_time_ps for d in dbs),
        total_op_time_ps=sum(d.total_op_time_ps for d in dbs),
        idle_time_ps=sum(d.idle_time_ps for d in dbs),
        busy_time_ps=sum(d.busy_time_ps for d in dbs),
        compute_16bit_ps=sum(d.compute_16bit_ps for d in dbs),
        compute_32bit_ps=sum(d.compute_32bit_ps for d in dbs),
        host_infeed_enq_duration_ps=sum(d.host_infeed_enq_duration_ps for d in dbs),
        host_infeed_enq_start_diff_ps=sum(d.host_infeed_enq_start_diff_ps for d in dbs),
    )


def framework_op_db(device: OpMetricsDb, include_idle: bool) -> OpMetricsDb:
    """XProf's CreateTfMetricsDbFromDeviceOpMetricsDb: device ops folded into
    the framework ops named by their provenance (§4.7). Occurrences are the
    maximum over the folded ops; times, flops and bytes add up; `is_eager`
    is the last folded op's."""
    m = device.metrics
    if len(m) == 0:
        frame = empty_metrics()
    else:
        is_idle = (m["category"] == IDLE).to_numpy()
        names = m["name"].to_numpy(object).copy()
        types = np.full(len(m), "Unknown", dtype=object)
        for i, prov in enumerate(m["provenance"].to_numpy(object)):
            if is_idle[i]:
                names[i], types[i] = IDLE, IDLE
            elif prov:
                op = parse_tf_op_fullname(prov)
                names[i] = op.name
                types[i] = "Unknown" if op.type == UNKNOWN_TYPE else op.type
        keep = ~is_idle | include_idle
        src = pd.DataFrame({
            "name": names[keep], "category": types[keep], "is_eager": m["is_eager"].to_numpy()[keep],
            "occurrences": m["occurrences"].to_numpy()[keep], "time_ps": m["time_ps"].to_numpy()[keep],
            "self_time_ps": m["self_time_ps"].to_numpy()[keep], "flops": m["flops"].to_numpy()[keep],
            "model_flops": m["model_flops"].to_numpy()[keep],
            "bytes_accessed": m["bytes_accessed"].to_numpy()[keep],
        })
        grouped = src.groupby("name", sort=False)
        agg = grouped.agg(
            category=("category", "first"), is_eager=("is_eager", "last"), occurrences=("occurrences", "max"),
            time_ps=("time_ps", "sum"), self_time_ps=("self_time_ps", "sum"), flops=("flops", "sum"),
            model_flops=("model_flops", "sum"), bytes_accessed=("bytes_accessed", "sum"),
        ).reset_index()
        frame = metrics_frame(**{c: agg[c].to_numpy() for c in agg.columns})
    return OpMetricsDb(
        metrics=frame,
        total_time_ps=device.total_time_ps if include_idle else device.total_op_time_ps,
        total_op_time_ps=device.total_op_time_ps,
    )
