"""Run views shared by the sections that read the core: each host alone and,
for multi-host runs, all hosts combined (XProf's combined OpStats)."""

from __future__ import annotations

from collections.abc import Mapping

from reportgen.core.ops.op_stats import HostOpStats, RunOpStats, combine_op_stats, drop_incomplete_steps

ALL_HOSTS = "All hosts"
# A host's own view runs XProf's whole analysis again on that host, and its panel carries a chart and tables:
# beyond this many hosts (a pod slice has hundreds to thousands) the pages show the hosts combined only, so
# that a run's combine, render and page size grow no faster than its host count's share of the combined view.
MAX_HOST_VIEWS = 16


def host_views_note(host_count: int) -> str:
    """What a page says when it leaves the hosts' own views out ("" when it shows them)."""
    if host_count <= MAX_HOST_VIEWS:
        return ""
    return (f"This run has {host_count:,} hosts: they are shown combined. Each host's own view is shown for "
            f"runs of up to {MAX_HOST_VIEWS} hosts; build one host's file to see it alone.")


def hosts_in_order(host_names: list[str], parts: Mapping[str, object]) -> list[str]:
    """The hosts that have a part: in the run's order, then any others in their parts' order (membership in
    a set: a list's `in` made this quadratic in a run of thousands of hosts)."""
    named = set(host_names)
    return [h for h in host_names if h in parts] + [h for h in parts if h not in named]


def run_views(parts: dict[str, HostOpStats], hosts: list[str], overview_steps: bool) -> dict[str, RunOpStats]:
    """Label → combined OpStats, "All hosts" first when there are several hosts, then each host alone
    (up to MAX_HOST_VIEWS hosts).

    `overview_steps`: apply XProf 2.24.2's overview step rule (first and last
    step dropped when a host has more than five) before combining."""
    ordered = hosts_in_order(hosts, parts)
    prepared = {h: drop_incomplete_steps(parts[h]) if overview_steps else parts[h] for h in ordered}
    views: dict[str, RunOpStats] = {}
    if len(ordered) > 1:
        views[ALL_HOSTS] = combine_op_stats([prepared[h] for h in ordered])
    if len(ordered) <= MAX_HOST_VIEWS:
        for h in ordered:
            views[h] = combine_op_stats([prepared[h]])
    return views
