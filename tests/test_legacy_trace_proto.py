"""Cloud TPU `.trace` files decoded into columns and written back as Chrome JSON: the same text
`orjson` gives for one event dict per event (TensorBoard's conversion, times divided exactly), and
the same verdict as protobuf on what is not a Trace."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from google.protobuf.message import DecodeError

from reportgen.errors import CaptureError
from reportgen.legacy.chrome_trace import parse_trace_proto
from reportgen.legacy.trace_proto import TraceDecodeError, decode_trace_events, ps_to_us
from reportgen.loaders.proto import trace_events_pb2 as tpb
from tests.tftrace import chrome_events_of

U64_MAX = 2**64 - 1
NAMES = ["", 'a"b\\c', "ctl\x00\x01\x1f\x7f\b\t\n\f\r", "uni é ☃ \U0001f600 \u2028", "x" * 300, "fusion.1"]
TIMES = [0, 1, 999_999, 1_000_000, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 500_000, 2**60 + 12_345, U64_MAX,
         1_600_000_000_000_000_000, 5 * 10**17 + 500_000]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, varint length, payload."""
    out = bytearray([number << 3 | 2])
    n = len(payload)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + payload


def _edge_trace() -> tpb.Trace:
    """Ids up to 2^64 - 1, times past 2^53 ps, names JSON escapes, instants, one arg on some events."""
    trace = tpb.Trace()
    for did in (0, 7, U64_MAX):
        device = trace.devices[did]
        device.name = f"dev {did}" if did != 7 else ""
        for rid in (0, 3, 2**63):
            device.resources[rid].name = "" if rid == 3 else f"r{rid}é"
    for i in range(600):
        event = trace.trace_events.add(
            device_id=(0, 7, U64_MAX)[i % 3], resource_id=(0, 3, 2**63)[(i // 3) % 3], name=NAMES[i % len(NAMES)],
            timestamp_ps=TIMES[i % len(TIMES)] if i < 100 else (i * 7919 * 1_000_003) % 2**64,
            duration_ps=(0, 1, 125_000, 2**53 + 3, 10**12 + 1)[i % 5])
        if i % 4 == 0:
            event.args[f'k"{i % 3}'] = NAMES[(i + 1) % len(NAMES)]
    return trace


def test_times_are_divided_as_python_divides_integers():
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.integers(0, 2**53, 20_000, dtype=np.uint64),
        rng.integers(2**53, 2**64 - 1, 20_000, dtype=np.uint64, endpoint=True),
        np.array([2**53 - 1, 2**53, 2**53 + 1, U64_MAX, 10**18 + 500_000, 9_007_199_254_740_993_500_000 % 2**64],
                 dtype=np.uint64),
        # Exact halfway cases past 2^53: q + r/10^6 with r/10^6 a half of the double's last place.
        (np.arange(2**40, 2**40 + 64, dtype=np.uint64) * np.uint64(1_000_000) + np.uint64(500_000)),
    ])
    assert ps_to_us(values).tolist() == [int(v) / 1_000_000 for v in values.tolist()]


def test_events_are_written_as_orjson_writes_tensorboards_dicts():
    trace = _edge_trace()
    data = trace.SerializeToString()
    columns, _devices = decode_trace_events(data)
    expected = chrome_events_of(trace)
    assert columns.to_json(np.arange(len(expected))) == b",".join(orjson.dumps(e) for e in expected)
    rows = np.array([5, 3, 599, 0, 3])  # any rows, in the order asked
    assert columns.to_json(rows) == b",".join(orjson.dumps(expected[i]) for i in rows)
    assert columns.ts_us.tolist() == [e["ts"] for e in expected]
    assert columns.dur_us.tolist() == [e.get("dur", 0.0) for e in expected]
    parsed = parse_trace_proto("h.trace", data)
    assert {(m["pid"], m.get("tid"), m["name"]) for m in parsed.meta} >= {(U64_MAX, 2**63, "thread_name"),
                                                                            (0, None, "process_name")}
    assert parsed.count == 600 and parsed.events == []


def test_args_keep_the_files_order_and_a_repeated_key_its_last_value():
    event = b"".join(tpb.TraceEvent(**fields).SerializeToString() for fields in (
        {"name": "op", "timestamp_ps": 2_000_000, "duration_ps": 1_000_000, "args": {"b": "1"}},
        {"args": {"a": "2"}}, {"args": {"b": "3"}}, {"args": {"": ""}},
    ))  # protobuf merges concatenated messages: map entries b, a, b, "" in this order
    columns, _ = decode_trace_events(_field(4, event))
    assert orjson.loads(b"[" + columns.to_json(np.arange(1)) + b"]") == [
        {"pid": 0, "tid": 0, "name": "op", "ts": 2.0, "ph": "X", "dur": 1.0, "args": {"b": "3", "a": "2", "": ""}}]
    assert columns.to_json(np.arange(1)).endswith(b'"args":{"b":"3","a":"2","":""}}')
    assert dict(tpb.TraceEvent.FromString(event).args) == {"b": "3", "a": "2", "": ""}  # protobuf's values


@pytest.mark.parametrize("count, distinct", [(17, 5), (3000, 2999), (20_000, 300)])
def test_an_event_with_many_args_keeps_the_same_rule(count, distinct):
    """Past a few args the repeated keys are found by sorting them (comparing each with the earlier ones
    took 20 s for an event of 32,768 args): first place, last value, as a dict built from the entries."""
    keys = [f"k{(i * 7919) % distinct}" if i % 3 else f"k{i % distinct}" for i in range(count)]
    keys[-1] = ""
    event = tpb.TraceEvent(name="op", timestamp_ps=1, duration_ps=1).SerializeToString() + b"".join(
        tpb.TraceEvent(args={k: f"v{i}"}).SerializeToString() for i, k in enumerate(keys))
    columns, _ = decode_trace_events(_field(4, event))
    expected: dict[str, str] = {}
    for i, k in enumerate(keys):
        expected[k] = f"v{i}"
    args = orjson.loads(b"[" + columns.to_json(np.arange(1)) + b"]")[0]["args"]
    assert list(args.items()) == list(expected.items())


def test_malformed_bytes_are_refused_where_protobuf_refuses_them():
    data = _edge_trace().SerializeToString()
    verdicts = []
    for cut in range(0, len(data), 97):
        for blob in (data[:cut], data[:cut] + b"\x80", data[:cut] + b"\x0f"):
            try:
                expected = len(tpb.Trace.FromString(blob).trace_events)
            except DecodeError:
                expected = None
            try:
                got = len(decode_trace_events(blob)[0])
            except TraceDecodeError:
                got = None
            verdicts.append((cut, expected, got))
    assert all(expected == got for _cut, expected, got in verdicts), [v for v in verdicts if v[1] != v[2]][:3]
    assert any(expected is None for _cut, expected, _got in verdicts)


@pytest.mark.parametrize("name", [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xe2\x82"])
def test_a_name_that_is_not_utf8_makes_the_file_an_error(name):
    data = _field(4, _field(3, name))
    with pytest.raises(DecodeError):
        tpb.Trace.FromString(data)
    with pytest.raises(CaptureError, match=r"cannot be decoded as a Trace protobuf \(a string field is not valid"):
        parse_trace_proto("h.trace", data)
    assert len(decode_trace_events(_field(4, _field(3, "é☃\U0001f600".encode())))[0]) == 1
