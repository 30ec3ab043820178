"""HLO modules from a capture's `/host:metadata` plane.

XLA writes one event metadata per compiled program on that plane, carrying
the serialized `xla.HloProto` (module, buffer assignment, heap-simulator
traces) in a bytes stat named `Hlo Proto`. Tools that need the HLO graph
(memory viewer, op profile, GPU op metrics) get it from here:

    modules = hlo_modules(capture)          # {program_id: HloModule}
    module = modules[program_id]
    module.display_name                     # "jit_f(123)", XProf's module-list name
    module.hlo                              # its `HloProto`, as plain Python (core/hlo/model.py)
    module.instructions["fusion.3"]         # an HloInstructionProto by name

Each proto is parsed once and converted into the plain dataclasses of
`reportgen.core.hlo.model` (`plain_hlo`), which is all core ever sees. Program
ids here are unsigned; a `program_id` event stat read as int64 is turned into
a key with `program_key(value)`. To read more of the HLO graph, add the field
to `proto/hlo.proto` with XLA's field number, regenerate `hlo_pb2.py` and add
it to the dataclass of `core/hlo/model.py` (tests/test_hlo_proto.py checks all
three).

Rules follow XProf (see docs/xprof/xspace.md §8): the legacy stat name
`HLO Proto` counts as `Hlo Proto`; a metadata whose name ends in
`(<program id>)` is keyed by that number; the program id is the metadata's
`program_id` stat when present, else its (fixed) id; the first module seen
for a program id wins. Program ids are unsigned 64-bit numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from reportgen.capture import KIND_BYTES, KIND_INT64, KIND_UINT64, HostCapture
from reportgen.core.hlo.model import MESSAGES, OPTIONAL_FIELDS, UNKNOWN_FIELD_NUMBERS, HloModule, HloProto
from reportgen.loaders.proto import hlo_pb2

METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
LEGACY_HLO_PROTO_STAT = "HLO Proto"
PROGRAM_ID_STAT = "program_id"

_PROGRAM_ID_IN_NAME = re.compile(r".*\((-?\d+)\)", re.DOTALL)
_U64 = 1 << 64


def _program_id_from_name(name: str) -> int | None:
    """The number in a trailing `(<n>)`, as the signed id it would be keyed by."""
    match = _PROGRAM_ID_IN_NAME.fullmatch(name)
    if match is None:
        return None
    value = int(match.group(1))
    if -(1 << 63) <= value < (1 << 63):
        return value
    if 0 <= value < _U64:
        return value - _U64  # a uint64 id keyed as its int64 bit pattern
    return None


def hlo_modules(capture: HostCapture) -> dict[int, HloModule]:
    """Every HLO module in the capture, keyed by (unsigned) program id.

    Bytes that do not parse as an HloProto are skipped, as XProf does.
    """
    plane = capture.plane_by_name(METADATA_PLANE)
    if plane is None:
        return {}
    md = capture.event_metadata
    plane_rows = np.flatnonzero(md["plane"].to_numpy() == plane)
    if len(plane_rows) == 0:
        return _legacy_plane_stats(capture, plane)

    stats = capture.metadata_stats
    in_plane = np.isin(stats.owner, plane_rows)
    hlo_keys = [capture.string_id(HLO_PROTO_STAT), capture.string_id(LEGACY_HLO_PROTO_STAT)]
    hlo_rows = stats.select(in_plane & np.isin(stats.key, [k for k in hlo_keys if k >= 0]))
    if len(hlo_rows) == 0:
        return _legacy_plane_stats(capture, plane)
    program_stats = stats.select(in_plane & (stats.key == capture.string_id(PROGRAM_ID_STAT)))
    program_id_of = {
        int(o): int(v)
        for o, v, k in zip(program_stats.owner, program_stats.raw, program_stats.kind)
        if k in (KIND_INT64, KIND_UINT64)
    }

    # (metadata id after the name fix-up, metadata row, proto bytes), in id order
    # like a map keyed by id; a later stat on the same metadata overrides.
    candidates: dict[int, tuple[int, int, bytes]] = {}
    for owner, kind, sid in zip(hlo_rows.owner, hlo_rows.kind, hlo_rows.str_id):
        owner = int(owner)
        md_id = int(md.at[owner, "id"])
        fixed = _program_id_from_name(md.at[owner, "name"])
        key = fixed if fixed is not None else md_id
        if kind != KIND_BYTES:
            candidates.pop(key, None)
            continue
        candidates[key] = (key, owner, capture.string(int(sid)))

    modules: dict[int, HloModule] = {}
    for key in sorted(candidates):
        md_id, owner, payload = candidates[key]
        program_id = program_id_of.get(owner, md_id) % _U64
        if program_id in modules:
            continue
        proto = _parse(payload)
        if proto is not None:
            modules[program_id] = HloModule(program_id, proto.hlo_module.name, plain_hlo(proto))
    return modules


def _legacy_plane_stats(capture: HostCapture, plane: int) -> dict[int, HloModule]:
    """Older captures stored each proto as a plane stat keyed by its stat id."""
    stats = capture.plane_stats
    rows = stats.select((stats.owner == plane) & (stats.kind == KIND_BYTES))
    if len(rows) == 0:
        return {}
    smd = capture.stat_metadata
    smd = smd[smd["plane"] == plane]
    id_by_name = dict(zip(smd["name"], smd["id"]))
    modules: dict[int, HloModule] = {}
    for key, sid in zip(rows.key, rows.str_id):
        stat_id = id_by_name.get(capture.string(int(key)))
        if stat_id is None:
            continue
        proto = _parse(capture.string(int(sid)))
        program_id = int(stat_id) % _U64
        if proto is not None and program_id not in modules:
            modules[program_id] = HloModule(program_id, proto.hlo_module.name, plain_hlo(proto))
    return modules


def _parse(payload: bytes | str) -> hlo_pb2.HloProto | None:
    if isinstance(payload, str):
        payload = payload.encode("utf-8", errors="surrogateescape")
    proto = hlo_pb2.HloProto()
    try:
        proto.ParseFromString(payload)
    except DecodeError:
        return None
    return proto


# --- protobuf → plain dataclasses ---------------------------------------------------------------
#
# One converter function per message type, generated from its descriptor on first use: a
# single expression building the dataclass from the message's fields in order (about 4x faster
# than walking the fields generically; a module of a few thousand instructions converts in
# tens of milliseconds).

_PACKAGE = "reportgen.xla."
_CONVERTERS: dict[str, Callable[[Message], Any]] = {}


def _converter_name(descriptor) -> str:
    return "_to_" + descriptor.full_name.removeprefix(_PACKAGE).replace(".", "_")


def _converter(descriptor) -> Callable[[Message], Any]:
    """The function converting one message type (and, recursively, the types of its fields)."""
    key = descriptor.full_name
    if key in _CONVERTERS:
        return _CONVERTERS[key]
    name = descriptor.full_name.removeprefix(_PACKAGE)
    optional = OPTIONAL_FIELDS.get(name, frozenset())
    namespace: dict[str, Any] = {"cls": MESSAGES[name], "UnknownFieldSet": UnknownFieldSet}
    args = []
    for f in descriptor.fields:
        value = f"m.{f.name}"
        if f.message_type is None:
            if f.name in optional:  # a scalar in a oneof: None when unset
                args.append(f"({value} if m.HasField({f.name!r}) else None)")
            else:
                args.append(f"list({value})" if f.is_repeated else value)
            continue
        if f.message_type.GetOptions().map_entry:
            inner = f.message_type.fields_by_name["value"].message_type
            if inner is None:  # scalar values
                args.append(f"dict({value})")
                continue
            namespace[_converter_name(inner)] = None  # filled below, once this converter exists
            args.append(f"{{k: {_converter_name(inner)}(v) for k, v in {value}.items()}}")
            continue
        inner = f.message_type
        namespace[_converter_name(inner)] = None
        call = _converter_name(inner)
        if f.is_repeated:
            args.append(f"[{call}(x) for x in {value}]")
        elif f.name in optional:
            args.append(f"({call}({value}) if m.HasField({f.name!r}) else None)")
        else:
            args.append(f"{call}({value})")
    if name in UNKNOWN_FIELD_NUMBERS:
        args.append("[u.field_number for u in UnknownFieldSet(m)]")
    source = f"def convert(m):\n    return cls({', '.join(args)})\n"
    exec(source, namespace)  # noqa: S102 - code built above from the schema's own field names
    convert = namespace["convert"]
    _CONVERTERS[key] = convert
    for field_descriptor in descriptor.fields:  # resolve the converters of the field types (cycles allowed)
        inner = field_descriptor.message_type
        if inner is None:
            continue
        if inner.GetOptions().map_entry:
            inner = inner.fields_by_name["value"].message_type
            if inner is None:
                continue
        namespace[_converter_name(inner)] = _converter(inner)
    return convert


def to_plain(message: Message) -> Any:
    """Any message of `proto/hlo.proto` as its dataclass of `reportgen.core.hlo.model`."""
    return _converter(message.DESCRIPTOR)(message)


def plain_hlo(proto: hlo_pb2.HloProto) -> HloProto:
    """A parsed `HloProto` as the plain dataclasses core reads (reportgen.core.hlo.model)."""
    return to_plain(proto)


__all__ = ["hlo_modules", "plain_hlo", "to_plain"]
