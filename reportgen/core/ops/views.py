"""Run views shared by the sections that read the core: each host alone and,
for multi-host runs, all hosts combined (XProf's combined OpStats)."""

from __future__ import annotations

from collections.abc import Mapping

from reportgen.core.ops.op_metrics import OpMetricsDb
from reportgen.core.ops.op_stats import (
    HostOpStats,
    RunOpStats,
    combine_metric_dbs,
    combine_op_stats,
    drop_incomplete_steps,
)

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


# The last combined views, by the identity of the hosts' OpStats and the step rule: the overview and the input
# pipeline combine the same hosts the same way, as do TF stats and the pod viewer (each combine of a pod's
# thousands of hosts costs ≈ 0.5 s).
# The entries hold their hosts' OpStats, so an identity cannot be reused by another object while cached;
# combined views are read, never modified, by the sections. Runs are combined on one thread, one at a time;
# the build lets the entries go once a run is combined (`forget_combined`).
_COMBINED: dict[tuple, tuple[tuple[HostOpStats, ...], RunOpStats]] = {}
_COMBINED_KEPT = 2
# The hosts' op metrics combined, by the identity of the hosts' OpStats (the step rule changes the steps only:
# both rules' views share them), with the OpStats they were made from.
_COMBINED_DBS: dict[tuple, tuple[tuple[HostOpStats, ...], tuple[OpMetricsDb, OpMetricsDb]]] = {}


def combined_hosts(parts: list[HostOpStats], overview_steps: bool) -> RunOpStats:
    """The hosts combined (XProf's combined OpStats), with the overview's step rule applied first when
    `overview_steps`; computed once for the sections that ask for the same hosts the same way (one host is
    taken as it is, which costs nothing to redo)."""
    if len(parts) == 1:
        return combine_op_stats(_with_step_rule(parts, overview_steps))
    key = (overview_steps, *map(id, parts))
    if key in _COMBINED:
        return _COMBINED[key][1]
    dbs_key = tuple(map(id, parts))
    if dbs_key not in _COMBINED_DBS:
        _COMBINED_DBS.clear()
        _COMBINED_DBS[dbs_key] = (tuple(parts), combine_metric_dbs(parts))
    combined = combine_op_stats(_with_step_rule(parts, overview_steps), _COMBINED_DBS[dbs_key][1])
    while len(_COMBINED) >= _COMBINED_KEPT:
        del _COMBINED[next(iter(_COMBINED))]
    _COMBINED[key] = (tuple(parts), combined)
    return combined


def _with_step_rule(parts: list[HostOpStats], overview_steps: bool) -> list[HostOpStats]:
    # Applied only to hosts about to be combined: on a kept view it is work for nothing, a thousand times at a pod.
    return [drop_incomplete_steps(p) for p in parts] if overview_steps else parts


def forget_combined() -> None:
    """Let the kept combined views go (the build calls it once a run's sections are combined, so that a
    run's hosts are not held in memory while the next run builds)."""
    _COMBINED.clear()
    _COMBINED_DBS.clear()


def run_views(parts: dict[str, HostOpStats], hosts: list[str], overview_steps: bool) -> dict[str, RunOpStats]:
    """Label → combined OpStats, "All hosts" first when there are several hosts, then each host alone
    (up to MAX_HOST_VIEWS hosts).

    `overview_steps`: apply XProf 2.24.2's overview step rule (first and last
    step dropped when a host has more than five) before combining."""
    ordered = hosts_in_order(hosts, parts)
    views: dict[str, RunOpStats] = {}
    if len(ordered) > 1:
        views[ALL_HOSTS] = combined_hosts([parts[h] for h in ordered], overview_steps)
    if len(ordered) <= MAX_HOST_VIEWS:
        for h in ordered:
            views[h] = combined_hosts([parts[h]], overview_steps)
    return views
