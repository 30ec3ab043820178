"""The per-host stage for hosts written by older profilers.

Their per-tool files are read and decoded here, in the worker, and handed to
the legacy sections as their parts: there is no XSpace to build a
HostContext from. Timeline files (ProfilerHook steps, `.trace.json.gz`,
`.trace`) are exported one at a time into the host's output folder
(`reportgen/legacy/trace_export.py`) and never held together.
"""

from __future__ import annotations

from typing import Any

from reportgen import __version__
from reportgen.errors import CaptureError
from reportgen.legacy.sections import legacy_parts
from reportgen.legacy.tool_files import decode_legacy_host
from reportgen.legacy.trace_export import export_legacy_trace
from reportgen.loaders import limits
from reportgen.loaders.logdir import HostFile, file_name
from reportgen.loaders.older_formats import is_timeline
from reportgen.sections.base import HostSummary


def process_legacy_host(host: HostFile, shown_path: str, run: str, site_dir: str,
                        trace_format: str = "json") -> tuple[HostSummary, dict[str, Any], list[CaptureError]]:
    """Decode the host's tool files and export its timeline files into `site_dir` (its output folder).

    A file that cannot be read or decoded is left out and returned among the
    errors (each naming its file): the host's other files still build.
    """
    errors: list[CaptureError] = []
    files = []
    for path in host.legacy:
        if is_timeline(file_name(path)):
            continue
        try:
            files.append((path, limits.read_input(path)))
        except CaptureError as exc:
            errors.append(exc)
        except OSError as exc:
            errors.append(CaptureError(path, f"cannot be read ({exc.strerror or exc})"))
    decoded = decode_legacy_host(host.host, files, errors)
    timelines = [p for p in host.legacy if is_timeline(file_name(p))]
    trace_part, timeline = export_legacy_trace(host.host, run, timelines, site_dir, trace_format,
                                               generator=f"reportgen {__version__}", errors=errors)
    bad = {e.path for e in errors}
    decoded.files = [file_name(p) for p in host.legacy if p not in bad]
    if timeline is not None:
        decoded.timeline = timeline
    overview = decoded.overview
    export = trace_part.export if trace_part is not None else None
    span_us = (max(c.last_us for c in export.chunks) - min(c.first_us for c in export.chunks)
               if export is not None and export.chunks else 0.0)
    summary = HostSummary(
        host=host.host,
        path=shown_path,
        size_bytes=host.size,
        planes=0,
        lines=0,
        events=export.events if export is not None else 0,
        duration_ps=int(round(span_us * 1e6)),
        device_type=decoded.device_type,
        device_core_count=(overview.device_core_count or 0) if overview is not None else 0,
    )
    parts = legacy_parts(decoded)
    if trace_part is not None:
        parts["trace"] = trace_part
    return summary, parts, errors
