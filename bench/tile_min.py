"""A minimal capture tiler for benchmarks: repeat every line's events N times.

    python bench/tile_min.py CAPTURE.xplane.pb N OUT.xplane.pb

Copy k is shifted by k × (capture span + 1 ms). Ids that tie events of one
step together (`group_id`, `step_num`, `iter_num`, `id`, `_p`, `_c`,
`correlation_id`) are offset per copy so that each copy is its own set of
steps. Slow (pure protobuf), but run once per size; outputs are cached by
callers.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reportgen.loaders.proto import xplane_pb2  # noqa: E402

RENUMBERED = ("group_id", "step_num", "iter_num", "id", "_p", "_c", "correlation_id")
GAP_PS = 1_000_000_000


def tile(data: bytes, copies: int) -> bytes:
    space = xplane_pb2.XSpace.FromString(data)
    first, last = None, 0
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for e in line.events:
                s = base + e.offset_ps
                first = s if first is None else min(first, s)
                last = max(last, s + e.duration_ps)
    shift = (last - (first or 0)) + GAP_PS
    for plane in space.planes:
        ids = {k for k, m in plane.stat_metadata.items() if m.name in RENUMBERED}
        for line in plane.lines:
            originals = list(line.events)
            spans = {}
            for k in range(1, copies):
                for e in originals:
                    c = line.events.add()
                    c.CopyFrom(e)
                    c.offset_ps = e.offset_ps + k * shift
                    for st in c.stats:
                        if st.metadata_id in ids:
                            which = st.WhichOneof("value")
                            if which == "int64_value":
                                width = spans.setdefault(st.metadata_id, 1 << 20)
                                st.int64_value += k * width
                            elif which == "uint64_value":
                                st.uint64_value = (st.uint64_value + k * (1 << 20)) % (1 << 64)
            if line.duration_ps:
                line.duration_ps += (copies - 1) * shift
    return space.SerializeToString()


def main() -> None:
    src, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(tile(Path(src).read_bytes(), copies))


if __name__ == "__main__":
    main()
