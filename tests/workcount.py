"""A deterministic measure of the work a host stage does: the lines of reportgen's own code it executes.

Wall-clock time on a shared machine cannot tell linear from quadratic in a test; the number of lines run
can: a loop over every plane inside a loop over planes runs its lines planes² times, whatever else the
machine does. Library code (numpy, pandas) is not counted, and numpy's work inside one call is invisible
to it: the measure finds the Python loops that grow with the input, not every cost.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import reportgen

_ROOT = str(Path(reportgen.__file__).parent)  # as code objects name their files


class LineCounter:
    def __init__(self) -> None:
        self.lines = 0

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._local

    def _global(self, frame, event, arg):
        return self._local if frame.f_code.co_filename.startswith(_ROOT) else None

    def __enter__(self) -> LineCounter:
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(None)


def host_stage_lines(data: bytes, name: str = "wide.xplane.pb") -> int:
    """Lines of reportgen run by decoding `data` and computing every section's host part."""
    from reportgen.loaders.xspace import decode_xspace
    from reportgen.pipeline.host_stage import host_context, plain_pages
    from reportgen.sections.registry import SECTIONS

    plain_pages()
    with tempfile.TemporaryDirectory() as out, LineCounter() as counter:
        ctx = host_context("run", decode_xspace(name, data), out)
        ctx.op_stats  # noqa: B018
        ctx.forget_stat_columns()
        for section in SECTIONS:
            section.host_part(ctx)
            ctx.forget_stat_columns()
    return counter.lines
