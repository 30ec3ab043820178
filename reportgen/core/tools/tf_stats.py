"""XProf's TF stats (framework_op_stats) tool (docs/xprof/tf_stats.md), as its converter computes it.

Every framework op on device (device ops folded by provenance) and on host,
ranked by self time, top 500 each as XProf keeps them, with XProf's columns;
once with the IDLE rows and once without. A device op's GPU TensorCore
utilization is its share of kernel time on TensorCores, from the run's
kernel stats DB. One view per host and, with several hosts, all hosts
combined.

    views = tf_stats_views(parts, host_names)
    view.with_idle / view.without_idle     # COLUMNS; the `(%)` columns hold XProf's fractions
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reportgen.core.ops.kernel_reports import tensor_core_utilization
from reportgen.core.ops.op_metrics import IDLE, OpMetricsDb, framework_op_db
from reportgen.core.ops.op_stats import HostOpStats, RunOpStats
from reportgen.core.ops.perf_env import PerfEnv
from reportgen.core.ops.training import is_training
from reportgen.core.ops.views import run_views
from reportgen.summary_blocks import TfStatsBlock, TfStatsOp

MAX_ROWS = 500  # per side (device, host), as XProf
GIBI = 2**30 / 1e9  # GigaToGibi divisor

# (column key, XProf label, CSV holds a percentage of the fraction XProf writes)
COLUMNS = [
    ("rank", "Rank", False), ("host_or_device", "Host/device", False), ("type", "Operation Type", False),
    ("operation", "Operation Name", False), ("occurrences", "#Occurrences", False),
    ("total_time", "Total time (us)", False), ("avg_time", "Avg. time (us)", False),
    ("total_self_time", "Total self-time (us)", False), ("avg_self_time", "Avg. self-time (us)", False),
    ("device_total_self_time_percent", "Total self-time on Device (%)", True),
    ("device_cumulative_total_self_time_percent", "Cumulative total-self time on Device (%)", True),
    ("host_total_self_time_percent", "Total self-time on Host (%)", True),
    ("host_cumulative_total_self_time_percent", "Cumulative total-self time on Host (%)", True),
    ("measured_flop_rate", "Normalized FLOP Rate (FLOPs/s)", False),
    ("model_flop_rate", "Model FLOP Rate (GFLOP/s)", False),
    ("measured_memory_bw", "Measured Memory BW (GBytes/Sec)", False),
    ("operational_intensity", "Operational Intensity (FLOPs/Byte)", False),
    ("gpu_tensorcore_utilization", "GPU TensorCore utilization", False),
    ("bound_by", "Bound by", False), ("eager", "Execution mode", False),
]
PERCENT_COLUMNS = [key for key, _, pct in COLUMNS if pct]


def _bound_by(rate: np.ndarray, hbm_bw: np.ndarray, perf: PerfEnv, hardware: str) -> list[str]:
    """XProf's roofline 'Bound by': the resource with the highest utilization (Unknown when none)."""
    bws = perf.peak_bws_giga_bytes_per_second
    peak_gflops = perf.peak_tera_flops_per_second * 1e3
    candidates = [("Compute", np.where(peak_gflops > 1e-10, rate / (peak_gflops or 1), 0.0))]
    hbm_peak = bws[0] / GIBI if bws else 0.0
    candidates.append(("HBM", np.where(abs(hbm_peak) > 1e-10, hbm_bw / (hbm_peak or 1), 0.0)))
    if hardware == "GPU" and len(bws) > 2:
        shm = bws[2] / GIBI
        candidates.append(("Shm/L1", np.where(abs(shm) > 1e-10, hbm_bw / (shm or 1), 0.0)))
    best = np.full(len(rate), "Unknown", dtype=object)
    best_value = np.zeros(len(rate))
    for name, util in candidates:
        better = util > best_value
        best[better] = name
        best_value = np.where(better, util, best_value)
    return list(best)


def _records(db: OpMetricsDb, side: str, total_ps: int, exclude_idle: bool, perf: PerfEnv,
             hardware: str, kernel_reports: pd.DataFrame | None = None) -> pd.DataFrame:
    ops = db.sorted(MAX_ROWS)
    if exclude_idle:
        ops = ops[ops["category"] != IDLE]
    time_us = ops["time_ps"].to_numpy(np.float64) / 1e6
    self_us = ops["self_time_ps"].to_numpy(np.float64) / 1e6
    occ = ops["occurrences"].to_numpy(np.float64)
    t_ns = ops["time_ps"].to_numpy(np.float64) / 1e3
    flops = ops["flops"].to_numpy(np.float64)
    model_flops = ops["model_flops"].to_numpy(np.float64)
    nbytes = ops["bytes_accessed"].to_numpy(np.float64)

    def div(a, b):
        return np.where(np.abs(b) < 1e-10, 0.0, a / np.where(np.abs(b) < 1e-10, 1.0, b))

    total_us = total_ps / 1e6
    fraction = div(self_us, np.full(len(ops), total_us))
    rate = div(flops, t_ns)
    bw = div(nbytes, t_ns) / GIBI
    out = pd.DataFrame({
        "host_or_device": side, "type": ops["category"].to_numpy(object), "operation": ops["name"].to_numpy(object),
        "occurrences": occ, "total_time": time_us, "avg_time": div(time_us, occ), "total_self_time": self_us,
        "avg_self_time": div(self_us, occ),
        "measured_flop_rate": rate, "model_flop_rate": div(model_flops, t_ns), "measured_memory_bw": bw,
        "operational_intensity": div(flops, nbytes),
        "gpu_tensorcore_utilization": (0.0 if kernel_reports is None
                                       else tensor_core_utilization(kernel_reports, ops["name"].to_numpy(object))),
        "bound_by": _bound_by(rate, bw, perf, hardware),
        "eager": np.where(ops["is_eager"].to_numpy(bool), "Eager", "Function"),
        "fraction": fraction,
    })
    return out


def framework_op_stats_table(op_stats: RunOpStats, exclude_idle: bool) -> pd.DataFrame:
    """XProf's GenerateTfStatsTable: device rows then host rows, ranks continuing;
    the `(%)` columns hold XProf's fractions (0–1)."""
    device = framework_op_db(op_stats.device_db, include_idle=True)
    host = op_stats.host_db
    hw = op_stats.environment.hardware_type
    dev = _records(device, "Device", device.total_op_time_ps if exclude_idle else device.total_time_ps,
                   exclude_idle, op_stats.perf_env, hw, op_stats.kernel_reports)
    hst = _records(host, "Host", host.total_op_time_ps if exclude_idle else host.total_time_ps, exclude_idle,
                   op_stats.perf_env, hw)
    for frame, side in ((dev, "device"), (hst, "host")):
        other = "host" if side == "device" else "device"
        frame[f"{side}_total_self_time_percent"] = frame["fraction"]
        frame[f"{side}_cumulative_total_self_time_percent"] = frame["fraction"].cumsum()
        frame[f"{other}_total_self_time_percent"] = 0.0
        frame[f"{other}_cumulative_total_self_time_percent"] = 0.0
    table = pd.concat([dev, hst], ignore_index=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1, dtype=np.float64))
    return table[[key for key, _, _ in COLUMNS]]


TOP_OPS_IN_SUMMARY = 5


@dataclass
class TfStatsView:
    """One host's (or all hosts') TF stats tables."""

    label: str
    with_idle: pd.DataFrame
    without_idle: pd.DataFrame
    has_gpu: bool
    task_type: str  # "Training" or "Inference", from the ops' names


def tf_stats_view(label: str, op_stats: RunOpStats) -> TfStatsView:
    with_idle = framework_op_stats_table(op_stats, exclude_idle=False)
    without_idle = framework_op_stats_table(op_stats, exclude_idle=True)
    training = is_training(zip(with_idle["operation"].astype(str), with_idle["type"].astype(str)))
    return TfStatsView(label, with_idle, without_idle, "GPU" in op_stats.environment.device_type,
                       "Training" if training else "Inference")


def tf_stats_views(parts: dict[str, HostOpStats], host_names: list[str]) -> dict[str, TfStatsView]:
    """All hosts combined first (with several hosts), then each host; every step counts."""
    return {label: tf_stats_view(label, v) for label, v in run_views(parts, host_names, overview_steps=False).items()}


def tf_stats_summary(view: TfStatsView) -> TfStatsBlock:
    """The run's `tf_stats` block of summary.json: op count and self time by side, IDLE excluded."""
    t = view.without_idle
    top = []
    for side in ("Device", "Host"):
        rows = t[t["host_or_device"] == side].nlargest(TOP_OPS_IN_SUMMARY, "total_self_time", keep="first")
        top += [TfStatsOp(side=side, name=str(r.operation), type=str(r.type), self_time_us=float(r.total_self_time),
                          # the share of the side's op time (IDLE excluded), as XProf's default view shows it
                          self_time_percent=100.0 * float(getattr(r, f"{side.lower()}_total_self_time_percent")))
                for r in rows.itertuples()]
    return TfStatsBlock(
        ops=int(len(t)),
        host_self_us=float(t.loc[t["host_or_device"] == "Host", "total_self_time"].sum()),
        device_self_us=float(t.loc[t["host_or_device"] == "Device", "total_self_time"].sum()),
        task_type=view.task_type,
        top_ops=tuple(top),
    )


__all__ = ["COLUMNS", "PERCENT_COLUMNS", "TfStatsView", "framework_op_stats_table", "tf_stats_summary",
           "tf_stats_view", "tf_stats_views"]
