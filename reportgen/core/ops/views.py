"""Run views shared by the sections that read the core: each host alone and,
for multi-host runs, all hosts combined (XProf's combined OpStats)."""

from __future__ import annotations

from reportgen.core.ops.op_stats import HostOpStats, RunOpStats, combine_op_stats, drop_incomplete_steps

ALL_HOSTS = "All hosts"


def run_views(parts: dict[str, HostOpStats], hosts: list[str], overview_steps: bool) -> dict[str, RunOpStats]:
    """Label → combined OpStats, "All hosts" first when there are several hosts.

    `overview_steps`: apply XProf 2.24.2's overview step rule (first and last
    step dropped when a host has more than five) before combining."""
    ordered = [h for h in hosts if h in parts] + [h for h in parts if h not in hosts]
    prepared = {h: drop_incomplete_steps(parts[h]) if overview_steps else parts[h] for h in ordered}
    views: dict[str, RunOpStats] = {}
    if len(ordered) > 1:
        views[ALL_HOSTS] = combine_op_stats([prepared[h] for h in ordered])
    for h in ordered:
        views[h] = combine_op_stats([prepared[h]])
    return views
