"""A straightforward protobuf decode of an XSpace, for checking the fast decoder.

Everything goes through `xplane_pb2` objects and Python loops, one event and
one stat at a time, following docs/xprof/xspace.md §2–3 literally. It is slow
(use it on small files) and shares no code with `reportgen.loaders`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from reportgen.capture import KIND_BYTES, KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64
from reportgen.loaders.proto import xplane_pb2

KIND_NONE = 0


def _u64_bits(value: int) -> int:
    """A uint64 as the int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass
class Stat:
    owner: int
    key: str
    kind: int
    raw: int
    text: str | bytes | None  # resolved string/bytes/ref value


@dataclass
class Reference:
    hostnames: list[str]
    errors: list[str]
    warnings: list[str]
    planes: list[tuple]  # id, name, first_line, line_count
    lines: list[tuple]  # plane, id, display_id, name, display_name, timestamp_ns, duration_ps, first_event, count
    events: list[tuple]  # plane, line, metadata_id, start_ps, duration_ps, num_occurrences, name, display_name
    event_stats: list[Stat] = field(default_factory=list)
    metadata: list[tuple] = field(default_factory=list)  # plane, id, name, display_name, child_ids
    metadata_stats: list[Stat] = field(default_factory=list)  # owner = index in `metadata`
    stat_metadata: list[tuple] = field(default_factory=list)  # plane, id, name
    plane_stats: list[Stat] = field(default_factory=list)


def _stat(owner: int, st, names: dict[int, str]) -> Stat:
    which = st.WhichOneof("value")
    key = names.get(st.metadata_id, "")
    if which == "double_value":
        return Stat(owner, key, KIND_DOUBLE, struct.unpack("<q", struct.pack("<d", st.double_value))[0], None)
    if which == "uint64_value":
        return Stat(owner, key, KIND_UINT64, _u64_bits(st.uint64_value), None)
    if which == "int64_value":
        return Stat(owner, key, KIND_INT64, st.int64_value, None)
    if which == "str_value":
        return Stat(owner, key, KIND_STR, 0, st.str_value)
    if which == "bytes_value":
        return Stat(owner, key, KIND_BYTES, 0, bytes(st.bytes_value))
    if which == "ref_value":
        return Stat(owner, key, KIND_REF, _u64_bits(st.ref_value), names.get(st.ref_value, ""))
    return Stat(owner, key, KIND_NONE, 0, None)


def reference_decode(data: bytes) -> Reference:
    space = xplane_pb2.XSpace.FromString(data)
    ref = Reference(list(space.hostnames), list(space.errors), list(space.warnings), [], [], [])
    for p, plane in enumerate(space.planes):
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        ref.planes.append((plane.id, plane.name, len(ref.lines), len(plane.lines)))
        for k in sorted(names):
            ref.stat_metadata.append((p, k, names[k]))
        for k in sorted(plane.event_metadata):
            md = plane.event_metadata[k]
            for st in md.stats:
                ref.metadata_stats.append(_stat(len(ref.metadata), st, names))
            ref.metadata.append((p, k, md.name, md.display_name, tuple(md.child_id)))
        for st in plane.stats:
            ref.plane_stats.append(_stat(p, st, names))
        for line in plane.lines:
            line_index = len(ref.lines)
            ref.lines.append((p, line.id, line.display_id, line.name, line.display_name, line.timestamp_ns,
                              line.duration_ps, len(ref.events), len(line.events)))
            for event in line.events:
                md = plane.event_metadata.get(event.metadata_id)
                timed = event.WhichOneof("data") != "num_occurrences"
                start = line.timestamp_ns * 1000 + (event.offset_ps if timed else 0)
                for st in event.stats:
                    ref.event_stats.append(_stat(len(ref.events), st, names))
                ref.events.append((p, line_index, event.metadata_id, start, event.duration_ps,
                                   0 if timed else event.num_occurrences,
                                   md.name if md else "", md.display_name if md else ""))
    return ref
