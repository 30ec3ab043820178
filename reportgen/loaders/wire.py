"""Compiled protobuf wire-format walker for XSpace files.

Parsing an XSpace with protobuf and then copying every event and stat into
columns costs tens of seconds on a large capture: the per-object Python work,
not the parse, is the expense. This module walks the raw bytes once with
numba and writes events and event stats straight into preallocated numpy
arrays. Everything that is small (plane names, metadata maps, plane stats) is
left to protobuf: the walker only reports the byte ranges of those fields.

Two passes over the bytes: the first counts rows so the second can fill
arrays of the exact size (no growth, no copies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

# Error codes returned by the walker (0 = fine).
OK = 0
ERR_TRUNCATED = 1
ERR_BAD_WIRE_TYPE = 2
ERR_BAD_VARINT = 3
ERR_LENGTH = 4

ERROR_TEXT = {
    ERR_TRUNCATED: "the file ends in the middle of a message (truncated?)",
    ERR_BAD_WIRE_TYPE: "invalid protobuf wire type (not an XSpace protobuf)",
    ERR_BAD_VARINT: "malformed varint (not an XSpace protobuf)",
    ERR_LENGTH: "a length-delimited field runs past its enclosing message",
}

# Stat value kinds, in XStat oneof field order.
KIND_NONE = 0
KIND_DOUBLE = 1
KIND_UINT64 = 2
KIND_INT64 = 3
KIND_STR = 4
KIND_BYTES = 5
KIND_REF = 6


@njit(cache=True, inline="always")
def _varint(buf, pos, end):
    """Decode a varint at pos; returns (value as uint64, new pos, error)."""
    result = np.uint64(0)
    shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            return result, pos, OK
        shift += 7
        if shift >= 70:
            return result, pos, ERR_BAD_VARINT
    return result, pos, ERR_TRUNCATED


@njit(cache=True, inline="always")
def _skip(buf, pos, end, wire_type):
    """Skip a field's payload; returns (new pos, error)."""
    if wire_type == 0:
        _, pos, err = _varint(buf, pos, end)
        return pos, err
    if wire_type == 1:
        if pos + 8 > end:
            return pos, ERR_TRUNCATED
        return pos + 8, OK
    if wire_type == 2:
        n, pos, err = _varint(buf, pos, end)
        if err != OK:
            return pos, err
        if np.int64(n) < 0 or pos + np.int64(n) > end:
            return pos, ERR_LENGTH
        return pos + np.int64(n), OK
    if wire_type == 5:
        if pos + 4 > end:
            return pos, ERR_TRUNCATED
        return pos + 4, OK
    return pos, ERR_BAD_WIRE_TYPE


@njit(cache=True, inline="always")
def _read_double(buf, pos):
    bits = np.uint64(0)
    for i in range(8):
        bits |= np.uint64(buf[pos + i]) << np.uint64(8 * i)
    return bits


@njit(cache=True)
def _walk(buf, fill, counts, planes, plane_keep, lines, line_strs, events, stats, strs):
    """Walk an XSpace. With fill=False only counts rows into `counts`.

    counts: [planes, keep ranges, lines, events, stats, strings, error, error pos]
    planes:     per plane [first line, line count]
    plane_keep: per non-line plane field [plane, start, end] (tag included)
    lines:      per line [plane, id, display_id, timestamp_ns, duration_ps,
                first event, event count]
    line_strs:  per line [name pos, name len, display_name pos, display_name len]
    events:     per event [line, metadata_id, offset_ps, num_occurrences,
                duration_ps, first stat, stat count]
    stats:      per stat [event, metadata_id, kind, raw value]
    strs:       per string/bytes stat value [pos, len]
    """
    n_planes = 0
    n_keep = 0
    n_lines = 0
    n_events = 0
    n_stats = 0
    n_strs = 0
    end = buf.shape[0]
    pos = 0
    while pos < end:
        field_start = pos
        tag, pos, err = _varint(buf, pos, end)
        if err != OK:
            counts[6] = err
            counts[7] = field_start
            return
        field = tag >> np.uint64(3)
        wt = np.int64(tag & np.uint64(7))
        if field != 1 or wt != 2:
            # errors / warnings / hostnames / unknown: kept for protobuf.
            pos, err = _skip(buf, pos, end, wt)
            if err != OK:
                counts[6] = err
                counts[7] = field_start
                return
            if fill:
                plane_keep[n_keep, 0] = -1
                plane_keep[n_keep, 1] = field_start
                plane_keep[n_keep, 2] = pos
            n_keep += 1
            continue
        plen, pos, err = _varint(buf, pos, end)
        plane_end = pos + np.int64(plen)
        if err != OK or plane_end > end:
            counts[6] = ERR_TRUNCATED if err == OK else err
            counts[7] = field_start
            return
        plane_idx = n_planes
        n_planes += 1
        if fill:
            planes[plane_idx, 0] = n_lines
        plane_lines = 0
        while pos < plane_end:
            pf_start = pos
            tag, pos, err = _varint(buf, pos, plane_end)
            if err != OK:
                counts[6] = err
                counts[7] = pf_start
                return
            field = tag >> np.uint64(3)
            wt = np.int64(tag & np.uint64(7))
            if field != 3 or wt != 2:
                pos, err = _skip(buf, pos, plane_end, wt)
                if err != OK:
                    counts[6] = err
                    counts[7] = pf_start
                    return
                if fill:
                    plane_keep[n_keep, 0] = plane_idx
                    plane_keep[n_keep, 1] = pf_start
                    plane_keep[n_keep, 2] = pos
                n_keep += 1
                continue
            llen, pos, err = _varint(buf, pos, plane_end)
            line_end = pos + np.int64(llen)
            if err != OK or line_end > plane_end:
                counts[6] = ERR_LENGTH if err == OK else err
                counts[7] = pf_start
                return
            line_idx = n_lines
            n_lines += 1
            plane_lines += 1
            if fill:
                lines[line_idx, 0] = plane_idx
                lines[line_idx, 5] = n_events
            line_event_count = 0
            while pos < line_end:
                lf_start = pos
                tag, pos, err = _varint(buf, pos, line_end)
                if err != OK:
                    counts[6] = err
                    counts[7] = lf_start
                    return
                field = tag >> np.uint64(3)
                wt = np.int64(tag & np.uint64(7))
                if wt == 0 and (field == 1 or field == 10 or field == 3 or field == 9):
                    v, pos, err = _varint(buf, pos, line_end)
                    if err != OK:
                        counts[6] = err
                        counts[7] = lf_start
                        return
                    if fill:
                        col = 1 if field == 1 else 2 if field == 10 else 3 if field == 3 else 4
                        lines[line_idx, col] = np.int64(v)
                    continue
                if wt == 2 and (field == 2 or field == 11):
                    slen, pos, err = _varint(buf, pos, line_end)
                    if err != OK or pos + np.int64(slen) > line_end:
                        counts[6] = ERR_LENGTH if err == OK else err
                        counts[7] = lf_start
                        return
                    if fill:
                        c = 0 if field == 2 else 2
                        line_strs[line_idx, c] = pos
                        line_strs[line_idx, c + 1] = np.int64(slen)
                    pos += np.int64(slen)
                    continue
                if not (field == 4 and wt == 2):
                    pos, err = _skip(buf, pos, line_end, wt)
                    if err != OK:
                        counts[6] = err
                        counts[7] = lf_start
                        return
                    continue
                elen, pos, err = _varint(buf, pos, line_end)
                ev_end = pos + np.int64(elen)
                if err != OK or ev_end > line_end:
                    counts[6] = ERR_LENGTH if err == OK else err
                    counts[7] = lf_start
                    return
                ev = n_events
                n_events += 1
                line_event_count += 1
                if fill:
                    events[ev, 0] = line_idx
                    events[ev, 5] = n_stats
                ev_stats = 0
                while pos < ev_end:
                    ef_start = pos
                    tag, pos, err = _varint(buf, pos, ev_end)
                    if err != OK:
                        counts[6] = err
                        counts[7] = ef_start
                        return
                    field = tag >> np.uint64(3)
                    wt = np.int64(tag & np.uint64(7))
                    if wt == 0 and (field == 1 or field == 2 or field == 5 or field == 3):
                        v, pos, err = _varint(buf, pos, ev_end)
                        if err != OK:
                            counts[6] = err
                            counts[7] = ef_start
                            return
                        if fill:
                            if field == 1:
                                events[ev, 1] = np.int64(v)
                            elif field == 2:
                                events[ev, 2] = np.int64(v)
                                events[ev, 3] = 0
                            elif field == 5:
                                events[ev, 3] = np.int64(v)
                                events[ev, 2] = 0
                            else:
                                events[ev, 4] = np.int64(v)
                        continue
                    if not (field == 4 and wt == 2):
                        pos, err = _skip(buf, pos, ev_end, wt)
                        if err != OK:
                            counts[6] = err
                            counts[7] = ef_start
                            return
                        continue
                    slen_, pos, err = _varint(buf, pos, ev_end)
                    st_end = pos + np.int64(slen_)
                    if err != OK or st_end > ev_end:
                        counts[6] = ERR_LENGTH if err == OK else err
                        counts[7] = ef_start
                        return
                    st = n_stats
                    n_stats += 1
                    ev_stats += 1
                    if fill:
                        stats[st, 0] = ev
                        stats[st, 1] = 0
                        stats[st, 2] = KIND_NONE
                        stats[st, 3] = 0
                    while pos < st_end:
                        sf_start = pos
                        tag, pos, err = _varint(buf, pos, st_end)
                        if err != OK:
                            counts[6] = err
                            counts[7] = sf_start
                            return
                        field = tag >> np.uint64(3)
                        wt = np.int64(tag & np.uint64(7))
                        if wt == 0 and (field == 1 or field == 3 or field == 4 or field == 7):
                            v, pos, err = _varint(buf, pos, st_end)
                            if err != OK:
                                counts[6] = err
                                counts[7] = sf_start
                                return
                            if fill:
                                if field == 1:
                                    stats[st, 1] = np.int64(v)
                                else:
                                    stats[st, 2] = (
                                        KIND_UINT64 if field == 3 else KIND_INT64 if field == 4 else KIND_REF
                                    )
                                    stats[st, 3] = np.int64(v)
                            continue
                        if wt == 1 and field == 2:
                            if pos + 8 > st_end:
                                counts[6] = ERR_TRUNCATED
                                counts[7] = sf_start
                                return
                            if fill:
                                stats[st, 2] = KIND_DOUBLE
                                stats[st, 3] = np.int64(_read_double(buf, pos))
                            pos += 8
                            continue
                        if wt == 2 and (field == 5 or field == 6):
                            vlen, pos, err = _varint(buf, pos, st_end)
                            if err != OK or pos + np.int64(vlen) > st_end:
                                counts[6] = ERR_LENGTH if err == OK else err
                                counts[7] = sf_start
                                return
                            if fill:
                                stats[st, 2] = KIND_STR if field == 5 else KIND_BYTES
                                stats[st, 3] = n_strs
                                strs[n_strs, 0] = pos
                                strs[n_strs, 1] = np.int64(vlen)
                            n_strs += 1
                            pos += np.int64(vlen)
                            continue
                        pos, err = _skip(buf, pos, st_end, wt)
                        if err != OK:
                            counts[6] = err
                            counts[7] = sf_start
                            return
                if fill:
                    events[ev, 6] = ev_stats
            if fill:
                lines[line_idx, 6] = line_event_count
        if fill:
            planes[plane_idx, 1] = plane_lines
    counts[0] = n_planes
    counts[1] = n_keep
    counts[2] = n_lines
    counts[3] = n_events
    counts[4] = n_stats
    counts[5] = n_strs


@njit(cache=True)
def _hash_ranges(buf, strs):
    """64-bit FNV-1a of each [pos, len) byte range (used to deduplicate strings)."""
    n = strs.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        p = strs[i, 0]
        for j in range(p, p + strs[i, 1]):
            h ^= np.uint64(buf[j])
            h *= np.uint64(1099511628211)
        out[i] = h
    return out


@njit(cache=True)
def _ranges_equal(buf, strs, rep):
    """True when every range equals the bytes of its representative range."""
    for i in range(strs.shape[0]):
        r = rep[i]
        if r == i:
            continue
        n = strs[i, 1]
        if n != strs[r, 1]:
            return False
        a = strs[i, 0]
        b = strs[r, 0]
        for j in range(n):
            if buf[a + j] != buf[b + j]:
                return False
    return True


@dataclass
class WireTables:
    """Raw columns of one XSpace, before any id resolution."""

    planes: np.ndarray  # (P, 2) first line, line count
    plane_keep: np.ndarray  # (K, 3) plane (-1 = XSpace), start, end
    lines: np.ndarray  # (L, 7)
    line_strs: np.ndarray  # (L, 4)
    events: np.ndarray  # (E, 7)
    stats: np.ndarray  # (S, 4)
    strs: np.ndarray  # (T, 2)


class WireError(ValueError):
    def __init__(self, code: int, position: int):
        super().__init__(f"{ERROR_TEXT.get(code, 'malformed protobuf')} (at byte {position})")
        self.code = code
        self.position = position


def walk(buf: np.ndarray) -> WireTables:
    """Decode the XSpace wire bytes in `buf` (uint8 array) into raw columns."""
    counts = np.zeros(8, dtype=np.int64)
    empty2 = np.zeros((0, 2), dtype=np.int64)
    empty3 = np.zeros((0, 3), dtype=np.int64)
    empty4 = np.zeros((0, 4), dtype=np.int64)
    empty7 = np.zeros((0, 7), dtype=np.int64)
    _walk(buf, False, counts, empty2, empty3, empty7, empty4, empty7, empty4, empty2)
    if counts[6] != OK:
        raise WireError(int(counts[6]), int(counts[7]))
    n_planes, n_keep, n_lines, n_events, n_stats, n_strs = (int(c) for c in counts[:6])
    tables = WireTables(
        planes=np.zeros((n_planes, 2), dtype=np.int64),
        plane_keep=np.zeros((n_keep, 3), dtype=np.int64),
        lines=np.zeros((n_lines, 7), dtype=np.int64),
        line_strs=np.zeros((n_lines, 4), dtype=np.int64),
        events=np.zeros((n_events, 7), dtype=np.int64),
        stats=np.empty((n_stats, 4), dtype=np.int64),
        strs=np.empty((n_strs, 2), dtype=np.int64),
    )
    counts[:] = 0
    _walk(
        buf, True, counts, tables.planes, tables.plane_keep, tables.lines, tables.line_strs,
        tables.events, tables.stats, tables.strs,
    )
    if counts[6] != OK:  # pragma: no cover - the counting pass saw the same bytes
        raise WireError(int(counts[6]), int(counts[7]))
    return tables


def unique_strings(buf: np.ndarray, strs: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """Deduplicate byte ranges: (unique values, index of each range's value).

    Ranges are grouped by a 64-bit hash and then compared byte for byte with
    their group's representative, so a hash collision can never merge two
    different strings (it falls back to exact Python dedup instead).
    """
    if len(strs) == 0:
        return [], np.zeros(0, dtype=np.int64)
    hashes = _hash_ranges(buf, strs)
    uniq, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    rep = first[inverse]
    raw = buf.data
    if _ranges_equal(buf, strs, rep):
        values = [bytes(raw[p : p + n]) for p, n in strs[first]]
        return values, inverse.astype(np.int64)
    index: dict[bytes, int] = {}
    out = np.empty(len(strs), dtype=np.int64)
    for i, (p, n) in enumerate(strs):
        out[i] = index.setdefault(bytes(raw[p : p + n]), len(index))
    return list(index), out
