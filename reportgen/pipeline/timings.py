"""Per-stage wall times of a build, so the slow stage is obvious.

Stages are named `<group>.<what>`: `host.*` are summed over hosts (in a
parallel build they overlap, so their sum can exceed the wall time of the
`hosts` stage), `combine.<slug>` / `render.<slug>` are per section, and the
rest are whole-build steps. The instrumentation is a `perf_counter` pair per
stage: nothing per event.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timings:
    """Seconds per stage, in the order stages first ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def merge(self, other: dict[str, float]) -> None:
        for stage, seconds in other.items():
            self.add(stage, seconds)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process and of its finished child processes (the larger)."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * scale


def format_timings(seconds: dict[str, float], total: float, peak_rss: int) -> str:
    """A plain table: stage, seconds, share of the total."""
    width = max([len(s) for s in seconds] + [len("total")])
    lines = [f"{'stage':<{width}}  {'seconds':>8}  {'share':>6}"]
    for stage, value in seconds.items():
        share = value / total if total > 0 else 0.0
        lines.append(f"{stage:<{width}}  {value:8.3f}  {share:6.1%}")
    lines.append(f"{'total':<{width}}  {total:8.3f}")
    lines.append(f"peak RSS {peak_rss / 2**20:,.0f} MiB (this process or one of its workers)")
    return "\n".join(lines)
