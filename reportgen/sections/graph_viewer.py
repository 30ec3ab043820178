"""The graph viewer page: each HLO module's text (as XProf prints it) and one op's neighbourhood as a graph.

The page lists the run's HLO modules (XProf lists the graph viewer for every
capture that carries them). A module's graph and text go into a script of
their own, `graph_viewer/<module>.js`, which registers them with the page
when the reader picks the module, so a run of many large modules opens fast
and works from file://. The page lays out one op's neighbourhood at a time
with Graphviz (`reportgen/static/vendor/hpcc-js-wasm`). Device ops carry the
HLO op stats' numbers (time, occurrences, FLOPs, FLOP rate, bound by).

Other pages link here as `graph_viewer.html#module=<module>&op=<op>` (or
`#program=<program id>&op=<op>`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from reportgen.core.hlo_graph import ModuleGraph, module_graph
from reportgen.core.hlo_stats import hlo_stats_table
from reportgen.core.op_metrics import IDLE
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.device_ops import DevicePart, combine_device_parts, device_part
from reportgen.sections.memory_profile import safe_file_part

U64 = 1 << 64
DATA_DIR = "graph_viewer"
# The most ops drawn at once: Graphviz lays out 300 HLO-shaped ops in ≈0.4 s and 1,000 in ≈14 s
# in headless Chromium (bench/graph_layout.py), so larger neighbourhoods are cut here.
MAX_NODES = 400


@dataclass
class GraphViewerPart:
    modules: dict[str, ModuleGraph]
    device: DevicePart | None


@dataclass
class GraphViewerData:
    modules: list[ModuleGraph]  # in XProf's module-list order
    metrics: dict[tuple[int, str], dict] = field(default_factory=dict)  # (program id, op name) → numbers
    device_type: str = ""


def op_metrics(run: RunContext, parts: dict[str, DevicePart]) -> tuple[dict[tuple[int, str], dict], str]:
    """The HLO op stats' numbers of every device op, by (unsigned program id, op name)."""
    device = combine_device_parts(run, parts)
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


def module_payload(graph: ModuleGraph, metrics: dict[tuple[int, str], dict]) -> dict:
    """The module as the page's script reads it (short keys: modules can have many thousands of ops)."""
    nodes = []
    for node in graph.nodes:
        item = {"n": node.name, "o": node.opcode, "k": node.category, "s": node.shape, "c": node.computation,
                "l": node.line}
        if node.operands:
            item["in"] = node.operands
        if node.calls:
            item["calls"] = node.calls
        if node.padding:
            item["pad"] = node.padding
        if node.fusion_kind:
            item["fk"] = node.fusion_kind
        if node.parameter >= 0:
            item["p"] = node.parameter
        numbers = metrics.get((graph.program_id % U64, node.name))
        if numbers is not None:
            item["m"] = numbers
        nodes.append(item)
    return {
        "name": graph.display_name,
        "program": str(graph.program_id % U64),
        "text": graph.text,
        "unprinted": graph.unprinted,
        "computations": [{"n": c.name, "entry": c.entry, "fusion": c.fusion, "root": c.root, "nodes": c.nodes}
                         for c in graph.computations],
        "nodes": nodes,
    }


def module_script(payload: dict) -> bytes:
    # JSON is JavaScript; the file is loaded by a <script> element (never fetched), so
    # nothing in it needs HTML escaping, and capture text stays data.
    return b"reportgenGraphViewer.register(" + orjson.dumps(payload) + b");\n"


class GraphViewerSection(Section):
    slug = "graph_viewer"
    title = "Graph viewer"

    def host_part(self, host: HostContext) -> GraphViewerPart | None:
        modules = host.hlo_modules
        if not modules:
            return None
        graphs = {m.display_name: module_graph(m) for m in modules.values()}
        return GraphViewerPart(modules=graphs, device=device_part(host))

    def combine(self, run: RunContext, parts: dict[str, GraphViewerPart]) -> GraphViewerData | None:
        # A module compiled on several hosts is one program: the first host's copy is shown.
        modules: dict[str, ModuleGraph] = {}
        for host in [*run.host_names, *(h for h in parts if h not in run.host_names)]:
            part = parts.get(host)
            if part is not None:
                for name, graph in part.modules.items():
                    modules.setdefault(name, graph)
        if not modules:
            return None
        devices = {h: p.device for h, p in parts.items() if p.device is not None}
        metrics, device_type = op_metrics(run, devices) if devices else ({}, "")
        return GraphViewerData(modules=[modules[n] for n in sorted(modules)], metrics=metrics,
                               device_type=device_type)

    def summary(self, data: GraphViewerData) -> dict:
        return {"modules": {g.display_name: {"instructions": len(g.nodes), "computations": len(g.computations),
                                             "text_differences": g.unprinted} for g in data.modules}}

    def render(self, data: GraphViewerData, page) -> None:
        modules = []
        for index, graph in enumerate(data.modules):
            script = f"{DATA_DIR}/m{index}-{safe_file_part(graph.display_name)}.js"
            page.path(script).write_bytes(module_script(module_payload(graph, data.metrics)))
            timed = sum(1 for n in graph.nodes if (graph.program_id % U64, n.name) in data.metrics)
            modules.append({"name": graph.display_name, "script": script, "instructions": len(graph.nodes),
                            "computations": len(graph.computations), "timed": timed,
                            "unprinted": graph.unprinted})
        page.write_html("graph_viewer.html", "graph_viewer.html", modules=modules, device_type=data.device_type,
                        timed=bool(data.metrics), max_nodes=MAX_NODES)
