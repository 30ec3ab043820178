"""XProf's graph viewer: each HLO module of the run as a graph and as text, with the device ops' numbers.

XProf lists the graph viewer for every capture whose XSpace carries HLO
modules. Each host contributes its modules as graphs (`core.hlo.graph`:
instructions, operands, called computations, shapes with layout, and the
module text XProf prints with `type=short_txt`) and, where it ran ops on a
device, its device op part; the run keeps one copy of each module (the first
host's: a module compiled on several hosts is one program) and joins the
HLO op stats' numbers to its ops.

    part = graph_viewer_part(host)                       # per host
    data = graph_viewer_data(host_names, parts)          # per run
    data.metrics[(program_id, "fusion.3")]["time_us"]

Times are HLO op stats' (`core.tools.hlo_stats`): summed over all
occurrences on all cores; FLOPs are the op's total over its occurrences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.core.hlo.graph import ModuleGraph, module_graph
from reportgen.core.host import HostContext
from reportgen.core.ops.device_run import DevicePart, combine_device_parts, device_part
from reportgen.core.ops.op_metrics import IDLE
from reportgen.core.tools.hlo_stats import hlo_stats_table

U64 = 1 << 64


@dataclass
class GraphViewerPart:
    """One host's share (picklable): its modules' graphs by XProf's module name, its device ops."""

    modules: dict[str, ModuleGraph]
    device: DevicePart | None


@dataclass
class GraphViewerData:
    modules: list[ModuleGraph]  # in XProf's module-list order (by name)
    metrics: dict[tuple[int, str], dict] = field(default_factory=dict)  # (program id, op name) → numbers
    device_type: str = ""
    device_us: dict[int, float] = field(default_factory=dict)  # program id → its ops' self time

    def device_percent(self, graph: ModuleGraph) -> float | None:
        """The module's share of the run's device op time, or None without device ops."""
        total = sum(self.device_us.values())
        return 100.0 * self.device_us.get(graph.program_id, 0.0) / total if total > 0 else None

    def picker(self) -> list[ModuleGraph]:
        """The modules as the page's picker lists them, the first one shown: the most device time (their ops'
        self times) first; where that is equal (a CPU capture has no device ops), the largest (most
        instructions). XProf's picker goes by name, which opened a JAX run on a module of 0.46 % of the
        device time instead of the one of 99.5 %."""
        return sorted(self.modules, key=lambda g: (-self.device_us.get(g.program_id, 0.0), -len(g.nodes),
                                                   g.display_name))


def graph_viewer_part(host: HostContext) -> GraphViewerPart | None:
    modules = host.hlo_modules
    if not modules:
        return None
    graphs = {m.display_name: module_graph(m) for m in modules.values()}
    return GraphViewerPart(modules=graphs, device=device_part(host))


def op_metrics(host_names: list[str], parts: dict[str, DevicePart]) -> tuple[dict[tuple[int, str], dict], str]:
    """The HLO op stats' numbers of every device op, by (unsigned program id, op name), and the device type."""
    device = combine_device_parts(host_names, parts)
    if device is None or not device.has_ops:
        return {}, ""
    env = device.op_stats.environment
    table = hlo_stats_table(device.records, device.op_stats.perf_env, env.hardware_type,
                            device.op_stats.device_db.total_time_ps)
    records = device.records[(device.records["occurrences"] > 0) & (device.records["category"] != IDLE)]
    flops = {(int(p) % U64, n): (int(f), int(m)) for p, n, f, m in
             zip(records["hlo_module_id"], records["name"], records["flops"], records["model_flops"])}
    metrics = {}
    for row in table.itertuples(index=False):
        key = (int(row.program_id), row.hlo_op_name)
        total_flops, model_flops = flops.get(key, (0, 0))
        metrics[key] = {"time_us": row.total_time, "self_us": row.total_self_time, "occurrences": int(row.occurrences),
                        "self_percent": row.total_self_time_percent, "flops": total_flops, "model_flops": model_flops,
                        "gflops": row.model_flop_rate, "bound_by": row.bound_by}
    return metrics, env.device_type


def graph_viewer_data(host_names: list[str], parts: dict[str, GraphViewerPart]) -> GraphViewerData | None:
    """The run's modules (None when no host carries one) with the device ops' numbers."""
    modules: dict[str, ModuleGraph] = {}
    named = set(host_names)
    for host in [*host_names, *(h for h in parts if h not in named)]:
        part = parts.get(host)
        if part is not None:
            for name, graph in part.modules.items():
                modules.setdefault(name, graph)
    if not modules:
        return None
    devices = {h: p.device for h, p in parts.items() if p.device is not None}
    metrics, device_type = op_metrics(host_names, devices) if devices else ({}, "")
    device_us: dict[int, float] = {}
    for (program, _), numbers in metrics.items():
        device_us[program] = device_us.get(program, 0.0) + numbers["self_us"]
    return GraphViewerData(modules=[modules[n] for n in sorted(modules)], metrics=metrics, device_type=device_type,
                           device_us=device_us)


__all__ = ["GraphViewerData", "GraphViewerPart", "graph_viewer_data", "graph_viewer_part", "op_metrics"]
