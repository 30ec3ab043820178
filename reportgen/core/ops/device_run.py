"""What the device op tools (op profile, HLO op stats, roofline) share: the run's device ops.

Each host contributes its OpStats and its device op details where it has a
GPU or TPU; the run combines them as XProf combines OpStats (all device
hosts together) and joins them into one record per op.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reportgen.core.host import HostContext
from reportgen.core.ops.device_details import DeviceOpDetails, combine_device_op_details
from reportgen.core.ops.device_records import hlo_op_records, normalized_total_op_time_ps
from reportgen.core.ops.op_metrics import IDLE, safe_divide
from reportgen.core.ops.op_stats import HostOpStats, RunOpStats
from reportgen.core.ops.views import combined_hosts, hosts_in_order


@dataclass
class DevicePart:
    """One host's share (picklable)."""

    op_stats: HostOpStats
    details: DeviceOpDetails


@dataclass
class DeviceRun:
    op_stats: RunOpStats
    details: DeviceOpDetails
    records: pd.DataFrame  # core.ops.device_records columns, DB order, IDLE included
    hosts: list[str]

    @property
    def hardware_type(self) -> str:
        return self.op_stats.environment.hardware_type

    @property
    def has_ops(self) -> bool:
        """Whether any op ran on the device (beyond idle time)."""
        r = self.records
        return bool(((r["category"] != IDLE) & (r["occurrences"] > 0)).any())

    @property
    def time_scale_multiplier(self) -> float:
        """XProf's aggregate DVFS multiplier: normalized op time over op time (0 on GPU)."""
        db = self.op_stats.device_db
        return safe_divide(normalized_total_op_time_ps(self.records), db.total_op_time_ps)


def device_part(host: HostContext) -> DevicePart | None:
    details = host.device_op_details
    if details is None:
        return None
    return DevicePart(op_stats=host.op_stats, details=details)


def combine_device_parts(host_names: list[str], parts: dict[str, DevicePart]) -> DeviceRun | None:
    """The run's hosts with a device (`host_names`: the run's host order), combined."""
    hosts = hosts_in_order(host_names, parts)
    if not hosts:
        return None
    # The combine TF stats and the pod viewer share when the hosts are the same (core/ops/views.py).
    op_stats = combined_hosts([parts[h].op_stats for h in hosts], overview_steps=False)
    details = combine_device_op_details([parts[h].details for h in hosts])
    records = hlo_op_records(op_stats.device_db, details)
    return DeviceRun(op_stats=op_stats, details=details, records=records, hosts=hosts)


__all__ = ["DevicePart", "DeviceRun", "combine_device_parts", "device_part"]
