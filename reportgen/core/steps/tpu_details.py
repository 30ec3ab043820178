"""Per-step TPU details for the input-pipeline analysis (docs/xprof/input_pipeline.md §3.1–3.2).

Each TensorCore's step breakdown (`StepDb.category_ps`, op self time per HLO
category) is reduced to XProf's TpuStepBreakdown (infeed, outfeed, host
send/recv, SparseCoreV0 waits, idle), then the cores of one step are
combined into a PerTpuStepDetails row: the least compute, the most infeed
(and the core it was on), the average outfeed, the range of the share of
the step each core spent waiting for input, and the idle time left over.

Not reproduced: XProf's all-reduce breakdown, which reads per-core
all-reduce records the step database does not collect; its compute and
sync times are 0 here (as they are in XProf for captures without them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reportgen.core.ops.op_metrics import safe_divide
from reportgen.core.steps.step_db import StepDb

SPARSE_CORE_ID_MIN = 1_000_000  # XProf's first SparseCore id

# PerTpuStepDetails fields (ms unless named otherwise), in this frame's column order.
TPU_STEP_COLUMNS = [
    "step_num", "step_name", "tc_compute", "scv0_compute", "scv0_infeed", "tc_infeed", "tc_outfeed", "tc_idle",
    "host_transfer", "all_reduce_compute", "all_reduce_sync", "infeed_percent_average", "infeed_percent_minimum",
    "infeed_percent_maximum", "core_id_max_infeed", "max_infeed_core_name", "sc_compute", "sc_infeed", "sc_outfeed",
    "sc_idle", "sc_step_time", "cores", "step_time_ms", "input_ms",
]


def _core_breakdown(duration_ps: int, categories: dict) -> dict[str, int]:
    """One TensorCore's step: XProf's TpuStepBreakdown from its category times."""
    c = {k: int(v) for k, v in categories.items() if k != "IDLE"}
    busy = sum(c.values())  # before the SparseCoreV0 split, which keeps the sum
    blocked = c.pop("sparsecorev0 infeed", 0)
    if blocked > 0:
        transform = min(blocked, c.get("sparsecorev0 outfeed", 0))
        c["sparsecorev0 infeed wait"] = blocked - transform
        c["sparsecorev0 infeed transform"] = transform
    infeed = c.get("infeed", 0)
    outfeed = c.get("outfeed", 0)
    wait_scv0 = c.get("sparsecorev0 infeed wait", 0)
    host_send_recv = (c.get("host send", 0) + c.get("host send-done", 0) + c.get("host recv", 0)
                      + c.get("host recv-done", 0))
    idle = duration_ps - busy
    wait_for_host = infeed + outfeed + host_send_recv + idle
    return {
        "infeed": infeed + wait_scv0 + c.get("sparsecorev0 infeed transform", 0),
        "tc_plus_scv0_infeed": infeed,  # XProf never sets the SparseCoreV0 infeed share: its part is 0
        "outfeed": outfeed,
        "wait_scv0": wait_scv0,
        "host_send_recv": host_send_recv,
        "optimal": duration_ps - (wait_for_host + wait_scv0),
    }


def _step_row(step: int, cores: pd.DataFrame, category_ps: dict, core_details: dict[int, dict]) -> dict:
    durations, outfeed, infeed_pct, optimal, send_recv = [], [], [], [], []
    sc_step, sc_compute, sc_idle = [], [], []
    max_infeed, max_infeed_core, max_wait, scv0_compute = 0, None, 0, 0
    for core, duration in zip(cores["core"].to_numpy(np.int64), cores["duration_ps"].to_numpy(np.int64)):
        cats = category_ps.get((step, int(core)), {})
        if core >= SPARSE_CORE_ID_MIN:
            idle = int(cats.get("IDLE", 0))
            sc_step.append(int(duration))
            sc_compute.append(int(duration) - idle)
            sc_idle.append(idle)
            continue
        b = _core_breakdown(int(duration), cats)
        durations.append(int(duration))
        if b["wait_scv0"] > max_wait:
            max_wait, scv0_compute = b["wait_scv0"], b["wait_scv0"]
        outfeed.append(b["outfeed"])
        infeed_pct.append(100.0 * safe_divide(b["tc_plus_scv0_infeed"], duration))
        optimal.append(b["optimal"])
        send_recv.append(b["host_send_recv"])
        if b["infeed"] > max_infeed:
            max_infeed, max_infeed_core = b["infeed"], int(core)
    # Stat<uint64> averages are integer divisions.
    tc_outfeed = (sum(outfeed) // len(outfeed)) / 1e9 if outfeed else 0.0
    tc_compute = min(optimal) / 1e9 if optimal else 0.0
    tc_infeed = max_infeed / 1e9
    scv0_compute_ms = scv0_compute / 1e9
    tc_idle = max(0.0, (min(durations) / 1e9 if durations else 0.0)
                  - (tc_compute + scv0_compute_ms + tc_infeed + tc_outfeed))
    details = core_details.get(max_infeed_core, {}) if max_infeed_core is not None else {}
    name = f"{details['hostname']}:{details.get('device_ordinal', 0)}" if details.get("hostname") else ""
    row = {
        "step_num": step, "step_name": str(step), "tc_compute": tc_compute, "scv0_compute": scv0_compute_ms,
        "scv0_infeed": 0.0, "tc_infeed": tc_infeed, "tc_outfeed": tc_outfeed, "tc_idle": tc_idle,
        "host_transfer": max(send_recv) / 1e9 if send_recv else 0.0,
        "all_reduce_compute": 0.0, "all_reduce_sync": 0.0,
        "infeed_percent_average": float(np.mean(infeed_pct)) if infeed_pct else 0.0,
        "infeed_percent_minimum": min(infeed_pct) if infeed_pct else 0.0,
        "infeed_percent_maximum": max(infeed_pct) if infeed_pct else 0.0,
        "core_id_max_infeed": max_infeed_core if max_infeed_core is not None else -1,
        "max_infeed_core_name": name,
        "sc_compute": min(sc_compute) / 1e9 if sc_compute else 0.0,
        "sc_infeed": 0.0, "sc_outfeed": 0.0,
        "sc_idle": (sum(sc_idle) // len(sc_idle)) / 1e9 if sc_idle else 0.0,
        "sc_step_time": (sum(sc_step) // len(sc_step)) / 1e9 if sc_step else 0.0,
        "cores": len(durations),
    }
    # XProf's StepTimeMs (non-idle + idle) and InfeedTimeMs helpers.
    row["input_ms"] = row["tc_infeed"] + row["scv0_infeed"]
    row["step_time_ms"] = (row["tc_compute"] + row["scv0_compute"] + row["input_ms"] + row["all_reduce_compute"]
                           + row["all_reduce_sync"] + row["tc_outfeed"] + row["tc_idle"])
    return row


def tpu_step_details(step_db: StepDb, core_details: dict[int, dict] | None = None) -> pd.DataFrame:
    """One PerTpuStepDetails row per step (TPU_STEP_COLUMNS), in step order."""
    steps = step_db.steps
    rows = []
    for step, cores in steps.groupby("step_num", sort=False):
        rows.append(_step_row(int(step), cores, step_db.category_ps, core_details or {}))
    return pd.DataFrame(rows, columns=TPU_STEP_COLUMNS)
