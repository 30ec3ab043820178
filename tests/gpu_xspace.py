"""Small GPU XSpaces built in code, for rule tests of the GPU tools.

`GpuSpace` keeps the metadata bookkeeping out of the tests: a test names
planes, lines and events with their stats and gets the serialized XSpace.
Stat values: str → str_value, int → int64_value, float → double_value,
`Ref("text")` → ref_value pointing at a stat-metadata entry named "text",
`Uint(n)` → uint64_value, bytes → bytes_value.
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.loaders.proto import xplane_pb2


@dataclass(frozen=True)
class Ref:
    text: str


@dataclass(frozen=True)
class Uint:
    value: int


class PlaneBuilder:
    def __init__(self, plane: xplane_pb2.XPlane):
        self.plane = plane
        self._event_md: dict[str, int] = {}
        self._stat_md: dict[str, int] = {}

    def stat_id(self, name: str) -> int:
        sid = self._stat_md.get(name)
        if sid is None:
            sid = self._stat_md[name] = len(self._stat_md) + 1
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return sid

    def _fill(self, stat: xplane_pb2.XStat, name: str, value) -> None:
        stat.metadata_id = self.stat_id(name)
        if isinstance(value, Ref):
            stat.ref_value = self.stat_id(value.text)
        elif isinstance(value, Uint):
            stat.uint64_value = value.value
        elif isinstance(value, bool) or isinstance(value, int):
            stat.int64_value = int(value)
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.str_value = value

    def add_stats(self, owner, stats) -> None:
        items = stats.items() if isinstance(stats, dict) else stats
        for name, value in items:
            self._fill(owner.stats.add(), name, value)

    def metadata_id(self, name: str, stats=None) -> int:
        mid = self._event_md.get(name)
        if mid is None:
            mid = self._event_md[name] = len(self._event_md) + 1
            md = self.plane.event_metadata[mid]
            md.id = mid
            md.name = name
            if stats:
                self.add_stats(md, stats)
        return mid

    def line(self, line_id: int, name: str, timestamp_ns: int = 0) -> LineBuilder:
        line = self.plane.lines.add()
        line.id = line_id
        line.display_id = line_id
        line.name = name
        line.timestamp_ns = timestamp_ns
        return LineBuilder(self, line)


class LineBuilder:
    def __init__(self, plane: PlaneBuilder, line: xplane_pb2.XLine):
        self.plane = plane
        self.line = line

    def event(self, name: str, offset_ps: int, duration_ps: int, stats=None, metadata_stats=None) -> LineBuilder:
        event = self.line.events.add()
        event.metadata_id = self.plane.metadata_id(name, metadata_stats)
        event.offset_ps = offset_ps
        event.duration_ps = duration_ps
        if stats:
            self.plane.add_stats(event, stats)
        return self


class GpuSpace:
    """An XSpace with a host plane and GPU planes `/device:GPU:<n>`."""

    def __init__(self, hostname: str = "testhost"):
        self.space = xplane_pb2.XSpace()
        self.space.hostnames.append(hostname)
        self.host = self.plane("/host:CPU", plane_id=0)
        self.host_thread = self.host.line(1, "python3").event("train", 0, 1_000_000)

    def plane(self, name: str, plane_id: int | None = None, stats=None) -> PlaneBuilder:
        plane = self.space.planes.add()
        plane.id = len(self.space.planes) - 1 if plane_id is None else plane_id
        plane.name = name
        builder = PlaneBuilder(plane)
        if stats:
            builder.add_stats(plane, stats)
        return builder

    def gpu(self, ordinal: int, vendor: str = "Nvidia") -> PlaneBuilder:
        return self.plane(
            f"/device:GPU:{ordinal}",
            plane_id=ordinal + 1,
            stats={"device_vendor": vendor, "compute_cap_major": 7, "compute_cap_minor": 0, "core_count": 80,
                   "clock_rate": 1_530_000},
        )

    def serialize(self) -> bytes:
        return self.space.SerializeToString()
