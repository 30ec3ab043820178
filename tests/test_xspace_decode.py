"""The fast XSpace decoder against an independent protobuf-object reader.

Every real capture must decode to exactly the tables the slow reference
reader (`reference_xspace.py`) builds from protobuf objects, and XSpaces
built here in code pin the corner cases of the format: ref values, the time
model, nested and interleaved fields, missing metadata, 64-bit extremes,
double and bytes stats, aggregated events and unknown fields.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import struct

import numpy as np
import pytest

from reportgen.capture import KIND_BYTES, KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64
from reportgen.loaders import wire, xspace
from reportgen.loaders.proto import xplane_pb2 as pb
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import LOGDIR, REPO, needs_shared
from tests.reference_xspace import assert_same_tables, capture_tables, reference_tables
from tests.wirebytes import key, ld, varint


def _shared_files() -> list:
    """Every host file of the shared logdir, byte-identical copies once."""
    profile = LOGDIR / "plugins" / "profile"
    if not profile.exists():
        return []
    seen, files = set(), []
    for path in sorted(profile.glob("*/*.xplane.pb")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            files.append(path)
    return files


SHARED_FILES = _shared_files()
SAMPLE_FILES = sorted((REPO / "reportgen" / "sample").glob("plugins/profile/*/*.xplane.pb"))


def _decode(space_or_bytes, name: str = "mem.xplane.pb"):
    data = space_or_bytes if isinstance(space_or_bytes, bytes) else space_or_bytes.SerializeToString()
    capture = decode_xspace(name, data)
    assert_same_tables(capture_tables(capture), reference_tables(data))
    return capture


# --- real captures ------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_capture_matches_reference(path):
    data = path.read_bytes()
    capture = decode_xspace(str(path), data)
    assert_same_tables(capture_tables(capture), reference_tables(data))


@needs_shared
@pytest.mark.parametrize("path", sorted((LOGDIR / "plugins" / "profile").glob("*/*.xplane.pb")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_capture_plane_counts_equal_protobuf(path):
    """Every host of every shared run: lines and events per plane as protobuf holds them."""
    data = path.read_bytes()
    capture = decode_xspace(str(path), data)
    space = pb.XSpace.FromString(data)
    assert capture.host == path.name.removesuffix(".xplane.pb")
    assert list(capture.planes["name"]) == [p.name for p in space.planes]
    lines_per_plane = capture.lines.groupby("plane").size().reindex(range(len(space.planes)), fill_value=0)
    events_per_plane = capture.events.groupby("plane").size().reindex(range(len(space.planes)), fill_value=0)
    assert list(lines_per_plane) == [len(p.lines) for p in space.planes]
    assert list(events_per_plane) == [sum(len(line.events) for line in p.lines) for p in space.planes]
    assert capture.event_count == sum(len(line.events) for p in space.planes for line in p.lines) > 0
    # Stats come in event order (one pass over the file): the core looks an event's stats up by bisection.
    assert (np.diff(capture.event_stats.owner) >= 0).all()
    assert (np.diff(capture.metadata_stats.owner) >= 0).all()


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.parent.name)
def test_bundled_sample_matches_reference(path):
    data = path.read_bytes()
    capture = decode_xspace(str(path), data)
    assert_same_tables(capture_tables(capture), reference_tables(data))
    assert capture.event_count > 1000


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.parent.name)
def test_a_mapped_file_decodes_batch_by_batch_to_the_same_tables(path, monkeypatch):
    """A memory-mapped file is walked in batches of lines, each batch's pages handed back as
    the walk passes them: here one line per batch, every page handed back, the same tables."""
    data = path.read_bytes()
    monkeypatch.setattr(wire, "BATCH_BYTES", 1)
    released = []
    real = xspace._page_release

    def spy(buffer):
        release = real(buffer)
        assert release is not None, "a mapped file gets its pages handed back"
        return lambda end: (released.append(end), release(end))

    monkeypatch.setattr(xspace, "_page_release", spy)
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    capture = decode_xspace(str(path), mapped)
    mapped.close()  # nothing of the capture points into the file
    assert_same_tables(capture_tables(capture), reference_tables(data))
    lines = len(capture.lines)
    assert len(released) == 2 * lines and released == sorted(released[:lines]) * 2  # counting, then filling
    assert len(wire.line_batches(np.array([[0, 0, 10], [0, 10, 20], [0, 20, 30]]), batch_bytes=15)) == 2


def test_sample_is_bundled():
    assert [p.parent.name for p in SAMPLE_FILES] == ["tf_keras_fast", "tf_keras_input_bound"]


# --- XSpaces built in code ----------------------------------------------------


def _stat_md(plane: pb.XPlane, *names: str) -> dict[str, int]:
    ids = {}
    for i, name in enumerate(names, start=1):
        plane.stat_metadata[i].id = i
        plane.stat_metadata[i].name = name
        ids[name] = i
    return ids


def _event_md(plane: pb.XPlane, mid: int, name: str, display: str = "") -> pb.XEventMetadata:
    md = plane.event_metadata[mid]
    md.id = mid
    md.name = name
    md.display_name = display
    return md


def _stats_of(capture, owner_row: int) -> dict:
    st = capture.event_stats
    rows = np.flatnonzero(st.owner == owner_row)
    return {capture.string(int(st.key[r])): (int(st.kind[r]), int(st.raw[r]), capture.string(int(st.str_id[r])))
            for r in rows}


def test_ref_values_resolve_to_stat_metadata_names():
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    ids = _stat_md(plane, "tf_op", "long/op/name:MatMul", "is_eager")
    _event_md(plane, 7, "op")
    line = plane.lines.add(id=1, name="t")
    ev = line.events.add(metadata_id=7, offset_ps=0, duration_ps=10)
    ev.stats.add(metadata_id=ids["tf_op"], ref_value=ids["long/op/name:MatMul"])
    ev.stats.add(metadata_id=ids["is_eager"], ref_value=999)  # dangling reference reads as ""
    md = plane.event_metadata[7]
    md.stats.add(metadata_id=ids["tf_op"], ref_value=ids["is_eager"])
    plane.stats.add(metadata_id=ids["is_eager"], ref_value=ids["tf_op"])
    capture = _decode(space)
    stats = _stats_of(capture, 0)
    assert stats["tf_op"] == (KIND_REF, ids["long/op/name:MatMul"], "long/op/name:MatMul")
    assert stats["is_eager"] == (KIND_REF, 999, "")
    assert capture.string(int(capture.metadata_stats.str_id[0])) == "is_eager"
    assert capture.string(int(capture.plane_stats.str_id[0])) == "tf_op"
    assert capture.metadata_stats.kind[0] == capture.plane_stats.kind[0] == KIND_REF


def test_ref_values_resolve_per_plane():
    """The same stat-metadata id names different strings on different planes."""
    space = pb.XSpace()
    for pid, text in ((1, "on plane one"), (2, "on plane two")):
        plane = space.planes.add(id=pid, name=f"/device:GPU:{pid}")
        plane.stat_metadata[1].name = "hlo_op"
        plane.stat_metadata[2].name = text
        _event_md(plane, 1, f"kernel {pid}")
        ev = plane.lines.add(id=1).events.add(metadata_id=1, offset_ps=5)
        ev.stats.add(metadata_id=1, ref_value=2)
    capture = _decode(space)
    assert [_stats_of(capture, r)["hlo_op"][2] for r in (0, 1)] == ["on plane one", "on plane two"]
    md = capture.event_metadata
    assert list(md["name"].to_numpy()[capture.events["md"]]) == ["kernel 1", "kernel 2"]


def test_time_model_start_is_timestamp_ns_times_1000_plus_offset():
    space = pb.XSpace()
    plane = space.planes.add(id=0, name="/host:CPU")
    _event_md(plane, 1, "a")
    line = plane.lines.add(id=3, timestamp_ns=3_600_000_123_456, duration_ps=99)
    line.events.add(metadata_id=1, offset_ps=7, duration_ps=1)
    line.events.add(metadata_id=1, offset_ps=2_000_001, duration_ps=0)
    other = plane.lines.add(id=4, timestamp_ns=5)
    other.events.add(metadata_id=1, offset_ps=0, duration_ps=3)
    capture = _decode(space)
    assert list(capture.events["start_ps"]) == [
        3_600_000_123_456 * 1000 + 7,
        3_600_000_123_456 * 1000 + 2_000_001,
        5000,
    ]
    assert list(capture.events["duration_ps"]) == [1, 0, 3]
    assert list(capture.lines["timestamp_ns"]) == [3_600_000_123_456, 5]
    assert list(capture.lines["duration_ps"]) == [99, 0]
    assert capture.time_span_ps() == (5000, 3_600_000_123_456 * 1000 + 2_000_001)


def test_nested_events_lines_and_planes_keep_file_order():
    space = pb.XSpace(hostnames=["host-a"], errors=["e1"], warnings=["w1", "w2"])
    for p in range(3):
        plane = space.planes.add(id=10 + p, name=f"plane {p}")
        _event_md(plane, 1, f"outer {p}", display=f"o{p}")
        _event_md(plane, 2, f"inner {p}")
        for ln in range(p):  # plane 0 has no lines, plane 1 one line, plane 2 two
            line = plane.lines.add(id=-ln - 1, display_id=ln, name=f"line {ln}", display_name=f"shown {ln}",
                                   timestamp_ns=100)
            line.events.add(metadata_id=1, offset_ps=0, duration_ps=100)  # encloses the next two
            line.events.add(metadata_id=2, offset_ps=10, duration_ps=20)
            line.events.add(metadata_id=2, offset_ps=40, duration_ps=20).stats.add(metadata_id=0, int64_value=1)
    capture = _decode(space)
    assert capture.hostnames == ["host-a"] and capture.errors == ["e1"] and capture.warnings == ["w1", "w2"]
    assert list(capture.planes["line_count"]) == [0, 1, 2]
    assert list(capture.planes["first_line"]) == [0, 0, 1]
    assert list(capture.lines["id"]) == [-1, -1, -2]
    assert list(capture.lines["display_name"]) == ["shown 0", "shown 0", "shown 1"]
    assert list(capture.lines["first_event"]) == [0, 3, 6]
    assert list(capture.events["line"]) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert list(capture.events["plane"]) == [1, 1, 1, 2, 2, 2, 2, 2, 2]
    names = capture.event_metadata["name"].to_numpy()[capture.events["md"]]
    assert list(names[:3]) == ["outer 1", "inner 1", "inner 1"]
    assert list(capture.event_stats.owner) == [2, 5, 8]


def test_empty_planes_and_lines():
    space = pb.XSpace()
    space.planes.add(id=1, name="/host:metadata")
    empty_line_plane = space.planes.add(id=2, name="Task Environment")
    empty_line_plane.lines.add(id=1, name="nothing here")
    space.planes.add()  # a plane with every field at its default
    capture = _decode(space)
    assert list(capture.planes["name"]) == ["/host:metadata", "Task Environment", ""]
    assert len(capture.lines) == 1 and capture.lines["event_count"][0] == 0
    assert capture.event_count == 0 and len(capture.event_stats) == 0
    assert capture.time_span_ps() == (0, 0)


def test_space_without_planes_decodes_to_empty_tables():
    capture = _decode(pb.XSpace(hostnames=["h"]))
    assert len(capture.planes) == 0 and capture.event_count == 0 and capture.hostnames == ["h"]


def test_missing_event_metadata_reads_as_empty_name():
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="p")
    _event_md(plane, 1, "known")
    line = plane.lines.add(id=1)
    for mid in (1, 42, 42, 0):
        line.events.add(metadata_id=mid, offset_ps=1)
    other = space.planes.add(id=2, name="q")
    _event_md(other, 42, "known on q")
    other.lines.add(id=1).events.add(metadata_id=42, offset_ps=1)
    capture = _decode(space)
    md = capture.event_metadata
    assert list(md["name"].to_numpy()[capture.events["md"]]) == ["known", "", "", "", "known on q"]
    assert list(capture.events["metadata_id"]) == [1, 42, 42, 0, 42]
    ev = capture.events
    assert ev["md"][1] == ev["md"][2] != ev["md"][3]  # one empty metadata row per (plane, id)


def test_negative_int64_values():
    space = pb.XSpace()
    plane = space.planes.add(id=-5, name="p")
    ids = _stat_md(plane, "neg", "min")
    _event_md(plane, -3, "negative id")
    line = plane.lines.add(id=-2, display_id=-9, timestamp_ns=-1000, duration_ps=-1)
    ev = line.events.add(metadata_id=-3, offset_ps=-20, duration_ps=7)
    ev.stats.add(metadata_id=ids["neg"], int64_value=-1)
    ev.stats.add(metadata_id=ids["min"], int64_value=-(2**63))
    plane.stats.add(metadata_id=ids["neg"], int64_value=-123456789)
    capture = _decode(space)
    assert capture.planes["id"][0] == -5
    assert (capture.lines["id"][0], capture.lines["display_id"][0]) == (-2, -9)
    assert capture.events["start_ps"][0] == -1000 * 1000 - 20
    assert capture.events["duration_ps"][0] == 7
    assert capture.event_metadata["name"].to_numpy()[capture.events["md"][0]] == "negative id"
    assert _stats_of(capture, 0) == {"neg": (KIND_INT64, -1, ""), "min": (KIND_INT64, -(2**63), "")}
    assert list(capture.event_stats.int_values()) == [-1, -(2**63)]
    assert int(capture.plane_stats.raw[0]) == -123456789


def test_events_of_negative_duration_are_left_out_and_counted():
    # XProf reads durations as unsigned: such an event would end past the end of time.
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="p")
    ids = _stat_md(plane, "neg")
    _event_md(plane, 3, "kept")
    _event_md(plane, 4, "negative")
    line = plane.lines.add(id=2, timestamp_ns=1000)
    line.events.add(metadata_id=3, offset_ps=10, duration_ps=5)
    line.events.add(metadata_id=4, offset_ps=20, duration_ps=-7).stats.add(metadata_id=ids["neg"], int64_value=-1)
    capture = decode_xspace("mem.xplane.pb", space.SerializeToString())
    names = capture.event_metadata["name"].to_numpy()[capture.events["md"]]
    assert list(names) == ["kept"] and list(capture.events["duration_ps"]) == [5]
    assert int(capture.lines["event_count"][0]) == 1
    assert capture.dropped == {"with a negative duration": 1}
    assert len(capture.event_stats.int_values()) == 0, "the stats of a left-out event go with it"


def test_uint64_values_above_2_pow_63():
    big = [2**63, 2**64 - 1, 2**63 + 12345]
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="p")
    ids = _stat_md(plane, "a", "b", "c")
    _event_md(plane, 1, "e")
    ev = plane.lines.add(id=1).events.add(metadata_id=1)
    for name, value in zip("abc", big):
        ev.stats.add(metadata_id=ids[name], uint64_value=value)
    plane.stats.add(metadata_id=ids["a"], uint64_value=2**64 - 2)
    plane.event_metadata[1].stats.add(metadata_id=ids["b"], uint64_value=2**63 + 1)
    capture = _decode(space)
    st = capture.event_stats
    assert list(st.kind) == [KIND_UINT64] * 3
    assert list(st.raw.view(np.uint64)) == big
    assert list(st.double_values()) == [float(v) for v in big]
    assert int(capture.plane_stats.raw.view(np.uint64)[0]) == 2**64 - 2
    assert int(capture.metadata_stats.raw.view(np.uint64)[0]) == 2**63 + 1


def test_double_stats():
    values = [0.5, -0.0, 1e300, -2.25, math.inf, 5e-324]
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="p")
    names = [f"d{i}" for i in range(len(values) + 1)]
    ids = _stat_md(plane, *names)
    _event_md(plane, 1, "e")
    ev = plane.lines.add(id=1).events.add(metadata_id=1)
    for name, value in zip(names, values):
        ev.stats.add(metadata_id=ids[name], double_value=value)
    ev.stats.add(metadata_id=ids[names[-1]], double_value=math.nan)
    plane.stats.add(metadata_id=ids["d0"], double_value=3.75)
    capture = _decode(space)
    st = capture.event_stats
    assert list(st.kind) == [KIND_DOUBLE] * (len(values) + 1)
    got = st.double_values()
    assert list(got[:-1]) == values and math.isnan(got[-1])
    assert struct.pack("<d", got[1]) == struct.pack("<d", -0.0)  # the sign bit survives
    assert capture.plane_stats.double_values()[0] == 3.75


def test_string_and_bytes_stats_stay_distinct():
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="p")
    ids = _stat_md(plane, "s", "b", "empty", "none")
    _event_md(plane, 1, "e")
    line = plane.lines.add(id=1)
    for _ in range(3):  # repeated values are interned once
        ev = line.events.add(metadata_id=1)
        ev.stats.add(metadata_id=ids["s"], str_value="abc ✓")
        ev.stats.add(metadata_id=ids["b"], bytes_value="abc ✓".encode())
        ev.stats.add(metadata_id=ids["empty"], str_value="")
        ev.stats.add(metadata_id=ids["none"])  # no value set at all
    ev.stats.add(metadata_id=ids["b"], bytes_value=b"\xff\x00\xfe not utf-8")
    plane.event_metadata[1].stats.add(metadata_id=ids["b"], bytes_value=b"\x08\x01")
    capture = _decode(space)
    stats = _stats_of(capture, 0)
    assert stats["s"] == (KIND_STR, 0, "abc ✓")
    assert stats["b"] == (KIND_BYTES, 0, "abc ✓".encode())
    assert stats["empty"] == (KIND_STR, 0, "")
    assert stats["none"][0] == 0
    last = capture.event_stats.str_id[-1]
    assert capture.string(int(last)) == b"\xff\x00\xfe not utf-8"
    assert capture.string(int(capture.metadata_stats.str_id[0])) == b"\x08\x01"
    assert len(set(capture.event_stats.str_id[capture.event_stats.kind == KIND_STR])) == 2


def test_num_occurrences_events():
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="/device:TPU:0 aggregated")
    _event_md(plane, 1, "agg")
    line = plane.lines.add(id=1, timestamp_ns=10)
    line.events.add(metadata_id=1, num_occurrences=17, duration_ps=500)
    line.events.add(metadata_id=1, offset_ps=3, duration_ps=2)
    capture = _decode(space)
    ev = capture.events
    assert list(ev["num_occurrences"]) == [17, 0]
    # An aggregated event has no offset: its start is the line timestamp.
    assert list(ev["start_ps"]) == [10_000, 10_003]
    assert capture.time_span_ps() == (10_003, 10_005)


# --- hand-assembled wire bytes ----------------------------------------------


def _unknown(number: int) -> bytes:
    """One unknown field of every wire type protobuf 3 writes."""
    return (
        key(number, 0) + varint(2**64 - 1)
        + key(number + 1, 1) + b"\x01" * 8
        + ld(number + 2, b"\x0a\x03abc")
        + key(number + 3, 5) + b"\x02" * 4
    )


def test_unknown_fields_are_skipped_at_every_level():
    stat = pb.XStat(metadata_id=1, int64_value=-4).SerializeToString() + _unknown(20)
    ref_stat = pb.XStat(metadata_id=1, ref_value=2).SerializeToString()
    event = pb.XEvent(metadata_id=1, offset_ps=5, duration_ps=6).SerializeToString() + _unknown(30)
    event += ld(4, stat) + _unknown(40) + ld(4, ref_stat)
    line = pb.XLine(id=1, name="l", timestamp_ns=2).SerializeToString() + _unknown(50) + ld(4, event)
    line += key(5, 0) + varint(1)  # a reserved field number
    head = pb.XPlane(id=1, name="p")
    head.stat_metadata[1].name = "stat one"
    head.stat_metadata[2].name = "ref target"
    head.event_metadata[1].name = "event one"
    plane = head.SerializeToString() + _unknown(60) + ld(3, line)
    space = ld(1, plane) + _unknown(70) + ld(4, b"host")
    capture = _decode(space)
    assert capture.hostnames == ["host"]
    assert list(capture.events["start_ps"]) == [2005]
    st = capture.event_stats
    assert list(st.kind) == [KIND_INT64, KIND_REF]
    assert list(st.raw) == [-4, 2]
    assert capture.string(int(st.str_id[1])) == "ref target"


def test_known_field_with_unexpected_wire_type_is_skipped():
    """protobuf treats a known field number with another wire type as unknown."""
    event = pb.XEvent(metadata_id=1, offset_ps=5).SerializeToString() + ld(3, b"xx") + ld(1, b"yy")
    line = pb.XLine(id=1).SerializeToString() + ld(4, event) + key(2, 0) + varint(9)
    head = pb.XPlane(id=1, name="p")
    head.event_metadata[1].name = "e"
    capture = _decode(ld(1, head.SerializeToString() + ld(3, line)))
    assert list(capture.events["metadata_id"]) == [1]
    assert list(capture.events["duration_ps"]) == [0]
    assert capture.lines["name"][0] == ""


def test_interleaved_fields_and_last_oneof_wins():
    """Plane fields split around lines; offset_ps and num_occurrences both present."""
    line_a = pb.XLine(id=1, timestamp_ns=1)
    line_a.events.add(metadata_id=1, offset_ps=4)
    # Both members of the `data` oneof on the wire: the last one wins.
    both = (pb.XEvent(metadata_id=1, num_occurrences=3).SerializeToString()
            + pb.XEvent(offset_ps=8).SerializeToString())
    both_back = pb.XEvent(offset_ps=8).SerializeToString() + pb.XEvent(num_occurrences=3).SerializeToString()
    line_b = pb.XLine(id=2, timestamp_ns=1).SerializeToString() + ld(4, both) + ld(4, both_back)
    first = pb.XPlane(id=7)
    first.event_metadata[1].name = "split"
    second = pb.XPlane(name="named after its lines")
    second.stat_metadata[1].name = "late stat"
    second.stats.add(metadata_id=1, str_value="plane value")
    plane = (first.SerializeToString() + ld(3, line_a.SerializeToString()) + second.SerializeToString()
             + ld(3, line_b))
    space = ld(4, b"h1") + ld(1, plane) + ld(2, b"an error") + ld(1, pb.XPlane(name="second").SerializeToString())
    capture = _decode(space)
    assert list(capture.planes["name"]) == ["named after its lines", "second"]
    assert list(capture.planes["id"]) == [7, 0]
    assert capture.errors == ["an error"] and capture.hostnames == ["h1"]
    assert list(capture.events["num_occurrences"]) == [0, 0, 3]
    assert list(capture.events["start_ps"]) == [1004, 1008, 1000]
    assert capture.string(int(capture.plane_stats.key[0])) == "late stat"
    assert capture.string(int(capture.plane_stats.str_id[0])) == "plane value"
