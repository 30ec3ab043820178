"""Inputs whose cost could grow faster than their size, timed at growing sizes (the ratio should stay flat).

    PYTHONPATH=. python bench/hostile.py

- one Cloud TPU `.trace` event with N args (its Chrome JSON; repeated keys are found by sorting),
- one XSpace event with N stats (the whole host stage),
- one XSpace line with N empty events (the whole host stage).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from reportgen.legacy.trace_proto import decode_trace_events  # noqa: E402
from reportgen.loaders.logdir import HostFile  # noqa: E402
from reportgen.loaders.proto import trace_events_pb2 as tpb  # noqa: E402
from reportgen.pipeline.host_stage import HostTask, process_host, warm_up  # noqa: E402
from tests.hostile import empty_events  # noqa: E402
from tests.xspace import Space  # noqa: E402

SIZES = (4096, 8192, 16384, 32768)


def trace_args(n: int) -> float:
    trace = tpb.Trace()
    event = trace.trace_events.add(device_id=1, resource_id=2, name="op", timestamp_ps=10, duration_ps=5)
    for i in range(n):
        event.args[f"key{i}"] = f"value{i}"
    columns, _ = decode_trace_events(trace.SerializeToString())
    started = time.perf_counter()
    columns.to_json(np.arange(len(columns)))
    return time.perf_counter() - started


def host_stage(data: bytes) -> float:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "h.xplane.pb"
        path.write_bytes(data)
        started = time.perf_counter()
        outcome = process_host(HostTask(0, "run", HostFile(host="h", path=str(path), size=len(data))),
                               str(Path(folder) / "out"))
        assert outcome.error is None, outcome.error
        return time.perf_counter() - started


def event_stats(n: int) -> float:
    space = Space()
    space.host_plane().line(1, "x").event("train", 0, 1000, stats=[(f"key{i}", f"value{i}") for i in range(n)])
    return host_stage(space.serialize())


def line_events(n: int) -> float:
    return host_stage(empty_events(n * 16))


def main() -> None:
    warm_up()
    trace_args(16)  # compile
    for label, fn in (("trace event args", trace_args), ("XSpace event stats", event_stats),
                      ("XSpace empty events (x16)", line_events)):
        times = [fn(n) for n in SIZES]
        print(f"{label:28s} " + "  ".join(f"N={n:,}: {t:.3f} s" for n, t in zip(SIZES, times))
              + f"   time ×{times[-1] / max(times[0], 1e-9):.1f} for size ×{SIZES[-1] // SIZES[0]}")


if __name__ == "__main__":
    main()
