"""Compiled writer of Chrome trace-event JSON: events → bytes in a caller's buffer.

Each event is written as `,\\n{…}` (the caller's header ends with metadata
events, so the separator always has something before it). Layout per event,
as XProf's trace_viewer@ writes it:

  {"pid":P,"tid":T,"name":"…","ts":µs,"dur":µs,"ph":"X"[,"bind_id":N,"cat":"…","flow_out":true|"flow_in":true]
   [,"args":{…}]}

Times are exact decimals of the picosecond values (µs with up to 6 decimals,
so a JSON reader gets the same double as from XProf's `%.17g`); a complete
event lasts at least 1 ps, as in XProf. Async events (`_a` with a flow) are
`"ph":"b"`/`"e"` pairs on the process; counter-line events are `"ph":"C"`
samples with their numeric args.

The helpers are ordinary compiled functions that LLVM inlines into the writer
where it pays; numba's own IR inlining (`inline="always"`) gave the same speed
for an eight times longer first compile. The writer stops before an event that
might not fit (a size bound is computed first, so writes never run past the
buffer) and reports how far it got.
"""

from __future__ import annotations

import numpy as np
from numba.core import types

from reportgen.capture import KIND_DOUBLE, KIND_INT64, KIND_REF, KIND_STR, KIND_UINT64
from reportgen.export import schema
from reportgen.export.flows import FLOW_ASYNC
from reportgen.export.layout import LINE_COUNTERS
from reportgen.export.tables import ROLE_HIDDEN
from reportgen.kernels import array_type, helper_kernel, kernel

_JS_SAFE = np.uint64(1 << 53)
# Literal pieces as module arrays: compiled code reads them as constants.
_L_EMPTY_STR = np.frombuffer(b'""', dtype=np.uint8)
_L_ARGS = np.frombuffer(b',"args":{', dtype=np.uint8)
_L_BIND_ID = np.frombuffer(b',"bind_id":', dtype=np.uint8)
_L_CAT = np.frombuffer(b',"cat":', dtype=np.uint8)
_L_DUR = np.frombuffer(b',"dur":', dtype=np.uint8)
_L_FLOW_IN_TRUE = np.frombuffer(b',"flow_in":true', dtype=np.uint8)
_L_FLOW_OUT_TRUE = np.frombuffer(b',"flow_out":true', dtype=np.uint8)
_L_ID = np.frombuffer(b',"id":', dtype=np.uint8)
_L_NAME = np.frombuffer(b',"name":', dtype=np.uint8)
_L_PH_C = np.frombuffer(b',"ph":"C"', dtype=np.uint8)
_L_PH_X = np.frombuffer(b',"ph":"X"', dtype=np.uint8)
_L_PH_B = np.frombuffer(b',"ph":"b"', dtype=np.uint8)
_L_PH_E = np.frombuffer(b',"ph":"e"', dtype=np.uint8)
_L_PH_E2 = np.frombuffer(b',"ph":"e"}', dtype=np.uint8)
_L_TID = np.frombuffer(b',"tid":', dtype=np.uint8)
_L_TS = np.frombuffer(b',"ts":', dtype=np.uint8)
_L_PID = np.frombuffer(b',\n{"pid":', dtype=np.uint8)
_IN = schema.FLOW_IN
_OUT = schema.FLOW_OUT


@helper_kernel()
def _lit(out, pos, text):
    # Copy through views indexed by the bare loop counter: an index that might be
    # negative makes numba wrap it per byte, which defeats vectorised copies.
    n = len(text)
    dst = out[pos:pos + n]
    for k in range(n):
        dst[k] = text[k]
    return pos + n


# Every caller passes string ids as int64: each other integer type would compile these once more.
@helper_kernel()
def _frag(out, pos, pool, pool_off, sid):
    a = pool_off[sid]
    n = pool_off[sid + 1] - a
    dst = out[pos:pos + n]
    src = pool[a:a + n]
    for k in range(n):
        dst[k] = src[k]
    return pos + n


@helper_kernel()
def _frag_len(pool_off, sid):
    return pool_off[sid + 1] - pool_off[sid]


@helper_kernel()
def _u64(out, pos, v):
    v = np.uint64(v)
    n = 1
    probe = v
    while probe >= np.uint64(10):
        probe = probe // np.uint64(10)
        n += 1
    dst = out[pos:pos + n]
    for k in range(n):
        dst[n - 1 - k] = np.uint8(48 + v % np.uint64(10))
        v = v // np.uint64(10)
    return pos + n


@helper_kernel()
def _i64(out, pos, v):
    if v < 0:
        out[pos] = 45  # '-'
        pos += 1
        return _u64(out, pos, np.uint64(-(v + 1)) + np.uint64(1))
    return _u64(out, pos, np.uint64(v))


@helper_kernel()
def _micros(out, pos, ps):
    """Picoseconds as an exact decimal number of microseconds."""
    if ps < 0:
        out[pos] = 45
        pos += 1
        ps = -ps
    v = np.uint64(ps)
    whole = v // np.uint64(1000000)
    frac = v - whole * np.uint64(1000000)
    pos = _u64(out, pos, whole)
    if frac != np.uint64(0):
        out[pos] = 46  # '.'
        pos += 1
        width = 6
        while frac % np.uint64(10) == np.uint64(0):
            frac = frac // np.uint64(10)
            width -= 1
        dst = out[pos:pos + width]
        for k in range(width):
            dst[width - 1 - k] = np.uint8(48 + frac % np.uint64(10))
            frac = frac // np.uint64(10)
        pos += width
    return pos


@helper_kernel()
def _int_arg(out, pos, raw, unsigned):
    """An integer arg: a JSON number, quoted beyond 2^53 as XProf does."""
    if unsigned:
        big = np.uint64(raw) > _JS_SAFE
    else:
        big = raw > (1 << 53) or raw < -(1 << 53)
    if big:
        out[pos] = 34
        pos += 1
    pos = _u64(out, pos, np.uint64(raw)) if unsigned else _i64(out, pos, raw)
    if big:
        out[pos] = 34
        pos += 1
    return pos


@helper_kernel()
def _double_sid(double_keys, double_sid, raw):
    # np.searchsorted's left side, written out: numba's own costs ≈ 1 s of a first build's compile.
    lo = 0
    hi = len(double_keys)
    while lo < hi:
        mid = (lo + hi) >> 1
        if double_keys[mid] < raw:
            lo = mid + 1
        else:
            hi = mid
    return np.int64(double_sid[lo])


@helper_kernel()
def _stat_bound(kind, sid, key, pool_off):
    base = _frag_len(pool_off, key) + 4
    if kind == KIND_STR or kind == KIND_REF:
        return base + _frag_len(pool_off, sid)
    return base + 32  # numbers: at most 26 characters, quotes included


@helper_kernel()
def _write_stat(out, pos, first, kind, sid, raw, key, numeric_only, pool, pool_off, double_keys, double_sid):
    """One `"key":value` (with its separator); returns (pos, written?)."""
    if kind == KIND_STR or kind == KIND_REF:
        if numeric_only or sid < 0:
            return pos, False
    elif kind != KIND_INT64 and kind != KIND_UINT64 and kind != KIND_DOUBLE:
        return pos, False  # bytes and unset values are never written
    if first:
        pos = _lit(out, pos, _L_ARGS)
    else:
        out[pos] = 44
        pos += 1
    pos = _frag(out, pos, pool, pool_off, key)
    out[pos] = 58  # ':'
    pos += 1
    if kind == KIND_STR or kind == KIND_REF:
        pos = _frag(out, pos, pool, pool_off, sid)
    elif kind == KIND_DOUBLE:
        pos = _frag(out, pos, pool, pool_off, _double_sid(double_keys, double_sid, raw))
    else:
        pos = _int_arg(out, pos, raw, kind == KIND_UINT64)
    return pos, True


@helper_kernel()
def _overridden(key, es_key, e0, e1):
    for j in range(e0, e1):
        if es_key[j] == key:
            return True
    return False


@helper_kernel()
def _write_args(out, pos, md, long_sid, e0, e1, numeric_only,
                md_stat_start, ms_key, ms_kind, ms_raw, ms_sid,
                es_key, es_kind, es_raw, es_sid, role, pool, pool_off, double_keys, double_sid,
                long_name_key):
    first = True
    if long_sid >= 0 and not numeric_only:
        pos = _lit(out, pos, _L_ARGS)
        pos = _frag(out, pos, pool, pool_off, long_name_key)
        out[pos] = 58
        pos += 1
        pos = _frag(out, pos, pool, pool_off, long_sid)
        first = False
    # Metadata stats first, then the event's own (which win on a shared name).
    for s in range(md_stat_start[md], md_stat_start[md + 1]):
        key = ms_key[s]
        if role[key] == ROLE_HIDDEN or _overridden(key, es_key, e0, e1):
            continue
        pos, wrote = _write_stat(out, pos, first, ms_kind[s], np.int64(ms_sid[s]), ms_raw[s], np.int64(key),
                                 numeric_only, pool, pool_off, double_keys, double_sid)
        if wrote:
            first = False
    for s in range(e0, e1):
        key = es_key[s]
        if role[key] == ROLE_HIDDEN:
            continue
        pos, wrote = _write_stat(out, pos, first, es_kind[s], np.int64(es_sid[s]), es_raw[s], np.int64(key),
                                 numeric_only, pool, pool_off, double_keys, double_sid)
        if wrote:
            first = False
    if not first:
        out[pos] = 125  # '}'
        pos += 1
    return pos


@helper_kernel()
def _pid_name_ts(out, pos, pid, tid, with_tid, name_sid, ts, pool, pool_off):
    pos = _lit(out, pos, _L_PID)
    pos = _i64(out, pos, pid)
    if with_tid:
        pos = _lit(out, pos, _L_TID)
        pos = _i64(out, pos, tid)
    pos = _lit(out, pos, _L_NAME)
    pos = _frag(out, pos, pool, pool_off, name_sid)
    pos = _lit(out, pos, _L_TS)
    return _micros(out, pos, ts)


@kernel(nogil=True)
def write_events(rows, i0, i1, out,
                 ev_line, ev_md, ev_start, ev_dur, name_sid, flow_id, flow_bits, flow_cat,
                 line_pid, line_tid, line_kind,
                 md_long_sid, md_stat_start, ms_key, ms_kind, ms_raw, ms_sid,
                 ev_stat_start, es_key, es_kind, es_raw, es_sid,
                 role, pool, pool_off, double_keys, double_sid, cat_sid, long_name_key,
                 syn_line, syn_start, syn_dur, syn_name_sid):
    """Write rows[i0:i1] into `out`; returns (bytes written, next index)."""
    n_events = len(ev_line)
    limit = len(out)
    # Typed (not literal) values throughout: a literal argument would compile
    # the helper it is passed to once more, for that constant.
    pos = np.int64(0)
    i = i0
    while i < i1:
        r = rows[i]
        synthetic = r >= n_events
        if synthetic:
            j = r - n_events
            line = syn_line[j]
            md = -1
            start = syn_start[j]
            dur = syn_dur[j]
            name = np.int64(syn_name_sid[j])
            e0 = np.int64(0)
            e1 = np.int64(0)
            fid = np.uint64(0)
            bits = 0
            cat = np.int64(-1)
            long_sid = np.int64(-1)
        else:
            line = ev_line[r]
            md = ev_md[r]
            start = ev_start[r]
            dur = ev_dur[r]
            name = np.int64(name_sid[r])
            e0 = np.int64(ev_stat_start[r])
            e1 = np.int64(ev_stat_start[r + 1])
            fid = flow_id[r]
            bits = flow_bits[r]
            cat = np.int64(cat_sid[flow_cat[r]])
            long_sid = np.int64(md_long_sid[md])

        # Size bound: fixed parts, the name twice (async pairs), every arg.
        bound = 320 + 2 * _frag_len(pool_off, name)
        if cat >= 0:
            bound += 2 * _frag_len(pool_off, cat)
        if long_sid >= 0:
            bound += _frag_len(pool_off, long_sid) + _frag_len(pool_off, long_name_key) + 4
        if md >= 0:
            for s in range(md_stat_start[md], md_stat_start[md + 1]):
                bound += _stat_bound(ms_kind[s], np.int64(ms_sid[s]), np.int64(ms_key[s]), pool_off)
        for s in range(e0, e1):
            bound += _stat_bound(es_kind[s], np.int64(es_sid[s]), np.int64(es_key[s]), pool_off)
        if pos + bound > limit:
            break

        pid = line_pid[line]
        direction = bits & 3
        counter = line_kind[line] == LINE_COUNTERS
        is_async = (bits & FLOW_ASYNC) != 0 and direction != 0 and not counter
        # Counter samples and async events belong to the process, not to a thread.
        with_tid = not counter and not is_async
        tid = np.int64(line_tid[line])
        pos = _pid_name_ts(out, pos, pid, tid, with_tid, name, start, pool, pool_off)
        if counter:
            pos = _lit(out, pos, _L_PH_C)
        elif is_async:
            pos = _lit(out, pos, _L_ID)
            pos = _u64(out, pos, fid)
            pos = _lit(out, pos, _L_CAT)
            if cat >= 0:
                pos = _frag(out, pos, pool, pool_off, cat)
            else:
                pos = _lit(out, pos, _L_EMPTY_STR)
            pos = _lit(out, pos, _L_PH_E if direction == _IN else _L_PH_B)
        else:
            pos = _lit(out, pos, _L_DUR)
            pos = _micros(out, pos, dur if dur > 0 else 1)
            pos = _lit(out, pos, _L_PH_X)
            if direction != 0:
                pos = _lit(out, pos, _L_BIND_ID)
                pos = _u64(out, pos, fid)
                if cat >= 0:
                    pos = _lit(out, pos, _L_CAT)
                    pos = _frag(out, pos, pool, pool_off, cat)
                if direction & _OUT:
                    pos = _lit(out, pos, _L_FLOW_OUT_TRUE)
                if direction & _IN:
                    pos = _lit(out, pos, _L_FLOW_IN_TRUE)
        if md >= 0:
            pos = _write_args(out, pos, md, long_sid, e0, e1, counter,
                              md_stat_start, ms_key, ms_kind, ms_raw, ms_sid,
                              es_key, es_kind, es_raw, es_sid, role, pool, pool_off, double_keys, double_sid,
                              long_name_key)
        out[pos] = 125
        pos += 1
        if is_async and direction == schema.FLOW_IN_OUT:
            # XProf closes an in-out async event with a synthetic end at its end time.
            pos = _pid_name_ts(out, pos, pid, tid, with_tid, name, start + dur, pool, pool_off)
            pos = _lit(out, pos, _L_ID)
            pos = _u64(out, pos, fid)
            pos = _lit(out, pos, _L_CAT)
            if cat >= 0:
                pos = _frag(out, pos, pool, pool_off, cat)
            else:
                pos = _lit(out, pos, _L_EMPTY_STR)
            pos = _lit(out, pos, _L_PH_E2)
        i += 1
    return pos, i


_I1, _I4, _I8, _U1, _U8 = types.int8, types.int32, types.int64, types.uint8, types.uint64
# The argument types a build passes to `write_events` (the decoder's columns are
# read-only views): `precompile` compiles exactly this, ahead, and
# tests/test_kernels.py checks that a real build needs nothing else.
WRITE_EVENTS_SIGNATURE = (
    array_type(_I8), _I8, _I8, array_type(_U1),  # rows, i0, i1, out
    # ev_line, ev_md, ev_start, ev_dur, name_sid, flow_id, flow_bits, flow_cat
    array_type(_I4, True), array_type(_I4, True), array_type(_I8, True), array_type(_I8, True),
    array_type(_I4), array_type(_U8), array_type(_I1), array_type(_I1),
    array_type(_I8), array_type(_I8), array_type(_I1),  # line_pid, line_tid, line_kind
    # md_long_sid, md_stat_start, ms_key, ms_kind, ms_raw, ms_sid
    array_type(_I4), array_type(_I8), array_type(_I4), array_type(_I1), array_type(_I8), array_type(_I4),
    # ev_stat_start, es_key, es_kind, es_raw, es_sid
    array_type(_I8), array_type(_I4), array_type(_I1), array_type(_I8), array_type(_I4),
    # role, pool, pool_off, double_keys, double_sid, cat_sid, long_name_key
    array_type(_I1), array_type(_U1, True), array_type(_I8), array_type(_I8), array_type(_I4), array_type(_I4), _I8,
    array_type(_I8), array_type(_I8), array_type(_I8), array_type(_I4),  # syn_line, syn_start, syn_dur, syn_name_sid
)


def precompile() -> None:
    """Compile the writer for a build's argument types (the "trace-writer" group of `reportgen.kernels`)."""
    write_events.compile(WRITE_EVENTS_SIGNATURE)
