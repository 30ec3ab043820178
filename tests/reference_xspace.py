"""A slow, independent XSpace reader used to check the fast decoder.

It parses with the generated protobuf module and walks the objects in plain
Python, following the resolution rules of `docs/xprof/xspace.md` §2 (missing
event metadata reads as an empty default, ref values resolve to the name of
the referenced stat metadata, the time model is `timestamp_ns * 1000 +
offset_ps`). It shares no code with `reportgen.loaders` beyond the schema.

Both readers are reduced to the same *resolved* tables (names instead of
interned string ids) so that they can be compared with `assert_frame_equal`:
`reference_tables(bytes)` for this reader, `capture_tables(HostCapture)` for
the decoder under test.
"""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd

from reportgen.capture import HostCapture, StatTable
from reportgen.loaders.proto import xplane_pb2

# Stat value kinds as HostCapture numbers them (XStat's oneof field order).
NONE, DOUBLE, UINT64, INT64, STR, BYTES, REF = range(7)

EVENT_COLUMNS = ["plane", "line", "metadata_id", "start_ps", "duration_ps", "num_occurrences", "name",
                 "display_name"]
STAT_COLUMNS = ["kind", "raw", "value"]


def _as_int64(value: int) -> int:
    """An unsigned 64-bit value's bit pattern read as int64."""
    return value - (1 << 64) if value >= (1 << 63) else value


def _double_bits(value: float) -> int:
    return struct.unpack("<q", struct.pack("<d", value))[0]


def _stat(stat: xplane_pb2.XStat, stat_names: dict[int, str]) -> tuple[str, int, int, object]:
    """(stat name, kind, raw, value): raw is the number, value the (resolved) text."""
    name = stat_names.get(stat.metadata_id, "")
    which = stat.WhichOneof("value")
    if which == "double_value":
        return name, DOUBLE, _double_bits(stat.double_value), ""
    if which == "uint64_value":
        return name, UINT64, _as_int64(stat.uint64_value), ""
    if which == "int64_value":
        return name, INT64, stat.int64_value, ""
    if which == "str_value":
        return name, STR, 0, stat.str_value
    if which == "bytes_value":
        return name, BYTES, 0, bytes(stat.bytes_value)
    if which == "ref_value":
        return name, REF, _as_int64(stat.ref_value), stat_names.get(stat.ref_value, "")
    return name, NONE, 0, ""


def _frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=columns) if rows else pd.DataFrame(columns=columns)
    for col in columns:
        if col not in ("name", "display_name", "value", "child_ids", "stat", "line_name", "line_display_name",
                       "plane_name"):
            frame[col] = frame[col].astype(np.int64)
        else:
            frame[col] = frame[col].astype(object)
    return frame


def reference_tables(data: bytes) -> dict:
    """Resolved tables of one serialized XSpace, by walking protobuf objects."""
    space = xplane_pb2.XSpace.FromString(data)
    planes, lines, events, event_stats = [], [], [], []
    event_md, md_stats, stat_md, plane_stats = [], [], [], []
    missing_md: set[tuple[int, int]] = set()
    for p, plane in enumerate(space.planes):
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        planes.append((plane.id, plane.name, len(lines), len(plane.lines)))
        for k in sorted(plane.stat_metadata):
            stat_md.append((p, k, plane.stat_metadata[k].name))
        for k in sorted(plane.event_metadata):
            md = plane.event_metadata[k]
            event_md.append((p, k, md.name, md.display_name, tuple(md.child_id)))
            for st in md.stats:
                md_stats.append((p, k, *_stat(st, stat_names)))
        for st in plane.stats:
            plane_stats.append((p, *_stat(st, stat_names)))
        for line in plane.lines:
            line_row = len(lines)
            lines.append((p, line.id, line.display_id, line.name, line.display_name, line.timestamp_ns,
                          line.duration_ps, len(events), len(line.events)))
            for event in line.events:
                if event.metadata_id in plane.event_metadata:
                    md = plane.event_metadata[event.metadata_id]
                    name, display = md.name, md.display_name
                else:
                    name, display = "", ""
                    missing_md.add((p, event.metadata_id))
                # Time model: absolute start = line timestamp (ns) * 1000 + offset (ps).
                start = line.timestamp_ns * 1000 + event.offset_ps
                row = len(events)
                events.append((p, line_row, event.metadata_id, start, event.duration_ps, event.num_occurrences,
                               name, display))
                for st in event.stats:
                    event_stats.append((row, *_stat(st, stat_names)))
    # HostCapture gives events with an unknown metadata id an empty metadata
    # row of their own, after the real ones, ordered by (plane, id).
    event_md.extend((p, k, "", "", ()) for p, k in sorted(missing_md))
    return {
        "hostnames": list(space.hostnames),
        "errors": list(space.errors),
        "warnings": list(space.warnings),
        "planes": _frame(planes, ["id", "name", "first_line", "line_count"]),
        "lines": _frame(lines, ["plane", "id", "display_id", "name", "display_name", "timestamp_ns",
                                "duration_ps", "first_event", "event_count"]),
        "events": _frame(events, EVENT_COLUMNS),
        "event_stats": _frame(event_stats, ["owner", "stat", *STAT_COLUMNS]),
        "event_metadata": _frame(event_md, ["plane", "id", "name", "display_name", "child_ids"]),
        "metadata_stats": _frame(md_stats, ["plane", "metadata_id", "stat", *STAT_COLUMNS]),
        "stat_metadata": _frame(stat_md, ["plane", "id", "name"]),
        "plane_stats": _frame(plane_stats, ["plane", "stat", *STAT_COLUMNS]),
    }


def _resolved_stats(capture: HostCapture, stats: StatTable) -> pd.DataFrame:
    strings = capture.strings
    return pd.DataFrame(
        {
            "stat": [strings[k] for k in stats.key],
            "kind": stats.kind.astype(np.int64),
            "raw": stats.raw.astype(np.int64),
            "value": [capture.string(int(s)) for s in stats.str_id],
        }
    )


def capture_tables(capture: HostCapture) -> dict:
    """The same resolved tables, read from a decoded HostCapture."""
    md = capture.event_metadata
    ev = capture.events
    md_rows = ev["md"].to_numpy()
    events = pd.DataFrame(
        {
            "plane": ev["plane"].to_numpy(np.int64),
            "line": ev["line"].to_numpy(np.int64),
            "metadata_id": ev["metadata_id"].to_numpy(np.int64),
            "start_ps": ev["start_ps"].to_numpy(np.int64),
            "duration_ps": ev["duration_ps"].to_numpy(np.int64),
            "num_occurrences": ev["num_occurrences"].to_numpy(np.int64),
            "name": md["name"].to_numpy(object)[md_rows] if len(ev) else [],
            "display_name": md["display_name"].to_numpy(object)[md_rows] if len(ev) else [],
        }
    )
    event_stats = _resolved_stats(capture, capture.event_stats)
    event_stats.insert(0, "owner", capture.event_stats.owner.astype(np.int64))
    metadata_stats = _resolved_stats(capture, capture.metadata_stats)
    owners = capture.metadata_stats.owner
    metadata_stats.insert(0, "metadata_id", md["id"].to_numpy(np.int64)[owners])
    metadata_stats.insert(0, "plane", md["plane"].to_numpy(np.int64)[owners])
    plane_stats = _resolved_stats(capture, capture.plane_stats)
    plane_stats.insert(0, "plane", capture.plane_stats.owner.astype(np.int64))
    lines = capture.lines[["plane", "id", "display_id", "name", "display_name", "timestamp_ns", "duration_ps",
                           "first_event", "event_count"]]
    return {
        "hostnames": list(capture.hostnames),
        "errors": list(capture.errors),
        "warnings": list(capture.warnings),
        "planes": capture.planes[["id", "name", "first_line", "line_count"]],
        "lines": lines,
        "events": events,
        "event_stats": event_stats,
        "event_metadata": md[["plane", "id", "name", "display_name", "child_ids"]],
        "metadata_stats": metadata_stats,
        "stat_metadata": capture.stat_metadata[["plane", "id", "name"]],
        "plane_stats": plane_stats,
    }


def normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """Same dtypes on both sides: int64 numbers, object text, a fresh index."""
    out = frame.reset_index(drop=True).copy()
    for col in out.columns:
        if out[col].dtype.kind in "iub":
            out[col] = out[col].astype(np.int64)
        else:
            out[col] = out[col].astype(object)
    return out


def assert_same_tables(actual: dict, expected: dict) -> None:
    """Every resolved table of `actual` equals `expected`, with a useful diff."""
    assert actual.keys() == expected.keys()
    for key in expected:
        want, got = expected[key], actual[key]
        if isinstance(want, list):
            assert got == want, key
            continue
        got, want = normalized(got), normalized(want)
        assert list(got.columns) == list(want.columns), key
        assert len(got) == len(want), f"{key}: {len(got)} rows, expected {len(want)}"
        for col in want.columns:
            a, b = got[col].to_numpy(), want[col].to_numpy()
            if a.dtype == object:
                same = np.array([x == y and type(x) is type(y) for x, y in zip(a, b)], dtype=bool)
            else:
                same = a == b
            if not same.all():
                bad = np.flatnonzero(~same)
                raise AssertionError(
                    f"{key}.{col}: {len(bad)} of {len(b)} rows differ; first at row {bad[0]}: "
                    f"got {a[bad[0]]!r}, expected {b[bad[0]]!r}"
                )
