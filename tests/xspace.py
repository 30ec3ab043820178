"""XSpaces built in code, serialised and decoded like real files: the one builder every test uses.

    space = Space()                                   # hostnames ("testhost",)
    host = space.host_plane()                         # "/host:CPU", made on first use
    host.line(1, "python").event("train", 0, 1_000, step_num=1, _r=1)
    gpu = space.gpu(0)                                # "/device:GPU:0" with an Nvidia V100's capabilities
    gpu.line(7, "Stream #7(Compute)").event("kernel", 10, 5, correlation_id=1, kernel_details=Ref("regs:4"))
    space.plane("/host:metadata").metadata("jit_f(7)", **{"Hlo Proto": b"..."})
    capture = space.capture()                         # a HostCapture, through the real decoder

Any plane, line, event, metadata and stat combination can be made: planes and their stats, lines with
display names and ids and a timestamp (events are given by absolute start; the offset is computed),
event metadata (by name and display name, with stats, or with a chosen id), event stats given as keywords
or as a list of (name, value) pairs (which may repeat a name). Stat values: `str` → string, `bytes` →
bytes, `float` → double, `bool`/`int` → int64 (ints from 2^63 → uint64), `U(n)` → uint64, `Ref("text")` →
ref_value to a stat metadata named "text". Stat metadata ids start at 1000 and event metadata ids at 1,
so that a confusion of the two id spaces shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reportgen.capture import HostCapture
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace

STAT_ID_BASE = 1000
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class U:
    """A uint64 stat value."""

    value: int


@dataclass(frozen=True)
class Ref:
    """A stat whose value refers to a stat metadata by its name (XProf's ref_value)."""

    name: str


Stats = dict | list  # {name: value} or [(name, value), …]


def _items(stats: Stats | None) -> list[tuple[str, object]]:
    if not stats:
        return []
    return list(stats.items()) if isinstance(stats, dict) else list(stats)


class Plane:
    def __init__(self, proto: xplane_pb2.XPlane):
        self.proto = proto
        self.lines: list[Line] = []
        self._metadata: dict[tuple[str, str], int] = {}
        self._stats: dict[str, int] = {}

    def stat_id(self, name: str) -> int:
        """The stat metadata id of `name` (registered on first use)."""
        if name not in self._stats:
            sid = STAT_ID_BASE + len(self._stats)
            self._stats[name] = sid
            self.proto.stat_metadata[sid].id = sid
            self.proto.stat_metadata[sid].name = name
        return self._stats[name]

    def set_stat(self, stat: xplane_pb2.XStat, name: str, value) -> None:
        stat.metadata_id = self.stat_id(name)
        if isinstance(value, U):
            stat.uint64_value = value.value
        elif isinstance(value, Ref):
            stat.ref_value = self.stat_id(value.name)
        elif isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int):
            if value > INT64_MAX:
                stat.uint64_value = value
            else:
                stat.int64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.str_value = str(value)

    def add_stats(self, target, stats: Stats | None) -> None:
        """Stats on any message that has them (the plane, an event metadata, an event)."""
        for name, value in _items(stats):
            self.set_stat(target.stats.add(), name, value)

    def stat(self, name: str, value) -> Plane:
        """A plane stat."""
        self.add_stats(self.proto, [(name, value)])
        return self

    def metadata(self, name: str, display_name: str = "", *, md_id: int | None = None, stats: Stats | None = None,
                 **more_stats) -> int:
        """The event metadata id of (name, display name), made on first use with these stats.

        `md_id` makes a new metadata with that id (a later event of the name uses it)."""
        key = (name, display_name)
        if key not in self._metadata or md_id is not None:
            mid = md_id if md_id is not None else len(self._metadata) + 1
            self._metadata[key] = mid
            md = self.proto.event_metadata[mid]
            md.id, md.name, md.display_name = mid, name, display_name
            self.add_stats(md, _items(stats) + list(more_stats.items()))
        return self._metadata[key]

    def line(self, line_id: int | None = None, name: str | None = None, *, display_name: str = "",
             display_id: int = 0, timestamp_ns: int = 0) -> Line:
        """A new line (id: the next one when not given; name: "thread <id>" when not given)."""
        line_id = len(self.proto.lines) + 1 if line_id is None else line_id
        proto = self.proto.lines.add(id=line_id, name=f"thread {line_id}" if name is None else name,
                                     display_name=display_name, display_id=display_id, timestamp_ns=timestamp_ns)
        line = Line(self, proto)
        self.lines.append(line)
        return line


class Line:
    def __init__(self, plane: Plane, proto: xplane_pb2.XLine):
        self.plane = plane
        self.proto = proto

    def event(self, name: str, start_ps: int, duration_ps: int = 0, /, *, display_name: str = "",
              stats: Stats | None = None, metadata_stats: Stats | None = None, **more_stats) -> Line:
        """An event starting at `start_ps` (absolute: its offset is taken from the line's timestamp)."""
        event = self.proto.events.add()
        event.metadata_id = self.plane.metadata(name, display_name, stats=metadata_stats)
        event.offset_ps = start_ps - self.proto.timestamp_ns * 1000
        event.duration_ps = duration_ps
        self.plane.add_stats(event, _items(stats) + list(more_stats.items()))
        return self


class Space:
    def __init__(self, hostnames: tuple[str, ...] = ("testhost",)):
        self.proto = xplane_pb2.XSpace(hostnames=list(hostnames))
        self.planes: list[Plane] = []

    @property
    def host(self) -> str:
        return self.proto.hostnames[0] if self.proto.hostnames else "testhost"

    def plane(self, name: str, plane_id: int | None = None, *, stats: Stats | None = None, **more_stats) -> Plane:
        """A new plane (id: its position when not given) with these plane stats."""
        proto = self.proto.planes.add(id=len(self.proto.planes) if plane_id is None else plane_id, name=name)
        plane = Plane(proto)
        plane.add_stats(proto, _items(stats) + list(more_stats.items()))
        self.planes.append(plane)
        return plane

    def host_plane(self) -> Plane:
        """The `/host:CPU` plane, made on first use."""
        for plane in self.planes:
            if plane.proto.name == "/host:CPU":
                return plane
        return self.plane("/host:CPU")

    def gpu(self, ordinal: int, vendor: str = "Nvidia") -> Plane:
        """`/device:GPU:<ordinal>` (plane id ordinal + 1) with a V100's capability stats."""
        return self.plane(f"/device:GPU:{ordinal}", plane_id=ordinal + 1, device_vendor=vendor,
                          compute_cap_major=7, compute_cap_minor=0, core_count=80, clock_rate=1_530_000)

    def serialize(self) -> bytes:
        return self.proto.SerializeToString()

    def capture(self, host: str | None = None, *, sort_lines: bool = False) -> HostCapture:
        """The space decoded as `<host>.xplane.pb`. `sort_lines`: first order each line's events as
        saved captures are (start ascending, then duration descending)."""
        if sort_lines:
            for line in (line for plane in self.proto.planes for line in plane.lines):
                events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
                copies = [xplane_pb2.XEvent.FromString(e.SerializeToString()) for e in events]
                del line.events[:]
                line.events.extend(copies)
        host = host or self.host
        return decode_xspace(f"{host}.xplane.pb", self.serialize(), host=host)

    def write(self, folder: Path, host: str | None = None) -> Path:
        """`<folder>/<host>.xplane.pb` (folders made)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{host or self.host}.xplane.pb"
        path.write_bytes(self.serialize())
        return path


def gpu_space(hostname: str = "testhost") -> Space:
    """A GPU capture's frame: the host plane (id 0) with a `python3` thread running `train` for 1 µs."""
    space = Space((hostname,))
    space.plane("/host:CPU", plane_id=0).line(1, "python3").event("train", 0, 1_000_000)
    return space


def memory_event(line: Line, kind: str, offset_ps: int, *, allocator="bfc", heap=0, stack=0, free=0,
                 requested=0, allocated=0, address=0, peak=0, fragmentation=0.0, **extra) -> None:
    """A `MemoryAllocation`/`MemoryDeallocation` TraceMe with the stats TF's allocators write."""
    line.event(
        kind, offset_ps, 1,
        allocator_name=allocator, bytes_reserved=stack, bytes_allocated=heap, bytes_available=free,
        fragmentation=fragmentation, peak_bytes_in_use=peak, requested_bytes=requested, allocation_bytes=allocated,
        addr=address, **extra,
    )


def host_space(host: str = "testhost") -> Space:
    """A space with its `/host:CPU` plane (id 0) already there, lines or not."""
    space = Space((host,))
    space.host_plane()
    return space
