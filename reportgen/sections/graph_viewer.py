"""The graph viewer page: each HLO module's text (as XProf prints it) and one op's neighbourhood as a graph.

The page lists the run's HLO modules (XProf lists the graph viewer for every
capture that carries them). A module's graph and text go into a script of
their own, `graph_viewer/<module>.js`, which registers them with the page
when the reader picks the module, so a run of many large modules opens fast
and works from file://. The page lays out one op's neighbourhood at a time
with Graphviz (`reportgen/static/vendor/hpcc-js-wasm`). Device ops carry the
HLO op stats' numbers (time, occurrences, FLOPs, FLOP rate, bound by), joined in
`reportgen/core/tools/graph_viewer.py`.

Other pages link here as `graph_viewer.html#module=<module>&op=<op>` (or
`#program=<program id>&op=<op>`).
"""

from __future__ import annotations

import orjson

from reportgen.core.hlo.graph import ModuleGraph
from reportgen.core.pages import safe_file_part
from reportgen.core.tools.graph_viewer import GraphViewerData, GraphViewerPart, graph_viewer_data, graph_viewer_part
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.summary_blocks import GraphModule, GraphViewerBlock

U64 = 1 << 64
DATA_DIR = "graph_viewer"
# The most ops drawn at once: Graphviz lays out 300 HLO-shaped ops in ≈0.4 s and 1,000 in ≈14 s
# in headless Chromium (bench/graph_layout.py), so larger neighbourhoods are cut here.
MAX_NODES = 400


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
    assets = ("graph_viewer_js", "graphviz_js")

    def host_part(self, host: HostContext) -> GraphViewerPart | None:
        return graph_viewer_part(host)

    def combine(self, run: RunContext, parts: dict[str, GraphViewerPart]) -> GraphViewerData | None:
        return graph_viewer_data(run.host_names, parts)

    def summary(self, data: GraphViewerData) -> GraphViewerBlock:
        return GraphViewerBlock(modules={g.display_name: GraphModule(instructions=len(g.nodes),
                                                                     computations=len(g.computations),
                                                                     text_differences=tuple(g.unprinted))
                                         for g in data.modules})

    def render(self, data: GraphViewerData, page) -> None:
        modules = []
        for index, graph in enumerate(data.picker()):  # the first is the one the page opens on
            script = f"{DATA_DIR}/m{index}-{safe_file_part(graph.display_name, len(f'm{index}-.js'))}.js"
            page.path(script).write_bytes(module_script(module_payload(graph, data.metrics)))
            timed = sum(1 for n in graph.nodes if (graph.program_id % U64, n.name) in data.metrics)
            modules.append({"name": graph.display_name, "script": script, "instructions": len(graph.nodes),
                            "computations": len(graph.computations), "timed": timed,
                            "unprinted": graph.unprinted, "device_percent": data.device_percent(graph)})
        page.write_html("graph_viewer.html", "graph_viewer.html", modules=modules, device_type=data.device_type,
                        timed=bool(data.metrics), max_nodes=MAX_NODES)
