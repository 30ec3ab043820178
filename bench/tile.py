"""Make a large capture from a real one by repeating it in time.

    python bench/tile.py CAPTURE.xplane.pb N [-o OUT.xplane.pb] [--gap-us US]

Every line's events are written N times; copy k is shifted by k × (the
capture's span + a gap), so copies follow each other without overlapping and
every line stays sorted by (start, duration desc). Each copy is made a
distinct set of steps:

* `group_id`, `step_num`, `iter_num` and the other ids that link events
  within a copy (`id`/`parent_id`, `_p`/`_c`, `correlation_id`,
  `element_id`, `run_id`, `step_id`) are renumbered per copy: small ranges by
  adding k × (range width), so step numbers stay small and consecutive;
  hash-like ids (wider than 2^62 / N) by XOR with a per-copy constant, which
  keeps equal ids equal and different ids different within a copy;
* events of a `Steps` line whose metadata name is a number (the group id,
  as XProf's derived GPU step line names them) point, from copy 1 on, at a
  new event metadata named after the renumbered step, and their `step_name`
  stat follows. These few entries are the only additions to the metadata
  maps; every existing metadata entry is written unchanged;
* `_r` root markers are kept as they are, so each copy's roots start its own
  groups.

Line `duration_ps` (when set) and the `Task Environment` plane's
`profile_stop_time` are stretched to cover all copies.

The file is written at the wire level from protobuf-serialised pieces: each
line's header, then the events of every copy (a repeated field may be split
into any number of runs), so the output is a plain, valid XSpace in
canonical field order.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reportgen.loaders.proto import xplane_pb2  # noqa: E402

DEFAULT_GAP_US = 1000.0

# Ids renumbered per copy; names in one family share a numbering (a
# `parent_id` refers to an iterator's `id`, a consumer `_c` to a producer `_p`).
ID_FAMILIES: dict[str, str] = {
    "group_id": "group_id",
    "step_num": "step_num",
    "iter_num": "iter_num",
    "id": "id",
    "parent_id": "id",
    "_p": "context",
    "_c": "context",
    "correlation_id": "correlation_id",
    "element_id": "element_id",
    "run_id": "run_id",
    "step_id": "step_id",
}
U64 = (1 << 64) - 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload_len: int) -> bytes:
    """Tag and length of a length-delimited field."""
    return _varint((number << 3) | 2) + _varint(payload_len)


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & U64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & U64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & U64
    return x ^ (x >> 31)


def _as_u64(value: int) -> int:
    return value & U64


def _as_i64(value: int) -> int:
    value &= U64
    return value - (1 << 64) if value >> 63 else value


@dataclass
class Renumbering:
    """How one id family changes from copy to copy."""

    additive: bool
    stride: int  # additive: k × stride is added
    family: str

    def apply(self, value: int, copy: int, signed: bool) -> int:
        if copy == 0:
            return value
        if self.additive:
            new = value + copy * self.stride
        else:
            new = value ^ _splitmix64((zlib.crc32(self.family.encode()) << 32) | copy)
        return _as_i64(new) if signed else _as_u64(new)


def _family_renumbering(values: dict[str, list[int]], copies: int) -> dict[str, Renumbering]:
    plans = {}
    for family, vals in values.items():
        low, high = min(vals), max(vals)
        width = high - low + 1
        additive = width * copies < (1 << 62) and low + width * copies < (1 << 63)
        plans[family] = Renumbering(additive=additive, stride=width, family=family)
    return plans


def _stat_int(stat) -> tuple[int, bool] | None:
    which = stat.WhichOneof("value")
    if which == "int64_value":
        return stat.int64_value, True
    if which == "uint64_value":
        return stat.uint64_value, False
    return None


def _id_stat_names(plane) -> dict[int, str]:
    return {k: ID_FAMILIES[m.name] for k, m in plane.stat_metadata.items() if m.name in ID_FAMILIES}


def _timed_span_ps(space) -> tuple[int, int]:
    first, last = None, None
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for event in line.events:
                if event.WhichOneof("data") == "num_occurrences":
                    continue
                start = base + event.offset_ps
                end = start + event.duration_ps
                first = start if first is None else min(first, start)
                last = end if last is None else max(last, end)
    return (first or 0), (last or 0)


@dataclass
class _LinePlan:
    header_a: bytes  # id, name, timestamp_ns (fields 1-3)
    header_b: bytes  # duration_ps, display_id, display_name (fields 9-11)
    holder: object  # an XLine holding only the events, mutated per copy
    timed: list  # (event, base offset) of events with a start time
    id_stats: list  # (stat, family, base value, signed)
    step_events: list  # (event, its step_name stat or None, original metadata id)


class _StepMetadata:
    """Event metadata for the renumbered numeric steps of one plane, made on demand."""

    def __init__(self, metadata_map, label) -> None:
        self.map = metadata_map
        self.label = label
        self.next_id = max(metadata_map.keys(), default=0) + 1
        self.made: dict[tuple[int, int], int] = {}

    def for_copy(self, base_id: int, copy: int) -> tuple[int, str]:
        base = self.map[base_id]
        label = self.label(base.name, copy)
        key = (base_id, copy)
        if key not in self.made:
            new = self.map[self.next_id]
            new.CopyFrom(base)
            new.id = self.next_id
            new.name = label
            self.made[key] = self.next_id
            self.next_id += 1
        return self.made[key], label


def tile(data: bytes, copies: int, gap_ps: int) -> bytes:
    """The bytes of an XSpace holding `copies` time-shifted copies of `data`."""
    if copies < 1:
        raise ValueError("copies must be at least 1")
    space = xplane_pb2.XSpace.FromString(data)
    first, last = _timed_span_ps(space)
    period = (last - first) + gap_ps
    stretch_ps = (copies - 1) * period

    # Value ranges of every id family over the whole capture.
    family_values: dict[str, list[int]] = {}
    for plane in space.planes:
        id_names = _id_stat_names(plane)
        if not id_names:
            continue
        for line in plane.lines:
            for event in line.events:
                for stat in event.stats:
                    family = id_names.get(stat.metadata_id)
                    if family is None:
                        continue
                    value = _stat_int(stat)
                    if value is not None:
                        family_values.setdefault(family, []).append(value[0])
    plans = _family_renumbering(family_values, copies)
    group_plan = plans.get("group_id")

    def step_label(name: str, copy: int) -> str:
        if group_plan is None or copy == 0:
            return name
        return str(group_plan.apply(int(name), copy, signed=True))

    out_planes: list[bytes] = []
    for plane in space.planes:
        id_names = _id_stat_names(plane)
        step_name_ids = {k for k, m in plane.stat_metadata.items() if m.name == "step_name"}
        line_plans = []
        for line in plane.lines:
            # The line's own fields, in field order around its events.
            head_a = xplane_pb2.XLine(id=line.id, name=line.name, timestamp_ns=line.timestamp_ns)
            head_b = xplane_pb2.XLine(
                duration_ps=line.duration_ps + stretch_ps if line.duration_ps else 0,
                display_id=line.display_id, display_name=line.display_name,
            )
            holder = xplane_pb2.XLine()
            holder.events.extend(line.events)
            timed, id_stats, step_events = [], [], []
            is_steps = line.name == "Steps"
            for event in holder.events:
                if event.WhichOneof("data") != "num_occurrences":
                    timed.append((event, event.offset_ps))
                step_stat = None
                for stat in event.stats:
                    family = id_names.get(stat.metadata_id)
                    if family is not None:
                        value = _stat_int(stat)
                        if value is not None:
                            id_stats.append((stat, family, value[0], value[1]))
                    if stat.metadata_id in step_name_ids and stat.WhichOneof("value") == "str_value":
                        step_stat = stat
                if is_steps:
                    md_name = plane.event_metadata[event.metadata_id].name if (
                        event.metadata_id in plane.event_metadata
                    ) else ""
                    if md_name.lstrip("-").isdigit():
                        same_name = step_stat is not None and step_stat.str_value == md_name
                        step_events.append((event, step_stat if same_name else None, event.metadata_id))
            line_plans.append(
                _LinePlan(head_a.SerializeToString(), head_b.SerializeToString(), holder, timed, id_stats, step_events)
            )

        # New metadata for renumbered numeric step names (copy 1 on).
        plane_tail = xplane_pb2.XPlane()
        plane_tail.event_metadata.MergeFrom(plane.event_metadata)
        plane_tail.stat_metadata.MergeFrom(plane.stat_metadata)
        plane_tail.stats.extend(plane.stats)
        if plane.name == "Task Environment":
            for stat in plane_tail.stats:
                name = plane.stat_metadata[stat.metadata_id].name if stat.metadata_id in plane.stat_metadata else ""
                if name == "profile_stop_time" and stat.WhichOneof("value") == "uint64_value":
                    stat.uint64_value += stretch_ps // 1000
        step_md = _StepMetadata(plane_tail.event_metadata, step_label)
        line_chunks: list[list[bytes]] = [[] for _ in line_plans]
        for copy in range(copies):
            shift = copy * period
            for lp, chunks in zip(line_plans, line_chunks):
                if copy == 0:  # the original events, unchanged
                    chunks.append(lp.holder.SerializeToString())
                    continue
                for event, base in lp.timed:
                    event.offset_ps = base + shift
                for stat, family, base, signed in lp.id_stats:
                    value = plans[family].apply(base, copy, signed)
                    if signed:
                        stat.int64_value = value
                    else:
                        stat.uint64_value = value
                for event, step_stat, base_id in lp.step_events:
                    event.metadata_id, label = step_md.for_copy(base_id, copy)
                    if step_stat is not None:
                        step_stat.str_value = label
                chunks.append(lp.holder.SerializeToString())

        head = xplane_pb2.XPlane(id=plane.id, name=plane.name).SerializeToString()
        parts = [head]
        for lp, chunks in zip(line_plans, line_chunks):
            body_len = len(lp.header_a) + len(lp.header_b) + sum(len(c) for c in chunks)
            parts.append(_field(3, body_len))
            parts.append(lp.header_a)
            parts.extend(chunks)
            parts.append(lp.header_b)
        parts.append(plane_tail.SerializeToString(deterministic=True))
        body = b"".join(parts)
        out_planes.append(_field(1, len(body)) + body)

    tail = xplane_pb2.XSpace(errors=space.errors, warnings=space.warnings, hostnames=space.hostnames)
    return b"".join(out_planes) + tail.SerializeToString()


def tiled_path(out_dir: Path, source: Path, copies: int) -> Path:
    """Where the ×N tile of `source` lives: a logdir of its own, one run per factor."""
    run = source.parent.name
    return out_dir / "logdir" / "plugins" / "profile" / f"{run}_x{copies}" / source.name


def ensure_tiled(source: Path, copies: int, out_dir: Path, gap_ps: int = int(DEFAULT_GAP_US * 1e6)) -> Path:
    """Write the ×N tile of `source` under `out_dir` unless it is already there."""
    target = tiled_path(out_dir, source, copies)
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(tile(source.read_bytes(), copies, gap_ps))
    tmp.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("copies", type=int)
    parser.add_argument("-o", "--output", type=Path, help="default: bench/out/logdir/plugins/profile/<run>_xN/")
    parser.add_argument("--gap-us", type=float, default=DEFAULT_GAP_US, help="gap between copies (µs)")
    parser.add_argument("--check", action="store_true", help="re-read the result with protobuf and count events")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = tile(args.capture.read_bytes(), args.copies, int(args.gap_us * 1e6))
    target = args.output or tiled_path(REPO / "bench" / "out", args.capture, args.copies)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"{target}: {len(data) / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
    if args.check:
        space = xplane_pb2.XSpace.FromString(data)
        events = sum(len(line.events) for plane in space.planes for line in plane.lines)
        print(f"  protobuf reads it back: {len(space.planes)} planes, {events:,} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
