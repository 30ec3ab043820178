"""Timelines that older profilers wrote as files of their own, read as Chrome trace events.

Four formats, one result (`ChromeTrace`, one input file's events):

- `<host>.trace.json.gz` (TF 2.2-2.3's profiler) and ProfilerHook's
  `timeline-<step>.json[.gz]` (TF 1.x step stats): Chrome trace JSON already,
  a `{"traceEvents": [...]}` document or a bare event list. The events are
  kept as the file has them; only the empty `{}` that TensorFlow's writer
  appends to close its list (it is not an event) is dropped.
- `<host>.trace` (Cloud TPU `capture_tpu_profile`): a serialized
  `tensorflow.profiler.Trace` proto (schema subset: `proto/trace_events.proto`),
  converted the way TensorBoard's profile plugin of the day did
  (`trace_events_json.py`): one process per device (pid = its key in the
  `devices` map, sorted by it), one thread per resource (tid = its key), `X`
  events with ts/dur in µs (picoseconds / 10^6, divided exactly), instant `i`
  events (scope `t`) where the duration is 0, and the event's `args` map as
  its args. Its events stay columns (`trace_proto.py`) until written.
- `<host>.tracetable` (Cloud TPU `capture_tpu_profile` 1.9's streaming trace):
  a LevelDB table (`sstable.py`) of the same protos: the entry keyed
  `trace` (`/trace` in XProf's later tables) holds a `Trace` with the
  devices, and every other entry one `TraceEvent`, keyed by its zoom level
  (one character), its start time (8 bytes, big-endian) and a tie-break, so
  that the streaming viewer could read a time window at a resolution. Each
  event is stored once, at the coarsest level it shows at. The events are
  read in table order and converted exactly as a `.trace` file's (the export
  orders them by time); keys are not interpreted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import pandas as pd
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from reportgen.errors import CaptureError
from reportgen.legacy.sstable import TableError, read_table, values_as_field
from reportgen.legacy.trace_proto import TRACE_EVENTS as TRACE_EVENTS_FIELD
from reportgen.legacy.trace_proto import TraceDecodeError, TraceEventColumns, decode_trace_events
from reportgen.loaders import limits
from reportgen.loaders.logdir import file_name
from reportgen.loaders.older_formats import TRACE_PROTO_SUFFIX, TRACETABLE_SUFFIX
from reportgen.loaders.proto import trace_events_pb2

# Memory per Cloud TPU trace event and per arg: their columns, and their share of a chunk's JSON.
TRACE_EVENT_COST = 300
TRACE_ARG_COST = 100

# The entry of a .tracetable that holds the Trace (devices and resources); XProf's later tables use "/trace".
TRACETABLE_METADATA_KEYS = (b"trace", b"/trace")

@dataclass
class ChromeTrace:
    """One input file's trace: its header, its metadata events and its other events.

    Chrome JSON files keep their events as the dicts read; a Trace proto keeps
    them as columns (`columns`, `events` then empty), written out by
    `to_json` without a dict per event.
    """

    source: str  # the file's name
    head: dict = field(default_factory=dict)  # top-level keys other than traceEvents (displayTimeUnit, metadata, …)
    meta: list[dict] = field(default_factory=list)  # `ph: "M"` events (process/thread names and sort order)
    events: list[dict] = field(default_factory=list)  # every other event, in file order
    # Per event: start and duration in µs (NaN start: the event has no `ts`;
    # 0 duration: it has no `dur`).
    ts_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dur_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    columns: TraceEventColumns | None = None  # a Trace proto's events

    @property
    def end_us(self) -> np.ndarray:
        return self.ts_us + self.dur_us

    @property
    def count(self) -> int:
        """Events other than metadata."""
        return len(self.columns) if self.columns is not None else len(self.events)

    def phases(self) -> tuple[np.ndarray, int]:
        """(which events are complete `X` events, how many are flow events `s`/`t`/`f`)."""
        if self.columns is not None:  # a Trace proto: spans, and instants where the duration is 0
            return self.columns.duration_ps != 0, 0
        phases = [e["ph"] for e in self.events]
        complete = np.fromiter((p == "X" for p in phases), dtype=bool, count=len(phases))
        return complete, sum(1 for p in phases if p in ("s", "t", "f"))

    def threads(self, rows: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
        """(code per row, (pid, tid) per code): codes number the threads in order of first appearance."""
        if self.columns is not None:
            # factorize numbers values in order of first appearance: per id, then per pair of id codes.
            pid_codes, pids = pd.factorize(self.columns.device_id[rows])
            tid_codes, tids = pd.factorize(self.columns.resource_id[rows])
            codes, pairs = pd.factorize(pid_codes.astype(np.int64) * len(tids) + tid_codes)
            keys = [(int(pids[p // len(tids)]), int(tids[p % len(tids)])) for p in pairs.tolist()]
            return codes.astype(np.int64), keys
        events = self.events
        seen: dict[tuple, int] = {}
        codes = np.fromiter((seen.setdefault((events[i].get("pid"), events[i].get("tid")), len(seen))
                             for i in rows.tolist()), dtype=np.int64, count=len(rows))
        return codes, list(seen)

    def to_json(self, rows: np.ndarray) -> bytes:
        """Events `rows`, in that order, as comma-separated JSON objects."""
        if self.columns is not None:
            return self.columns.to_json(rows)
        return orjson.dumps([self.events[i] for i in rows.tolist()])[1:-1]


def parse_chrome_trace(path: str, data: bytes) -> ChromeTrace:
    """A Chrome trace JSON file (gzip when its name ends in .gz); CaptureError names the file otherwise."""
    if path.endswith(".gz"):
        data = limits.gunzip(path, data)
    if not data.strip():
        raise CaptureError(path, "is empty: no Chrome trace in it")
    limits.check_json(path, data)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CaptureError(path, f"is not JSON ({exc})") from exc
    if isinstance(doc, list):
        head, events = {}, doc
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = doc.pop("traceEvents")
        head = doc
    else:
        raise CaptureError(path, "is not a Chrome trace (neither a traceEvents list nor a list of events)")
    if not all(isinstance(e, dict) for e in events):
        raise CaptureError(path, "is not a Chrome trace (an entry of traceEvents is not an object)")
    if head.get("metadata") is not None and not isinstance(head["metadata"], dict):
        head["metadata"] = {"metadata": head["metadata"]}  # kept, but as an object so ours can join it
    meta = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e and e.get("ph") != "M"]
    if any("ph" not in e for e in rest):
        raise CaptureError(path, "is not a Chrome trace (an event has no 'ph' phase)")
    try:
        rows = len({(e.get("pid"), e.get("tid")) for e in rest if e.get("ph") == "X"})
    except TypeError as exc:  # an object or a list where a number or a name belongs
        raise CaptureError(path, "is not a Chrome trace (an event's pid or tid is neither a number nor a "
                                 "string)") from exc
    limits.check_trace_rows(path, len(rest), rows)
    ts, dur = _times(path, rest)
    return ChromeTrace(source=file_name(path), head=head, meta=meta, events=rest, ts_us=ts, dur_us=dur)


def _times(path: str, events: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    try:
        ts = np.array([e.get("ts") for e in events], dtype=np.float64)
        dur = np.array([e.get("dur", 0.0) for e in events], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CaptureError(path, f"is not a Chrome trace (an event's ts or dur is not a number: {exc})") from exc
    return ts.reshape(len(events)), np.nan_to_num(dur.reshape(len(events)), nan=0.0)


def parse_trace_proto(path: str, data: bytes, what: str = "a Trace protobuf") -> ChromeTrace:
    """A Cloud TPU `.trace` file (serialized `Trace` proto) as Chrome trace events, kept as columns."""
    try:
        columns, device_fields = decode_trace_events(data, lambda events, args: limits.check(
            path, len(data) + events * TRACE_EVENT_COST + args * TRACE_ARG_COST,
            f"{events:,} trace events with {args:,} args"))
        devices = trace_events_pb2.Trace.FromString(device_fields).devices
    except (TraceDecodeError, DecodeError) as exc:
        raise CaptureError(path, f"cannot be decoded as {what} ({exc})") from exc
    if not devices and not len(columns):
        raise CaptureError(path, f"holds no devices and no trace events (not {what}?)")
    spans = columns.duration_ps != 0
    limits.check_trace_rows(path, len(columns), len(np.unique(
        np.stack([columns.device_id[spans], columns.resource_id[spans]], axis=1), axis=0)) if spans.any() else 0)
    meta: list[dict] = []
    for did, device in sorted(devices.items()):  # one turn per device and resource, never per event
        if device.name:
            meta.append({"ph": "M", "pid": did, "name": "process_name", "args": {"name": device.name}})
        meta.append({"ph": "M", "pid": did, "name": "process_sort_index", "args": {"sort_index": did}})
        for rid, resource in sorted(device.resources.items()):
            if resource.name:
                meta.append({"ph": "M", "pid": did, "tid": rid, "name": "thread_name",
                             "args": {"name": resource.name}})
            meta.append({"ph": "M", "pid": did, "tid": rid, "name": "thread_sort_index",
                         "args": {"sort_index": rid}})
    return ChromeTrace(source=file_name(path), head={"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}},
                       meta=meta, ts_us=columns.ts_us, dur_us=columns.dur_us, columns=columns)


def parse_tracetable(path: str, data: bytes) -> ChromeTrace:
    """A `.tracetable` (LevelDB table of a Trace and its TraceEvents) as Chrome trace events.

    The table's Trace and events are put back together as the one serialized
    Trace a `.trace` file holds (a Trace's events are its repeated field 4, so
    the bytes are the metadata entry followed by one field-4 record per
    event) and converted by the same code.
    """
    try:
        table = read_table(data, lambda size: limits.check(
            path, len(data) + 2 * size, f"its blocks decompress to {limits.format_bytes(size)}"))
    except TableError as exc:
        # Every TableError is a whole clause with its own subject (the file, a block, an entry).
        raise CaptureError(path, f"cannot be read as a LevelDB table: {exc}") from exc
    is_metadata = np.zeros(len(table), dtype=bool)
    for i in np.flatnonzero(np.isin(table.entries[:, 1], [len(k) for k in TRACETABLE_METADATA_KEYS])).tolist():
        is_metadata[i] = table.key(i) in TRACETABLE_METADATA_KEYS  # event keys are 10 bytes: few candidates
    if not is_metadata.any():
        keys = ", ".join(repr(table.key(i)) for i in range(min(3, len(table)))) or "none"
        raise CaptureError(path, f"is a LevelDB table without the 'trace' entry of a .tracetable (first keys: {keys})")
    events = np.flatnonzero(~is_metadata)
    _check_event_layout(path, [table.value(i) for i in events[:64]])
    trace = table.value(int(np.flatnonzero(is_metadata)[0])) + values_as_field(table, events, TRACE_EVENTS_FIELD)
    return parse_trace_proto(path, trace, what="a .tracetable's Trace and TraceEvents")


def _check_event_layout(path: str, sample: list[bytes]) -> None:
    """XProf's later tables keep a TraceEvent's start and duration in fields 6 and 7 (TensorFlow 1.x's in
    9 and 10): read as 1.x events they would all start at 0, so they are refused by name."""
    for value in sample:
        try:
            event = trace_events_pb2.TraceEvent.FromString(value)
        except DecodeError as exc:
            raise CaptureError(path, f"holds an entry that is not a TraceEvent protobuf ({exc})") from exc
        later = {f.field_number for f in UnknownFieldSet(event)} & {6, 7}
        if later and not event.timestamp_ps and not event.duration_ps:
            raise CaptureError(path, "holds TraceEvents in XProf's later layout (times in fields 6 and 7), "
                                     "not capture_tpu_profile 1.9's: this reader does not convert those")


def read_trace(path: str, data: bytes) -> ChromeTrace:
    """Decode one timeline file by its name."""
    if path.endswith(TRACE_PROTO_SUFFIX):
        return parse_trace_proto(path, data)
    if path.endswith(TRACETABLE_SUFFIX):
        return parse_tracetable(path, data)
    return parse_chrome_trace(path, data)
