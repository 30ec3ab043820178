"""Small XSpaces built in code, for rule tests (no capture files needed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.capture import HostCapture
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace


@dataclass
class PlaneBuilder:
    plane: xplane_pb2.XPlane
    _md: dict[str, int] = field(default_factory=dict)
    _stat_md: dict[str, int] = field(default_factory=dict)

    def stat_id(self, name: str) -> int:
        if name not in self._stat_md:
            sid = len(self._stat_md) + 1
            self._stat_md[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat_md[name]

    def metadata_id(self, name: str) -> int:
        if name not in self._md:
            mid = len(self._md) + 1
            self._md[name] = mid
            self.plane.event_metadata[mid].id = mid
            self.plane.event_metadata[mid].name = name
        return self._md[name]

    def line(self, line_id: int, name: str = "", timestamp_ns: int = 0) -> LineBuilder:
        line = self.plane.lines.add()
        line.id = line_id
        line.name = name or f"thread {line_id}"
        line.timestamp_ns = timestamp_ns
        return LineBuilder(self, line)

    def add_stats(self, target, stats: dict) -> None:
        for key, value in stats.items():
            stat = target.stats.add()
            stat.metadata_id = self.stat_id(key)
            if isinstance(value, str):
                stat.str_value = value
            elif isinstance(value, float):
                stat.double_value = value
            elif isinstance(value, bytes):
                stat.bytes_value = value
            else:
                stat.int64_value = value


@dataclass
class LineBuilder:
    owner: PlaneBuilder
    line: xplane_pb2.XLine

    def event(self, name: str, start_ps: int, duration_ps: int, **stats) -> LineBuilder:
        event = self.line.events.add()
        event.metadata_id = self.owner.metadata_id(name)
        event.offset_ps = start_ps
        event.duration_ps = duration_ps
        self.owner.add_stats(event, stats)
        return self


class SpaceBuilder:
    def __init__(self, hostname: str = "testhost") -> None:
        self.space = xplane_pb2.XSpace()
        self.space.hostnames.append(hostname)
        self.planes: list[PlaneBuilder] = []

    def plane(self, name: str, plane_id: int = 0) -> PlaneBuilder:
        plane = self.space.planes.add()
        plane.id = plane_id
        plane.name = name
        builder = PlaneBuilder(plane)
        self.planes.append(builder)
        return builder

    def capture(self, host: str = "testhost") -> HostCapture:
        # Saved captures keep every line sorted by (start asc, duration desc).
        for builder in self.planes:
            for line in builder.plane.lines:
                events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
                copies = [xplane_pb2.XEvent.FromString(e.SerializeToString()) for e in events]
                del line.events[:]
                line.events.extend(copies)
        return decode_xspace(f"{host}.xplane.pb", self.space.SerializeToString(), host=host)
