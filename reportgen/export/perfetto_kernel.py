"""Compiled encoder of Perfetto TracePackets (protobuf wire format) for trace events.

Every event becomes a TrackEvent slice: a SLICE_BEGIN packet (name, args as
debug annotations, flow ids) and a SLICE_END packet on the same track.
Perfetto closes the innermost open slice of a track at each END, so events
that overlap without nesting (async copies, clock jitter) go to extra lanes of
their line: `slice_lanes` assigns them and orders each lane's BEGIN/END
records; a lane is one track. Names, arg names and string values are interned
(the caller writes the InternedData first), so an event costs a few dozen bytes.

Field numbers are those of perfetto/trace/trace_packet.proto and
track_event/track_event.proto (checked against the perfetto package's
descriptors in the tests).
"""

from __future__ import annotations

import numpy as np

from reportgen.capture import KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64
from reportgen.export.tables import ROLE_HIDDEN
from reportgen.kernels import helper_kernel, kernel

SEQUENCE_ID = 1
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

TYPE_SLICE_BEGIN = 1
TYPE_SLICE_END = 2
TYPE_COUNTER = 4

REC_BEGIN = 1
REC_END = 2


@helper_kernel()
def _varint(out, pos, v):
    v = np.uint64(v)
    while v >= np.uint64(0x80):
        out[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v = v >> np.uint64(7)
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


@helper_kernel()
def _varint_len(v):
    v = np.uint64(v)
    n = 1
    while v >= np.uint64(0x80):
        v = v >> np.uint64(7)
        n += 1
    return n


@helper_kernel()
def _fixed64(out, pos, v):
    v = np.uint64(v)
    for k in range(8):
        out[pos + k] = np.uint8((v >> np.uint64(8 * k)) & np.uint64(0xFF))
    return pos + 8


@helper_kernel()
def _copy(out, pos, src, n):
    dst = out[pos:pos + n]  # views indexed by the loop counter copy without per-byte index wrapping
    for k in range(n):
        dst[k] = src[k]
    return pos + n


@kernel()
def slice_lanes(start, end):
    """Lanes for intervals sorted by (start asc, end desc): each lane is properly nested.

    Returns (record index into the inputs, record kind BEGIN/END, lane), 2 records
    per interval, in an order that is valid for every lane taken alone.
    """
    n = len(start)
    rec_idx = np.empty(2 * n, np.int64)
    rec_kind = np.empty(2 * n, np.int8)
    rec_lane = np.empty(2 * n, np.int32)
    parent = np.empty(n, np.int64)
    top = np.full(n + 1, -1, np.int64)
    lanes = 0
    r = 0
    for i in range(n):
        placed = -1
        for lane in range(lanes):
            t = top[lane]
            while t >= 0 and end[t] <= start[i]:
                rec_idx[r] = t
                rec_kind[r] = REC_END
                rec_lane[r] = lane
                r += 1
                t = parent[t]
            top[lane] = t
            if t < 0 or end[i] <= end[t]:
                placed = lane
                break
        if placed < 0:
            placed = lanes
            lanes += 1
        parent[i] = top[placed]
        top[placed] = i
        rec_idx[r] = i
        rec_kind[r] = REC_BEGIN
        rec_lane[r] = placed
        r += 1
    for lane in range(lanes):
        t = top[lane]
        while t >= 0:
            rec_idx[r] = t
            rec_kind[r] = REC_END
            rec_lane[r] = lane
            r += 1
            t = parent[t]
    return rec_idx, rec_kind, rec_lane, lanes


@kernel()
def encode_interned(field_key, sids, data, off, out):
    """Interned entries `{iid: sid + 1, name/str: text}` under field key bytes `field_key`; returns length."""
    pos = 0
    for sid in sids:
        n = off[sid + 1] - off[sid]
        iid = sid + 1
        inner = 1 + _varint_len(iid) + 1 + _varint_len(n) + n
        pos = _copy(out, pos, field_key, len(field_key))
        pos = _varint(out, pos, inner)
        out[pos] = 0x08
        pos = _varint(out, pos + 1, iid)
        out[pos] = 0x12
        pos = _varint(out, pos + 1, n)
        pos = _copy(out, pos, data[off[sid]:off[sid] + n], n)
    return pos


@helper_kernel()
def _annotation(tmp, name_iid, kind, raw, sid):
    """A DebugAnnotation into tmp; returns its length (0 when the value is not written)."""
    if kind == KIND_STR or kind == KIND_REF:
        if sid < 0:
            return 0
    elif kind != KIND_INT64 and kind != KIND_UINT64 and kind != KIND_DOUBLE:
        return 0
    p = 0
    tmp[p] = 0x08  # name_iid
    p = _varint(tmp, p + 1, name_iid)
    if kind == KIND_INT64:
        tmp[p] = 0x20  # int_value
        p = _varint(tmp, p + 1, np.uint64(raw))
    elif kind == KIND_UINT64:
        tmp[p] = 0x18  # uint_value
        p = _varint(tmp, p + 1, np.uint64(raw))
    elif kind == KIND_DOUBLE:
        tmp[p] = 0x29  # double_value
        p = _fixed64(tmp, p + 1, np.uint64(raw))
    else:
        tmp[p] = 0x88  # string_value_iid (17)
        tmp[p + 1] = 0x01
        p = _varint(tmp, p + 2, sid + 1)
    return p


@helper_kernel()
def _put_annotation(te, q, ann, n):
    te[q] = 0x22  # debug_annotations
    q = _varint(te, q + 1, n)
    return _copy(te, q, ann, n)


@helper_kernel()
def _overridden(key, es_key, e0, e1):
    for j in range(e0, e1):
        if es_key[j] == key:
            return True
    return False


@kernel(nogil=True)
def write_packets(rec_row, rec_kind, rec_track, i0, i1, out,
                  ev_md, ev_start, ev_dur, name_sid, flow_id, flow_bits,
                  md_long_sid, md_stat_start, ms_key, ms_kind, ms_raw, ms_sid,
                  ev_stat_start, es_key, es_kind, es_raw, es_sid, role, long_name_key,
                  syn_start, syn_dur, syn_name_sid, counter_value, counter_mode):
    """Encode records [i0, i1) as `Trace.packet` entries; returns (bytes written, next record).

    rec_row: exported row (≥ n_events: synthetic event); rec_kind: REC_BEGIN/REC_END;
    rec_track: track uuid. In counter mode every record is one counter sample whose
    value is counter_value[i].
    """
    n_events = len(ev_md)
    limit = len(out)
    te = np.empty(1 << 16, np.uint8)
    ann = np.empty(64, np.uint8)
    pos = 0
    i = i0
    while i < i1:
        r = rec_row[i]
        kind = rec_kind[i]
        synthetic = r >= n_events
        md = -1
        e0 = 0
        e1 = 0
        if synthetic:
            j = r - n_events
            start = syn_start[j]
            dur = syn_dur[j]
            name = syn_name_sid[j]
        else:
            md = ev_md[r]
            start = ev_start[r]
            dur = ev_dur[r]
            name = name_sid[r]
            e0 = ev_stat_start[r]
            e1 = ev_stat_start[r + 1]
        n_stats = e1 - e0
        if md >= 0:
            n_stats += md_stat_start[md + 1] - md_stat_start[md]
        bound = 96 + 40 * n_stats
        if bound > len(te):
            te = np.empty(2 * bound, np.uint8)
        if pos + bound + 16 > limit:
            break
        ts = (start + dur if kind == REC_END and not counter_mode else start) // 1000
        if ts < 0:
            ts = 0
        # --- TrackEvent body ---
        q = 0
        te[q] = 0x48  # type
        if counter_mode:
            q = _varint(te, q + 1, 4)
        else:
            q = _varint(te, q + 1, 1 if kind == REC_BEGIN else 2)
        te[q] = 0x58  # track_uuid
        q = _varint(te, q + 1, rec_track[i])
        if counter_mode:
            te[q] = 0xE1  # double_counter_value (44)
            te[q + 1] = 0x02
            q = _fixed64(te, q + 2, np.float64(counter_value[i]).view(np.uint64))
        elif kind == REC_BEGIN:
            te[q] = 0x50  # name_iid
            q = _varint(te, q + 1, name + 1)
            if not synthetic:
                fid = flow_id[r]
                direction = flow_bits[r] & 3
                if direction == 1:  # in: the flow ends here
                    te[q] = 0x81  # terminating_flow_ids (48)
                    te[q + 1] = 0x03
                    q = _fixed64(te, q + 2, fid)
                elif direction != 0:  # out, or passing through
                    te[q] = 0xF9  # flow_ids (47)
                    te[q + 1] = 0x02
                    q = _fixed64(te, q + 2, fid)
                long_sid = md_long_sid[md]
                if long_sid >= 0:
                    n = _annotation(ann, long_name_key + 1, KIND_STR, 0, long_sid)
                    q = _put_annotation(te, q, ann, n)
                for s in range(md_stat_start[md], md_stat_start[md + 1]):
                    key = ms_key[s]
                    if role[key] == ROLE_HIDDEN or _overridden(key, es_key, e0, e1):
                        continue
                    n = _annotation(ann, key + 1, ms_kind[s], ms_raw[s], ms_sid[s])
                    if n:
                        q = _put_annotation(te, q, ann, n)
                for s in range(e0, e1):
                    key = es_key[s]
                    if role[key] == ROLE_HIDDEN:
                        continue
                    n = _annotation(ann, key + 1, es_kind[s], es_raw[s], es_sid[s])
                    if n:
                        q = _put_annotation(te, q, ann, n)
        # --- TracePacket: timestamp, sequence, flags, track_event ---
        body = 1 + _varint_len(ts) + 2 + 2 + 1 + _varint_len(q) + q
        out[pos] = 0x0A  # Trace.packet
        pos = _varint(out, pos + 1, body)
        out[pos] = 0x40  # timestamp
        pos = _varint(out, pos + 1, ts)
        out[pos] = 0x50  # trusted_packet_sequence_id
        out[pos + 1] = SEQUENCE_ID
        out[pos + 2] = 0x68  # sequence_flags
        out[pos + 3] = SEQ_NEEDS_INCREMENTAL_STATE
        pos += 4
        out[pos] = 0x5A  # track_event
        pos = _varint(out, pos + 1, q)
        pos = _copy(out, pos, te, q)
        i += 1
    return pos, i
