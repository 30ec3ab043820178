"""Build small XSpace captures in code and decode them like real files.

    space = XSpaceMaker()
    thread = space.line("host thread")
    thread.event("Iterator::Root", start_ps=0, duration_ps=100, id=1)
    capture = space.decode()

Stat values: int → int64, `U(x)` → uint64, str → string, `Ref("name")` → a
ref_value to a stat metadata named so, float → double.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.capture import HostCapture
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace


@dataclass(frozen=True)
class U:
    value: int


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass
class LineMaker:
    plane: PlaneMaker
    proto: xplane_pb2.XLine

    def event(self, event_name: str, start_ps: int, duration_ps: int, /, **stats) -> LineMaker:
        ev = self.proto.events.add(metadata_id=self.plane.event_id(event_name), offset_ps=start_ps,
                                   duration_ps=duration_ps)
        for key, value in stats.items():
            self.plane.stat(ev.stats.add(), key, value)
        return self


@dataclass
class PlaneMaker:
    proto: xplane_pb2.XPlane
    _events: dict[str, int] = field(default_factory=dict)
    _stats: dict[str, int] = field(default_factory=dict)

    def event_id(self, name: str) -> int:
        if name not in self._events:
            eid = len(self._events) + 1
            self._events[name] = eid
            self.proto.event_metadata[eid].id = eid
            self.proto.event_metadata[eid].name = name
        return self._events[name]

    def stat_id(self, name: str) -> int:
        if name not in self._stats:
            sid = len(self._stats) + 1
            self._stats[name] = sid
            self.proto.stat_metadata[sid].id = sid
            self.proto.stat_metadata[sid].name = name
        return self._stats[name]

    def stat(self, st: xplane_pb2.XStat, key: str, value) -> None:
        st.metadata_id = self.stat_id(key)
        if isinstance(value, U):
            st.uint64_value = value.value
        elif isinstance(value, Ref):
            st.ref_value = self.stat_id(value.name)
        elif isinstance(value, bool | int):
            st.int64_value = int(value)
        elif isinstance(value, float):
            st.double_value = value
        else:
            st.str_value = str(value)

    def line(self, name: str, line_id: int | None = None, timestamp_ns: int = 0) -> LineMaker:
        lid = len(self.proto.lines) + 1 if line_id is None else line_id
        return LineMaker(self, self.proto.lines.add(id=lid, display_id=lid, name=name, timestamp_ns=timestamp_ns))


class XSpaceMaker:
    def __init__(self, host: str = "testhost"):
        self.host = host
        self.proto = xplane_pb2.XSpace(hostnames=[host])
        self.host_plane = self.plane("/host:CPU")

    def plane(self, name: str) -> PlaneMaker:
        return PlaneMaker(self.proto.planes.add(id=len(self.proto.planes), name=name))

    def line(self, name: str, **kwargs) -> LineMaker:
        return self.host_plane.line(name, **kwargs)

    def decode(self) -> HostCapture:
        return decode_xspace(f"{self.host}.xplane.pb", self.proto.SerializeToString(), host=self.host)
