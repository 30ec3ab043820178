"""XProf's pod viewer numbers: each step's time breakdown on every core, and its bottleneck.

From docs/xprof/pod_viewer.md: one record per step and core of the run's
step database (all steps, none dropped); the step's event-type times folded
into the nine generic step-breakdown events, in µs; the bottleneck is the
largest of them, ties going to the greatest name ("Output" when all are 0).
A core gets a record only when the run knows its host (core details). TPU
steps carry per-category times instead of event types, so XProf reports
them all zero; `tpu_category_us` keeps their HLO categories for the page.

    stats = pod_stats(run_op_stats, hostnames_by_core)
    stats.records   # step_num, core, host_name, total_duration_us, the nine breakdown columns, bottleneck
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.ops.op_stats import HostOpStats
from reportgen.core.ops.views import combined_hosts, hosts_in_order
from reportgen.core.steps.categories import GENERIC_CATEGORIES
from reportgen.core.steps.step_db import StepDb

# XProf's generic step-breakdown events: (id, name, event types folded into it).
BREAKDOWN_EVENTS: list[tuple[int, str, tuple[int, ...]]] = [
    (c.xprof_id, c.label, c.event_types) for c in GENERIC_CATEGORIES]
BREAKDOWN_NAMES = [name for _, name, _ in BREAKDOWN_EVENTS]
RECORD_COLUMNS = ["step_num", "core", "host_name", "total_duration_us", *BREAKDOWN_NAMES, "bottleneck"]


def bottleneck_of(values: np.ndarray, names: list[str]) -> np.ndarray:
    """Per row of `values` (one column per name): the name with the largest time, ties going to the
    lexicographically greatest name."""
    if len(values) == 0:
        return np.zeros(0, dtype=object)
    order = np.argsort(names)[::-1]  # greatest name first, so argmax picks it among equals
    best = order[np.argmax(np.asarray(values)[:, order], axis=1)]
    return np.array(names, dtype=object)[best]


def bottleneck(values: np.ndarray) -> np.ndarray:
    """XProf's bottleneck of each step (rows: steps × the nine breakdown events)."""
    return bottleneck_of(values, BREAKDOWN_NAMES)


@dataclass
class PodStats:
    records: pd.DataFrame  # RECORD_COLUMNS, in step order then core order
    device_type: str
    step_kind: str  # "generic" or "tpu"
    tpu_category_us: pd.DataFrame = field(default_factory=pd.DataFrame)  # step_num, core, category, us


def hostnames_by_core(hosts: list[tuple[str, dict[int, dict]]]) -> dict[int, str]:
    """Global core id → host name, hosts in host-id order: (environment host name, core details).

    Like XProf's core details: a host without TPU cores has one core, id 1."""
    out: dict[int, str] = {}
    for host_id, (hostname, details) in enumerate(hosts):
        cores = {core: d.get("hostname", hostname) for core, d in details.items()} or {1: hostname}
        for core, name in cores.items():
            out[host_id * 1000 + core] = name
    return out


def pod_stats(step_db: StepDb, hostnames: dict[int, str], device_type: str) -> PodStats:
    steps = step_db.steps
    steps = steps[steps["core"].isin(list(hostnames))] if len(steps) else steps
    values = np.zeros((len(steps), len(BREAKDOWN_EVENTS)))
    if step_db.kind != "tpu" and len(steps):
        for j, (_, _, types) in enumerate(BREAKDOWN_EVENTS):
            values[:, j] = sum(steps[f"t{t}"].to_numpy(np.float64) for t in types) / 1e6
    records = pd.DataFrame({
        "step_num": steps["step_num"].to_numpy(np.int64),
        "core": steps["core"].to_numpy(np.int64),
        "host_name": [hostnames[int(c)] for c in steps["core"]],
        "total_duration_us": steps["duration_ps"].to_numpy(np.float64) / 1e6,
    })
    for j, name in enumerate(BREAKDOWN_NAMES):
        records[name] = values[:, j]
    records["bottleneck"] = bottleneck(values)
    categories = pd.DataFrame(columns=["step_num", "core", "category", "us"])
    if step_db.kind == "tpu" and step_db.category_ps:
        rows = [(step, core, cat, ps / 1e6) for (step, core), cats in step_db.category_ps.items()
                if core in hostnames for cat, ps in cats.items()]
        categories = pd.DataFrame(rows, columns=["step_num", "core", "category", "us"])
    return PodStats(records=records[RECORD_COLUMNS], device_type=device_type, step_kind=step_db.kind,
                    tpu_category_us=categories)


def xprof_json(stats: PodStats, warnings: list[str]) -> dict:
    """The pod viewer as XProf prints it (PodViewerDatabase JSON)."""
    sequence = []
    for step, group in stats.records.groupby("step_num", sort=False):
        per_core = {}
        for row in group.to_dict("records"):
            per_core[str(row["core"])] = {
                "hostName": row["host_name"], "chipId": 0, "nodeId": 0, "stepNum": int(step),
                "totalDurationUs": row["total_duration_us"], "bottleneck": row["bottleneck"],
                "stepBreakdownUs": {str(i): row[name] for i, name, _ in BREAKDOWN_EVENTS},
            }
        sequence.append({"stepNum": int(step), "podStatsPerCore": per_core, "channelDb": [],
                         "coreIdToReplicaIdMap": {}, "allReduceOpDb": []})
    return {
        "podStatsSequence": {"podStatsMap": sequence},
        "diagnostics": {"info": [], "warnings": list(warnings), "errors": []},
        "stepBreakdownEvents": [{"id": i, "name": name} for i, name, _ in BREAKDOWN_EVENTS],
        "deviceType": stats.device_type,
    }




# --- the tool: the run's hosts combined, per step and core --------------------------------------


@dataclass
class PodViewerData:
    stats: PodStats
    hosts: list[str]
    breakdown: pd.DataFrame  # step_num, core, label, host, part, us (long form, what the chart stacks)
    columns: pd.DataFrame  # step_num, core, label, host, total_us, bottleneck (one row per column)
    parts: list[str]  # the stacked parts in legend order


def core_label(core: int, host: str, multi_host: bool) -> str:
    """A column's label: the core, and with several hosts which host it is on (host names may repeat)."""
    if not multi_host:
        return f"core {core}"
    return f"host {core // 1000} ({host}) core {core % 1000}"


def _frames(stats: PodStats, multi_host: bool) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    r = stats.records
    labels = [core_label(int(c), h, multi_host) for c, h in zip(r["core"], r["host_name"])]
    columns = pd.DataFrame({"step_num": r["step_num"].to_numpy(), "core": r["core"].to_numpy(), "label": labels,
                            "host": r["host_name"].to_numpy(), "total_us": r["total_duration_us"].to_numpy(),
                            "bottleneck": r["bottleneck"].to_numpy()})
    if stats.step_kind == "tpu":
        cats = stats.tpu_category_us
        parts = (cats.groupby("category")["us"].sum().sort_values(ascending=False).index.tolist()
                 if len(cats) else [])
        long = cats.rename(columns={"category": "part"}).merge(columns[["step_num", "core", "label", "host"]],
                                                               on=["step_num", "core"])
        wide = cats.pivot_table(index=["step_num", "core"], columns="category", values="us", aggfunc="sum",
                                fill_value=0.0)
        names = list(wide.columns)
        best = bottleneck_of(wide.to_numpy(), names) if len(wide) else []
        by_column = dict(zip(wide.index, best))
        columns["bottleneck"] = [by_column.get((s, c), "") for s, c in zip(columns["step_num"], columns["core"])]
    else:
        parts = list(BREAKDOWN_NAMES)
        long = r.melt(id_vars=["step_num", "core"], value_vars=parts, var_name="part", value_name="us")
        long = long.merge(columns[["step_num", "core", "label", "host"]], on=["step_num", "core"])
    long = long[long["us"] > 0]
    return long[["step_num", "core", "label", "host", "part", "us"]], columns, parts


def pod_viewer_data(host_names: list[str], parts: dict[str, HostOpStats]) -> PodViewerData | None:
    """The run's hosts combined as XProf combines them; None when the run has no step."""
    hosts = hosts_in_order(host_names, parts)
    ordered = [parts[h] for h in hosts]
    combined = combined_hosts(ordered, overview_steps=False)
    names = hostnames_by_core([(p.environment.hostnames[0], p.core_details) for p in ordered])
    stats = pod_stats(combined.step_db, names, combined.environment.device_type)
    if stats.records.empty:
        return None
    breakdown, columns, stacked = _frames(stats, len(hosts) > 1)
    return PodViewerData(stats=stats, hosts=hosts, breakdown=breakdown, columns=columns, parts=stacked)


__all__ = ["BREAKDOWN_EVENTS", "BREAKDOWN_NAMES", "bottleneck", "bottleneck_of", "core_label", "hostnames_by_core",
           "pod_stats", "pod_viewer_data", "PodStats", "PodViewerData", "xprof_json"]
