"""Device ops looked up in the capture's HLO modules: what the op profile shows about them.

XProf's HloInstructionWrapper, for the parts the op tools read: an
instruction's category, framework op, deduplicated name and source line; its
HLO text; its shape with layout (and the padding the layout's tiling adds);
for a convolution its window and the meaning of each output dimension; and,
for a fusion, the instructions inside it (parameters and tuples left out, as
XProf does), recursively.

    index = HloOpIndex(modules)                  # a host's HLO modules (reportgen.core.hlo.model)
    op = index.find(program_id, "fusion.3")      # None when not in any module

Instructions are described only when asked for, so a module with many
thousands of instructions costs only its conversion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.core.hlo.model import HloComputationProto, HloInstructionProto, HloModule
from reportgen.core.hlo.text import PhysicalDim, instruction_text, physical_dims, shape_text, window_text

U64 = 1 << 64

_FUSION_CATEGORIES = {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                      "kCustom": "custom fusion"}
_DATA_FORMATTING = {"transpose", "copy", "reshape", "dynamic-reshape"}
# XLA's elementwise opcodes (HloInstruction::IsElementwise): a constant counts, as in XLA.
_ELEMENTWISE = set("""abs add and atan2 bitcast-convert cbrt ceil clamp clz compare complex constant convert cosine
divide erf exponential exponential-minus-one floor imag is-finite log log-plus-one logistic maximum minimum multiply
negate not or popcnt power real reduce-precision remainder round-nearest-afz round-nearest-even rsqrt select
shift-left shift-right-arithmetic shift-right-logical sign sine sqrt stochastic-convert subtract tan tanh
xor""".split())
_SKIPPED_CHILDREN = {"parameter", "tuple"}


def hlo_category(instr: HloInstructionProto) -> str:
    """XProf's category of an HLO instruction (its ToCategory)."""
    op = instr.opcode
    if op in _DATA_FORMATTING:
        return "data formatting"
    if op == "fusion":
        return _FUSION_CATEGORIES.get(instr.fusion_kind, "fusion")
    if op == "convolution" and instr.window is not None:
        dims = instr.window.dimensions
        if any(d.base_dilation > 1 for d in dims):
            return "convolution base-dilated"
        if any(d.window_dilation > 1 for d in dims):
            return "convolution window-dilated"
    if op in _ELEMENTWISE:
        return "non-fusion elementwise"
    return op


def _convolution_semantics(instr: HloInstructionProto, dims: list[PhysicalDim]) -> None:
    numbers = instr.convolution_dimension_numbers
    role = {numbers.output_batch_dimension: "batch", numbers.output_feature_dimension: "feature"}
    role.update({d: "spatial" for d in numbers.output_spatial_dimensions})
    for dim in dims:
        dim.semantics = role.get(dim.dimension, "")


@dataclass
class HloOp:
    """One HLO instruction as the op tools show it."""

    name: str
    opcode: str
    category: str
    expression: str
    provenance: str  # `op_name:op_type`, as XProf's instruction wrapper writes it (":" when both are empty)
    deduplicated_name: str
    source_file: str
    source_line: int
    shape: str  # with layout
    layout: list[PhysicalDim] = field(default_factory=list)  # major to minor, with tile padding
    window: str = ""  # convolutions (and other windowed ops)
    fused: list[HloOp] = field(default_factory=list)  # a fusion's instructions, without parameters/tuples

    @property
    def padded(self) -> bool:
        return any(d.padded != d.size for d in self.layout)


class _Module:
    def __init__(self, module: HloModule):
        proto = module.hlo.hlo_module
        self.instructions: dict[int, HloInstructionProto] = {}
        self.by_name: dict[str, HloInstructionProto] = {}
        self.computations: dict[int, HloComputationProto] = {}
        self.computation_names: dict[int, str] = {}
        for computation in proto.computations:
            self.computations[computation.id] = computation
            self.computation_names[computation.id] = computation.name
            for instr in computation.instructions:
                self.instructions[instr.id] = instr
                self.by_name.setdefault(instr.name, instr)

    def describe(self, instr: HloInstructionProto, depth: int = 0, expanded: set[int] | None = None) -> HloOp:
        meta = instr.metadata
        layout = physical_dims(instr.shape)
        if instr.opcode == "convolution" and instr.convolution_dimension_numbers is not None:
            _convolution_semantics(instr, layout)
        fused: list[HloOp] = []
        # XLA gives every fusion a body of its own, so one op's tree opens each computation once:
        # a body that calls itself, or many fusions sharing one body (what a capture can say, not
        # what XLA writes), would otherwise be opened again and again (fanout ** 16 times).
        expanded = set() if expanded is None else expanded
        if instr.opcode == "fusion" and instr.called_computation_ids and depth < 16:
            inner_id = instr.called_computation_ids[0]
            inner = self.computations.get(inner_id)
            if inner is not None and inner_id not in expanded:
                expanded.add(inner_id)
                fused = [self.describe(child, depth + 1, expanded) for child in inner.instructions
                         if child.opcode not in _SKIPPED_CHILDREN]
        return HloOp(
            name=instr.name,
            opcode=instr.opcode,
            category=hlo_category(instr),
            expression=instruction_text(instr, self.instructions, self.computation_names),
            provenance=f"{meta.op_name}:{meta.op_type}",
            deduplicated_name=meta.deduplicated_name,
            source_file=meta.source_file,
            source_line=int(meta.source_line),
            shape=shape_text(instr.shape),
            layout=layout,
            window=window_text(instr.window) if instr.window is not None else "",
            fused=fused,
        )


class HloOpIndex:
    """Instructions of the capture's HLO modules by (program id, instruction name)."""

    def __init__(self, modules: dict[int, HloModule]):
        self._modules = {pid % U64: m for pid, m in modules.items()}
        self._parsed: dict[int, _Module] = {}
        self._cache: dict[tuple[int, str], HloOp | None] = {}

    @property
    def program_names(self) -> dict[int, str]:
        """Program id (unsigned) → HLO module name (XProf's program_id_to_name_map)."""
        return {pid: m.name for pid, m in self._modules.items()}

    def find(self, program_id: int, name: str) -> HloOp | None:
        key = (program_id % U64, name)
        if key not in self._cache:
            self._cache[key] = self._describe(*key)
        return self._cache[key]

    def _describe(self, program_id: int, name: str) -> HloOp | None:
        module = self._modules.get(program_id)
        if module is None:
            return None
        parsed = self._parsed.get(program_id)
        if parsed is None:
            parsed = self._parsed[program_id] = _Module(module)
        instr = parsed.by_name.get(name)
        return parsed.describe(instr) if instr is not None else None


__all__ = ["HloOp", "HloOpIndex", "hlo_category"]
