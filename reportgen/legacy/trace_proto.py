"""Cloud TPU `.trace` files (a serialized `tensorflow.profiler.Trace`) as event columns, and back out as Chrome JSON.

Building one protobuf object, then one dict, per event costs about 3 µs an
event; a Cloud TPU capture holds millions. `decode_trace_events` walks the
raw bytes with numba instead and keeps each event's fields as numpy columns
(ids, times, where its name and args lie in the file's bytes);
`TraceEventColumns.to_json` writes events from those columns as the Chrome
trace JSON that `orjson.dumps` gives for the event dicts TensorBoard's
converter built (key order, escapes and number formatting included: the
times are formatted by orjson itself, from numpy). Only the few `devices`
(process and thread names) go through protobuf.

Decoding follows protobuf's rules for this schema: the last value of a
repeated singular field wins, fields of another number or wire type are
skipped, strings must be valid UTF-8; a map's entries keep the file's order,
and a key given twice keeps its first place and its last value, as a dict
built from the entries would. (The protobuf runtime's own map iteration
order is seeded per process, so it gave no stable order to follow.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson

from reportgen.kernels import helper_kernel, kernel
from reportgen.loaders.wire import ERR_BAD_WIRE_TYPE, ERR_LENGTH, ERR_TRUNCATED, OK, _skip, _varint

ERR_UTF8 = 101
ERR_FIELD_ZERO = 102
ERROR_TEXT = {
    ERR_TRUNCATED: "the file ends in the middle of a message (truncated?)",
    ERR_BAD_WIRE_TYPE: "invalid protobuf wire type",
    3: "malformed varint",
    ERR_LENGTH: "a length-delimited field runs past its enclosing message",
    ERR_UTF8: "a string field is not valid UTF-8",
    ERR_FIELD_ZERO: "a field numbered 0",
}

# Trace and TraceEvent field numbers (TensorFlow's).
TRACE_DEVICES = 1
TRACE_EVENTS = 4
EVENT_DEVICE_ID = 1
EVENT_RESOURCE_ID = 2
EVENT_NAME = 3
EVENT_TIMESTAMP_PS = 9
EVENT_DURATION_PS = 10
EVENT_ARGS = 11

PS_PER_US = 1_000_000
EXACT_BELOW = 1 << 53  # integers a double holds exactly


class TraceDecodeError(ValueError):
    """The bytes are not a Trace protobuf; the message says where."""


@helper_kernel()
def _utf8_ok(buf, start, end):
    """Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as protobuf checks strings."""
    p = start
    while p < end:
        c = buf[p]
        if c < 0x80:
            p += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
            lo, hi = 0x80, 0xBF
        elif c == 0xE0:
            n = 2
            lo, hi = 0xA0, 0xBF
        elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
            n = 2
            lo, hi = 0x80, 0xBF
        elif c == 0xED:
            n = 2
            lo, hi = 0x80, 0x9F
        elif c == 0xF0:
            n = 3
            lo, hi = 0x90, 0xBF
        elif 0xF1 <= c <= 0xF3:
            n = 3
            lo, hi = 0x80, 0xBF
        elif c == 0xF4:
            n = 3
            lo, hi = 0x80, 0x8F
        else:
            return False
        if p + n >= end:
            return False
        second = buf[p + 1]
        if second < lo or second > hi:
            return False
        for k in range(2, n + 1):
            b = buf[p + k]
            if b < 0x80 or b > 0xBF:
                return False
        p += n + 1
    return True


@helper_kernel()
def _fail(err, code, pos):
    err[0] = code
    err[1] = pos


@kernel(nogil=True)
def _walk(buf, fill, ev_dev, ev_res, ev_name, ev_name_len, ev_ts, ev_dur, ev_arg0,
          arg_key, arg_key_len, arg_val, arg_val_len, dev_fields, counts, err):
    """Walk a Trace's bytes: count (fill=False) or fill the columns (fill=True, sized by the count).

    counts: [events, args, device fields]. Strings are checked only when filling.
    """
    end = len(buf)
    pos = 0
    n_ev = 0
    n_arg = 0
    n_dev = 0
    while pos < end:
        field_start = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            _fail(err, -pos, field_start)
            return
        wire_type = tag & 7
        number = tag >> 3
        if number == 0:
            _fail(err, ERR_FIELD_ZERO, field_start)
            return
        if wire_type != 2:
            pos = _skip(buf, pos, end, wire_type)
            if pos < 0:
                _fail(err, -pos, field_start)
                return
            continue
        length, payload = _varint(buf, pos, end)
        if payload < 0:
            _fail(err, -payload, field_start)
            return
        if length < 0 or length > end - payload:
            _fail(err, ERR_LENGTH, field_start)
            return
        stop = payload + length
        pos = stop
        if number == TRACE_DEVICES:
            if fill:
                dev_fields[n_dev, 0] = field_start
                dev_fields[n_dev, 1] = stop
            n_dev += 1
            continue
        if number != TRACE_EVENTS:
            continue
        # One TraceEvent in buf[payload:stop].
        dev = np.int64(0)
        res = np.int64(0)
        ts = np.int64(0)
        dur = np.int64(0)
        name = np.int64(0)
        name_len = np.int64(0)
        first_arg = n_arg
        p = payload
        while p < stop:
            at = p
            etag, p = _varint(buf, p, stop)
            if p < 0:
                _fail(err, -p, at)
                return
            ewire = etag & 7
            enumber = etag >> 3
            if enumber == 0:
                _fail(err, ERR_FIELD_ZERO, at)
                return
            if ewire == 0:
                value, p = _varint(buf, p, stop)
                if p < 0:
                    _fail(err, -p, at)
                    return
                if enumber == EVENT_DEVICE_ID:
                    dev = value
                elif enumber == EVENT_RESOURCE_ID:
                    res = value
                elif enumber == EVENT_TIMESTAMP_PS:
                    ts = value
                elif enumber == EVENT_DURATION_PS:
                    dur = value
                continue
            if ewire != 2:
                p = _skip(buf, p, stop, ewire)
                if p < 0:
                    _fail(err, -p, at)
                    return
                continue
            slen, s0 = _varint(buf, p, stop)
            if s0 < 0:
                _fail(err, -s0, at)
                return
            if slen < 0 or slen > stop - s0:
                _fail(err, ERR_LENGTH, at)
                return
            s1 = s0 + slen
            p = s1
            if enumber == EVENT_NAME:
                if fill and not _utf8_ok(buf, s0, s1):
                    _fail(err, ERR_UTF8, at)
                    return
                name = s0
                name_len = slen
            elif enumber == EVENT_ARGS:
                # A map entry: key = 1, value = 2, both strings.
                key = s0
                key_len = np.int64(0)
                val = s0
                val_len = np.int64(0)
                q = s0
                while q < s1:
                    mat = q
                    mtag, q = _varint(buf, q, s1)
                    if q < 0:
                        _fail(err, -q, mat)
                        return
                    mwire = mtag & 7
                    mnumber = mtag >> 3
                    if mnumber == 0:
                        _fail(err, ERR_FIELD_ZERO, mat)
                        return
                    if mwire != 2 or (mnumber != 1 and mnumber != 2):
                        q = _skip(buf, q, s1, mwire)
                        if q < 0:
                            _fail(err, -q, mat)
                            return
                        continue
                    tlen, t0 = _varint(buf, q, s1)
                    if t0 < 0:
                        _fail(err, -t0, mat)
                        return
                    if tlen < 0 or tlen > s1 - t0:
                        _fail(err, ERR_LENGTH, mat)
                        return
                    q = t0 + tlen
                    if fill and not _utf8_ok(buf, t0, q):
                        _fail(err, ERR_UTF8, mat)
                        return
                    if mnumber == 1:
                        key = t0
                        key_len = tlen
                    else:
                        val = t0
                        val_len = tlen
                if fill:
                    arg_key[n_arg] = key
                    arg_key_len[n_arg] = key_len
                    arg_val[n_arg] = val
                    arg_val_len[n_arg] = val_len
                n_arg += 1
        if fill:
            ev_dev[n_ev] = dev
            ev_res[n_ev] = res
            ev_ts[n_ev] = ts
            ev_dur[n_ev] = dur
            ev_name[n_ev] = name
            ev_name_len[n_ev] = name_len
            ev_arg0[n_ev] = first_arg
        n_ev += 1
    if fill:
        ev_arg0[n_ev] = n_arg
    counts[0] = n_ev
    counts[1] = n_arg
    counts[2] = n_dev


@dataclass
class TraceEventColumns:
    """A Trace proto's events, one entry per event in file order; names and args as spans of `buf`."""

    buf: np.ndarray  # uint8: the file's bytes
    device_id: np.ndarray  # uint64: the event's pid
    resource_id: np.ndarray  # uint64: its tid
    name_pos: np.ndarray  # int64
    name_len: np.ndarray  # int64
    timestamp_ps: np.ndarray  # uint64
    duration_ps: np.ndarray  # uint64: 0 for an instant event
    arg_start: np.ndarray  # int64, events + 1: event i's args are entries arg_start[i]:arg_start[i + 1]
    key_pos: np.ndarray  # int64 per arg entry, in file order
    key_len: np.ndarray
    value_pos: np.ndarray
    value_len: np.ndarray
    ts_us: np.ndarray  # float64: timestamp_ps / 10^6, rounded once
    dur_us: np.ndarray  # float64: duration_ps / 10^6

    def __len__(self) -> int:
        return len(self.device_id)

    def to_json(self, rows: np.ndarray) -> bytes:
        """Events `rows`, in that order, as comma-separated JSON objects (what `orjson.dumps` writes
        between the brackets of a list of TensorBoard's event dicts)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return b""
        ts_text, ts_off = _float_texts(self.ts_us[rows])
        dur_text, dur_off = _float_texts(self.dur_us[rows])
        args_bytes = 6 * (self.key_len + self.value_len) + 6  # every byte escaped as \u00XX, quotes, ':' and ','
        args_before = np.concatenate([[0], np.cumsum(args_bytes)])
        per_event = (128 + 6 * self.name_len[rows] + np.diff(ts_off) + np.diff(dur_off)
                     + args_before[self.arg_start[rows + 1]] - args_before[self.arg_start[rows]])
        out = np.empty(int(per_event.sum()) + len(rows), dtype=np.uint8)
        n = _render(rows, self.buf, self.device_id, self.resource_id, self.name_pos, self.name_len,
                    self.duration_ps, ts_text, ts_off, dur_text, dur_off, self.arg_start, self.key_pos,
                    self.key_len, self.value_pos, self.value_len, out)
        return out[:n].tobytes()


def _float_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """orjson's text of each double: (bytes, offsets); value j is bytes[offsets[j]:offsets[j + 1] - 1]."""
    text = np.frombuffer(orjson.dumps(np.ascontiguousarray(values), option=orjson.OPT_SERIALIZE_NUMPY),
                         dtype=np.uint8)
    commas = np.flatnonzero(text == ord(","))
    return text, np.concatenate([[1], commas + 1, [len(text)]]).astype(np.int64)


def ps_to_us(ps: np.ndarray) -> np.ndarray:
    """ps / 10^6 as Python's `int / int` gives it: the exact quotient rounded once (half to even).

    Below 2^53 the integer converts exactly and one IEEE division rounds
    once. Above, the quotient is q + r/10^6 (q < 2^45, so its double has
    at least 8 fraction bits): rounded here in integer arithmetic.
    """
    ps = np.asarray(ps, dtype=np.uint64)
    out = ps.astype(np.float64) / PS_PER_US
    big = ps >= np.uint64(EXACT_BELOW)
    if big.any():
        value = ps[big]
        q, r = value // np.uint64(PS_PER_US), value % np.uint64(PS_PER_US)
        shift = (52 - (np.frexp(q.astype(np.float64))[1] - 1)).astype(np.uint64)  # fraction bits of the result
        scaled = r << shift
        m, rest = scaled // np.uint64(PS_PER_US), scaled % np.uint64(PS_PER_US)
        up = (2 * rest > PS_PER_US) | ((2 * rest == PS_PER_US) & (m % np.uint64(2) == 1))
        mantissa = (q << shift) + m + up.astype(np.uint64)
        out[big] = np.ldexp(mantissa.astype(np.float64), -shift.astype(np.int64))
    return out


def decode_trace_events(data: bytes, check_counts=None) -> tuple[TraceEventColumns, bytes]:
    """The events of a serialized Trace as columns, and its `devices` fields (to parse with protobuf).

    Raises TraceDecodeError when the bytes are not a well-formed Trace. `check_counts(events, args)`,
    when given, is called before the columns are allocated (a memory budget check may raise there).
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    err = np.zeros(2, dtype=np.int64)
    counts = np.zeros(3, dtype=np.int64)
    i64 = np.zeros(0, dtype=np.int64)
    _walk(buf, False, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, np.zeros((0, 2), np.int64), counts, err)
    _raise(err)
    n, n_args, n_dev = (int(c) for c in counts)
    if check_counts is not None:
        check_counts(n, n_args)
    ev = [np.empty(n, dtype=np.int64) for _ in range(6)]
    arg_start = np.empty(n + 1, dtype=np.int64)
    args = [np.empty(n_args, dtype=np.int64) for _ in range(4)]
    dev_fields = np.empty((n_dev, 2), dtype=np.int64)
    _walk(buf, True, *ev, arg_start, *args, dev_fields, counts, err)
    _raise(err)
    dev, res, name, name_len, ts, dur = ev
    ts, dur = ts.view(np.uint64), dur.view(np.uint64)
    columns = TraceEventColumns(
        buf=buf, device_id=dev.view(np.uint64), resource_id=res.view(np.uint64), name_pos=name, name_len=name_len,
        timestamp_ps=ts, duration_ps=dur, arg_start=arg_start, key_pos=args[0], key_len=args[1],
        value_pos=args[2], value_len=args[3], ts_us=ps_to_us(ts), dur_us=ps_to_us(dur),
    )
    devices = b"".join(data[a:b] for a, b in dev_fields.tolist())  # a few fields: one per device
    return columns, devices


def _raise(err: np.ndarray) -> None:
    if err[0] != OK:
        raise TraceDecodeError(f"{ERROR_TEXT.get(int(err[0]), 'malformed protobuf')} at byte {int(err[1])}")


# --- Chrome JSON from the columns --------------------------------------------------

_PID = np.frombuffer(b'{"pid":', dtype=np.uint8)
_TID = np.frombuffer(b',"tid":', dtype=np.uint8)
_NAME = np.frombuffer(b',"name":', dtype=np.uint8)
_TS = np.frombuffer(b',"ts":', dtype=np.uint8)
_PH_X_DUR = np.frombuffer(b',"ph":"X","dur":', dtype=np.uint8)
_PH_I = np.frombuffer(b',"ph":"i","s":"t"', dtype=np.uint8)
_ARGS = np.frombuffer(b',"args":{', dtype=np.uint8)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@helper_kernel()
def _lit(out, pos, text):
    for k in range(len(text)):
        out[pos + k] = text[k]
    return pos + len(text)


@helper_kernel()
def _span(out, pos, src, start, end):
    for k in range(start, end):
        out[pos] = src[k]
        pos += 1
    return pos


@helper_kernel()
def _uint(out, pos, v):
    n = 1
    probe = v
    while probe >= np.uint64(10):
        probe = probe // np.uint64(10)
        n += 1
    for k in range(n):
        out[pos + n - 1 - k] = np.uint8(48 + v % np.uint64(10))
        v = v // np.uint64(10)
    return pos + n


@helper_kernel()
def _string(out, pos, buf, start, length):
    """A JSON string, escaped as orjson escapes (quote, backslash, control characters; UTF-8 as is)."""
    out[pos] = 34
    pos += 1
    for k in range(start, start + length):
        c = buf[k]
        if c == 34 or c == 92:
            out[pos] = 92
            out[pos + 1] = c
            pos += 2
        elif c >= 32:
            out[pos] = c
            pos += 1
        else:
            out[pos] = 92
            if c == 8:
                out[pos + 1] = 98  # b
            elif c == 9:
                out[pos + 1] = 116  # t
            elif c == 10:
                out[pos + 1] = 110  # n
            elif c == 12:
                out[pos + 1] = 102  # f
            elif c == 13:
                out[pos + 1] = 114  # r
            else:
                out[pos + 1] = 117  # u00XX
                out[pos + 2] = 48
                out[pos + 3] = 48
                out[pos + 4] = _HEX[c >> 4]
                out[pos + 5] = _HEX[c & 15]
                pos += 4
            pos += 2
    out[pos] = 34
    return pos + 1


@helper_kernel()
def _same(buf, a, b, n):
    for k in range(n):
        if buf[a + k] != buf[b + k]:
            return False
    return True


@helper_kernel()
def _key_order(buf, key_pos, key_len, a, b):
    """-1, 0 or 1: arg a's key against arg b's, bytes compared in order, then the shorter first."""
    n = min(key_len[a], key_len[b])
    pa = key_pos[a]
    pb = key_pos[b]
    for k in range(n):
        if buf[pa + k] != buf[pb + k]:
            return -1 if buf[pa + k] < buf[pb + k] else 1
    if key_len[a] == key_len[b]:
        return 0
    return -1 if key_len[a] < key_len[b] else 1


@helper_kernel()
def _last_of_each_key(buf, key_pos, key_len, a0, a1):
    """For args a0..a1-1: out[j] = the index (from a0) of the last arg with arg a0+j's key when j is that key's
    first place, else -1. A stable merge sort of the args by key (then place): O(m log m) comparisons, where
    comparing every arg with the earlier ones would take m² (a Cloud TPU event may hold tens of thousands)."""
    m = a1 - a0
    order = np.arange(m)
    spare = np.empty(m, np.int64)
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _key_order(buf, key_pos, key_len, a0 + order[j], a0 + order[i]) < 0:
                    spare[k] = order[j]
                    j += 1
                else:
                    spare[k] = order[i]
                    i += 1
                k += 1
            while i < mid:
                spare[k] = order[i]
                i += 1
                k += 1
            while j < hi:
                spare[k] = order[j]
                j += 1
                k += 1
        order, spare = spare, order
        width *= 2
    out = np.full(m, -1, np.int64)
    g = 0
    while g < m:
        h = g + 1
        while h < m and _key_order(buf, key_pos, key_len, a0 + order[g], a0 + order[h]) == 0:
            h += 1
        out[order[g]] = order[h - 1]  # stable: the group is in place order
        g = h
    return out


SMALL_ARGS = 16  # up to this many args, comparing each with the earlier ones is the quicker way


@kernel(nogil=True)
def _render(rows, buf, pid, tid, name_pos, name_len, dur_ps, ts_text, ts_off, dur_text, dur_off,
            arg_start, key_pos, key_len, value_pos, value_len, out):
    pos = 0
    for j in range(len(rows)):
        r = rows[j]
        if j:
            out[pos] = 44  # ','
            pos += 1
        pos = _lit(out, pos, _PID)
        pos = _uint(out, pos, pid[r])
        pos = _lit(out, pos, _TID)
        pos = _uint(out, pos, tid[r])
        pos = _lit(out, pos, _NAME)
        pos = _string(out, pos, buf, name_pos[r], name_len[r])
        pos = _lit(out, pos, _TS)
        pos = _span(out, pos, ts_text, ts_off[j], ts_off[j + 1] - 1)
        if dur_ps[r] != np.uint64(0):
            pos = _lit(out, pos, _PH_X_DUR)
            pos = _span(out, pos, dur_text, dur_off[j], dur_off[j + 1] - 1)
        else:
            pos = _lit(out, pos, _PH_I)
        a0 = arg_start[r]
        a1 = arg_start[r + 1]
        if a1 > a0:
            pos = _lit(out, pos, _ARGS)
            first = True
            many = a1 - a0 > SMALL_ARGS
            lasts = _last_of_each_key(buf, key_pos, key_len, a0, a1) if many else np.empty(0, np.int64)
            for a in range(a0, a1):
                # A key given twice: its first place, its last value (a dict built from the entries).
                if many:
                    if lasts[a - a0] < 0:
                        continue
                    last = a0 + lasts[a - a0]
                else:
                    seen = False
                    for b in range(a0, a):
                        if key_len[b] == key_len[a] and _same(buf, key_pos[b], key_pos[a], key_len[a]):
                            seen = True
                            break
                    if seen:
                        continue
                    last = a
                    for b in range(a + 1, a1):
                        if key_len[b] == key_len[a] and _same(buf, key_pos[b], key_pos[a], key_len[a]):
                            last = b
                if not first:
                    out[pos] = 44
                    pos += 1
                first = False
                pos = _string(out, pos, buf, key_pos[a], key_len[a])
                out[pos] = 58  # ':'
                pos += 1
                pos = _string(out, pos, buf, value_pos[last], value_len[last])
            out[pos] = 125  # '}'
            pos += 1
        out[pos] = 125
        pos += 1
    return pos
