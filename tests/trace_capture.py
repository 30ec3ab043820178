"""Captures built in code for the trace tests: an XSpace serialised and decoded like a file."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from reportgen.capture import HostCapture
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace


@dataclass
class Plane:
    plane: xplane_pb2.XPlane
    _md: dict[tuple[str, str], int] = field(default_factory=dict)
    _stat: dict[str, int] = field(default_factory=dict)

    def stat_id(self, name: str) -> int:
        if name not in self._stat:
            sid = 1000 + len(self._stat)
            self._stat[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat[name]

    def metadata(self, name: str, display_name: str = "", **stats) -> int:
        key = (name, display_name)
        if key not in self._md:
            mid = 1 + len(self._md)
            self._md[key] = mid
            md = self.plane.event_metadata[mid]
            md.id, md.name, md.display_name = mid, name, display_name
            self.add_stats(md, stats)
        return self._md[key]

    def line(self, line_id: int, name: str, display_name: str = "", display_id: int = 0,
             timestamp_ns: int = 0) -> Line:
        line = self.plane.lines.add()
        line.id, line.name, line.display_name = line_id, name, display_name
        line.display_id, line.timestamp_ns = display_id, timestamp_ns
        return Line(self, line)

    def add_stats(self, target, stats: dict) -> None:
        for key, value in stats.items():
            stat = target.stats.add()
            stat.metadata_id = self.stat_id(key)
            if isinstance(value, tuple) and value[0] == "uint":
                stat.uint64_value = value[1]
            elif isinstance(value, tuple) and value[0] == "ref":
                stat.ref_value = self.stat_id(value[1])
            elif isinstance(value, bool):
                stat.int64_value = int(value)
            elif isinstance(value, int):
                stat.int64_value = value
            elif isinstance(value, float):
                stat.double_value = value
            elif isinstance(value, bytes):
                stat.bytes_value = value
            else:
                stat.str_value = value


@dataclass
class Line:
    owner: Plane
    line: xplane_pb2.XLine

    def event(self, name: str, start_ps: int, duration_ps: int, display_name: str = "", **stats) -> Line:
        ev = self.line.events.add()
        ev.metadata_id = self.owner.metadata(name, display_name)
        ev.offset_ps = start_ps - self.line.timestamp_ns * 1000
        ev.duration_ps = duration_ps
        self.owner.add_stats(ev, stats)
        return self


class Space:
    def __init__(self, hostnames: tuple[str, ...] = ("testhost",)):
        self.space = xplane_pb2.XSpace()
        self.space.hostnames.extend(hostnames)

    def plane(self, name: str, plane_id: int = 0, **plane_stats) -> Plane:
        plane = self.space.planes.add()
        plane.id, plane.name = plane_id, name
        builder = Plane(plane)
        builder.add_stats(plane, plane_stats)
        return builder

    def capture(self, host: str = "testhost") -> HostCapture:
        return decode_xspace(f"{host}.xplane.pb", self.space.SerializeToString(), host=host)

    def write(self, folder: Path, host: str = "testhost") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{host}.xplane.pb"
        path.write_bytes(self.space.SerializeToString())
        return path


def read_chunk(path: Path) -> dict:
    return orjson.loads(gzip.decompress(path.read_bytes()))


def track_names(doc: dict) -> tuple[dict, dict]:
    """The document's process names by pid and thread names by (pid, tid), from its metadata events."""
    processes, threads = {}, {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return processes, threads


def named_events(doc: dict) -> list[dict]:
    """The document's non-metadata events, each with its process and thread names added."""
    processes, threads = track_names(doc)
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            continue
        out.append({**e, "process": processes.get(e["pid"]), "thread": threads.get((e["pid"], e.get("tid")))})
    return out
