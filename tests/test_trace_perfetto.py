"""The native Perfetto export, decoded with Perfetto's own protos (the perfetto package).

Perfetto's trace processor needs a binary that cannot be installed here, so the file is checked by
decoding every packet with perfetto_trace_pb2 (no unknown fields: the field numbers are Perfetto's)
and by replaying each track's slices the way the processor does (an END closes the innermost open
slice of its track).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from reportgen.export.host_export import export_host
from reportgen.loaders.xspace import decode_xspace
from tests.chrome_json import named_events, read_chunk
from tests.conftest import host_files, needs_shared
from tests.test_trace_parity import added_rows
from tests.xspace import Space

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
unknown_fields = pytest.importorskip("google.protobuf.unknown_fields")

SAMPLE = Path(__file__).resolve().parent.parent / "reportgen" / "sample" / "plugins" / "profile"
NS = 1000


class Decoded:
    """A .pftrace replayed: slices per track with names, args and flows resolved."""

    def __init__(self, path: Path):
        trace = pb.Trace()
        trace.ParseFromString(path.read_bytes())
        self.packets = list(trace.packet)
        self.names, self.arg_names, self.strings = {}, {}, {}
        self.tracks = {}  # uuid → descriptor
        self.slices = []  # (track uuid, name, begin ns, end ns, args, flow_out ids, flow_in ids)
        self.counters = defaultdict(list)
        open_slices = defaultdict(list)
        for packet in self.packets:
            assert len(unknown_fields.UnknownFieldSet(packet)) == 0
            if packet.HasField("interned_data"):
                data = packet.interned_data
                self.names.update({e.iid: e.name for e in data.event_names})
                self.arg_names.update({e.iid: e.name for e in data.debug_annotation_names})
                self.strings.update({e.iid: e.str.decode() for e in data.debug_annotation_string_values})
            if packet.HasField("track_descriptor"):
                self.tracks[packet.track_descriptor.uuid] = packet.track_descriptor
            if not packet.HasField("track_event"):
                continue
            event = packet.track_event
            assert len(unknown_fields.UnknownFieldSet(event)) == 0
            assert event.track_uuid in self.tracks, "a track is described before its events"
            assert packet.trusted_packet_sequence_id == 1
            if event.type == pb.TrackEvent.TYPE_COUNTER:
                self.counters[event.track_uuid].append((packet.timestamp, event.double_counter_value))
            elif event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                assert event.name_iid in self.names, "names are interned before use"
                args = {}
                for a in event.debug_annotations:
                    value = a.WhichOneof("value")
                    args[self.arg_names[a.name_iid]] = (
                        self.strings[a.string_value_iid] if value == "string_value_iid" else getattr(a, value))
                open_slices[event.track_uuid].append(
                    [event.track_uuid, self.names[event.name_iid], packet.timestamp, None, args,
                     tuple(event.flow_ids), tuple(event.terminating_flow_ids)])
            else:
                assert event.type == pb.TrackEvent.TYPE_SLICE_END
                top = open_slices[event.track_uuid].pop()
                assert packet.timestamp >= top[2]
                top[3] = packet.timestamp
                # The processor closes the innermost slice: it must lie inside its parent.
                if open_slices[event.track_uuid]:
                    assert open_slices[event.track_uuid][-1][2] <= top[2]
                self.slices.append(tuple(top))
        assert not any(open_slices.values()), "every slice is closed"

    def thread_of(self, uuid: int) -> str:
        return self.tracks[uuid].name.split(" (overlapping")[0]

    def process_of(self, uuid: int) -> str:
        return self.tracks[self.tracks[uuid].parent_uuid].process.process_name


def _ns(us: float) -> int:
    return round(us * 1e6) // 1000


@pytest.fixture(scope="module")
def sample_export(tmp_path_factory):
    path = SAMPLE / "tf_keras_fast" / "vm.xplane.pb"
    out = tmp_path_factory.mktemp("trace") / "vm"
    result = export_host(decode_xspace(str(path), path.read_bytes()), "tf_keras_fast", out, trace_format="both")
    events = []
    for chunk in result.chunks:
        if chunk.format == "json.gz":
            events.extend(named_events(read_chunk(out.parent / chunk.file)))
    (pftrace,) = [c for c in result.chunks if c.format == "pftrace"]
    return result, events, Decoded(out.parent / pftrace.file)


def test_pftrace_holds_the_json_events(sample_export):
    result, events, decoded = sample_export
    assert len(decoded.slices) == result.events == len(events)
    from_json = Counter((e["process"], e["thread"], e["name"], _ns(e["ts"]), _ns(e["ts"] + e["dur"]))
                        for e in events)
    from_proto = Counter((decoded.process_of(s[0]), decoded.thread_of(s[0]), s[1], s[2], s[3])
                         for s in decoded.slices)
    # JSON durations are at least 1 ps; the end can round one ns apart. Compare starts exactly.
    assert Counter(k[:4] for k in from_json) == Counter(k[:4] for k in from_proto)


def test_pftrace_args_and_flows_match_json(sample_export):
    _, events, decoded = sample_export
    by_key = {(e["thread"], e["name"], _ns(e["ts"])): e for e in events}
    checked = 0
    for s in decoded.slices:
        e = by_key[(decoded.thread_of(s[0]), s[1], s[2])]
        # JSON quotes integers beyond 2^53 (as XProf does); the proto keeps them as integers.
        proto_args = {k: str(v) if isinstance(v, int) and abs(v) > 2**53 else v for k, v in s[4].items()}
        assert proto_args == e.get("args", {})
        checked += bool(s[4])
    assert checked > 1000
    json_groups = defaultdict(set)
    for e in events:
        if "bind_id" in e:
            json_groups[e["bind_id"]].add((e["thread"], e["name"], _ns(e["ts"]), bool(e.get("flow_out"))))
    proto_groups = defaultdict(set)
    for s in decoded.slices:
        for fid in s[5]:
            proto_groups[fid].add((decoded.thread_of(s[0]), s[1], s[2], True))
        for fid in s[6]:
            proto_groups[fid].add((decoded.thread_of(s[0]), s[1], s[2], False))
    assert sorted(map(sorted, json_groups.values())) == sorted(map(sorted, proto_groups.values()))
    assert len(proto_groups) == 1348


def test_pftrace_processes_and_thread_order(sample_export):
    _, events, decoded = sample_export
    processes = [t for t in decoded.tracks.values() if t.HasField("process")]
    assert [(p.process.pid, p.process.process_name) for p in processes] == [(1701, "vm /host:CPU")]
    threads = sorted((t for t in decoded.tracks.values() if t.parent_uuid), key=lambda t: t.sibling_order_rank)
    json_threads = [e for e in events if e["name"]]
    assert len({e["thread"] for e in json_threads}) == len({t.name.split(" (")[0] for t in threads})


def test_overlapping_events_get_lanes_and_counters_get_tracks(tmp_path):
    space = Space()
    tpu = space.plane("/device:TPU:0", plane_id=0)
    ops = tpu.line(3, "XLA Ops")
    ops.event("outer", 0, 100 * NS)
    ops.event("inner", 10 * NS, 20 * NS)
    ops.event("crossing", 50 * NS, 100 * NS)  # overlaps outer without nesting
    ops.event("after", 200 * NS, 0)
    counters = tpu.line(9, "_counters_")
    counters.event("HBM", 0, 0, bytes_in_use=5)
    counters.event("HBM", 3 * NS, 0, bytes_in_use=7.5)
    out = tmp_path / "testhost"
    result = export_host(space.capture(), "run", out, trace_format="perfetto")
    assert [c.format for c in result.chunks] == ["pftrace"]
    decoded = Decoded(out.parent / result.chunks[0].file)
    lanes = {s[1]: decoded.tracks[s[0]].name for s in decoded.slices}
    assert lanes == {"outer": "XLA Ops", "inner": "XLA Ops", "crossing": "XLA Ops (overlapping 1)", "after": "XLA Ops"}
    spans = {s[1]: (s[2], s[3]) for s in decoded.slices}
    assert spans == {"outer": (0, 100), "inner": (10, 30), "crossing": (50, 150), "after": (200, 200)}
    ((uuid, samples),) = decoded.counters.items()
    assert decoded.tracks[uuid].name == "HBM" and decoded.tracks[uuid].HasField("counter")
    assert samples == [(0, 5.0), (3, 7.5)]


@needs_shared
def test_the_rows_xprof_derives_on_tpu_cores_are_in_the_pftrace_too(tmp_path):
    """tpu_inference_2: Framework Ops, Framework Name Scope, Source code and Host Offload Ops rows hold the
    same events in the .pftrace as in the JSON chunks."""
    (path,) = host_files("tpu_inference_2")
    capture = decode_xspace(str(path), path.read_bytes())
    result = export_host(capture, "tpu_inference_2", tmp_path / capture.host, trace_format="both",
                         added=added_rows(capture))
    events = [e for c in result.chunks if c.format == "json.gz"
              for e in named_events(read_chunk(tmp_path / c.file))]
    (pftrace,) = [c for c in result.chunks if c.format == "pftrace"]
    decoded = Decoded(tmp_path / pftrace.file)
    derived = ("Framework Ops", "Framework Name Scope", "Source code", "Host Offload Ops")
    from_json = Counter((e["process"], e["thread"], e["name"], _ns(e["ts"])) for e in events
                        if e["thread"] and e["thread"].startswith(derived))
    from_proto = Counter((decoded.process_of(s[0]), decoded.thread_of(s[0]), s[1], s[2]) for s in decoded.slices
                         if decoded.thread_of(s[0]).startswith(derived))
    assert from_proto == from_json
    per_row = Counter(k[:2] for k in from_proto.elements())
    assert per_row[("tpu_inference_2 /device:TPU:0", "Framework Ops")] == 104
    assert per_row[("tpu_inference_2 /device:TPU:0", "Host Offload Ops row 3")] == 107
