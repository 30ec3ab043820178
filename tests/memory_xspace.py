"""Small XSpaces built in code for the memory tools' rule tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.capture import HostCapture
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace


@dataclass(frozen=True)
class Ref:
    """A stat whose value refers to a stat metadata (XProf's ref_value)."""

    name: str


def set_value(stat: xplane_pb2.XStat, value, plane: PlaneBuilder) -> None:
    if isinstance(value, Ref):
        stat.ref_value = plane.stat_id(value.name)
    elif isinstance(value, bool):
        stat.int64_value = int(value)
    elif isinstance(value, int):
        if value >= 1 << 63:
            stat.uint64_value = value
        else:
            stat.int64_value = value
    elif isinstance(value, float):
        stat.double_value = value
    elif isinstance(value, bytes):
        stat.bytes_value = value
    else:
        stat.str_value = str(value)


@dataclass
class PlaneBuilder:
    plane: xplane_pb2.XPlane
    _events: dict = field(default_factory=dict)
    _stats: dict = field(default_factory=dict)

    def stat_id(self, name: str) -> int:
        if name not in self._stats:
            sid = len(self._stats) + 1
            self._stats[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stats[name]

    def event_id(self, name: str, md_id: int | None = None, **stats) -> int:
        if name not in self._events or md_id is not None:
            eid = md_id if md_id is not None else len(self._events) + 1
            self._events[name] = eid
            md = self.plane.event_metadata[eid]
            md.id = eid
            md.name = name
            for key, value in stats.items():
                stat = md.stats.add()
                stat.metadata_id = self.stat_id(key)
                set_value(stat, value, self)
        return self._events[name]

    def stat(self, name: str, value) -> None:
        stat = self.plane.stats.add()
        stat.metadata_id = self.stat_id(name)
        set_value(stat, value, self)

    def line(self, name: str, line_id: int = 0, timestamp_ns: int = 0) -> LineBuilder:
        line = self.plane.lines.add()
        line.id = line_id or len(self.plane.lines)
        line.name = name
        line.timestamp_ns = timestamp_ns
        return LineBuilder(self, line)


@dataclass
class LineBuilder:
    plane: PlaneBuilder
    line: xplane_pb2.XLine

    def event(self, name: str, offset_ps: int, duration_ps: int = 0, **stats) -> LineBuilder:
        event = self.line.events.add()
        event.metadata_id = self.plane.event_id(name)
        event.offset_ps = offset_ps
        event.duration_ps = duration_ps
        for key, value in stats.items():
            stat = event.stats.add()
            stat.metadata_id = self.plane.stat_id(key)
            set_value(stat, value, self.plane)
        return self


class SpaceBuilder:
    def __init__(self) -> None:
        self.space = xplane_pb2.XSpace()

    def plane(self, name: str, plane_id: int = 0) -> PlaneBuilder:
        plane = self.space.planes.add()
        plane.id = plane_id
        plane.name = name
        return PlaneBuilder(plane)

    def bytes(self) -> bytes:
        return self.space.SerializeToString()

    def capture(self, host: str = "host") -> HostCapture:
        return decode_xspace(f"{host}.xplane.pb", self.bytes(), host=host)


def memory_event(line: LineBuilder, kind: str, offset_ps: int, *, allocator="bfc", heap=0, stack=0, free=0,
                 requested=0, allocated=0, address=0, peak=0, fragmentation=0.0, **extra) -> None:
    """A `MemoryAllocation`/`MemoryDeallocation` TraceMe with the stats TF's allocators write."""
    line.event(
        kind, offset_ps, 1,
        allocator_name=allocator, bytes_reserved=stack, bytes_allocated=heap, bytes_available=free,
        fragmentation=fragmentation, peak_bytes_in_use=peak, requested_bytes=requested, allocation_bytes=allocated,
        addr=address, **extra,
    )
