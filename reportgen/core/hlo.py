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
INSTRUCTION_METADATA = 7
METADATA_OP_TYPE = 1
METADATA_OP_NAME = 2


@dataclass
class HloModuleInfo:
    program_id: int
    name: str
    ops: list[tuple[str, str]]  # (op_name, op_type) of every instruction


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else ""


def parse_module(data: bytes, program_id: int) -> HloModuleInfo | None:
    try:
        module = next((v for n, v in fields(data) if n == HLO_PROTO_MODULE), None)
        if not isinstance(module, bytes):
            return None
        name = ""
        ops: list[tuple[str, str]] = []
        for number, value in fields(module):
            if number == MODULE_NAME:
                name = _text(value)
            elif number == MODULE_COMPUTATIONS and isinstance(value, bytes):
                for cn, instruction in fields(value):
                    if cn != COMPUTATION_INSTRUCTIONS or not isinstance(instruction, bytes):
                        continue
                    for inum, meta in fields(instruction):
                        if inum == INSTRUCTION_METADATA and isinstance(meta, bytes):
                            parsed = dict(fields(meta))
                            ops.append((_text(parsed.get(METADATA_OP_NAME, b"")),
                                        _text(parsed.get(METADATA_OP_TYPE, b""))))
        return HloModuleInfo(program_id, name, ops)
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
