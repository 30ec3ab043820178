"""Compiled protobuf wire-format walker for XSpace files.

Parsing an XSpace with protobuf and then copying every event and stat into
columns costs tens of seconds on a large capture: the per-object Python work,
not the parse, is the expense. This module walks the raw bytes with numba and
writes events and event stats straight into their final numpy columns, ids
already resolved. Everything small (plane names, metadata maps, plane stats)
is left to protobuf: `split_fields` only reports where those fields lie.

The lines are walked twice: `count_lines` checks the framing of lines and
events and counts each line's events and stats, so that `fill_lines` can
write arrays of the exact size (no growth, no copies), check the stats'
insides, and resolve metadata ids with lookup tables built in between from
the protobuf-parsed metadata. String values are deduplicated afterwards
(`dedupe_strings`), so that each distinct string becomes one Python object.

The kernels are few and plain (int64 arithmetic only; the two varint readers
the passes share are inlined into them) so that the one-time compile stays
short; the kernel cache keeps it across runs.
They release the GIL (`nogil`), so threads can decode several hosts at once.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba.core import types

from reportgen.capture import (  # the stat value kinds the decoder writes
    KIND_BYTES,
    KIND_DOUBLE,
    KIND_INT64,
    KIND_NONE,
    KIND_REF,
    KIND_STR,
    KIND_UINT64,
)
from reportgen.kernels import array_type, ensure_compiled, helper_kernel, kernel

# Error codes (0 = fine). A kernel reports the first error in err[0] and the
# byte position of the field it was reading in err[1].
OK = 0
ERR_TRUNCATED = 1
ERR_BAD_WIRE_TYPE = 2
ERR_BAD_VARINT = 3
ERR_LENGTH = 4
ERR_FIELD_ZERO = 5

ERROR_TEXT = {
    ERR_TRUNCATED: "the file ends in the middle of a message (truncated?)",
    ERR_BAD_WIRE_TYPE: "invalid protobuf wire type (not an XSpace protobuf)",
    ERR_BAD_VARINT: "malformed varint (not an XSpace protobuf)",
    ERR_LENGTH: "a length-delimited field runs past its enclosing message",
    ERR_FIELD_ZERO: "a field numbered 0, which protobuf forbids (not an XSpace protobuf)",
}

# split_fields columns.
F_NUMBER, F_WIRE_TYPE, F_START, F_PAYLOAD, F_END = range(5)

# count_lines columns (per line).
C_EVENTS, C_STATS = range(2)

# Line scalar columns written by fill_lines.
L_ID, L_DISPLAY_ID, L_TIMESTAMP_NS, L_DURATION_PS, L_NAME_POS, L_NAME_LEN, L_DISPLAY_POS, L_DISPLAY_LEN = range(8)

# Lookup table parameters per plane (see `lookup_table`).
T_BASE, T_COUNT, T_LOW, T_DENSE = range(4)

MISSING = -1

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@helper_kernel()
def _varint(buf, pos, end):
    """(value, new position). The position is negative on error:
    -ERR_TRUNCATED or -ERR_BAD_VARINT."""
    result = np.int64(0)
    shift = np.int64(0)
    while pos < end:
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            return result, -ERR_BAD_VARINT
    return result, -ERR_TRUNCATED


@helper_kernel()
def _skip(buf, pos, end, wire_type):
    """Position after a field's payload; negative (-error) on error."""
    if wire_type == 0:
        _, pos = _varint(buf, pos, end)
        return pos
    if wire_type == 1:
        return pos + 8 if pos + 8 <= end else -ERR_TRUNCATED
    if wire_type == 2:
        n, pos = _varint(buf, pos, end)
        if pos < 0:
            return pos
        if n < 0 or n > end - pos:
            return -ERR_LENGTH
        return pos + n
    if wire_type == 5:
        return pos + 4 if pos + 4 <= end else -ERR_TRUNCATED
    return -ERR_BAD_WIRE_TYPE


@kernel(nogil=True)
def _split_fields(buf, start, end, fill, out, err):
    """Top-level fields of the message in buf[start:end]; returns their count.

    With fill, writes per field [number, wire type, tag position, payload
    position (after the length for wire type 2), end position] into out.
    """
    n = 0
    pos = start
    while pos < end:
        field_start = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            err[0] = -pos
            err[1] = field_start
            return n
        wire_type = tag & 7
        if tag >> 3 == 0:
            err[0] = ERR_FIELD_ZERO
            err[1] = field_start
            return n
        payload = pos
        if wire_type == 2:
            length, payload = _varint(buf, pos, end)
            if payload < 0:
                err[0] = -payload
                err[1] = field_start
                return n
            if length < 0 or length > end - payload:
                err[0] = ERR_LENGTH
                err[1] = field_start
                return n
            pos = payload + length
        else:
            pos = _skip(buf, pos, end, wire_type)
            if pos < 0:
                err[0] = -pos
                err[1] = field_start
                return n
        if fill:
            out[n, F_NUMBER] = tag >> 3
            out[n, F_WIRE_TYPE] = wire_type
            out[n, F_START] = field_start
            out[n, F_PAYLOAD] = payload
            out[n, F_END] = pos
        n += 1
    return n


def split_fields(buf: np.ndarray, start: int, end: int, check_count=None) -> np.ndarray:
    """(n, 5) int64: number, wire type, start, payload start, end of each field.

    `check_count(n)`, when given, is called with the number of fields before
    their table is allocated (a memory budget check may raise there).
    """
    err = np.zeros(2, dtype=np.int64)
    empty = np.zeros((0, 5), dtype=np.int64)
    n = _split_fields(buf, start, end, False, empty, err)
    if err[0] != OK:
        raise WireError(int(err[0]), int(err[1]))
    if check_count is not None:
        check_count(n)
    out = np.empty((n, 5), dtype=np.int64)
    _split_fields(buf, start, end, True, out, err)
    return out


def fields_before_error(buf: np.ndarray, start: int, end: int) -> np.ndarray:
    """The fields of buf[start:end] that are well framed, up to the first that is not (to say where an
    error lies; never raises)."""
    err = np.zeros(2, dtype=np.int64)
    n = _split_fields(buf, start, end, False, np.zeros((0, 5), dtype=np.int64), err)
    out = np.empty((n, 5), dtype=np.int64)
    _split_fields(buf, start, end, True, out, err)
    return out


@helper_kernel()
def _find(keys, vals, params, plane, key, default):
    """Value stored for `key` in `plane`'s table, else `default`."""
    base = params[plane, T_BASE]
    count = params[plane, T_COUNT]
    if params[plane, T_DENSE] != 0:
        i = key - params[plane, T_LOW]
        if i < 0 or i >= count:
            return default
        v = vals[base + i]
        return default if v == MISSING else v
    lo = base
    hi = base + count
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < base + count and keys[lo] == key:
        return vals[lo]
    return default


_MIX = np.uint64(0x9E3779B97F4A7C15)


@kernel(nogil=True)
def _dedupe(buf, words, kind, raw, str_col, row, table, uniq, n_uniq):
    """Replace each string/bytes stat's range (position in raw, length in
    str_col) by the index of its unique value, from `row` on.

    words: buf's whole 8-byte words (an aligned uint64 view) for hashing and
    comparing 8 bytes per step. table: open-addressing slots holding unique
    index + 1 (0 = free); uniq: per unique value [position, length, kind,
    hash]. Stops before a value that needs a bigger table or uniq; returns
    (row reached, uniques). Everything is written inline: a call that passes
    an array costs a reference count update each time.
    """
    mask = table.shape[0] - 1
    n_rows = kind.shape[0]
    n_words = words.shape[0]
    while row < n_rows:
        k = kind[row]
        if k != KIND_STR and k != KIND_BYTES:
            row += 1
            continue
        pos = raw[row]
        length = np.int64(str_col[row])
        end = pos + length
        hu = _MIX * np.uint64(length + 1) ^ np.uint64(k)
        j = pos
        while j + 8 <= end and (j >> 3) + 1 < n_words:
            q = j >> 3
            shift = np.uint64((j & 7) * 8)
            w = words[q] if shift == 0 else (words[q] >> shift) | (words[q + 1] << (np.uint64(64) - shift))
            hu = (hu ^ w) * _MIX
            hu ^= hu >> np.uint64(29)
            j += 8
        while j < end:
            hu = (hu ^ np.uint64(buf[j])) * _MIX
            j += 1
        hu ^= hu >> np.uint64(32)
        h = np.int64(hu)
        slot = h & mask
        while True:
            u = table[slot]
            if u == 0:
                if 2 * (n_uniq + 1) > table.shape[0] or n_uniq >= uniq.shape[0]:
                    return row, n_uniq
                uniq[n_uniq, 0] = pos
                uniq[n_uniq, 1] = length
                uniq[n_uniq, 2] = k
                uniq[n_uniq, 3] = h
                n_uniq += 1
                table[slot] = n_uniq
                u = n_uniq
                break
            v = u - 1
            if uniq[v, 3] == h and uniq[v, 1] == length and uniq[v, 2] == k:
                a = pos
                b = uniq[v, 0]
                same = True
                while a + 8 <= end and (a >> 3) + 1 < n_words and (b >> 3) + 1 < n_words:
                    qa = a >> 3
                    sa = np.uint64((a & 7) * 8)
                    wa = words[qa] if sa == 0 else (words[qa] >> sa) | (words[qa + 1] << (np.uint64(64) - sa))
                    qb = b >> 3
                    sb = np.uint64((b & 7) * 8)
                    wb = words[qb] if sb == 0 else (words[qb] >> sb) | (words[qb + 1] << (np.uint64(64) - sb))
                    if wa != wb:
                        same = False
                        break
                    a += 8
                    b += 8
                while same and a < end:
                    if buf[a] != buf[b]:
                        same = False
                    a += 1
                    b += 1
                if same:
                    break
            slot = (slot + 1) & mask
        str_col[row] = u - 1
        raw[row] = 0
        row += 1
    return row, n_uniq


@kernel(nogil=True)
def _grow_table(table, uniq, n_uniq):
    """A table twice the size holding the same unique values."""
    bigger = np.zeros(table.shape[0] * 2, dtype=table.dtype)
    mask = bigger.shape[0] - 1
    for u in range(n_uniq):
        slot = uniq[u, 3] & mask
        while bigger[slot] != 0:
            slot = (slot + 1) & mask
        bigger[slot] = u + 1
    return bigger


class Deduper:
    """`_dedupe` over a capture's stats batch after batch, one set of unique values for them all.

    Values are grouped by a 64-bit hash and compared byte for byte, so two
    different strings are never merged. `unique()` gives (U, 3) position,
    length and kind of each unique value, in order of first appearance.
    """

    def __init__(self, buf: np.ndarray):
        # On a machine's first build `_dedupe` compiles in another process meanwhile (`precompile`).
        ensure_compiled("decoder-tail")
        self.buf = buf
        self.words = np.frombuffer(buf, dtype=np.uint64, count=len(buf) // 8) if buf.ctypes.data % 8 == 0 else (
            np.zeros(0, dtype=np.uint64))
        self.words.flags.writeable = False  # as `buf` (see `loaders.xspace`): one type for `_dedupe`
        self.table = np.zeros(1024, dtype=np.int32)
        self.uniq = np.empty((512, 4), dtype=np.int64)
        self.n_uniq = 0

    def run(self, kind: np.ndarray, raw: np.ndarray, str_col: np.ndarray) -> None:
        """In place: these stats' string/bytes ranges → unique value indices (raw → 0)."""
        row = 0
        while True:
            row, self.n_uniq = _dedupe(self.buf, self.words, kind, raw, str_col, row, self.table, self.uniq,
                                       self.n_uniq)
            if row >= len(kind):
                return
            if self.n_uniq >= len(self.uniq):
                self.uniq = np.concatenate([self.uniq, np.empty_like(self.uniq)])
            else:
                self.table = _grow_table(self.table, self.uniq, self.n_uniq)

    def unique(self) -> np.ndarray:
        return self.uniq[: self.n_uniq, :3].copy()


def dedupe_strings(buf: np.ndarray, kind: np.ndarray, raw: np.ndarray, str_col: np.ndarray) -> np.ndarray:
    """In place: string/bytes stats' ranges → unique value indices (raw → 0); the unique values
    ((U, 3) position, length, kind), as `Deduper` gives them."""
    deduper = Deduper(buf)
    deduper.run(kind, raw, str_col)
    return deduper.unique()


# The two passes below read every tag and varint through the two readers here, which numba inlines into
# them (`inline="always"`): a numba function call per varint (calls are not inlined across compiled
# functions) costs more than the rest of the walk together.


@helper_kernel(inline="always")
def _checked_varint(buf, pos, end):
    """(value, position after it, error code: OK, ERR_TRUNCATED or ERR_BAD_VARINT) of the varint at `pos`,
    which must be below `end`."""
    c = np.int64(buf[pos])
    pos += 1
    v = c & 0x7F
    shift = 7
    while c >= 0x80 and pos < end and shift < 70:
        c = np.int64(buf[pos])
        pos += 1
        v |= (c & 0x7F) << shift
        shift += 7
    if c >= 0x80:
        return v, pos, ERR_TRUNCATED if pos >= end else ERR_BAD_VARINT
    return v, pos, OK


@helper_kernel(inline="always")
def _framed_varint(buf, pos):
    """(value, position after it) of a varint whose framing `_count_pass` checked."""
    c = np.int64(buf[pos])
    pos += 1
    v = c & 0x7F
    shift = 7
    while c >= 0x80:
        c = np.int64(buf[pos])
        pos += 1
        v |= (c & 0x7F) << shift
        shift += 7
    return v, pos


@kernel(nogil=True)
def _count_pass(buf, ranges, counts, err):
    """Validate the lines' and events' framing; count each line's events and
    stats (stats are skipped by length: `_fill_pass` checks their insides)."""
    for li in range(ranges.shape[0]):
        pos = ranges[li, 1]
        line_end = ranges[li, 2]
        n_events = 0
        n_stats = 0
        while pos < line_end:
            field_start = pos
            tag, pos, code = _checked_varint(buf, pos, line_end)
            if code != OK:
                err[0] = code
                err[1] = field_start
                return
            if tag >> 3 == 0:
                err[0] = ERR_FIELD_ZERO
                err[1] = field_start
                return
            if tag != 0x22:  # not an event (field 4, wire type 2)
                pos = _skip(buf, pos, line_end, tag & 7)
                if pos < 0:
                    err[0] = -pos
                    err[1] = field_start
                    return
                continue
            length, pos = _varint(buf, pos, line_end)
            if pos < 0 or length < 0 or length > line_end - pos:
                err[0] = -pos if pos < 0 else ERR_LENGTH
                err[1] = field_start
                return
            ev_end = pos + length
            n_events += 1
            while pos < ev_end:
                ef_start = pos
                tag, pos, code = _checked_varint(buf, pos, ev_end)
                if code != OK:
                    err[0] = code
                    err[1] = ef_start
                    return
                if tag >> 3 == 0:
                    err[0] = ERR_FIELD_ZERO
                    err[1] = ef_start
                    return
                wire_type = tag & 7
                if wire_type == 0 or wire_type == 2:
                    if pos >= ev_end:
                        err[0] = ERR_TRUNCATED
                        err[1] = ef_start
                        return
                    v, pos, code = _checked_varint(buf, pos, ev_end)
                    if code != OK:
                        err[0] = code
                        err[1] = ef_start
                        return
                    if wire_type == 2:
                        if v < 0 or v > ev_end - pos:
                            err[0] = ERR_LENGTH
                            err[1] = ef_start
                            return
                        pos += v
                        if tag == 0x22:  # a stat (field 4, wire type 2)
                            n_stats += 1
                else:
                    pos = _skip(buf, pos, ev_end, wire_type)
                    if pos < 0:
                        err[0] = -pos
                        err[1] = ef_start
                        return
        counts[li, C_EVENTS] = n_events
        counts[li, C_STATS] = n_stats


@kernel(nogil=True)
def _fill_pass(buf, ranges, err, line_vals, ev_line, ev_md, ev_mdid, ev_start, ev_dur, ev_occ,
               st_owner, st_key, st_kind, st_raw, st_str, emd, smd, empty_id, line0, ev0):
    """Decode every XLine in `ranges` ([plane, payload start, end] per line).

    `ranges` may be a batch of a capture's lines: `line0` and `ev0` are the
    capture's numbers of its first line and first event (what `ev_line` and
    `st_owner` hold), and the other arrays are the batch's own rows.

    Writes the line scalars, the event columns and the stat columns, in file
    order. Event metadata ids resolve to event_metadata rows through emd
    (MISSING when absent); stat metadata ids and ref values resolve to
    interned names through smd (empty_id when absent); string and bytes
    values are left as ranges (position in st_raw, length in st_str) for
    `dedupe_strings`. Nothing in here allocates or re-binds an array (numba
    would then count references inside the loop), and dense lookup tables
    are read inline (a call per stat costs as much as decoding it).
    """
    emd_keys, emd_vals, emd_params = emd
    smd_keys, smd_vals, smd_params = smd
    ev = 0
    st = 0
    for li in range(ranges.shape[0]):
        plane = ranges[li, 0]
        e_base = emd_params[plane, T_BASE]
        e_count = emd_params[plane, T_COUNT]
        e_low = emd_params[plane, T_LOW]
        e_dense = emd_params[plane, T_DENSE] != 0
        s_base = smd_params[plane, T_BASE]
        s_count = smd_params[plane, T_COUNT]
        s_low = smd_params[plane, T_LOW]
        s_dense = smd_params[plane, T_DENSE] != 0
        pos = ranges[li, 1]
        line_end = ranges[li, 2]
        line_first_event = ev
        timestamp_ns = np.int64(0)
        while pos < line_end:
            # --- an XLine field (the framing was checked by _count_pass) ----
            tag, pos = _framed_varint(buf, pos)
            wire_type = tag & 7
            if wire_type == 1 or wire_type == 5:
                pos += 8 if wire_type == 1 else 4
                continue
            v, pos = _framed_varint(buf, pos)
            if wire_type == 0:
                if tag == 0x08:
                    line_vals[li, L_ID] = v
                elif tag == 0x18:
                    line_vals[li, L_TIMESTAMP_NS] = v
                    timestamp_ns = v
                elif tag == 0x48:
                    line_vals[li, L_DURATION_PS] = v
                elif tag == 0x50:
                    line_vals[li, L_DISPLAY_ID] = v
                continue
            if tag != 0x22:
                if tag == 0x12 or tag == 0x5A:  # name, display_name
                    col = L_NAME_POS if tag == 0x12 else L_DISPLAY_POS
                    line_vals[li, col] = pos
                    line_vals[li, col + 1] = v
                pos += v
                continue
            # --- XEvent (framing checked; stat insides are checked here) -------
            ev_end = pos + v
            md_id = np.int64(0)
            offset = np.int64(0)
            occurrences = np.int64(0)
            duration = np.int64(0)
            while pos < ev_end:
                tag, pos = _framed_varint(buf, pos)
                wire_type = tag & 7
                if wire_type == 1 or wire_type == 5:
                    pos += 8 if wire_type == 1 else 4
                    continue
                v, pos = _framed_varint(buf, pos)
                if wire_type == 0:
                    if tag == 0x08:
                        md_id = v
                    elif tag == 0x10:
                        offset = v
                        occurrences = 0
                    elif tag == 0x28:
                        occurrences = v
                        offset = 0
                    elif tag == 0x18:
                        duration = v
                    continue
                if tag != 0x22:
                    pos += v
                    continue
                # --- XStat ------------------------------------------------
                st_end = pos + v
                key = np.int64(0)
                kind = KIND_NONE
                raw = np.int64(0)
                str_pos = np.int64(0)
                str_len = np.int64(0)
                while pos < st_end:
                    sf_start = pos
                    tag, pos, code = _checked_varint(buf, pos, st_end)
                    if code != OK:
                        err[0] = code
                        err[1] = sf_start
                        return
                    if tag >> 3 == 0:
                        err[0] = ERR_FIELD_ZERO
                        err[1] = sf_start
                        return
                    wire_type = tag & 7
                    if wire_type == 0 or wire_type == 2:
                        if pos >= st_end:
                            err[0] = ERR_TRUNCATED
                            err[1] = sf_start
                            return
                        v, pos, code = _checked_varint(buf, pos, st_end)
                        if code != OK:
                            err[0] = code
                            err[1] = sf_start
                            return
                        if wire_type == 0:
                            if tag == 0x08:
                                key = v
                            elif tag == 0x18:
                                kind = KIND_UINT64
                                raw = v
                            elif tag == 0x20:
                                kind = KIND_INT64
                                raw = v
                            elif tag == 0x38:
                                kind = KIND_REF
                                raw = v
                            continue
                        if v < 0 or v > st_end - pos:
                            err[0] = ERR_LENGTH
                            err[1] = sf_start
                            return
                        if tag == 0x2A or tag == 0x32:  # str_value, bytes_value
                            kind = KIND_STR if tag == 0x2A else KIND_BYTES
                            str_pos = pos
                            str_len = v
                        pos += v
                        continue
                    if wire_type == 1:
                        if pos + 8 > st_end:
                            err[0] = ERR_TRUNCATED
                            err[1] = sf_start
                            return
                        if tag == 0x11:  # double_value: keep its bits
                            raw = np.int64(0)
                            for i in range(8):
                                raw |= np.int64(buf[pos + i]) << (8 * i)
                            kind = KIND_DOUBLE
                        pos += 8
                        continue
                    if wire_type == 5 and pos + 4 <= st_end:
                        pos += 4
                        continue
                    err[0] = ERR_TRUNCATED if wire_type == 5 else ERR_BAD_WIRE_TYPE
                    err[1] = sf_start
                    return
                st_owner[st] = ev0 + ev
                i = key - s_low
                if not s_dense:
                    st_key[st] = _find(smd_keys, smd_vals, smd_params, plane, key, empty_id)
                elif i >= 0 and i < s_count and smd_vals[s_base + i] != MISSING:
                    st_key[st] = smd_vals[s_base + i]
                else:
                    st_key[st] = empty_id
                st_kind[st] = kind
                if kind == KIND_STR or kind == KIND_BYTES:
                    st_raw[st] = str_pos
                    st_str[st] = str_len
                elif kind == KIND_REF:
                    st_raw[st] = raw
                    i = raw - s_low
                    if not s_dense:
                        st_str[st] = _find(smd_keys, smd_vals, smd_params, plane, raw, empty_id)
                    elif i >= 0 and i < s_count and smd_vals[s_base + i] != MISSING:
                        st_str[st] = smd_vals[s_base + i]
                    else:
                        st_str[st] = empty_id
                else:
                    st_raw[st] = raw
                    st_str[st] = -1
                st += 1
            ev_line[ev] = line0 + li
            ev_mdid[ev] = md_id
            i = md_id - e_low
            if not e_dense:
                # A typed default, not the literal constant: that would compile `_find` a second time.
                ev_md[ev] = _find(emd_keys, emd_vals, emd_params, plane, md_id, np.int64(MISSING))
            elif i >= 0 and i < e_count:
                ev_md[ev] = emd_vals[e_base + i]
            else:
                ev_md[ev] = MISSING
            ev_start[ev] = offset
            ev_dur[ev] = duration
            ev_occ[ev] = occurrences
            ev += 1
        # The line's timestamp may follow its events on the wire.
        base_ps = timestamp_ns * 1000
        for e in range(line_first_event, ev):
            ev_start[e] += base_ps


class WireError(ValueError):
    def __init__(self, code: int, position: int):
        self.text = ERROR_TEXT.get(code, "malformed protobuf")
        super().__init__(f"{self.text} (at byte {position})")
        self.code = code
        self.position = position


@dataclass
class LookupTable:
    """Per-plane int64 key → int32 value maps, in a form the walker can search.

    A plane whose keys are nearly dense is a direct array (value at key -
    low, MISSING in holes); otherwise its keys are sorted and searched.
    """

    keys: np.ndarray  # int64, sorted per plane (sparse planes only)
    values: np.ndarray  # int32
    params: np.ndarray  # (P, 4) base, count, low key, dense

    def as_tuple(self) -> tuple:
        return self.keys, self.values, self.params


def lookup_table(per_plane: list[tuple[np.ndarray, np.ndarray]]) -> LookupTable:
    """Build from per plane (keys int64, values int32) pairs (keys unique)."""
    params = np.zeros((max(len(per_plane), 1), 4), dtype=np.int64)
    keys_parts, value_parts = [], []
    base = 0
    for p, (keys, values) in enumerate(per_plane):
        keys = np.asarray(keys, dtype=np.int64)
        values = np.asarray(values, dtype=np.int32)
        if len(keys) == 0:
            params[p] = (base, 0, 0, 1)
            continue
        low, high = int(keys.min()), int(keys.max())
        span = high - low + 1
        if span <= 4 * len(keys) + 1024:
            dense = np.full(span, MISSING, dtype=np.int32)
            dense[keys - low] = values
            keys_parts.append(np.zeros(span, dtype=np.int64))
            value_parts.append(dense)
            params[p] = (base, span, low, 1)
            base += span
        else:
            order = np.argsort(keys, kind="stable")
            keys_parts.append(keys[order])
            value_parts.append(values[order])
            params[p] = (base, len(keys), low, 0)
            base += len(keys)
    keys_all = np.concatenate(keys_parts) if keys_parts else np.zeros(1, dtype=np.int64)
    values_all = np.concatenate(value_parts) if value_parts else np.zeros(1, dtype=np.int32)
    return LookupTable(keys_all, values_all, params)


@dataclass
class LineColumns:
    """Everything the walker decodes from the XLines of one XSpace."""

    line_vals: np.ndarray  # (L, 8) int64, columns L_*
    line_counts: np.ndarray  # (L, 2) int64, columns C_*
    ev_line: np.ndarray  # int32
    ev_md: np.ndarray  # int32, event_metadata row or MISSING
    ev_metadata_id: np.ndarray  # int64
    ev_start_ps: np.ndarray  # int64, absolute (line timestamp included)
    ev_duration_ps: np.ndarray  # int64
    ev_occurrences: np.ndarray  # int64
    st_owner: np.ndarray  # int32, event row
    st_key: np.ndarray  # int32, interned stat name
    st_kind: np.ndarray  # int8
    st_raw: np.ndarray  # int64
    st_str: np.ndarray  # int32, unique string index (str/bytes), interned name (ref), -1
    unique_strings: np.ndarray  # (U, 3) int64: position, length, kind of each unique value


# Lines are walked in batches of about this many bytes of the file, each batch
# followed by `release(end)` (see `count_lines`), so that a memory-mapped
# file's pages need not stay mapped for the whole walk.
BATCH_BYTES = 64 * 2**20

Release = Callable[[int], None]


def line_batches(ranges: np.ndarray, batch_bytes: int | None = None) -> list[tuple[int, int]]:
    """Consecutive runs [a, b) of lines, in file order, each spanning about `batch_bytes` (default
    `BATCH_BYTES`; one line may span more: a batch never splits a line)."""
    batch_bytes = BATCH_BYTES if batch_bytes is None else batch_bytes
    batches, first = [], 0
    for line in range(len(ranges)):
        if ranges[line, 2] - ranges[first, 1] >= batch_bytes or line == len(ranges) - 1:
            batches.append((first, line + 1))
            first = line + 1
    return batches


@kernel(nogil=True)
def _count_metadata(buf, entries, out):
    """Stats (out[0]) and child ids (out[1]) inside XPlane.event_metadata map entries ([payload start,
    end] each). A framing error ends that entry's count: protobuf refuses the entry afterwards."""
    for i in range(entries.shape[0]):
        pos = entries[i, 0]
        end = entries[i, 1]
        while pos < end:
            tag, pos = _varint(buf, pos, end)
            if pos < 0:
                break
            if tag != 0x12:  # not the map entry's value
                pos = _skip(buf, pos, end, tag & 7)
                if pos < 0:
                    break
                continue
            n, q = _varint(buf, pos, end)
            if q < 0 or n < 0 or n > end - q:
                break
            value_end = q + n
            pos = value_end
            while q < value_end:
                t, q = _varint(buf, q, value_end)
                if q < 0:
                    break
                if t == 0x2A:  # stats (field 5)
                    out[0] += 1
                elif t == 0x30:  # child_id (field 6), one varint
                    out[1] += 1
                elif t == 0x32:  # child_id, packed: one id per final varint byte
                    m, r = _varint(buf, q, value_end)
                    if r < 0 or m < 0 or m > value_end - r:
                        break
                    for k in range(r, r + m):
                        if buf[k] < 0x80:
                            out[1] += 1
                q = _skip(buf, q, value_end, t & 7)
                if q < 0:
                    break


def count_metadata(buf: np.ndarray, entries: np.ndarray) -> tuple[int, int]:
    """(stats, child ids) inside event metadata map entries given as (n, 2) [payload start, end]."""
    out = np.zeros(2, dtype=np.int64)
    if len(entries):
        _count_metadata(buf, np.ascontiguousarray(entries, dtype=np.int64), out)
    return int(out[0]), int(out[1])


def count_lines(buf: np.ndarray, ranges: np.ndarray, release: Release | None = None) -> np.ndarray:
    """(L, 2) events and stats per line; raises WireError.

    `release(end)`, when given, is called as the walk passes file position
    `end` (the file's bytes before it are not read again by this pass).
    """
    counts = np.zeros((len(ranges), 2), dtype=np.int64)
    err = np.zeros(2, dtype=np.int64)
    for a, b in line_batches(ranges):
        _count_pass(buf, ranges[a:b], counts[a:b], err)
        if err[0] != OK:
            raise WireError(int(err[0]), int(err[1]))
        if release is not None:
            release(int(ranges[b - 1, 2]))
    return counts


def fresh_array(n: int, dtype) -> np.ndarray:
    """An uninitialised 1-D array in its own anonymous memory mapping, its pages
    mapped in at once where the system allows (MAP_POPULATE).

    Every column is written exactly once, so its first touch is all its memory
    costs; on the virtual machines measured here that dominated the filling
    pass. numpy asks the kernel for transparent huge pages on large arrays,
    which faulted in two to three times slower than plain pages there; one
    populated mapping per column was the cheapest (≈ 0.3 s of CPU instead of
    ≈ 1 s for the ×200 benchmark file's 620 MB of columns).
    """
    dtype = np.dtype(dtype)
    if n == 0:
        return np.empty(0, dtype)
    size = n * dtype.itemsize
    if _POPULATE:
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
    else:
        memory = mmap.mmap(-1, size)
    return np.frombuffer(memory, dtype=dtype, count=n)


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def fill_lines(
    buf: np.ndarray, ranges: np.ndarray, counts: np.ndarray, event_md: LookupTable, stat_names: LookupTable,
    empty_id: int, release: Release | None = None,
) -> LineColumns:
    """Decode the lines counted by `count_lines` into final columns; raises WireError.

    Batch after batch of lines: decoded, their string values deduplicated
    (the only other pass that reads their bytes), then `release(end)` as in
    `count_lines`.
    """
    n_events, n_stats = (int(c) for c in counts.sum(axis=0)) if len(ranges) else (0, 0)
    cols = LineColumns(
        line_vals=np.zeros((len(ranges), 8), dtype=np.int64),
        line_counts=counts,
        ev_line=fresh_array(n_events, np.int32),
        ev_md=fresh_array(n_events, np.int32),
        ev_metadata_id=fresh_array(n_events, np.int64),
        ev_start_ps=fresh_array(n_events, np.int64),
        ev_duration_ps=fresh_array(n_events, np.int64),
        ev_occurrences=fresh_array(n_events, np.int64),
        st_owner=fresh_array(n_stats, np.int32),
        st_key=fresh_array(n_stats, np.int32),
        st_kind=fresh_array(n_stats, np.int8),
        st_raw=fresh_array(n_stats, np.int64),
        st_str=fresh_array(n_stats, np.int32),
        unique_strings=np.zeros((0, 3), np.int64),
    )
    err = np.zeros(2, dtype=np.int64)
    deduper = Deduper(buf)
    first_event = np.concatenate([[0], np.cumsum(counts[:, C_EVENTS])]) if len(ranges) else np.zeros(1, np.int64)
    first_stat = np.concatenate([[0], np.cumsum(counts[:, C_STATS])]) if len(ranges) else np.zeros(1, np.int64)
    for a, b in line_batches(ranges):
        e0, e1, s0, s1 = int(first_event[a]), int(first_event[b]), int(first_stat[a]), int(first_stat[b])
        _fill_pass(
            buf, ranges[a:b], err, cols.line_vals[a:b], cols.ev_line[e0:e1], cols.ev_md[e0:e1],
            cols.ev_metadata_id[e0:e1], cols.ev_start_ps[e0:e1], cols.ev_duration_ps[e0:e1],
            cols.ev_occurrences[e0:e1], cols.st_owner[s0:s1], cols.st_key[s0:s1], cols.st_kind[s0:s1],
            cols.st_raw[s0:s1], cols.st_str[s0:s1], event_md.as_tuple(), stat_names.as_tuple(), empty_id, a, e0,
        )
        if err[0] != OK:
            raise WireError(int(err[0]), int(err[1]))
        deduper.run(cols.st_kind[s0:s1], cols.st_raw[s0:s1], cols.st_str[s0:s1])
        if release is not None:
            release(int(ranges[b - 1, 2]))
    cols.unique_strings = deduper.unique()
    return cols


@kernel(nogil=True)
def _remap_strings(kind, str_col, mapping):
    """Unique-value indices of string/bytes stats → interned string ids."""
    for i in range(kind.shape[0]):
        if kind[i] == KIND_STR or kind[i] == KIND_BYTES:
            str_col[i] = mapping[str_col[i]]


def remap_strings(kind: np.ndarray, str_col: np.ndarray, mapping: np.ndarray) -> None:
    """In place: replace unique-value indices by `mapping` (int32) entries."""
    if len(kind):
        _remap_strings(kind, str_col, mapping)


def precompile() -> None:
    """Compile the kernels the decoder needs last, `_dedupe` and `_remap_strings`, for a build's argument
    types (the "decoder-tail" group of `reportgen.kernels`). On a machine's first build another process
    compiles them while the building process compiles the passes that walk the file, where used."""
    int8s, int32s, int64s = (array_type(t) for t in (types.int8, types.int32, types.int64))
    _dedupe.compile((array_type(types.uint8, True), array_type(types.uint64, True), int8s, int64s, int32s,
                     types.int64, int32s, types.Array(types.int64, 2, "C"), types.int64))
    _remap_strings.compile((int8s, int32s, int32s))
