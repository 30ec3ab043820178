"""XProf's HLO op stats: one row per device op, by self time, with its rates and what bounds it.

From `op_stats_to_hlo_stats.cc` (the 2.24 release's columns): the device op
DB sorted by self time (then name), ops that never ran (IDLE) left out; times
in µs; the self-time share of the whole device time and its running total
(percent); model and measured FLOP rates, memory bandwidths and the
bound-by resource as the roofline computes them (`core.tools.roofline`).

    table = hlo_stats_table(records, perf_env, hardware_type, total_time_ps)

Columns are XProf's ids (`COLUMNS` gives their labels). Values are XProf's,
with one exception: `dma_stall_percent` holds a percentage where XProf
writes a fraction under the same "%" label. The source column is
`file:line` (XProf writes an HTML snippet); the stack is in `source_stack`.
Energy is not read from captures (0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reportgen.core.events.tf_op import is_outside_compilation
from reportgen.core.ops.device_run import DevicePart, DeviceRun, combine_device_parts
from reportgen.core.ops.op_metrics import IDLE, safe_divide
from reportgen.core.tools.roofline import roofline_metrics

U64 = 1 << 64

COLUMNS = {
    "rank": "Rank", "program_id": "Program id", "category": "HLO op category", "hlo_op_name": "HLO op name",
    "hlo_op_expression": "HLO op text", "tf_op_name": "Framework op name", "occurrences": "#Occurrences",
    "total_time": "Total time (us)", "avg_time": "Avg. time (us)", "total_self_time": "Total self time (us)",
    "avg_self_time": "Avg. self time (us)", "total_self_time_percent": "Total self time (%)",
    "cumulative_total_self_time_percent": "Cumulative total self time (%)",
    "dma_stall_percent": "%time stalled by DMA", "model_flop_rate": "Model GFLOP/s",
    "normalized_flop_rate": "Normalized GFLOP/s", "measured_memory_bw": "Measured memory BW (GiB/s)",
    "hbm_bw": "HBM BW (GiB/s)", "cmem_read_bw": "CMEM Read BW (GiB/s)", "cmem_write_bw": "CMEM Write BW (GiB/s)",
    "operational_intensity": "Operational intensity (FLOPS/Byte)", "bound_by": "Bound by",
    "hlo_rematerialization": "Rematerialization", "outside_compilation": "Outside Compilation",
    "autotuned": "Autotuned", "source_info": "Source Info", "core_type": "TPU core type",
    "parent_op_name": "Parent op name", "vdd_energy": "VDD Energy (J)",
}


def hlo_op_name(expression: str) -> str:
    """The instruction name of an HLO text `%name = …` (XProf's GetHloOpNameFromExpression)."""
    name = expression.split(" = ", 1)[0]
    return name[1:] if name.startswith("%") else name


def is_rematerialization(expression: str, framework_op: str) -> bool:
    before_assignment = expression.split("=", 1)[0]
    return ".remat" in before_assignment or "/rematted_computation/" in framework_op


def ranked_ops(records: pd.DataFrame) -> pd.DataFrame:
    """The ops the table lists, in its order (row i has rank i + 1): most self time first, IDLE left out."""
    ops = records.sort_values(["self_time_ps", "name"], ascending=[False, True], kind="stable")
    return ops[(ops["occurrences"] > 0) & (ops["category"] != IDLE)].reset_index(drop=True)


def hlo_stats_table(records: pd.DataFrame, perf_env, hardware_type: str, total_time_ps: float) -> pd.DataFrame:
    """The HLO op stats rows (`records`: hlo_op_records of the device DB)."""
    ops = ranked_ops(records)
    rates = roofline_metrics(ops, perf_env, hardware_type)
    occ = ops["occurrences"].to_numpy(np.float64)
    total_us = ops["time_ps"].to_numpy(np.float64) / 1e6
    self_us = ops["self_time_ps"].to_numpy(np.float64) / 1e6
    device_us = total_time_ps / 1e6
    share = np.array([100.0 * safe_divide(s, device_us) for s in self_us])
    expressions = [lng or name for lng, name in zip(ops["long_name"], ops["name"])]
    provenance = ops["provenance"].tolist()
    table = pd.DataFrame({
        "rank": np.arange(1, len(ops) + 1, dtype=np.float64),
        "program_id": [str(int(p) % U64) for p in ops["hlo_module_id"]],
        "category": ops["category"].to_numpy(object),
        "hlo_op_name": [hlo_op_name(e) for e in expressions],
        "hlo_op_expression": expressions,
        "tf_op_name": provenance,
        "occurrences": occ,
        "total_time": total_us,
        "avg_time": [safe_divide(t, n) for t, n in zip(total_us, occ)],
        "total_self_time": self_us,
        "avg_self_time": [safe_divide(t, n) for t, n in zip(self_us, occ)],
        "total_self_time_percent": share,
        "cumulative_total_self_time_percent": np.cumsum(share),
        "dma_stall_percent": [100.0 * safe_divide(d, t) for d, t in zip(ops["dma_stall_ps"], ops["time_ps"])],
        "model_flop_rate": rates["model_flop_rate"].to_numpy(),
        "normalized_flop_rate": rates["measured_flop_rate"].to_numpy(),
        "measured_memory_bw": rates["measured_memory_bw"].to_numpy(),
        "hbm_bw": rates["hbm_bw"].to_numpy(),
        "cmem_read_bw": rates["cmem_read_bw"].to_numpy(),
        "cmem_write_bw": rates["cmem_write_bw"].to_numpy(),
        "operational_intensity": rates["operational_intensity"].to_numpy(),
        "bound_by": rates["bound_by"].to_numpy(object),
        "hlo_rematerialization": ["Yes" if is_rematerialization(e, p) else "No" for e, p in
                                  zip(ops["long_name"], provenance)],
        "outside_compilation": ["Yes" if is_outside_compilation(p, e) else "No" for p, e in
                                zip(provenance, ops["long_name"])],
        "autotuned": "No",
        "source_info": [f"{f}:{line}" if f else "" for f, line in zip(ops["source_file"], ops["source_line"])],
        "core_type": ops["core_type"].to_numpy(object),
        "parent_op_name": "",
        "vdd_energy": 0.0,
    })
    table["source_stack"] = ops["source_stack"].to_numpy(object)
    return table




@dataclass
class HloStatsData:
    run: DeviceRun  # the run's device ops, all hosts combined
    table: pd.DataFrame  # hlo_stats_table()


def hlo_stats_data(host_names: list[str], parts: dict[str, DevicePart]) -> HloStatsData | None:
    """The run's HLO op stats; None without a device. A device on which no XLA op could be placed (a GPU
    capture without HLO modules) gets XProf's empty table, which XProf still lists."""
    device = combine_device_parts(host_names, parts)
    if device is None:
        return None
    env = device.op_stats.environment
    table = hlo_stats_table(device.records, device.op_stats.perf_env, env.hardware_type,
                            device.op_stats.device_db.total_time_ps)
    return HloStatsData(run=device, table=table)


__all__ = ["COLUMNS", "hlo_op_name", "hlo_stats_data", "hlo_stats_table", "HloStatsData", "is_rematerialization",
           "ranked_ops"]
