"""XProf's roofline model: each op's FLOP rate and memory bandwidth against the device's peaks.

Rules from XProf's `op_metrics_to_record.h` (SetRooflineMetrics) and
`op_stats_to_roofline_model.cc` (the 2.24 release): rates use an op's
inclusive time over all its occurrences and cores (GFLOP/s, GiB/s); an op is
bound by whichever resource it uses the largest share of (compute, HBM, and
on TPU CMEM/VMEM reads and writes; on GPU shared memory/L1); the "Program"
record sums the innermost ops (no while/call/conditional) over the whole
profile. The table holds a record for the whole profile then each op (the
1,000 with most self time), an "Average" program record over complete steps
(TPU and multi-host runs), and a program record per step; all of it once
with infeed/outfeed ops and once without.

    model = roofline_model(records, run_op_stats, flags)
    model.records          # DataFrame, XProf's column ids, XProf's units (fractions where XProf has them)
    model.peaks            # peak FLOP rate, bandwidths and ridge points
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.ops.device_run import DevicePart, DeviceRun, combine_device_parts
from reportgen.core.ops.op_metrics import IDLE, safe_divide
from reportgen.core.ops.perf_env import PerfEnv
from reportgen.core.tools.op_profile import gibi_to_giga, giga_to_gibi

MAX_RECORDS = 1000
INNER_OP_CATEGORIES = {"call", "conditional", "while", "megacore fusion"}
U64 = 1 << 64

# Column id → label, in XProf's order (the TPU table; the GPU table is a subset).
COLUMNS = {
    "step": "Step", "rank": "Rank", "category": "Category", "operation": "Operation",
    "occurrences": "# Occurrences", "total_time": "Total Time (us)", "avg_time": "Avg. time (us)",
    "total_self_time": "Total self time (us)", "avg_self_time": "Avg. self time (us)",
    "total_self_time_percent": "Total self time (%)",
    "cumulative_total_self_time_percent": "Cumulative total self time (%)",
    "dma_stall_percent": "%time stalled by DMA", "measured_flop_rate": "Normalized FLOP Rate (GFLOP/s)",
    "model_flop_rate": "Model FLOP Rate (GFLOP/s)", "measured_memory_bw": "Memory BW (GiB/s)",
    "hbm_bw": "HBM BW (GiB/s)", "cmem_read_bw": "CMEM Read BW (GiB/s)", "cmem_write_bw": "CMEM Write BW (GiB/s)",
    "vmem_read_bw": "VMEM Read BW (GiB/s)", "vmem_write_bw": "VMEM Write BW (GiB/s)",
    "operational_intensity": "Operational Intensity (FLOP/Byte)",
    "hbm_operational_intensity": "HBM Operational Intensity (FLOP/Byte)",
    "cmem_read_operational_intensity": "CMEM Read Operational Intensity (FLOP/Byte)",
    "cmem_write_operational_intensity": "CMEM Write Operational Intensity (FLOP/Byte)",
    "vmem_read_operational_intensity": "VMEM Read Operational Intensity (FLOP/Byte)",
    "vmem_write_operational_intensity": "VMEM Write Operational Intensity (FLOP/Byte)",
    "bottleneck_operational_intensity": "Bottleneck Operational Intensity (FLOP/Byte)",
    "bound_by": "Bound by", "total_time_per_core": "Total Time per core (us)",
    "total_time_in_percentage": "Total Time (%)", "optimal_flop_rate": "Optimal FLOP Rate (GFLOP/s)",
    "roofline_efficiency": "Roofline efficiency (%)", "compute_efficiency": "FLOP Rate / Peak (%)",
    "max_mem_bw_utilization": "Max memory BW utilization (among supported memories) (%)",
    "include_infeed_outfeed": "Include Infeed/Outfeed", "hlo_module_id": "Program ID",
    "source_info": "Source Info",
}
# Columns XProf fills with fractions although their labels say "%".
FRACTION_COLUMNS = ["total_self_time_percent", "cumulative_total_self_time_percent", "dma_stall_percent",
                    "total_time_in_percentage", "roofline_efficiency", "compute_efficiency",
                    "max_mem_bw_utilization"]


def is_infeed_or_outfeed(category: str) -> bool:
    return "infeed" in category or "outfeed" in category


def _peak_bw(perf_env: PerfEnv, index: int) -> float:
    """GetMemoryPeakBandwidth (GB/s); 0 when the device has no such memory."""
    bws = perf_env.peak_bws_giga_bytes_per_second
    return float(bws[index]) if len(bws) > index else (float(bws[0]) if bws else 0.0)


def _div(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """SafeDivide, elementwise: 0 where |b| < 1e-10."""
    a = np.asarray(a, np.float64)
    b = np.broadcast_to(np.asarray(b, np.float64), a.shape)
    out = np.zeros(a.shape, np.float64)
    ok = np.abs(b) >= 1e-10
    out[ok] = a[ok] / b[ok]
    return out


def roofline_metrics(ops: pd.DataFrame, perf_env: PerfEnv, hardware_type: str) -> pd.DataFrame:
    """SetRooflineMetrics for each row of `ops` (hlo_op_records columns)."""
    t_ns = ops["time_ps"].to_numpy(np.float64) / 1000.0
    flops = ops["flops"].to_numpy(np.float64)
    nbytes = ops["bytes_accessed"].to_numpy(np.float64)
    has_breakdown = ops["has_breakdown"].to_numpy(bool)
    hbm = np.where(has_breakdown, ops["hbm_any"].to_numpy(np.float64), nbytes)
    mem = {k: ops[f"{k}"].to_numpy(np.float64) for k in ("cmem_read", "cmem_write", "vmem_read", "vmem_write")}
    out = pd.DataFrame(index=ops.index)
    out["measured_flop_rate"] = _div(flops, t_ns)
    out["model_flop_rate"] = _div(ops["model_flops"].to_numpy(np.float64), t_ns)
    out["measured_memory_bw"] = giga_to_gibi(_div(nbytes, t_ns))
    out["operational_intensity"] = _div(flops, nbytes)
    out["hbm_bw"] = giga_to_gibi(_div(hbm, t_ns))
    out["hbm_operational_intensity"] = _div(flops, hbm)
    for k, v in mem.items():
        out[f"{k}_bw"] = giga_to_gibi(_div(v, t_ns))
        out[f"{k}_operational_intensity"] = _div(flops, v)

    n = len(ops)
    bound = np.full(n, "Unknown", dtype=object)
    best = np.zeros(n)
    best_oi = np.zeros(n)

    def consider(util: np.ndarray, label: str, oi: np.ndarray, allowed: np.ndarray | bool = True) -> None:
        better = (best < util) & allowed
        bound[better] = label
        best[better] = util[better]
        best_oi[better] = oi[better]

    consider(_div(out["measured_flop_rate"].to_numpy(), perf_env.peak_tera_flops_per_second * 1000.0), "Compute",
             out["operational_intensity"].to_numpy())
    consider(_div(out["hbm_bw"].to_numpy(), giga_to_gibi(_peak_bw(perf_env, 0))), "HBM",
             out["hbm_operational_intensity"].to_numpy())
    if hardware_type == "TPU":
        for key, label, index in (("cmem_read", "CMEM Read", 3), ("cmem_write", "CMEM Write", 4),
                                  ("vmem_read", "VMEM Read", 5), ("vmem_write", "VMEM Write", 6)):
            peak = _peak_bw(perf_env, index)
            if peak:
                consider(_div(out[f"{key}_bw"].to_numpy(), giga_to_gibi(peak)), label,
                         out[f"{key}_operational_intensity"].to_numpy(), mem[key] != 0)
    if hardware_type == "GPU":
        peak = _peak_bw(perf_env, 2)
        if peak:
            consider(_div(out["hbm_bw"].to_numpy(), giga_to_gibi(peak)), "Shm/L1",
                     out["hbm_operational_intensity"].to_numpy())
    out["bound_by"] = bound
    out["bottleneck_operational_intensity"] = best_oi
    return out


@dataclass
class RooflinePeaks:
    """The roofline database's device fields (XProf's custom table properties)."""

    device_type: str
    peak_flop_rate: float  # GFLOP/s
    peak_hbm_bw: float  # GiB/s
    megacore: bool = False
    has_cmem: bool = False
    has_merged_vmem: bool = False
    peak_cmem_read_bw: float = 0.0
    peak_cmem_write_bw: float = 0.0
    peak_vmem_read_bw: float = 0.0
    peak_vmem_write_bw: float = 0.0
    time_scale_multiplier: float = 0.0

    def ridge_point(self, peak_bw_gib: float) -> float:
        """FLOP/byte where the memory roof meets the compute roof (bandwidth in GB/s)."""
        return safe_divide(self.peak_flop_rate, gibi_to_giga(peak_bw_gib))

    @property
    def ceilings(self) -> list[tuple[str, float]]:
        """(memory, peak GiB/s) of every memory roof the device has."""
        out = [("HBM", self.peak_hbm_bw)]
        for label, value in (("CMEM read", self.peak_cmem_read_bw), ("CMEM write", self.peak_cmem_write_bw),
                             ("VMEM read", self.peak_vmem_read_bw), ("VMEM write", self.peak_vmem_write_bw)):
            if value > 0:
                out.append((label, value))
        return out


def roofline_peaks(device_type: str, hardware_type: str, perf_env: PerfEnv, has_merged_vmem: bool,
                   has_megacore: bool, time_scale_multiplier: float) -> RooflinePeaks:
    peaks = RooflinePeaks(device_type=device_type, peak_flop_rate=perf_env.peak_tera_flops_per_second * 1000.0,
                          peak_hbm_bw=giga_to_gibi(_peak_bw(perf_env, 0)),
                          time_scale_multiplier=time_scale_multiplier)
    if hardware_type == "TPU":
        peaks.megacore = has_megacore
        peaks.has_cmem = _peak_bw(perf_env, 3) > 0 or _peak_bw(perf_env, 4) > 0
        peaks.has_merged_vmem = has_merged_vmem
        if peaks.has_cmem:
            peaks.peak_cmem_read_bw = giga_to_gibi(_peak_bw(perf_env, 3))
            peaks.peak_cmem_write_bw = giga_to_gibi(_peak_bw(perf_env, 4))
        elif peaks.has_merged_vmem:
            peaks.peak_vmem_read_bw = giga_to_gibi(_peak_bw(perf_env, 5))
            peaks.peak_vmem_write_bw = giga_to_gibi(_peak_bw(perf_env, 6))
    elif hardware_type == "GPU":
        peaks.has_merged_vmem = True
        peaks.peak_vmem_read_bw = giga_to_gibi(_peak_bw(perf_env, 1))
        peaks.peak_vmem_write_bw = giga_to_gibi(_peak_bw(perf_env, 2))
    return peaks


def _program_row(db: pd.DataFrame, total_time_ps: float, include_infeed: bool) -> tuple[pd.DataFrame, float]:
    """The "Program" record of a DB: innermost ops summed; (row, total time it uses)."""
    cats = db["category"]
    inner = db[~cats.isin(INNER_OP_CATEGORIES)] if len(db) else db
    feed = np.array([is_infeed_or_outfeed(c) for c in inner["category"]], dtype=bool)
    feed_time = 0.0 if include_infeed else float(inner["time_ps"].to_numpy()[feed].sum())
    used = inner if include_infeed else inner[~feed]
    sums = {c: float(used[c].sum()) if len(used) else 0.0
            for c in ("flops", "model_flops", "bytes_accessed", "hbm_any", "cmem_read", "cmem_write", "vmem_read",
                      "vmem_write")}
    time = total_time_ps - feed_time
    row = pd.DataFrame([{
        "hlo_module_id": 0, "name": "Program", "category": "Program", "occurrences": 1, "time_ps": time,
        "self_time_ps": 0, "dma_stall_ps": 0, "source_file": "", "source_line": 0, "source_stack": "",
        "has_breakdown": bool(len(used)) and bool(used["has_breakdown"].any()), **sums,
    }])
    return row, time


def _records(ops: pd.DataFrame, perf_env: PerfEnv, hardware_type: str, peaks: RooflinePeaks, core_count: int,
             total_time_ps: float, step: str, num_steps: int | None) -> pd.DataFrame:
    """ConvertOpMetricsToRooflineModelRecord for each row of `ops`."""
    out = roofline_metrics(ops, perf_env, hardware_type)
    occ = ops["occurrences"].to_numpy(np.float64)
    total_us = ops["time_ps"].to_numpy(np.float64) / 1e6
    self_us = ops["self_time_ps"].to_numpy(np.float64) / 1e6
    out.insert(0, "step", step)
    out["category"] = ops["category"].to_numpy(object)
    out["operation"] = ops["name"].to_numpy(object)
    out["occurrences"] = occ
    out["avg_time"] = _div(total_us, occ)
    out["avg_self_time"] = _div(self_us, occ)
    if num_steps is not None:  # the average step: totals per step
        total_us, self_us = _div(total_us, num_steps), _div(self_us, num_steps)
    out["total_time"] = total_us
    out["total_self_time"] = self_us
    out["total_time_per_core"] = _div(total_us, core_count)
    out["total_time_in_percentage"] = _div(ops["time_ps"].to_numpy(np.float64), total_time_ps)
    out["dma_stall_percent"] = _div(ops["dma_stall_ps"].to_numpy(np.float64), ops["time_ps"].to_numpy(np.float64))
    zero = np.zeros(len(ops))
    cmem_rd = _div(out["cmem_read_bw"].to_numpy(), peaks.peak_cmem_read_bw) if peaks.has_cmem else zero
    cmem_wr = _div(out["cmem_write_bw"].to_numpy(), peaks.peak_cmem_write_bw) if peaks.has_cmem else zero
    vmem_rd = _div(out["vmem_read_bw"].to_numpy(), peaks.peak_vmem_read_bw) if peaks.has_merged_vmem else zero
    vmem_wr = _div(out["vmem_write_bw"].to_numpy(), peaks.peak_vmem_write_bw) if peaks.has_merged_vmem else zero
    flops_util = _div(out["measured_flop_rate"].to_numpy(), peaks.peak_flop_rate)
    hbm_util = _div(out["hbm_bw"].to_numpy(), peaks.peak_hbm_bw)
    max_mem = np.maximum.reduce([cmem_wr, cmem_rd, hbm_util, vmem_wr, vmem_rd])
    efficiency = np.maximum(max_mem, flops_util)
    out["optimal_flop_rate"] = _div(out["measured_flop_rate"].to_numpy(), efficiency)
    out["roofline_efficiency"] = efficiency
    out["compute_efficiency"] = flops_util
    out["max_mem_bw_utilization"] = max_mem
    out["hlo_module_id"] = [str(int(p) % U64) for p in ops["hlo_module_id"]]
    out["source_info"] = [f"{f}:{line}" if f else "" for f, line in zip(ops["source_file"], ops["source_line"])]
    out["source_stack"] = ops["source_stack"].to_numpy(object)
    return out


def _ranked(records: pd.DataFrame, self_us: np.ndarray, total_time_ps: float) -> pd.DataFrame:
    """SetRankAndTimeFractions after the program record (rank 0)."""
    fraction = _div(self_us, total_time_ps / 1e6)
    records["rank"] = np.arange(1, len(records) + 1, dtype=np.float64)
    records["total_self_time_percent"] = fraction
    records["cumulative_total_self_time_percent"] = np.cumsum(fraction)
    return records


@dataclass
class RooflineModel:
    peaks: RooflinePeaks
    records: pd.DataFrame  # XProf's column ids (COLUMNS) plus `source_stack`
    per_step_omitted: bool = False  # TPU steps: their per-step op DBs are not kept by the core
    ops: pd.DataFrame = field(default_factory=pd.DataFrame)  # the "Total" op records with infeed/outfeed


def roofline_model(records: pd.DataFrame, perf_env: PerfEnv, hardware_type: str, device_type: str,
                   device_core_count: int, total_time_ps: float, step_numbers: list[int], step_kind: str,
                   has_complete_steps_db: bool, has_merged_vmem: bool = False, has_megacore: bool = False,
                   time_scale_multiplier: float = 0.0) -> RooflineModel:
    """The roofline database of a run's device ops (`records`: hlo_op_records of the device DB)."""
    peaks = roofline_peaks(device_type, hardware_type, perf_env, has_merged_vmem, has_megacore,
                           time_scale_multiplier)
    sorted_ops = records.sort_values(["self_time_ps", "name"], ascending=[False, True], kind="stable")
    sorted_ops = sorted_ops.head(MAX_RECORDS)
    sorted_ops = sorted_ops[(sorted_ops["occurrences"] > 0) & (sorted_ops["category"] != IDLE)]
    per_step_known = step_kind != "tpu" or not step_numbers
    empty_db = records.iloc[0:0]
    frames = []
    ops_frame = pd.DataFrame()
    for include in (True, False):
        program, time = _program_row(records, total_time_ps, include)
        rows = [_records(program, perf_env, hardware_type, peaks, device_core_count, time, "Total", None)
                .assign(rank=0.0, total_self_time_percent=0.0, cumulative_total_self_time_percent=0.0)]
        feed = np.array([is_infeed_or_outfeed(c) for c in sorted_ops["category"]], dtype=bool)
        ops = sorted_ops if include else sorted_ops[~feed]
        op_rows = _records(ops, perf_env, hardware_type, peaks, device_core_count, time, "Total", None)
        op_rows = _ranked(op_rows, ops["self_time_ps"].to_numpy(np.float64) / 1e6, time)
        rows.append(op_rows)
        if include:
            ops_frame = op_rows
        if has_complete_steps_db and per_step_known:
            # The complete-steps DB gathers per-step op DBs, which CPU/GPU steps never fill.
            avg, avg_time = _program_row(empty_db, 0.0, include)
            rows.append(_records(avg, perf_env, hardware_type, peaks, device_core_count, avg_time, "Average",
                                 len(step_numbers)).assign(rank=0.0, total_self_time_percent=0.0,
                                                           cumulative_total_self_time_percent=0.0))
        if per_step_known and step_numbers:
            # Every step's record is the program record of an empty DB: made once, repeated with each step's
            # number (one made per step cost ≈ 2.5 ms, 24 s for the ×1000 capture's 10,000 records).
            row, step_time = _program_row(empty_db, 0.0, include)
            record = _records(row, perf_env, hardware_type, peaks, device_core_count, step_time, "", None).assign(
                rank=0.0, total_self_time_percent=0.0, cumulative_total_self_time_percent=0.0)
            per_step = record.loc[record.index.repeat(len(step_numbers))].reset_index(drop=True)
            per_step["step"] = [str(step) for step in step_numbers]
            rows.append(per_step)
        block = pd.concat(rows, ignore_index=True)
        block["include_infeed_outfeed"] = include
        frames.append(block)
    table = pd.concat(frames, ignore_index=True)
    table = table[[*COLUMNS, "source_stack"]]
    return RooflineModel(peaks=peaks, records=table, per_step_omitted=not per_step_known, ops=ops_frame)




@dataclass
class RooflineData:
    run: DeviceRun  # the run's device ops, all hosts combined
    model: RooflineModel


def roofline_data(host_names: list[str], parts: dict[str, DevicePart]) -> RooflineData | None:
    """The run's roofline model; None without a device. A device on which no XLA op could be placed (a GPU
    capture without HLO modules) gets XProf's program records and peaks, without op records."""
    device = combine_device_parts(host_names, parts)
    if device is None:
        return None
    op_stats = device.op_stats
    env = op_stats.environment
    model = roofline_model(
        device.records, op_stats.perf_env, env.hardware_type, env.device_type, env.device_core_count,
        op_stats.device_db.total_time_ps, op_stats.step_db.step_numbers, op_stats.step_db.kind,
        has_complete_steps_db=env.hardware_type == "TPU" or len(device.hosts) > 1,
        has_merged_vmem=device.details.has_merged_vmem, has_megacore=device.details.has_megacore,
        time_scale_multiplier=device.time_scale_multiplier,
    )
    return RooflineData(run=device, model=model)


__all__ = ["COLUMNS", "FRACTION_COLUMNS", "MAX_RECORDS", "roofline_data", "roofline_metrics", "roofline_model",
           "roofline_peaks", "RooflineData", "RooflineModel", "RooflinePeaks"]
