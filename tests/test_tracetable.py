"""Cloud TPU `.tracetable` files: the LevelDB table reader (against LevelDB itself and a writer of the
documented format) and the tables' Trace and TraceEvents converted as a `.trace` file's; broken and
truncated tables are errors naming the file."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from reportgen.errors import CaptureError
from reportgen.legacy.chrome_trace import parse_trace_proto, parse_tracetable, read_trace
from reportgen.legacy.sstable import TableError, read_table
from reportgen.loaders.proto import trace_events_pb2 as tpb
from tests.sstable_writer import tracetable, tracetable_entries, write_raw_table, write_table
from tests.tftrace import chrome_events_of
from tests.wirebytes import key, varint

PATH = "logs/plugins/profile/run/10.0.0.9.tracetable"


def _entries(n: int, seed: int = 3) -> list[tuple[bytes, bytes]]:
    """Sorted keys sharing long prefixes (as trace keys do), values from empty to a few KiB."""
    rng = random.Random(seed)
    keys = sorted({b"%c" % rng.choice(b"0123") + rng.randrange(1 << 40).to_bytes(8, "big") + bytes([k % 3])
                   for k in range(n)})
    return [(k, bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 30, 300, 3000))))) for k in keys]


@pytest.mark.parametrize("compression", ["none", "snappy"])
@pytest.mark.parametrize("block_size", [64, 4096])
def test_reader_returns_what_the_writer_of_the_documented_format_wrote(compression, block_size):
    entries = _entries(400)
    assert read_table(write_table(entries, compression, block_size)).items() == entries
    assert read_table(write_table([], compression)).items() == []


def test_reader_reads_a_table_leveldb_itself_wrote(tmp_path):
    plyvel = pytest.importorskip("plyvel", reason="plyvel (LevelDB's Python binding) is a test dependency")
    db = plyvel.DB(str(tmp_path / "db"), create_if_missing=True, compression="snappy", block_size=1024)
    expected = [(b"key-%06d" % i, b"value %d, " % i * 8) for i in range(3000)]
    for k, v in expected:
        db.put(k, v)
    db.compact_range()
    db.close()
    (table,) = (tmp_path / "db").glob("*.ldb")
    entries = read_table(table.read_bytes()).items()
    # A database's tables hold internal keys: the user key, then 8 bytes of sequence number and type.
    assert [(k[:-8], v) for k, v in entries] == expected
    assert table.stat().st_size < sum(len(k) + len(v) for k, v in expected) / 2  # its blocks are Snappy


def _trace() -> tpb.Trace:
    """Two devices; spans at every zoom level, instants, events sharing a start, ids past 2^53, args."""
    trace = tpb.Trace()
    for did, name in ((2, "/host:CPU"), (9_007_199_254_740_993, 'TPU:0 "core"')):
        device = trace.devices[did]
        device.name, device.device_id = name, did
        for rid in (1, 7):
            device.resources[rid].name = f"{name} stream {rid}"
            device.resources[rid].resource_id = rid
    durations = [0, 1, 999, 1_000, 10_000, 123_456, 10_000_000, 5_000_000_000, 20_000_000_000]
    for i in range(90):
        event = trace.trace_events.add(device_id=(2, 9_007_199_254_740_993)[i % 2], resource_id=(1, 7)[i % 3 % 2],
                                       name=f"fusion.{i % 11}", timestamp_ps=(i // 3) * 2_500_000 + 7,
                                       duration_ps=durations[i % len(durations)])
        if i % 4 == 0:
            event.args["long_name"] = f"fusion.{i} = f32[8]{{0}} fusion(p), kind=kLoop \u00e9"
    return trace


def _events(trace) -> list[dict]:
    order = np.arange(trace.count)
    return json.loads(b"[" + trace.to_json(order) + b"]")


@pytest.mark.parametrize("compression", ["none", "snappy"])
def test_a_tracetable_converts_as_its_trace_proto_would(compression):
    proto = _trace()
    table = parse_tracetable(PATH, tracetable(proto, compression=compression, block_size=700))
    assert Counter(json.dumps(e, sort_keys=True) for e in _events(table)) == Counter(
        json.dumps(e, sort_keys=True) for e in chrome_events_of(proto))
    same = parse_trace_proto("x.trace", proto.SerializeToString())
    assert table.meta == same.meta and table.head == same.head and table.source == "10.0.0.9.tracetable"
    assert sorted(table.ts_us.tolist()) == sorted(same.ts_us.tolist())
    assert read_trace(PATH, tracetable(proto)).count == 90


def test_the_metadata_entry_may_come_under_xprofs_later_key():
    entries = [(b"/trace" if k == b"trace" else k, v) for k, v in tracetable_entries(_trace())]
    assert parse_tracetable(PATH, write_table(sorted(entries))).count == 90


def _problem(data: bytes) -> str:
    with pytest.raises(CaptureError) as caught:
        parse_tracetable(PATH, data)
    assert caught.value.path == PATH and str(caught.value).startswith(PATH + ": ")
    return caught.value.problem


def test_broken_tables_are_errors_naming_the_file_and_the_problem():
    good = tracetable(_trace(), compression="snappy", block_size=700)
    assert _problem(b"") == ("cannot be read as a LevelDB table: the file is 0 bytes, shorter than a table's "
                             "48-byte footer (truncated?)")
    assert "does not end with LevelDB's table magic number" in _problem(b"\x00not a table at all" * 10)
    assert "magic number" in _problem(good[:-1])  # cut at the end
    assert "runs past the table's data" in _problem(good[:300] + good[-48:])  # cut in the middle
    flipped = bytearray(good)
    flipped[40] ^= 0x20
    assert "data block 0 at byte 0 fails its checksum (corrupt)" in _problem(bytes(flipped))
    entries = tracetable_entries(_trace())
    assert "not valid Snappy data" in _problem(write_table(entries, "none", data_block_kind=1))
    assert "unknown compression type 7" in _problem(write_table(entries, "none", data_block_kind=7))
    huge = write_raw_table([(b"trace", b"\xff\xff\xff\xff\x0f" + bytes(30), 1)])  # claims 4 GiB of output
    assert "claims 4294967295 bytes of Snappy output from 35 (corrupt)" in _problem(huge)
    assert _problem(write_raw_table([(b"trace", b"\x05\x01\x01xy" + bytes(8), 0)])).startswith(
        "cannot be read as a LevelDB table: data block 0 has an entry that does not fit (at byte ")
    problem = _problem(write_table([(k, v) for k, v in entries if k != b"trace"]))
    assert problem.startswith("is a LevelDB table without the 'trace' entry of a .tracetable (first keys: b'0")
    junk = write_table(sorted([*entries, (b"7" + bytes(9), b"\xff\xff not a proto")]))
    assert "not a TraceEvent protobuf" in _problem(junk)
    # XProf's later tables: start and duration in fields 6 and 7.
    later = key(3, 2) + varint(3) + b"op." + key(6, 0) + varint(1234) + key(7, 0) + varint(99)
    newer = write_table(sorted([(b"/trace", entries[-1][1]), (b"1" + bytes(9), later)]))
    assert "XProf's later layout" in _problem(newer)


def test_table_errors_say_where():
    with pytest.raises(TableError, match="the index block .* runs past"):
        good = write_table(_entries(50))
        read_table(good[:20] + good[-48:])
