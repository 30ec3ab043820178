"""XProf's GPU kernel stats tool: the kernel stats DB of each host and of the run, per view.

The DB itself (one report per kernel–op pair, XProf's aggregation, sort and
cut) is built per host with the OpStats (`core.ops.kernel_reports`); this
tool combines hosts as XProf does and keeps a view per host beside the run's.
A run has the tool when a host has GPU planes.

    part = host_kernel_stats(host)                 # None without GPU planes
    data = kernel_stats_data(host_names, parts)    # the run's table and its views
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.host import HostContext
from reportgen.core.ops.kernel_reports import combine_host_reports, gpu_planes, kernel_stats_table
from reportgen.summary_blocks import Kernel, KernelStatsBlock

# XProf's column ids and labels (kernel_stats.md §3), in its order.
XPROF_COLUMNS = {
    "rank": "Rank",
    "kernel_name": "Kernel Name",
    "registers_per_thread": "Registers per thread",
    "shmem_bytes": "Shared Mem bytes",
    "block_dim": "Block dim",
    "grid_dim": "Grid dim",
    "occupancy_pct": "Theoretical Occupancy %",
    "is_op_tensor_core_eligible": "Op is TensorCore eligible",
    "is_kernel_using_tensor_core": "Kernel uses TensorCore",
    "op_name": "Op Name",
    "occurrences": "Occurrences",
    "total_duration_us": "Total Duration (\u03bcs)",
    "avg_duration_us": "Avg Duration (\u03bcs)",
    "min_duration_us": "Min Duration (\u03bcs)",
    "max_duration_us": "Max Duration (\u03bcs)",
}


@dataclass
class HostKernelStats:
    reports: pd.DataFrame  # the host's kernel stats DB (core.ops.kernel_reports.REPORT_COLUMNS)
    gpu_planes: int
    xla_kernel_events: int  # kernel events with an `hlo_op` stat (op names from the HLO modules)


@dataclass
class KernelStatsView:
    """One selectable view: a host, or all hosts combined."""

    key: str
    label: str
    table: pd.DataFrame  # core.ops.kernel_reports.kernel_stats_table(), plus `host` when combined
    show_host: bool = False


@dataclass
class KernelStatsData:
    hosts: list[str]
    combined: pd.DataFrame  # the run's table: XProf's multi-host combination (one host: that host's)
    views: list[KernelStatsView] = field(default_factory=list)
    gpu_planes: int = 0
    xla_kernel_events: int = 0


TOP_KERNELS_IN_SUMMARY = 5


def tensor_core_percent(table: pd.DataFrame) -> float:
    total = float(table["total_duration_us"].sum())
    if total <= 0:
        return 0.0
    return 100.0 * float(table.loc[table["is_kernel_using_tensor_core"], "total_duration_us"].sum()) / total


def host_kernel_stats(host: HostContext) -> HostKernelStats | None:
    table = host.events
    planes = gpu_planes(table)
    if len(planes) == 0:
        return None
    has_hlo_op = table.stat_present("hlo_op")
    return HostKernelStats(
        reports=host.op_stats.kernel_reports,
        gpu_planes=len(planes),
        xla_kernel_events=int(np.count_nonzero(has_hlo_op & np.isin(table.plane, planes))),
    )


def kernel_stats_data(host_names: list[str], parts: dict[str, HostKernelStats]) -> KernelStatsData | None:
    """The run's kernel stats (`host_names`: the run's host order): all hosts first, then each host."""
    hosts = [h for h in host_names if h in parts] or list(parts)
    if not hosts:
        return None
    per_host = {h: parts[h].reports for h in hosts}
    combined = kernel_stats_table(combine_host_reports(per_host))
    views = []
    if len(hosts) > 1:
        views.append(KernelStatsView("all", f"All {len(hosts)} hosts", combined, show_host=True))
    for index, host in enumerate(hosts, start=1):
        views.append(KernelStatsView(f"host-{index}", host, kernel_stats_table(per_host[host])))
    return KernelStatsData(
        hosts=hosts,
        combined=combined,
        views=views,
        gpu_planes=sum(parts[h].gpu_planes for h in hosts),
        xla_kernel_events=sum(parts[h].xla_kernel_events for h in hosts),
    )


def kernel_stats_summary(data: KernelStatsData) -> KernelStatsBlock:
    """The run's `kernel_stats` block of summary.json."""
    table = data.combined
    total = float(table["total_duration_us"].sum())
    by_name = (table.groupby("kernel_name", sort=False)
               .agg(total_us=("total_duration_us", "sum"), occurrences=("occurrences", "sum"), rank=("rank", "min"))
               .reset_index().sort_values(["total_us", "rank"], ascending=[False, True], kind="stable")
               .head(TOP_KERNELS_IN_SUMMARY))
    return KernelStatsBlock(
        kernels=int(len(table)),
        total_us=round(total, 3),
        tensor_core_percent=round(tensor_core_percent(table), 2),
        # Kernels by name (all their launch configurations and ops), the most total time first.
        top_kernels=tuple(Kernel(name=str(r.kernel_name), total_us=round(float(r.total_us), 3),
                                 occurrences=int(r.occurrences),
                                 percent=100.0 * float(r.total_us) / total if total > 0 else 0.0)
                          for r in by_name.itertuples()),
    )
