"""A host's trace as one native Perfetto file (`.pftrace`), written as a stream.

Layout: a first packet that starts the sequence, one track per process
(ProcessDescriptor with XProf's pid and name) whose child tracks are the
threads in XProf's order (named tracks; thread ids above 2^31 do not fit
Perfetto's ThreadDescriptor), the interned names and strings, then each
thread's slices. Counter lines become counter tracks of their process.
Perfetto times are integral nanoseconds: picoseconds are floored, which keeps
nesting (flooring is monotonic).

Small packets (descriptors, interned data) are encoded here; the events go
through the compiled encoder in `perfetto_kernel`, a buffer at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.capture import KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64
from reportgen.export.layout import TraceProcess
from reportgen.export.perfetto_kernel import (
    SEQ_INCREMENTAL_STATE_CLEARED,
    SEQ_NEEDS_INCREMENTAL_STATE,
    SEQUENCE_ID,
    encode_interned,
    slice_lanes,
    write_packets,
)
from reportgen.export.stat_select import first_per_owner
from reportgen.export.tables import ROLE_HIDDEN, TraceTables

BUFFER_BYTES = 8 << 20
INTERNED_PACKET_BYTES = 1 << 20
CHILD_ORDERING_EXPLICIT = 3


# --- tiny protobuf encoder for the few structural packets ---------------------------
def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def f_varint(field: int, v: int) -> bytes:
    return _key(field, 0) + _varint(v)


def f_bytes(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def packet(body: bytes) -> bytes:
    """A `Trace.packet` entry."""
    return f_bytes(1, body)


def _sequence(flags: int) -> bytes:
    return f_varint(10, SEQUENCE_ID) + f_varint(13, flags)


def first_packet() -> bytes:
    return packet(f_varint(10, SEQUENCE_ID) + f_varint(87, 1) + f_varint(13, SEQ_INCREMENTAL_STATE_CLEARED))


def track_descriptor(uuid: int, *, name: str | None = None, parent: int | None = None,
                     process: tuple[int, str] | None = None, rank: int | None = None,
                     counter: bool = False) -> bytes:
    body = f_varint(1, uuid)
    if parent is not None:
        body += f_varint(5, parent)
    if name is not None:
        body += f_bytes(2, name.encode("utf-8"))
    if process is not None:
        pid, pname = process
        body += f_bytes(3, f_varint(1, pid) + f_bytes(6, pname.encode("utf-8")))
        body += f_varint(11, CHILD_ORDERING_EXPLICIT)
    if counter:
        body += f_bytes(8, b"")
    if rank is not None:
        body += f_varint(12, rank)
    return packet(f_bytes(60, body))


def interned_packets(tables: TraceTables, name_sids: np.ndarray, key_sids: np.ndarray,
                     value_sids: np.ndarray) -> list[bytes]:
    """InternedData (event names, arg names, string values), iid = string id + 1, in ~1 MB packets."""
    data, off = tables.pool.utf8_fragments()
    packets = []
    # InternedData fields: event_names 2, debug_annotation_names 3, debug_annotation_string_values 29.
    for field, sids in ((2, name_sids), (3, key_sids), (29, value_sids)):
        key = np.frombuffer(_key(field, 2), dtype=np.uint8)
        sids = sids.astype(np.int64)
        sizes = off[sids + 1] - off[sids] + 24
        groups = np.cumsum(sizes) // INTERNED_PACKET_BYTES
        for g in np.unique(groups):
            part = sids[groups == g]
            out = np.empty(int(sizes[groups == g].sum()) + 16, dtype=np.uint8)
            n = encode_interned(key, part, data, off, out)
            packets.append(packet(_sequence(SEQ_NEEDS_INCREMENTAL_STATE) + f_bytes(12, out[:n].tobytes())))
    return packets


# --- what to intern ------------------------------------------------------------------
STAT_BLOCK = 1 << 20  # stats scanned per block when collecting the strings to intern


def _strings_used(tables: TraceTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """String ids of event names, shown arg names and string arg values (marked block by block:
    a capture can hold tens of millions of stats)."""
    cap = tables.capture
    n = tables.n_events
    rows = tables.exported
    names = np.zeros(len(tables.pool), dtype=bool)
    names[tables.name_sid[rows[rows < n]]] = True
    names[tables.synthetic.name_sid] = True
    keys = np.zeros(len(tables.pool), dtype=bool)
    values = np.zeros(len(tables.pool), dtype=bool)
    for stats in (cap.event_stats, cap.metadata_stats):
        for a in range(0, len(stats), STAT_BLOCK):
            key = stats.key[a:a + STAT_BLOCK]
            shown = tables.role[key] != ROLE_HIDDEN
            keys[key[shown]] = True
            kind, sid = stats.kind[a:a + STAT_BLOCK], stats.str_id[a:a + STAT_BLOCK]
            values[sid[shown & ((kind == KIND_STR) | (kind == KIND_REF)) & (sid >= 0)]] = True
    keys[tables.long_name_sid] = True
    values[tables.md_long_sid[tables.md_long_sid >= 0]] = True
    return np.flatnonzero(names), np.flatnonzero(keys), np.flatnonzero(values)


class _Uuids:
    """Track uuids: small consecutive numbers, so that each event's varint stays one or two bytes."""

    def __init__(self):
        self.last = 0

    def __call__(self) -> int:
        self.last += 1
        return self.last


@dataclass
class WrittenPftrace:
    events: int
    file_bytes: int
    lanes: int  # tracks used for events (threads plus overlap lanes)


class _Stream:
    def __init__(self, path: str):
        self.file = open(path, "wb")

    def write(self, data) -> None:
        self.file.write(data)

    def close(self) -> int:
        size = self.file.tell()
        self.file.close()
        return size


def _kernel_tables(tables: TraceTables) -> tuple:
    cap = tables.capture
    cols = tables.columns
    es, ms = cap.event_stats, cap.metadata_stats
    syn = tables.synthetic
    return (
        cols.ev_md, cols.ev_start, cols.ev_duration, tables.name_sid,
        tables.flows.flow_id, tables.flows.flow_bits,
        tables.md_long_sid, tables.md_stat_start, ms.key, ms.kind, ms.raw, ms.str_id,
        tables.ev_stat_start, es.key, es.kind, es.raw, es.str_id, tables.role, tables.long_name_sid,
        syn.start_ps, syn.duration_ps, syn.name_sid,
    )


def _emit(stream: _Stream, buf: np.ndarray, rec_row, rec_kind, rec_track, kernel: tuple,
          counter_value=None) -> np.ndarray:
    counter_mode = counter_value is not None
    values = counter_value if counter_mode else np.zeros(1, np.float64)
    i = 0
    while i < len(rec_row):
        n, nxt = write_packets(rec_row, rec_kind, rec_track, i, len(rec_row), buf, *kernel, values, counter_mode)
        if nxt == i:
            buf = np.empty(len(buf) * 4, dtype=np.uint8)
            continue
        stream.write(buf[:n].tobytes())
        i = nxt
    return buf


def _counter_values(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    """A counter sample's value: its first numeric arg (metadata stats first, as the args)."""
    cap = tables.capture
    values = np.zeros(len(rows), dtype=np.float64)
    found = np.zeros(len(rows), dtype=bool)
    md = tables.columns.ev_md[rows]
    for stats, owners in ((cap.metadata_stats, md), (cap.event_stats, rows)):
        numeric = ((stats.kind == KIND_INT64) | (stats.kind == KIND_UINT64) | (stats.kind == KIND_DOUBLE)) & (
            tables.role[stats.key] != ROLE_HIDDEN)
        own, first = first_per_owner(stats.owner[numeric])
        if len(own) == 0:
            continue
        vals = stats.select(numeric).double_values()[first]
        pos = np.minimum(np.searchsorted(own, owners), len(own) - 1)
        hit = (own[pos] == owners) & ~found
        values[hit] = vals[pos[hit]]
        found |= hit
    return values


def write_pftrace(path: str, tables: TraceTables, buffer_bytes: int = BUFFER_BYTES) -> WrittenPftrace:
    stream = _Stream(path)
    lanes_total = 0
    try:
        stream.write(first_packet())
        names, keys, values = _strings_used(tables)
        for p in interned_packets(tables, names, keys, values):
            stream.write(p)
        kernel = _kernel_tables(tables)
        buf = np.empty(buffer_bytes, dtype=np.uint8)
        uuid = _Uuids()

        for proc in tables.layout.processes:
            proc_uuid = uuid()
            stream.write(track_descriptor(proc_uuid, process=(proc.pid, proc.name)))
            for rank, thread in enumerate(proc.sorted_threads()):
                rows = tables.rows_on_lines(thread.lines)
                start, end = tables.start_ps(rows), tables.end_ps(rows)
                order = np.lexsort((-end, start))
                rows, start, end = rows[order], start[order], end[order]
                rec_idx, rec_kind, rec_lane, lanes = slice_lanes(start, end)
                lane_uuid = np.array([uuid() for _ in range(max(lanes, 1))], dtype=np.uint64)
                for lane in range(max(lanes, 1)):
                    label = thread.name if lane == 0 else f"{thread.name} (overlapping {lane})"
                    stream.write(track_descriptor(int(lane_uuid[lane]), name=label, parent=proc_uuid,
                                                  rank=rank * 1024 + min(lane, 1023)))
                lanes_total += lanes
                if len(rows):
                    buf = _emit(stream, buf, rows[rec_idx], rec_kind, lane_uuid[rec_lane], kernel)
            buf = _write_counters(stream, buf, tables, proc, proc_uuid, kernel, uuid)
    finally:
        size = stream.close()
    return WrittenPftrace(events=tables.event_total, file_bytes=size, lanes=lanes_total)


def _write_counters(stream: _Stream, buf: np.ndarray, tables: TraceTables, proc: TraceProcess, proc_uuid: int,
                    kernel: tuple, uuid: _Uuids) -> np.ndarray:
    if not proc.counter_lines:
        return buf
    rows = tables.rows_on_lines(proc.counter_lines)
    rows = rows[rows < tables.n_events]
    if len(rows) == 0:
        return buf
    rows = rows[np.argsort(tables.start_ps(rows), kind="stable")]
    names = tables.name_sid[rows]
    uuids = np.zeros(len(rows), dtype=np.uint64)
    for sid in np.unique(names).tolist():
        track = uuid()
        stream.write(track_descriptor(track, name=tables.pool.text(sid), parent=proc_uuid, counter=True))
        uuids[names == sid] = track
    kinds = np.full(len(rows), 1, dtype=np.int8)
    return _emit(stream, buf, rows, kinds, uuids, kernel, _counter_values(tables, rows))
