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

from reportgen.core.steps import events as ev
from reportgen.core.steps.step_db import StepDb

# XProf's generic step-breakdown events: (id, name, event types folded into it).
BREAKDOWN_EVENTS: list[tuple[int, str, tuple[int, ...]]] = [
    (1, "Device compute", (ev.DEVICE_COMPUTE_32, ev.DEVICE_COMPUTE_16)),
    (2, "Device to device", (ev.DEVICE_TO_DEVICE, ev.DEVICE_WAIT_DEVICE)),
    (3, "Device collective communication", (ev.DEVICE_COLLECTIVES,)),
    (4, "Host compute", (ev.HOST_COMPUTE,)),
    (5, "Kernel launch", (ev.HOST_PREPARE,)),
    (6, "Input", (ev.HOST_WAIT_INPUT, ev.HOST_TO_DEVICE, ev.DEVICE_WAIT_HOST)),
    (7, "Output", (ev.DEVICE_TO_HOST,)),
    (8, "Compilation", (ev.HOST_COMPILE,)),
    (9, "All others", (ev.UNKNOWN_TIME,)),
]
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


__all__ = ["BREAKDOWN_EVENTS", "BREAKDOWN_NAMES", "PodStats", "bottleneck", "bottleneck_of", "hostnames_by_core",
           "pod_stats", "xprof_json"]
