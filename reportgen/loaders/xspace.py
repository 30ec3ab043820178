"""Decode one `<host>.xplane.pb` (or `.xplane.pb.gz`) into a `HostCapture`.

The bulk (events and their stats) goes through the compiled wire walker in
`wire.py`. Planes' names, metadata maps and plane stats are small: protobuf
parses them from the byte ranges `wire.split_fields` reports, between the
walker's counting pass and its filling pass, so that the filling pass can
resolve metadata ids and stat names as it goes (see `capture.py`).

Memory: the events and stats are written once, into their final compact
columns; the only other large object is the file's bytes. The build reads
every file whole (`loaders.logdir.read_host_file`: a memory-mapped file
truncated under the build would end the process with SIGBUS); a mapped
buffer handed to `decode_xspace` is walked batch after batch of lines, each
batch's pages handed back as the walk passes them. Before anything large is allocated, what the
host will cost (decoded and analysed) is estimated from the counts the
walker found and checked against the memory budget (`limits.py`): a capture
over budget is refused, naming the estimate. The estimate counts the file's
bytes as resident, as they are for a file read whole: for a mapped one it
is high by up to its size, which the budget tolerates (it is meant to be
high rather than low).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from reportgen.capture import NO_STRING, HostCapture, StatTable
from reportgen.errors import CaptureError
from reportgen.loaders import limits, wire
from reportgen.loaders.logdir import file_name
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.stat_protos import decode_stat_protos

GZIP_MAGIC = limits.GZIP_MAGIC

# What one decoded item costs in memory, in bytes, through the whole build of its host (the decoder's columns
# and Python objects, the analyses, the trace export and the pages drawn from them), rounded up from measured
# peaks (RSS of `reportgen build --jobs 1`): the shared GPU capture tiled ×50 / ×200 / ×1000 (bench/build.py:
# 717 / 451 / 357 bytes per event all told, its ≈ 4.4 stats per event and the file's bytes included), a line
# of empty events (≈ 200 bytes each), and captures wide in one dimension: 100,000 lines of one event each
# (1.7 GiB: ≈ 16 KiB per line, its busy bins in the inventory and the trace page above all; 25 KiB when every
# line is busy in every time bin, as 20,000 lines of one long event each are), 100,000 planes of
# one line each (2.5 GiB: ≈ 24 KiB per plane, its line and metadata entry included), 1,000,000 event
# metadata entries (1.5 GiB: ≈ 1.3 KiB each). The estimate is meant to be high rather than low: it decides
# what is refused (×1000, 1.9 GB: 7.7 GiB measured, 12 GiB estimated).
COST_PER_BYTE = 2  # the file's bytes, and strings copied out of them
COST_FIELD = 200  # a field left to protobuf: its row in the field table, its slice, its parsed form
COST_PLANE = 8192
COST_LINE = 28 << 10
COST_EVENT_METADATA = 1800  # 200,000 entries of one event each: 619 MiB peak, with every section of the build
COST_METADATA_BYTE = 3  # beyond COST_PER_BYTE: a name is held as parsed, interned and JSON-escaped
COST_METADATA_STAT = 400
COST_CHILD_ID = 80
COST_EVENT = 250
COST_STAT = 30
# The process's own memory (Python, numpy, pandas, pyarrow, numba, the templates: 220-290 MB measured for the
# build of a small capture, and up to 110 MiB more for the same wide builds run from the full test suite in a clean
# CI environment) and the analyses' own tables, whatever the capture's size.
COST_FIXED = 352 << 20


Buffer = bytes | mmap.mmap


def read_bytes(path: str, data: Buffer) -> Buffer:
    """Undo gzip when the name or the content says so; reject obvious foreign files."""
    if path.endswith(".gz"):
        data = limits.gunzip(path, data)
    elif data[:2] == GZIP_MAGIC:  # a mapped file has no startswith
        raise CaptureError(path, "is gzip-compressed but not named .gz")
    if len(data) == 0:
        raise CaptureError(path, "is empty (0 bytes)")
    stripped = data[:4096].lstrip()[:1]  # not data.lstrip(): that copies the file
    if stripped in (b"{", b"["):
        raise CaptureError(path, "looks like JSON, not an XSpace protobuf")
    return data


def decode_xspace(path: str, data: Buffer, host: str | None = None) -> HostCapture:
    """Decode raw file bytes (or a memory-mapped file). Raises CaptureError
    naming `path` on bad input."""
    data = read_bytes(path, data)
    limits.check(path, len(data) * COST_PER_BYTE + COST_FIXED, f"to decode {limits.format_bytes(len(data))}")
    buf = np.frombuffer(data, dtype=np.uint8)
    # Read-only whatever the buffer (a mapped file is writable, bytes are not): numba compiles every
    # decoder kernel once per flag, and a build reading both kinds would compile the decoder twice.
    buf.flags.writeable = False
    release = _page_release(data)
    try:
        layout = _layout(path, buf)
        counts = wire.count_lines(buf, layout.line_ranges, release)
        _check_budget(path, buf, layout, counts)
    except wire.WireError as exc:
        raise CaptureError(path, f"{exc.text}{_where(buf, exc.position)}") from exc
    try:
        return _build(path, host or _host_name(path), data, buf, layout, counts, release)
    except wire.WireError as exc:  # inside a stat: only the filling pass looks there
        raise CaptureError(path, f"{exc.text}{_where(buf, exc.position)}") from exc
    except DecodeError as exc:
        raise CaptureError(path, f"plane metadata is not valid protobuf ({exc})") from exc


def _page_release(data: Buffer) -> wire.Release | None:
    """For a mapped file: a function that unmaps the pages of the file's bytes before a position
    (they stay in the page cache; a later read maps them again), else None."""
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    page = mmap.PAGESIZE

    def release(end: int) -> None:
        end -= end % page
        if end > 0:
            data.madvise(mmap.MADV_DONTNEED, 0, end)

    return release


def _check_budget(path: str, buf: np.ndarray, layout: _Layout, counts: np.ndarray) -> None:
    """Refuse the capture before its columns are allocated when what it holds would not fit the budget."""
    if limits.current_budget() is None:
        return
    estimate, held = _estimate(buf, layout, counts)
    limits.check(path, estimate, held)


def _estimate(buf: np.ndarray, layout: _Layout, counts: np.ndarray) -> tuple[int, str]:
    """(bytes the host's build will need, what the capture holds in words)."""
    events, stats = (int(c) for c in counts.sum(axis=0)) if len(counts) else (0, 0)
    entries = [f[(f[:, wire.F_NUMBER] == 4) & (f[:, wire.F_WIRE_TYPE] == 2)] for f in layout.plane_fields]
    entries = np.concatenate(entries) if entries else np.zeros((0, 5), np.int64)
    md_stats, child_ids = wire.count_metadata(buf, entries[:, [wire.F_PAYLOAD, wire.F_END]])
    fields = len(layout.space_fields) + sum(len(f) for f in layout.plane_fields)
    estimate = (COST_FIXED + len(buf) * COST_PER_BYTE + fields * COST_FIELD + len(layout.plane_fields) * COST_PLANE
                + len(layout.line_ranges) * COST_LINE + len(entries) * COST_EVENT_METADATA
                + int((entries[:, wire.F_END] - entries[:, wire.F_START]).sum()) * COST_METADATA_BYTE
                + md_stats * COST_METADATA_STAT + child_ids * COST_CHILD_ID + events * COST_EVENT
                + stats * COST_STAT)
    held = [(events, "event", "events"), (stats, "stat", "stats"), (len(layout.line_ranges), "line", "lines"),
            (len(layout.plane_fields), "plane", "planes"),
            (len(entries), "event metadata entry", "event metadata entries")]
    return estimate, ", ".join(f"{n:,} {one if n == 1 else many}" for n, one, many in held if n)


def estimate_memory(path: str, data: bytes) -> int:
    """The memory the build of this capture's host is estimated to need (what the budget is checked against)."""
    buf = np.frombuffer(read_bytes(path, data), dtype=np.uint8)
    try:
        layout = _layout(path, buf)
        return _estimate(buf, layout, wire.count_lines(buf, layout.line_ranges))[0]
    except wire.WireError as exc:
        raise CaptureError(path, f"{exc.text}{_where(buf, exc.position)}") from exc


# What a length-delimited field is, by its number, at each level of an XSpace (levels below a line: its
# events, then their stats).
_LEVELS = (
    {1: "plane"},
    {3: "line", 4: "event metadata entry", 5: "stat metadata entry", 6: "plane stat"},
    {4: "event"},
    {4: "stat"},
)


def _where(buf: np.ndarray, position: int) -> str:
    """Where byte `position` lies in the XSpace: plane, line, event, stat (as deep as the framing tells)."""
    parts: list[str] = []
    start, end = 0, len(buf)
    for labels in _LEVELS:
        fields = wire.fields_before_error(buf, start, end)
        if parts and labels is not _LEVELS[-1]:  # name the plane or line found one level up
            names = fields[(fields[:, wire.F_NUMBER] == 2) & (fields[:, wire.F_WIRE_TYPE] == 2)]
            if len(names) and parts[-1].startswith(("plane", "line")):
                parts[-1] += f" {_shorten(_text(bytes(buf[names[-1, wire.F_PAYLOAD]:names[-1, wire.F_END]])))!r}"
        inside = fields[(fields[:, wire.F_START] <= position) & (position < fields[:, wire.F_END])]
        if not len(inside) or int(inside[0, wire.F_NUMBER]) not in labels or inside[0, wire.F_WIRE_TYPE] != 2:
            break
        field = inside[0]
        number = int(field[wire.F_NUMBER])
        nth = int(np.count_nonzero((fields[:, wire.F_NUMBER] == number) & (fields[:, wire.F_START] < field[2])))
        parts.append(f"{labels[number]} {nth}")
        if labels is _LEVELS[1] and number != 3:
            break
        start, end = int(field[wire.F_PAYLOAD]), int(field[wire.F_END])
    return f" (in {', '.join(parts)}; at byte {position} of the file)" if parts else f" (at byte {position})"


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Times an event may have, in ps (its start, and its end): ±2^62 ps is ±53 days from the capture's start,
# far past any profile, and keeps every difference of two times within 64 bits.
TIME_LIMIT_PS = 1 << 62
START_LOW_PS = -(1 << 61)
# Why events were left out, as "<count> event(s) <reason>".
NEGATIVE_DURATION = "with a negative duration"
OUT_OF_RANGE = "whose start or end lies more than 53 days (2^62 ps) from the capture's start"


def _drop_unplaceable_events(cols: wire.LineColumns) -> dict[str, int]:
    """Leave out events that have no place on a time line: a negative duration (XProf reads durations as
    unsigned, making them end past the end of time) or a start or end beyond ±2^62 ps (the walker's start,
    line timestamp × 1000 + offset, would not even fit 64 bits). Returns {reason: events}; the event and
    stat columns are filtered in place (stats follow their events)."""
    n = len(cols.ev_start_ps)
    if n == 0:
        return {}
    timestamp_ns = cols.line_vals[:, wire.L_TIMESTAMP_NS]
    with np.errstate(over="ignore"):
        base_wrapped = timestamp_ns * np.int64(1000)  # as the walker added it
    base = [int(t) * 1000 for t in timestamp_ns.tolist()]  # exact (lines are few)
    int64 = np.iinfo(np.int64)
    low = np.array([min(max(START_LOW_PS - b, int64.min), int64.max) for b in base], dtype=np.int64)
    high = np.array([min(max(TIME_LIMIT_PS - b, int64.min), int64.max) for b in base], dtype=np.int64)
    line = cols.ev_line
    with np.errstate(over="ignore"):
        offset = cols.ev_start_ps - base_wrapped[line]  # undoes the walker's (wrapping) addition
    placed = (offset >= low[line]) & (offset <= high[line])
    start = np.where(placed, cols.ev_start_ps, 0)  # exact where placed: no wrap happened there
    duration = cols.ev_duration_ps
    negative = duration < 0
    placed &= negative | (duration <= TIME_LIMIT_PS - start)  # the end, too (no overflow: start ≥ -2^61)
    keep = placed & ~negative
    if keep.all():
        return {}
    dropped = {reason: int(count) for reason, count in ((NEGATIVE_DURATION, negative.sum()),
                                                         (OUT_OF_RANGE, (~placed & ~negative).sum())) if count}
    rows = np.flatnonzero(keep)
    renumber = np.cumsum(keep) - 1
    stat_keep = keep[cols.st_owner]
    for name in ("ev_line", "ev_md", "ev_metadata_id", "ev_start_ps", "ev_duration_ps", "ev_occurrences"):
        setattr(cols, name, getattr(cols, name)[rows])
    for name in ("st_key", "st_kind", "st_raw", "st_str"):
        setattr(cols, name, getattr(cols, name)[stat_keep])
    cols.st_owner = renumber[cols.st_owner[stat_keep]].astype(np.int32)
    return dropped


def _host_name(path: str) -> str:
    name = file_name(path)
    for suffix in (".xplane.pb.gz", ".xplane.pb"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@dataclass
class _Layout:
    """Where things are in the file: what protobuf parses, what the walker walks."""

    space_fields: np.ndarray  # (n, 5) XSpace fields other than planes
    plane_fields: list[np.ndarray]  # per plane: its fields other than lines
    line_ranges: np.ndarray  # (L, 3) plane, payload start, end


def _layout(path: str, buf: np.ndarray) -> _Layout:
    seen = [0]  # fields split so far, over the whole file

    def check_fields(n: int) -> None:
        seen[0] += n
        limits.check(path, COST_FIXED + len(buf) * COST_PER_BYTE + seen[0] * COST_FIELD,
                     f"{seen[0]:,} protobuf fields in {limits.format_bytes(len(buf))}")

    top = wire.split_fields(buf, 0, len(buf), check_fields)
    is_plane = (top[:, wire.F_NUMBER] == 1) & (top[:, wire.F_WIRE_TYPE] == 2)
    plane_fields, line_parts = [], []
    for p, row in enumerate(top[is_plane]):
        fields = wire.split_fields(buf, int(row[wire.F_PAYLOAD]), int(row[wire.F_END]), check_fields)
        is_line = (fields[:, wire.F_NUMBER] == 3) & (fields[:, wire.F_WIRE_TYPE] == 2)
        plane_fields.append(fields[~is_line])
        lines = fields[is_line]
        line_parts.append(
            np.column_stack([np.full(len(lines), p, dtype=np.int64), lines[:, wire.F_PAYLOAD], lines[:, wire.F_END]])
        )
    ranges = np.ascontiguousarray(np.concatenate(line_parts)) if line_parts else np.zeros((0, 3), np.int64)
    return _Layout(space_fields=top[~is_plane], plane_fields=plane_fields, line_ranges=ranges)


class _Interner:
    def __init__(self) -> None:
        self.values: list = []
        self.index: dict = {}

    def __call__(self, value) -> int:
        sid = self.index.get(value)
        if sid is None:
            sid = self.index[value] = len(self.values)
            self.values.append(value)
        return sid


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _stat_rows(owner: int, stats, plane_md_names: dict, intern: _Interner, rows: list) -> None:
    """Append protobuf XStats (metadata or plane stats: few) as StatTable rows."""
    for st in stats:
        which = st.WhichOneof("value")
        key = intern(plane_md_names.get(st.metadata_id, ""))
        raw, sid, kind = 0, NO_STRING, wire.KIND_NONE
        if which == "double_value":
            kind, raw = wire.KIND_DOUBLE, int(np.float64(st.double_value).view(np.int64))
        elif which == "uint64_value":
            kind, raw = wire.KIND_UINT64, int(np.uint64(st.uint64_value).view(np.int64))
        elif which == "int64_value":
            kind, raw = wire.KIND_INT64, st.int64_value
        elif which == "str_value":
            kind, sid = wire.KIND_STR, intern(st.str_value)
        elif which == "bytes_value":
            kind, sid = wire.KIND_BYTES, intern(bytes(st.bytes_value))
        elif which == "ref_value":
            kind, raw = wire.KIND_REF, int(np.uint64(st.ref_value).view(np.int64))
            sid = intern(plane_md_names.get(st.ref_value, ""))
        rows.append((owner, key, kind, raw, sid))


def _stat_table(rows: list) -> StatTable:
    if not rows:
        return StatTable(
            np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int8),
            np.zeros(0, np.int64), np.zeros(0, np.int32),
        )
    arr = np.array(rows, dtype=np.int64)
    return StatTable(
        arr[:, 0].astype(np.int32), arr[:, 1].astype(np.int32), arr[:, 2].astype(np.int8), arr[:, 3].copy(),
        arr[:, 4].astype(np.int32),
    )


def _join_ranges(data: bytes, fields: np.ndarray) -> bytes:
    # Slices of the bytes object: slicing a numpy array's memoryview costs
    # ~15 µs per piece, and a plane's metadata map is thousands of pieces.
    return b"".join([data[s:e] for s, e in fields[:, [wire.F_START, wire.F_END]].tolist()])


def _build(path: str, host: str, data: Buffer, buf: np.ndarray, layout: _Layout, counts: np.ndarray,
           release: wire.Release | None) -> HostCapture:
    intern = _Interner()
    space = xplane_pb2.XSpace.FromString(_join_ranges(data, layout.space_fields))

    # --- planes and their (small) metadata, via protobuf ----------------------
    plane_rows, md_rows, smd_rows = [], [], []
    md_stat_rows: list = []
    plane_stat_rows: list = []
    event_md_maps: list[tuple[np.ndarray, np.ndarray]] = []
    stat_name_maps: list[tuple[np.ndarray, np.ndarray]] = []
    lines_per_plane = np.bincount(layout.line_ranges[:, 0], minlength=len(layout.plane_fields))
    first_line = np.concatenate([[0], np.cumsum(lines_per_plane)[:-1]]) if len(lines_per_plane) else []
    for p, fields in enumerate(layout.plane_fields):
        # A plane's non-line fields re-framed as a standalone XPlane message.
        try:
            plane = xplane_pb2.XPlane.FromString(_join_ranges(data, fields))
        except DecodeError as exc:
            names = fields[(fields[:, wire.F_NUMBER] == 2) & (fields[:, wire.F_WIRE_TYPE] == 2)]
            name = _text(data[names[-1, wire.F_PAYLOAD]:names[-1, wire.F_END]]) if len(names) else ""
            raise CaptureError(path, f"the metadata of plane {p}{f' {_shorten(name)!r}' if name else ''} is not "
                               f"valid protobuf ({exc})") from exc
        plane_rows.append((plane.id, plane.name, int(first_line[p]), int(lines_per_plane[p])))
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        smd_ids = sorted(names)
        for k in smd_ids:
            smd_rows.append((p, k, names[k]))
        stat_name_maps.append((np.array(smd_ids, dtype=np.int64), np.array([intern(names[k]) for k in smd_ids],
                                                                            dtype=np.int32)))
        entries = sorted(plane.event_metadata.items(), key=lambda item: item[0])
        ids = [k for k, _ in entries]
        first_row = len(md_rows)
        for k, md in entries:
            row = len(md_rows)
            md_rows.append((p, k, md.name, md.display_name, intern(md.name), intern(md.display_name),
                            tuple(md.child_id)))
            _stat_rows(row, md.stats, names, intern, md_stat_rows)
        event_md_maps.append((np.array(ids, dtype=np.int64), np.arange(first_row, len(md_rows), dtype=np.int32)))
        _stat_rows(p, plane.stats, names, intern, plane_stat_rows)
    empty = intern("")

    # --- events and event stats: the compiled walker ------------------------------
    cols = wire.fill_lines(
        buf, layout.line_ranges, counts, wire.lookup_table(event_md_maps), wire.lookup_table(stat_name_maps), empty,
        release,
    )
    mapping = np.empty(len(cols.unique_strings), dtype=np.int32)
    for u, (pos, length, kind) in enumerate(cols.unique_strings.tolist()):
        value = data[pos : pos + length]
        mapping[u] = intern(_text(value) if kind == wire.KIND_STR else value)
    wire.remap_strings(cols.st_kind, cols.st_str, mapping)
    dropped = _drop_unplaceable_events(cols)

    # --- lines ----------------------------------------------------------------
    lv = cols.line_vals
    line_names = [_text(data[s : s + n]) for s, n in lv[:, [wire.L_NAME_POS, wire.L_NAME_LEN]].tolist()]
    line_display = [_text(data[s : s + n]) for s, n in lv[:, [wire.L_DISPLAY_POS, wire.L_DISPLAY_LEN]].tolist()]
    line_events = (np.bincount(cols.ev_line, minlength=len(layout.line_ranges)).astype(np.int64) if dropped
                   else counts[:, wire.C_EVENTS])
    lines = pd.DataFrame(
        {
            "plane": layout.line_ranges[:, 0].astype(np.int32),
            "id": lv[:, wire.L_ID],
            "display_id": lv[:, wire.L_DISPLAY_ID],
            "name": line_names,
            "display_name": line_display,
            "timestamp_ns": lv[:, wire.L_TIMESTAMP_NS],
            "duration_ps": lv[:, wire.L_DURATION_PS],
            "first_event": np.cumsum(line_events) - line_events,
            "event_count": line_events,
        }
    )

    # --- events ------------------------------------------------------------------
    ev_plane = lines["plane"].to_numpy()[cols.ev_line]
    missing = np.flatnonzero(cols.ev_md == wire.MISSING)
    if len(missing):
        # Events whose metadata id is absent read as an empty default metadata.
        pairs, inverse = np.unique(
            np.stack([ev_plane[missing].astype(np.int64), cols.ev_metadata_id[missing]], axis=1), axis=0,
            return_inverse=True,
        )
        base = len(md_rows)
        for p, k in pairs.tolist():
            md_rows.append((p, k, "", "", empty, empty, ()))
        cols.ev_md[missing] = base + inverse.reshape(-1)
    events = pd.DataFrame(
        {
            "plane": ev_plane,
            "line": cols.ev_line,
            "md": cols.ev_md,
            "metadata_id": cols.ev_metadata_id,
            "start_ps": cols.ev_start_ps,
            "duration_ps": cols.ev_duration_ps,
            "num_occurrences": cols.ev_occurrences,
        },
        copy=False,
    )

    planes = pd.DataFrame(plane_rows, columns=["id", "name", "first_line", "line_count"])
    event_metadata = pd.DataFrame(
        md_rows, columns=["plane", "id", "name", "display_name", "name_id", "display_name_id", "child_ids"]
    )
    stat_metadata = pd.DataFrame(smd_rows, columns=["plane", "id", "name"])
    capture = HostCapture(
        path=path,
        host=host,
        size_bytes=len(data),
        hostnames=list(space.hostnames),
        errors=list(space.errors),
        warnings=list(space.warnings),
        planes=planes,
        lines=lines,
        events=events,
        event_stats=StatTable(cols.st_owner, cols.st_key, cols.st_kind, cols.st_raw, cols.st_str),
        event_metadata=event_metadata,
        metadata_stats=_stat_table(md_stat_rows),
        stat_metadata=stat_metadata,
        plane_stats=_stat_table(plane_stat_rows),
        strings=intern.values,
        _string_index=intern.index,
        dropped=dropped,
    )
    capture.proto_stats = decode_stat_protos(capture)
    return capture
