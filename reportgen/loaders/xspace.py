"""Decode one `<host>.xplane.pb` (or `.xplane.pb.gz`) into a `HostCapture`.

The bulk (events and their stats) goes through the compiled wire walker in
`wire.py`. Planes' names, metadata maps and plane stats are small: protobuf
parses them from the byte ranges `wire.split_fields` reports, between the
walker's counting pass and its filling pass, so that the filling pass can
resolve metadata ids and stat names as it goes (see `capture.py`).

Memory: the events and stats are written once, into their final compact
columns; the only other large object is the file's bytes. A local file comes
memory-mapped (`loaders.logdir.map_file`): the walker reads it batch after
batch of lines and hands each batch's pages back as it passes them, so the
file's bytes and its columns are never resident together (a gzipped or
remote file is read whole).
"""

from __future__ import annotations

import gzip
import mmap
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from reportgen.capture import NO_STRING, HostCapture, StatTable
from reportgen.errors import CaptureError
from reportgen.loaders import wire
from reportgen.loaders.logdir import file_name
from reportgen.loaders.proto import xplane_pb2
from reportgen.loaders.stat_protos import decode_stat_protos

GZIP_MAGIC = b"\x1f\x8b"


Buffer = bytes | mmap.mmap


def read_bytes(path: str, data: Buffer) -> Buffer:
    """Undo gzip when the name or the content says so; reject obvious foreign files."""
    if path.endswith(".gz"):
        if data[:2] != GZIP_MAGIC:
            raise CaptureError(path, "named .gz but is not gzip data")
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CaptureError(path, f"gzip data is corrupt or truncated ({exc})") from exc
    elif data[:2] == GZIP_MAGIC:
        raise CaptureError(path, "is gzip-compressed but not named .gz")
    if len(data) == 0:
        raise CaptureError(path, "is empty (0 bytes)")
    stripped = data[:4096].lstrip()[:1]  # not data.lstrip(): that copies the file
    if stripped in (b"{", b"["):
        raise CaptureError(path, "looks like JSON, not an XSpace protobuf")
    return data


def decode_xspace(path: str, data: Buffer, host: str | None = None) -> HostCapture:
    """Decode raw file bytes (or a file mapped with `loaders.logdir.map_file`). Raises CaptureError
    naming `path` on bad input."""
    data = read_bytes(path, data)
    buf = np.frombuffer(data, dtype=np.uint8)
    release = _page_release(data)
    try:
        layout = _layout(buf)
        counts = wire.count_lines(buf, layout.line_ranges, release)
    except wire.WireError as exc:
        raise CaptureError(path, str(exc)) from exc
    try:
        return _build(path, host or _host_name(path), data, buf, layout, counts, release)
    except wire.WireError as exc:  # inside a stat: only the filling pass looks there
        raise CaptureError(path, str(exc)) from exc
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


def _layout(buf: np.ndarray) -> _Layout:
    top = wire.split_fields(buf, 0, len(buf))
    is_plane = (top[:, wire.F_NUMBER] == 1) & (top[:, wire.F_WIRE_TYPE] == 2)
    plane_fields, line_parts = [], []
    for p, row in enumerate(top[is_plane]):
        fields = wire.split_fields(buf, int(row[wire.F_PAYLOAD]), int(row[wire.F_END]))
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
        plane = xplane_pb2.XPlane.FromString(_join_ranges(data, fields))
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

    # --- lines ----------------------------------------------------------------
    lv = cols.line_vals
    line_names = [_text(data[s : s + n]) for s, n in lv[:, [wire.L_NAME_POS, wire.L_NAME_LEN]].tolist()]
    line_display = [_text(data[s : s + n]) for s, n in lv[:, [wire.L_DISPLAY_POS, wire.L_DISPLAY_LEN]].tolist()]
    line_events = counts[:, wire.C_EVENTS]
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
    )
    capture.proto_stats = decode_stat_protos(capture)
    return capture
