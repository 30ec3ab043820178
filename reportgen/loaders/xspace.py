"""Decode one `<host>.xplane.pb` (or `.xplane.pb.gz`) into a `HostCapture`.

The bulk (events and their stats) goes through the compiled wire walker in
`wire.py`; planes' names, metadata maps and plane stats are small and are
parsed by protobuf from the byte ranges the walker reports. Ids are then
resolved with vectorised lookups (see `capture.py`).
"""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from reportgen.capture import NO_STRING, HostCapture, StatTable
from reportgen.errors import CaptureError
from reportgen.loaders import wire
from reportgen.loaders.proto import xplane_pb2

GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str, data: bytes) -> bytes:
    """Undo gzip when the name or the content says so; reject obvious foreign files."""
    if path.endswith(".gz"):
        if not data.startswith(GZIP_MAGIC):
            raise CaptureError(path, "named .gz but is not gzip data")
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CaptureError(path, f"gzip data is corrupt or truncated ({exc})") from exc
    elif data.startswith(GZIP_MAGIC):
        raise CaptureError(path, "is gzip-compressed but not named .gz")
    if not data:
        raise CaptureError(path, "is empty (0 bytes)")
    stripped = data.lstrip()[:1]
    if stripped in (b"{", b"["):
        raise CaptureError(path, "looks like JSON, not an XSpace protobuf")
    return data


def decode_xspace(path: str, data: bytes, host: str | None = None) -> HostCapture:
    """Decode raw file bytes. Raises CaptureError naming `path` on bad input."""
    data = read_bytes(path, data)
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        tables = wire.walk(buf)
    except wire.WireError as exc:
        raise CaptureError(path, str(exc)) from exc
    try:
        return _build(path, host or _host_name(path), len(data), buf, tables)
    except DecodeError as exc:
        raise CaptureError(path, f"plane metadata is not valid protobuf ({exc})") from exc


def _host_name(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".xplane.pb.gz", ".xplane.pb"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


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
            np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int8),
            np.zeros(0, np.int64), np.zeros(0, np.int32),
        )
    arr = np.array(rows, dtype=np.int64)
    return StatTable(
        arr[:, 0], arr[:, 1].astype(np.int32), arr[:, 2].astype(np.int8), arr[:, 3], arr[:, 4].astype(np.int32)
    )


def _lookup(sorted_ids: np.ndarray, order_rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row of each wanted id among sorted ids, or -1 when absent."""
    if len(sorted_ids) == 0:
        return np.full(len(wanted), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, wanted)
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    found = sorted_ids[pos_c] == wanted
    return np.where(found, order_rows[pos_c], -1)


def _build(path: str, host: str, size: int, buf: np.ndarray, t: wire.WireTables) -> HostCapture:
    raw = buf.data
    intern = _Interner()

    def join_ranges(rows: np.ndarray) -> bytes:
        return b"".join(bytes(raw[s:e]) for s, e in rows)

    space = xplane_pb2.XSpace.FromString(join_ranges(t.plane_keep[t.plane_keep[:, 0] == -1][:, 1:]))

    # --- planes and their (small) metadata, via protobuf ----------------------
    plane_rows, md_rows, smd_rows = [], [], []
    md_stat_rows: list = []
    plane_stat_rows: list = []
    md_ids_by_plane: list[np.ndarray] = []
    md_rows_by_plane: list[np.ndarray] = []
    smd_names_by_plane: list[dict] = []
    for p in range(len(t.planes)):
        keep = t.plane_keep[t.plane_keep[:, 0] == p][:, 1:]
        # A plane's non-line fields re-framed as a standalone XPlane message.
        plane = xplane_pb2.XPlane.FromString(join_ranges(keep))
        plane_rows.append((plane.id, plane.name, int(t.planes[p, 0]), int(t.planes[p, 1])))
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        smd_names_by_plane.append(names)
        for k in sorted(plane.stat_metadata):
            smd_rows.append((p, k, plane.stat_metadata[k].name))
        ids = []
        for k in sorted(plane.event_metadata):
            md = plane.event_metadata[k]
            row = len(md_rows)
            md_rows.append((p, k, md.name, md.display_name, intern(md.name), intern(md.display_name),
                            tuple(md.child_id)))
            _stat_rows(row, md.stats, names, intern, md_stat_rows)
            ids.append(k)
        md_ids_by_plane.append(np.array(ids, dtype=np.int64))
        md_rows_by_plane.append(np.arange(len(md_rows) - len(ids), len(md_rows), dtype=np.int64))
        _stat_rows(p, plane.stats, names, intern, plane_stat_rows)

    # --- lines ----------------------------------------------------------------
    line_names = [_text(bytes(raw[s : s + n])) for s, n in t.line_strs[:, :2]]
    line_display = [_text(bytes(raw[s : s + n])) for s, n in t.line_strs[:, 2:]]
    lines = pd.DataFrame(
        {
            "plane": t.lines[:, 0],
            "id": t.lines[:, 1],
            "display_id": t.lines[:, 2],
            "name": line_names,
            "display_name": line_display,
            "timestamp_ns": t.lines[:, 3],
            "duration_ps": t.lines[:, 4],
            "first_event": t.lines[:, 5],
            "event_count": t.lines[:, 6],
        }
    )

    # --- events: resolve metadata rows per plane --------------------------------
    ev = t.events
    ev_line = ev[:, 0]
    ev_plane = t.lines[:, 0][ev_line] if len(ev) else np.zeros(0, np.int64)
    ev_md = np.full(len(ev), -1, dtype=np.int64)
    for p in range(len(t.planes)):
        sel = np.flatnonzero(ev_plane == p)
        if len(sel) == 0:
            continue
        ev_md[sel] = _lookup(md_ids_by_plane[p], md_rows_by_plane[p], ev[sel, 1])
    missing = np.flatnonzero(ev_md < 0)
    if len(missing):
        # Events whose metadata id is absent read as an empty default metadata.
        pairs, inverse = np.unique(np.stack([ev_plane[missing], ev[missing, 1]], axis=1), axis=0,
                                   return_inverse=True)
        base = len(md_rows)
        empty = intern("")
        for p, k in pairs:
            md_rows.append((int(p), int(k), "", "", empty, empty, ()))
        ev_md[missing] = base + inverse.reshape(-1)
    line_ts_ps = t.lines[:, 3] * 1000
    start_ps = (line_ts_ps[ev_line] + ev[:, 2]) if len(ev) else np.zeros(0, np.int64)
    events = pd.DataFrame(
        {
            "plane": ev_plane,
            "line": ev_line,
            "md": ev_md,
            "metadata_id": ev[:, 1],
            "start_ps": start_ps,
            "duration_ps": ev[:, 4],
            "num_occurrences": ev[:, 3],
        },
        copy=False,
    )

    # --- event stats: intern names and string values ------------------------------
    st = t.stats
    st_event = st[:, 0]
    st_plane = ev_plane[st_event] if len(st) else np.zeros(0, np.int64)
    kind = st[:, 2].astype(np.int8)
    raw_val = st[:, 3].copy()
    key = np.full(len(st), intern(""), dtype=np.int32)
    str_id = np.full(len(st), NO_STRING, dtype=np.int32)

    values, inverse = wire.unique_strings(buf, t.strs)
    for value_kind, convert in ((wire.KIND_STR, _text), (wire.KIND_BYTES, bytes)):
        rows = np.flatnonzero(kind == value_kind)
        if len(rows) == 0:
            continue
        used = np.unique(inverse[raw_val[rows]])
        ids = np.full(len(values), NO_STRING, dtype=np.int32)
        ids[used] = [intern(convert(values[u])) for u in used]
        str_id[rows] = ids[inverse[raw_val[rows]]]
        raw_val[rows] = 0

    for p, names in enumerate(smd_names_by_plane):
        sel = np.flatnonzero(st_plane == p)
        if len(sel) == 0:
            continue
        ids = np.array(sorted(names), dtype=np.int64)
        # The last entry is the empty name that unknown ids (row -1) read as; it
        # also covers planes that have stats but no stat metadata at all.
        name_ids = np.array([intern(names[i]) for i in ids] + [intern("")], dtype=np.int32)
        key[sel] = name_ids[_lookup(ids, np.arange(len(ids)), st[sel, 1])]
        refs = sel[kind[sel] == wire.KIND_REF]
        if len(refs):
            str_id[refs] = name_ids[_lookup(ids, np.arange(len(ids)), raw_val[refs])]

    planes = pd.DataFrame(plane_rows, columns=["id", "name", "first_line", "line_count"])
    event_metadata = pd.DataFrame(
        md_rows, columns=["plane", "id", "name", "display_name", "name_id", "display_name_id", "child_ids"]
    )
    stat_metadata = pd.DataFrame(smd_rows, columns=["plane", "id", "name"])
    return HostCapture(
        path=path,
        host=host,
        size_bytes=size,
        hostnames=list(space.hostnames),
        errors=list(space.errors),
        warnings=list(space.warnings),
        planes=planes,
        lines=lines,
        events=events,
        event_stats=StatTable(st_event, key, kind, raw_val, str_id),
        event_metadata=event_metadata,
        metadata_stats=_stat_table(md_stat_rows),
        stat_metadata=stat_metadata,
        plane_stats=_stat_table(plane_stat_rows),
        strings=intern.values,
        _string_index=intern.index,
    )
