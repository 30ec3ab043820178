"""The trace export of an older profiler's host: its timeline files, one at a time.

A host's timeline is one `<host>.trace.json.gz` (TF 2.2-2.3), one Cloud TPU
`<host>.trace` (Trace proto) or `<host>.tracetable` (the same protos in a
LevelDB table), or a ProfilerHook `timeline-<step>.json` set
(one step per file). Each file is read, decoded, its chunks written and
its ProfilerHook op totals kept, then dropped before the next is read: memory
holds one input file's events at a time. The result is the trace section's
per-host part (same files, manifest entries and page as an XSpace host), plus
the step-stats op table when the files are ProfilerHook steps.
"""

from __future__ import annotations

from reportgen.errors import CaptureError
from reportgen.export.host_export import FORMATS
from reportgen.legacy.chrome_trace import read_trace
from reportgen.legacy.step_stats import LegacyTimeline, TimelineSteps
from reportgen.legacy.timeline_chunks import ChromeTraceExport
from reportgen.loaders import limits
from reportgen.loaders.logdir import file_name
from reportgen.loaders.older_formats import TIMELINE_PATTERN, timeline_step
from reportgen.names import host_folder
from reportgen.sections.trace import TraceHostPart

NO_PFTRACE = ("No .pftrace for this host: its timeline came as Chrome trace events from an older profiler, and the "
              "Perfetto writer works from XSpace captures; the JSON chunks below open in Perfetto UI as they are.")
JSON_NOTE = ("This host's timeline came from an older profiler's {kind}: the chunks hold its events as the file has "
             "them (processes, threads, names, times and args; XProf's mapping of XSpace lines does not apply). "
             "The activity overview is computed from its complete (X) events{steps}; its times, the step marks, "
             "the chunk cuts and the files' ranges below count from the host's first event, while the files keep "
             "the timestamps they had.")
KINDS = {
    "timeline": "ProfilerHook step files (one file per step; each file is a chunk unless it exceeds the caps)",
    ".trace": "Cloud TPU Trace protobuf (converted as TensorBoard's profile plugin did: one process per device, "
              "one thread per resource, instant events where the duration is 0)",
    ".tracetable": "Cloud TPU streaming trace table (a LevelDB table of Trace protobufs, converted as a .trace "
                   "file: one process per device, one thread per resource, instant events where the duration is 0)",
    ".trace.json.gz": "Chrome trace JSON",
}


def _kind(names: list[str]) -> str:
    if any(TIMELINE_PATTERN.match(n) for n in names):
        return KINDS["timeline"]
    if any(n.endswith(".trace") for n in names):
        return KINDS[".trace"]
    if any(n.endswith(".tracetable") for n in names):
        return KINDS[".tracetable"]
    return KINDS[".trace.json.gz"]


MAX_STEP = (1 << 63) - 1


def _read(path: str):
    """One timeline file, decoded; CaptureError names it when it cannot be read or holds no event."""
    try:
        data = limits.read_input(path)
    except OSError as exc:
        raise CaptureError(path, f"cannot be read ({exc.strerror or exc})") from exc
    trace = read_trace(path, data)
    if trace.count == 0:
        what = "step file" if timeline_step(file_name(path)) is not None else "timeline"
        raise CaptureError(path, f"holds no trace events (a {what} with nothing but metadata in it)")
    return trace


def export_legacy_trace(host: str, run: str, paths: list[str], site_dir: str, trace_format: str = "json",
                        generator: str = "reportgen", errors: list[CaptureError] | None = None,
                        ) -> tuple[TraceHostPart | None, LegacyTimeline | None]:
    """Export the host's timeline files into `<site_dir>/<run>/trace/<host>/`.

    Returns the trace page's part (None when the host has no timeline file,
    or none could be read) and the ProfilerHook op table (None unless the
    files are ProfilerHook steps). A file that cannot be read raises
    CaptureError naming it, or, given `errors`, is added there and skipped:
    the other files are exported.
    """
    if trace_format not in FORMATS:
        raise ValueError(f"trace format must be one of {', '.join(FORMATS)}")
    if not paths:
        return None, None
    export = ChromeTraceExport(host, run, f"{site_dir}/{run}/trace/{host_folder(host)}", generator)
    notes: list[str] = []
    not_produced: list[dict] = []
    steps = TimelineSteps()
    exported: list[str] = []
    for path in paths:
        name = file_name(path)
        step = timeline_step(name)
        try:
            if step is not None and step > MAX_STEP:
                # ProfilerHook numbers steps with TF's int64 global step: a larger number is not one it
                # wrote, and the chunk headers, steps.csv and summary.json cannot hold it.
                raise CaptureError(path, f"names step {step}, beyond the 64-bit step numbers ProfilerHook "
                                         "writes (the file is left out)")
            trace = _read(path)
        except CaptureError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        if step is not None:
            steps.add(trace)
        export.add(trace, step=step, stem=name.split(".", 1)[0] if step is not None else None)
        exported.append(name)
        del trace  # the next file is read only once this one's events are gone
    if not exported:
        return None, None  # every timeline file is an error of its own
    notes.append(JSON_NOTE.format(kind=_kind(exported),
                                  steps="; steps are the step files" if steps.sources else
                                  "; this format marks no steps"))
    if trace_format in ("perfetto", "both"):
        notes.append(NO_PFTRACE + (" JSON was written although only Perfetto was asked for, so that the "
                                   "timeline is exported at all." if trace_format == "perfetto" else ""))
        not_produced.append({"host": host, "format": "pftrace",
                             "reason": "timeline from an older profiler's Chrome trace events: JSON chunks only"})
    timeline = steps.result() if steps.sources else None
    return TraceHostPart(export=export.finish(), notes=notes, not_produced=not_produced), timeline
