"""An HLO module as the graph viewer draws it: instructions, their operands and called computations.

    graph = module_graph(module)                 # core.hlo.model.HloModule
    graph.text                                   # XProf's graph_viewer text (core.hlo.module_text)
    graph.nodes[i].operands                      # indices of node i's operands (same computation)
    graph.computations[graph.nodes[i].computation]

Nodes are listed computation by computation in the printed order, each with
its opcode, XProf's category, its shape with layout, the tile padding of its
layout (dimensions major to minor, padded size) and the line of the module
text that prints it. Users are not stored: the page derives them from the
operands. The graph is plain data, so a host's result pickles cheaply and
the page gets it as JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reportgen.core.hlo.model import HloModule
from reportgen.core.hlo.module_text import module_text, sanitized_name
from reportgen.core.hlo.ops import hlo_category
from reportgen.core.hlo.shapes import shape_text
from reportgen.core.hlo.text import physical_dims

_COMPUTATION_LINE = re.compile(r"^(?:ENTRY )?(\S+) \{$")
_INSTRUCTION_LINE = re.compile(r"^  (?:ROOT )?(\S+) = ")


@dataclass
class GraphNode:
    name: str
    opcode: str
    category: str
    shape: str  # with layout, as XLA prints it
    computation: int
    operands: list[int]
    calls: list[int]  # called computations (a fusion's body, a while's condition and body, …)
    line: int  # 0-based line of the module text; -1 when not printed
    padding: list[tuple[int, int, int]] = field(default_factory=list)  # (dimension, size, padded), major→minor
    fusion_kind: str = ""
    parameter: int = -1  # a parameter's number


@dataclass
class GraphComputation:
    name: str
    entry: bool
    fusion: bool
    root: int  # node index (-1: none)
    nodes: list[int] = field(default_factory=list)


@dataclass
class ModuleGraph:
    display_name: str
    program_id: int
    text: str
    unprinted: list[str]
    computations: list[GraphComputation]
    nodes: list[GraphNode]


def _text_lines(text: str) -> dict[tuple[str, str], int]:
    """(computation name, instruction name) → line number in the printed module."""
    lines: dict[tuple[str, str], int] = {}
    computation = ""
    for number, line in enumerate(text.split("\n")):
        if line.startswith("  "):
            match = _INSTRUCTION_LINE.match(line)
            if match:
                lines.setdefault((computation, match.group(1)), number)
        else:
            match = _COMPUTATION_LINE.match(line)
            if match:
                computation = match.group(1)
    return lines


def _padding(shape) -> list[tuple[int, int, int]]:
    """The layout's dimensions major to minor with their tiled size, when tiling pads any of them."""
    dims = physical_dims(shape)
    if not any(d.padded != d.size for d in dims):
        return []
    return [(d.dimension, d.size, d.padded) for d in dims]


def module_graph(module: HloModule) -> ModuleGraph:
    proto = module.hlo.hlo_module
    printed = module_text(proto)
    lines = _text_lines(printed.text)
    computation_index = {c.id: i for i, c in enumerate(proto.computations)}
    fusion_bodies = {cid for c in proto.computations for instr in c.instructions if instr.opcode == "fusion"
                     for cid in instr.called_computation_ids[:1]}
    computations: list[GraphComputation] = []
    nodes: list[GraphNode] = []
    for computation in proto.computations:
        index_of = {}
        graph_computation = GraphComputation(
            name=computation.name, entry=computation.id == proto.entry_computation_id,
            fusion=computation.is_fusion_computation or computation.id in fusion_bodies, root=-1)
        for instr in computation.instructions:
            index_of[instr.id] = len(nodes)
            graph_computation.nodes.append(len(nodes))
            name = sanitized_name(instr.name)
            nodes.append(GraphNode(
                name=name, opcode=instr.opcode, category=hlo_category(instr), shape=shape_text(instr.shape),
                computation=len(computations), operands=[], line=lines.get((computation.name, name), -1),
                calls=[computation_index[c] for c in instr.called_computation_ids if c in computation_index],
                padding=_padding(instr.shape),
                fusion_kind=instr.fusion_kind,
                parameter=int(instr.parameter_number) if instr.opcode == "parameter" else -1,
            ))
        for instr in computation.instructions:
            nodes[index_of[instr.id]].operands = [index_of[o] for o in instr.operand_ids if o in index_of]
        graph_computation.root = index_of.get(computation.root_id, -1)
        computations.append(graph_computation)
    return ModuleGraph(display_name=module.display_name, program_id=module.program_id, text=printed.text,
                       unprinted=printed.unprinted, computations=computations, nodes=nodes)


__all__ = ["GraphComputation", "GraphNode", "ModuleGraph", "module_graph"]
