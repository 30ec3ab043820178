"""The device op DB joined with its details: one row per op with everything the op tools read.

`hlo_op_records(device_db, details)` → DataFrame in the DB's order, IDLE
included, with the OpMetricsDb columns plus:

    normalized_time_ps, dma_stall_ps, deduplicated_name, source_file,
    source_line, source_stack, core_type,
    has_breakdown (the op has a memory access breakdown),
    hbm_read, hbm_write, onchip_read, onchip_write   (bytes; on-chip = any space but HBM)
    cmem_read, cmem_write, vmem_read, vmem_write      (bytes)

An op without HLO text in the trace (GPU) gets its instruction's text from
the HLO module as `long_name`, as XProf's GPU op database has it.

Memory space numbers are XProf's: 1 is HBM (certain: the op profile and the
roofline agree on it); CMEM and VMEM are taken as 2 and 3. The shared
captures only use HBM.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reportgen.core.ops.device_details import HBM, KEY, OP_COLUMNS, READ, WRITE, DeviceOpDetails
from reportgen.core.ops.op_metrics import OpMetricsDb, safe_divide

CMEM = 2
VMEM = 3
BYTE_COLUMNS = ["hbm_read", "hbm_write", "onchip_read", "onchip_write", "cmem_read", "cmem_write", "vmem_read",
                "vmem_write"]


def _memory_columns(memory: pd.DataFrame) -> pd.DataFrame:
    space = memory["memory_space"].to_numpy()
    op_type = memory["operation_type"].to_numpy()
    nbytes = memory["bytes"].to_numpy(np.int64)
    masks = {
        "hbm_read": (space == HBM) & (op_type == READ), "hbm_write": (space == HBM) & (op_type == WRITE),
        "onchip_read": (space != HBM) & (op_type == READ), "onchip_write": (space != HBM) & (op_type == WRITE),
        "cmem_read": (space == CMEM) & (op_type == READ), "cmem_write": (space == CMEM) & (op_type == WRITE),
        "vmem_read": (space == VMEM) & (op_type == READ), "vmem_write": (space == VMEM) & (op_type == WRITE),
    }
    frame = memory[KEY].copy()
    for col, mask in masks.items():
        frame[col] = np.where(mask, nbytes, 0)
    # XProf's roofline counts every HBM access, whatever its direction.
    frame["hbm_any"] = np.where(space == HBM, nbytes, 0)
    grouped = frame.groupby(KEY, sort=False).sum()
    grouped["has_breakdown"] = True
    return grouped


def hlo_op_records(device_db: OpMetricsDb, details: DeviceOpDetails) -> pd.DataFrame:
    m = device_db.metrics.reset_index(drop=True)
    out = m.merge(details.ops[OP_COLUMNS], on=KEY, how="left")
    out["normalized_time_ps"] = out["normalized_time_ps"].fillna(0.0)
    out["dma_stall_ps"] = out["dma_stall_ps"].fillna(0).astype(np.int64)
    out["source_line"] = out["source_line"].fillna(0).astype(np.int64)
    for col in ["deduplicated_name", "source_file", "source_stack", "core_type"]:
        out[col] = out[col].fillna("").astype(object)
    if len(details.memory):
        mem = _memory_columns(details.memory)
        out = out.merge(mem, left_on=KEY, right_index=True, how="left")
    else:
        for col in [*BYTE_COLUMNS, "hbm_any", "has_breakdown"]:
            out[col] = 0
    for col in [*BYTE_COLUMNS, "hbm_any"]:
        out[col] = out[col].fillna(0).astype(np.int64)
    out["has_breakdown"] = out["has_breakdown"].eq(True).to_numpy(bool)
    # GPU ops carry no HLO text in the trace; XProf's long name is the instruction's text.
    if details.hlo:
        texts = out["long_name"].tolist()
        for i, (pid, name) in enumerate(zip(out["hlo_module_id"].tolist(), out["name"].tolist())):
            op = details.hlo.get((int(pid), name)) if not texts[i] else None
            if op is not None:
                texts[i] = op.expression
        out["long_name"] = np.array(texts, dtype=object)
    return out


def normalized_total_op_time_ps(records: pd.DataFrame) -> float:
    """Σ self time × normalized/time over the ops (XProf's normalized_total_op_time_ps)."""
    total = 0.0
    for self_ps, time_ps, norm in zip(records["self_time_ps"].tolist(), records["time_ps"].tolist(),
                                      records["normalized_time_ps"].tolist()):
        total += self_ps * safe_divide(norm, time_ps)
    return total


__all__ = ["BYTE_COLUMNS", "hlo_op_records", "normalized_total_op_time_ps"]
