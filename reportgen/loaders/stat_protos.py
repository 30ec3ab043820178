"""Stat values that are serialized protos, decoded into plain Python while the capture is loaded.

Two stats carry XProf's op-stats messages (schema subset: `proto/op_stats.proto`):
a TPU plane's `core_details` (`CoreDetails`, decoded as a dict of its fields)
and a TPU op metadata's `memory_access_breakdown` (`MemoryAccessBreakdown`,
decoded as (memory space, operation type, bytes) tuples). Core reads them from
`HostCapture.proto_stats` by (stat name, interned value id), never the bytes.
A value that does not parse is kept as XProf treats it: no core details
(None), no memory traffic (an empty list).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError

from reportgen.capture import KIND_BYTES, HostCapture
from reportgen.loaders.proto import op_stats_pb2


def core_details(raw: bytes) -> dict | None:
    try:
        details = op_stats_pb2.CoreDetails.FromString(raw)
    except DecodeError:
        return None
    return {f.name: getattr(details, f.name) for f in details.DESCRIPTOR.fields}


def memory_access_breakdown(raw: bytes) -> list[tuple[int, int, int]]:
    try:
        breakdown = op_stats_pb2.MemoryAccessBreakdown.FromString(raw)
    except DecodeError:
        return []
    return [(m.memory_space, m.operation_type, m.bytes_accessed) for m in breakdown.memory_accessed]


# stat name → (the capture's stat table holding it, decoder)
PROTO_STATS: dict[str, tuple[str, Callable[[bytes], Any]]] = {
    "core_details": ("plane_stats", core_details),
    "memory_access_breakdown": ("metadata_stats", memory_access_breakdown),
}


def decode_stat_protos(capture: HostCapture) -> dict[tuple[str, int], Any]:
    """Every bytes value of the stats above, decoded once: {(stat name, value id): plain value}."""
    out: dict[tuple[str, int], Any] = {}
    for name, (table, decode) in PROTO_STATS.items():
        rows = capture.stat_rows(getattr(capture, table), name)
        for kind, sid in zip(rows.kind.tolist(), rows.str_id.tolist()):
            if kind == KIND_BYTES and (name, sid) not in out:
                raw = capture.string(sid)
                out[(name, sid)] = decode(raw) if isinstance(raw, bytes) else decode(b"")
    return out
