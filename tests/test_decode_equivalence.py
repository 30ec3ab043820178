"""The compiled decoder gives exactly what a plain protobuf decode gives.

`reference_decode` walks protobuf objects one event and one stat at a time;
every table of the HostCapture is compared with it value by value (string
ids compared as the strings they stand for). Small files only: the shared
captures, the sample tiled ×3, and XSpaces built here for the corners (field
order, sparse ids, missing metadata, string table growth, malformed stats).
Set REPORTGEN_LARGE_TESTS=1 to include the GPU run tiled ×10 (≈ 1 min).
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from bench.tile import tile
from reportgen.capture import NO_STRING, HostCapture, StatTable
from reportgen.errors import CaptureError
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import LOGDIR, REPO, RUNS, host_files, needs_shared
from tests.reference_decode import Reference, Stat, reference_decode
from tests.wirebytes import ld, varint

SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb"


def _texts(capture: HostCapture, ids: np.ndarray) -> list:
    strings = np.array(capture.strings + [None], dtype=object)  # NO_STRING (-1) → None
    return strings[np.asarray(ids, dtype=np.int64)].tolist()


def _assert_stats(capture: HostCapture, stats: StatTable, expected: list[Stat], what: str) -> None:
    assert len(stats) == len(expected), what
    assert stats.owner.tolist() == [s.owner for s in expected], what
    assert _texts(capture, stats.key) == [s.key for s in expected], what
    assert stats.kind.tolist() == [s.kind for s in expected], what
    assert stats.raw.tolist() == [s.raw for s in expected], what
    assert _texts(capture, stats.str_id) == [s.text for s in expected], what


def assert_matches(capture: HostCapture, ref: Reference) -> None:
    assert (capture.hostnames, capture.errors, capture.warnings) == (ref.hostnames, ref.errors, ref.warnings)
    planes = capture.planes
    assert list(zip(planes["id"], planes["name"], planes["first_line"], planes["line_count"])) == ref.planes

    lines = capture.lines
    columns = ["plane", "id", "display_id", "name", "display_name", "timestamp_ns", "duration_ps", "first_event",
               "event_count"]
    assert list(zip(*(lines[c].tolist() for c in columns))) == ref.lines

    md = capture.event_metadata
    n_md = len(ref.metadata)
    assert list(zip(md["plane"][:n_md], md["id"][:n_md], md["name"][:n_md], md["display_name"][:n_md],
                    md["child_ids"][:n_md])) == ref.metadata
    assert _texts(capture, md["name_id"]) == md["name"].tolist()
    assert _texts(capture, md["display_name_id"]) == md["display_name"].tolist()
    assert (md["name"][n_md:] == "").all()  # rows for ids absent from the metadata map

    ev = capture.events
    got = list(zip(ev["plane"].tolist(), ev["line"].tolist(), ev["metadata_id"].tolist(), ev["start_ps"].tolist(),
                   ev["duration_ps"].tolist(), ev["num_occurrences"].tolist(),
                   md["name"].to_numpy()[ev["md"].to_numpy()].tolist(),
                   md["display_name"].to_numpy()[ev["md"].to_numpy()].tolist()))
    assert got == ref.events
    md_rows = ev["md"].to_numpy()
    assert (md["plane"].to_numpy()[md_rows] == ev["plane"].to_numpy()).all()
    assert (md["id"].to_numpy()[md_rows] == ev["metadata_id"].to_numpy()).all()

    _assert_stats(capture, capture.event_stats, ref.event_stats, "event stats")
    _assert_stats(capture, capture.metadata_stats, ref.metadata_stats, "metadata stats")
    _assert_stats(capture, capture.plane_stats, ref.plane_stats, "plane stats")
    sm = capture.stat_metadata
    assert list(zip(sm["plane"], sm["id"], sm["name"])) == ref.stat_metadata
    for i, s in enumerate(capture.strings):
        assert capture.string_id(s) == i


def check_file_bytes(data: bytes, path: str = "x.xplane.pb") -> HostCapture:
    capture = decode_xspace(path, data)
    assert_matches(capture, reference_decode(data))
    return capture


# --- real captures ---------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("run", RUNS)
def test_shared_captures_decode_like_protobuf(run):
    files = host_files(run)
    assert files
    for path in files:
        check_file_bytes(path.read_bytes(), str(path))


def test_sample_tiled_three_times_decodes_like_protobuf():
    capture = check_file_bytes(tile(SAMPLE.read_bytes(), 3, gap_ps=10**9))
    assert capture.event_count == 3 * decode_xspace("s", SAMPLE.read_bytes()).event_count


@pytest.mark.skipif(os.environ.get("REPORTGEN_LARGE_TESTS") != "1", reason="set REPORTGEN_LARGE_TESTS=1")
@needs_shared
def test_gpu_run_tiled_ten_times_decodes_like_protobuf():
    source = LOGDIR / "plugins" / "profile" / "gpu_multi_worker" / "34.83.195.179_6003.xplane.pb"
    check_file_bytes(tile(source.read_bytes(), 10, gap_ps=10**9))


# --- XSpaces built here ---------------------------------------------------------------


def _plane(**kwargs) -> xplane_pb2.XPlane:
    plane = xplane_pb2.XPlane(**kwargs)
    return plane


def test_corner_cases_decode_like_protobuf():
    plane = _plane(id=7, name="/device:GPU:0")
    # Sparse ids (binary-searched tables), a negative id, an id the events miss.
    for k, name in ((3, "a"), (10**12, "b"), (-5, "c")):
        plane.event_metadata[k].CopyFrom(xplane_pb2.XEventMetadata(id=k, name=name, display_name=name.upper(),
                                                                   child_id=[1, 2]))
    for k, name in ((1, "group_id"), (2**40, "tf_op"), (9, "shape"), (10, "blob"), (11, "ratio")):
        plane.stat_metadata[k].CopyFrom(xplane_pb2.XStatMetadata(id=k, name=name))
    plane.event_metadata[3].stats.add(metadata_id=9, str_value="meta")
    plane.stats.add(metadata_id=11, double_value=2.5)
    line = plane.lines.add(id=-559038737, display_id=4, name="Steps", display_name="Steps!", duration_ps=9)
    e = line.events.add(metadata_id=3, offset_ps=100, duration_ps=50)
    e.stats.add(metadata_id=1, int64_value=-3)
    e.stats.add(metadata_id=2**40, ref_value=9)  # ref → "shape"
    e.stats.add(metadata_id=2**40, ref_value=12345)  # dangling ref → ""
    e.stats.add(metadata_id=9, str_value="abc")
    e.stats.add(metadata_id=10, bytes_value=b"abc")  # same bytes, other kind
    e.stats.add(metadata_id=11, double_value=-0.125)
    e.stats.add(metadata_id=1, uint64_value=2**64 - 1)
    e.stats.add(metadata_id=77, int64_value=1)  # unknown stat metadata
    e.stats.add(metadata_id=1)  # no value
    line.events.add(metadata_id=999, offset_ps=120)  # metadata absent
    line.events.add(metadata_id=10**12, num_occurrences=4, duration_ps=7)  # aggregated
    line.events.add(metadata_id=-5, offset_ps=2**40)
    space = xplane_pb2.XSpace(hostnames=["h"], errors=["e1"], warnings=["w1", "w2"])
    space.planes.append(plane)
    space.planes.add(id=8, name="empty")
    # Many distinct strings, each twice: the string tables grow.
    busy = space.planes.add(id=9, name="/host:CPU")
    busy.stat_metadata[1].CopyFrom(xplane_pb2.XStatMetadata(id=1, name="s"))
    busy_line = busy.lines.add(id=1, name="t", timestamp_ns=5)
    for i in range(3000):
        ev = busy_line.events.add(metadata_id=1, offset_ps=i)
        ev.stats.add(metadata_id=1, str_value=f"value {i % 1500} " * (i % 7))
    check_file_bytes(space.SerializeToString())


def test_field_order_and_oneof_overrides_decode_like_protobuf():
    # A line whose timestamp follows its events; an event whose offset is
    # overridden by num_occurrences (oneof: the last one wins) and vice versa.
    stat = varint(1 << 3) + varint(5) + varint(4 << 3) + varint(42)
    event_a = varint(1 << 3) + varint(1) + varint(2 << 3) + varint(500) + varint(5 << 3) + varint(3)
    event_b = varint(5 << 3) + varint(3) + varint(2 << 3) + varint(700) + ld(4, stat)
    line = ld(2, b"late") + ld(4, event_a) + ld(4, event_b) + varint(3 << 3) + varint(1234)
    md = xplane_pb2.XPlane()
    md.event_metadata[1].CopyFrom(xplane_pb2.XEventMetadata(id=1, name="op"))
    md.stat_metadata[5].CopyFrom(xplane_pb2.XStatMetadata(id=5, name="n"))
    plane = md.SerializeToString() + ld(3, line) + varint(1 << 3) + varint(2)
    data = ld(1, plane) + ld(4, b"host")
    capture = check_file_bytes(data)
    assert capture.events["start_ps"].tolist() == [1234 * 1000, 1234 * 1000 + 700]
    assert capture.events["num_occurrences"].tolist() == [3, 0]


def test_malformed_stat_inside_an_event_is_a_capture_error():
    bad_stat = b"\x08\xff"  # a varint that never ends, inside the stat
    event = varint(1 << 3) + varint(1) + ld(4, bad_stat)
    data = ld(1, ld(3, ld(4, event)))
    with pytest.raises(CaptureError, match="malformed varint|truncated"):
        decode_xspace("bad.xplane.pb", data)


def test_stat_value_kinds_keep_their_bits():
    plane = _plane(id=1, name="p")
    plane.stat_metadata[1].CopyFrom(xplane_pb2.XStatMetadata(id=1, name="v"))
    ev = plane.lines.add(id=1).events.add(metadata_id=0, offset_ps=1)
    ev.stats.add(metadata_id=1, double_value=float("nan"))
    ev.stats.add(metadata_id=1, double_value=1e300)
    space = xplane_pb2.XSpace()
    space.planes.append(plane)
    capture = check_file_bytes(space.SerializeToString())
    doubles = capture.event_stats.double_values()
    assert np.isnan(doubles[0]) and doubles[1] == 1e300
    assert capture.event_stats.raw[1] == struct.unpack("<q", struct.pack("<d", 1e300))[0]
    assert capture.event_stats.str_id.tolist() == [NO_STRING, NO_STRING]
