"""A minimal tiler for the trace benchmark: a capture repeated N times in time.

    python bench/trace_tile.py CAPTURE.xplane.pb N OUT.xplane.pb

Copy k of every line's events is shifted by k × (capture span + 1 ms); stats
are copied unchanged (enough to measure the trace export, which does not
care whether ids repeat). The project's full tiler (`bench/tile.py`, which
also renumbers steps and ids per copy) is used instead when present.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reportgen.loaders.proto import xplane_pb2  # noqa: E402

GAP_PS = 1_000_000_000


def _field(number: int, length: int) -> bytes:
    out = bytearray()
    for value in ((number << 3) | 2, length):
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def tile(data: bytes, copies: int) -> bytes:
    space = xplane_pb2.XSpace.FromString(data)
    starts, ends = [], []
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                starts.append(line.timestamp_ns * 1000 + ev.offset_ps)
                ends.append(starts[-1] + ev.duration_ps)
    period = (max(ends) - min(starts) + GAP_PS) if starts else GAP_PS
    planes = []
    for plane in space.planes:
        parts = [xplane_pb2.XPlane(id=plane.id, name=plane.name).SerializeToString()]
        for line in plane.lines:
            head = xplane_pb2.XLine()
            head.CopyFrom(line)
            del head.events[:]
            holder = xplane_pb2.XLine()
            holder.events.extend(line.events)
            base = [ev.offset_ps for ev in holder.events]
            chunks = []
            for k in range(copies):
                for ev, offset in zip(holder.events, base):
                    ev.offset_ps = offset + k * period
                chunks.append(holder.SerializeToString())
            body = head.SerializeToString() + b"".join(chunks)
            parts.append(_field(3, len(body)) + body)
        tail = xplane_pb2.XPlane()
        tail.event_metadata.MergeFrom(plane.event_metadata)
        tail.stat_metadata.MergeFrom(plane.stat_metadata)
        tail.stats.extend(plane.stats)
        parts.append(tail.SerializeToString())
        body = b"".join(parts)
        planes.append(_field(1, len(body)) + body)
    rest = xplane_pb2.XSpace(errors=space.errors, warnings=space.warnings, hostnames=space.hostnames)
    return b"".join(planes) + rest.SerializeToString()


def ensure_tiled(source: Path, copies: int, out_dir: Path) -> Path:
    """The ×N tile of `source` under out_dir/trace_tiles/<run>_xN/, written once (apart from the full
    tiler's files, which also renumber ids)."""
    target = out_dir / "trace_tiles" / f"{source.parent.name}_x{copies}" / source.name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(tile(source.read_bytes(), copies))
        tmp.replace(target)
    return target


if __name__ == "__main__":
    src, n, dst = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    dst.write_bytes(tile(src.read_bytes(), n))
