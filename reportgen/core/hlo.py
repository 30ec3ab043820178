"""HLO protos stored in a capture's `/host:metadata` plane (docs/xprof/xspace.md §8).

Only what the core needs is read, straight from the wire format: each
module's name and its instructions' framework metadata (`op_type`,
`op_name`). Program ids come from the metadata's `program_id` stat, else its
id; the first module of a program id wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.capture import HostCapture
from reportgen.core import schema
from reportgen.core.protowire import fields

# Field numbers in xla/service/hlo.proto.
HLO_PROTO_MODULE = 1
MODULE_NAME = 1
MODULE_COMPUTATIONS = 3
COMPUTATION_INSTRUCTIONS = 2
INSTRUCTION_NAME = 1
INSTRUCTION_OPCODE = 2
INSTRUCTION_METADATA = 7
INSTRUCTION_FUSION_KIND = 11
METADATA_OP_TYPE = 1
METADATA_OP_NAME = 2

_FUSION_CATEGORIES = {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                      "kCustom": "custom fusion"}
_DATA_FORMATTING = {"transpose", "copy", "reshape", "dynamic-reshape"}
_ELEMENTWISE = set("""abs add and atan2 cbrt ceil clamp compare complex convert cosine divide erf exponential
exponential-minus-one floor imag is-finite log log-plus-one logistic maximum minimum multiply negate not or
popcnt power real reduce-precision remainder round-nearest-afz round-nearest-even rsqrt select shift-left
shift-right-arithmetic shift-right-logical sign sine sqrt subtract tan tanh xor""".split())


@dataclass
class HloInstructionInfo:
    opcode: str
    fusion_kind: str
    op_name: str
    op_type: str

    @property
    def category(self) -> str:
        """XProf's op category of an HLO instruction (dilated convolutions not distinguished)."""
        if self.opcode in _DATA_FORMATTING:
            return "data formatting"
        if self.opcode == "fusion":
            return _FUSION_CATEGORIES.get(self.fusion_kind, "fusion")
        if self.opcode in _ELEMENTWISE:
            return "non-fusion elementwise"
        return self.opcode

    @property
    def provenance(self) -> str:
        """`op_name:op_type` of the framework op, empty when neither is known."""
        if not self.op_name and not self.op_type:
            return ""
        return f"{self.op_name}:{self.op_type}"


@dataclass
class HloModuleInfo:
    program_id: int
    name: str
    ops: list[tuple[str, str]]  # (op_name, op_type) of every instruction
    instructions: dict[str, HloInstructionInfo] | None = None


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else ""


def parse_module(data: bytes, program_id: int) -> HloModuleInfo | None:
    try:
        module = next((v for n, v in fields(data) if n == HLO_PROTO_MODULE), None)
        if not isinstance(module, bytes):
            return None
        name = ""
        ops: list[tuple[str, str]] = []
        instructions: dict[str, HloInstructionInfo] = {}
        for number, value in fields(module):
            if number == MODULE_NAME:
                name = _text(value)
            elif number == MODULE_COMPUTATIONS and isinstance(value, bytes):
                for cn, instruction in fields(value):
                    if cn != COMPUTATION_INSTRUCTIONS or not isinstance(instruction, bytes):
                        continue
                    parts = dict(fields(instruction))
                    meta = parts.get(INSTRUCTION_METADATA)
                    parsed = dict(fields(meta)) if isinstance(meta, bytes) else {}
                    op_name = _text(parsed.get(METADATA_OP_NAME, b""))
                    op_type = _text(parsed.get(METADATA_OP_TYPE, b""))
                    if isinstance(meta, bytes):
                        ops.append((op_name, op_type))
                    instructions.setdefault(_text(parts.get(INSTRUCTION_NAME, b"")), HloInstructionInfo(
                        _text(parts.get(INSTRUCTION_OPCODE, b"")), _text(parts.get(INSTRUCTION_FUSION_KIND, b"")),
                        op_name, op_type))
        return HloModuleInfo(program_id, name, ops, instructions)
    except ValueError:
        return None


def hlo_modules(capture: HostCapture) -> list[HloModuleInfo]:
    plane = capture.plane_by_name(schema.METADATA_PLANE)
    if plane is None:
        return []
    md = capture.event_metadata
    protos = capture.stat_rows(capture.metadata_stats, "Hlo Proto")
    legacy = capture.stat_rows(capture.metadata_stats, "HLO Proto")
    program = capture.stat_rows(capture.metadata_stats, "program_id")
    program_of = dict(zip(program.owner.tolist(), program.int_values().tolist()))
    out: dict[int, HloModuleInfo] = {}
    for table in (protos, legacy):
        for owner, sid in zip(table.owner.tolist(), table.str_id.tolist()):
            if int(md["plane"].iloc[owner]) != plane:
                continue
            data = capture.string(int(sid))
            if not isinstance(data, bytes):
                continue
            pid = program_of.get(owner, int(md["id"].iloc[owner]))
            if pid in out:
                continue
            module = parse_module(data, pid)
            if module is not None:
                out[pid] = module
    return [out[k] for k in sorted(out)]


def modules_show_training(modules: list[HloModuleInfo]) -> bool:
    from reportgen.core.model import is_training

    return any(is_training(m.ops) for m in modules)


__all__ = ["HloModuleInfo", "hlo_modules", "modules_show_training"]
