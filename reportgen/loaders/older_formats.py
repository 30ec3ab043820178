"""Which files are older profilers' captures: the per-tool files by tool and the timelines.

Discovery (`logdir.py`) reads a host's older files only when it has no XSpace, and keeps the richest file per
tool: it learns their names here, beside the XSpace's, without loading the older formats' readers. The legacy
host stage (`reportgen.legacy`) splits them into tool files (decoded by `tool_files.py`) and timelines
(exported by `trace_export.py`).
"""

from __future__ import annotations

import re

CHROME_JSON_SUFFIXES = (".trace.json.gz", ".trace.json")
TRACE_PROTO_SUFFIX = ".trace"
TRACETABLE_SUFFIX = ".tracetable"

# Tool files by suffix, best source first: a protobuf result is richer than
# the Cloud TPU JSON one (per-step breakdowns, every input op).
TOOL_SUFFIXES: dict[str, tuple[str, ...]] = {
    "overview": (".overview_page.pb", ".overview_page.json"),
    "input_pipeline": (".input_pipeline.pb", ".input_pipeline.json"),
    "tf_stats": (".tensorflow_stats.pb",),
    "kernel_stats": (".kernel_stats.pb",),
    "pod_viewer": (".pod_viewer.json",),
    "op_profile": (".op_profile.json",),
    "memory_profile": (".memory_profile.json.gz", ".memory_profile.json"),
    "memory_viewer": (".memory_viewer.json",),
    # The trace: a Trace proto first (picosecond times, one file), then Chrome JSON, then the streaming
    # trace table (the same protos in a LevelDB table).
    "trace": (TRACE_PROTO_SUFFIX, *CHROME_JSON_SUFFIXES, TRACETABLE_SUFFIX),
}
TIMELINE_PATTERN = re.compile(r"^timeline-(\d+)\.json(\.gz)?$")


def timeline_step(name: str) -> int | None:
    """The step number in a ProfilerHook file name (`timeline-<step>.json[.gz]`)."""
    match = TIMELINE_PATTERN.match(name)
    return int(match.group(1)) if match else None


def is_trace_source(name: str) -> bool:
    """A file that holds a timeline (and feeds the trace export)."""
    return name.endswith((*CHROME_JSON_SUFFIXES, TRACE_PROTO_SUFFIX, TRACETABLE_SUFFIX))


def is_timeline(name: str) -> bool:
    """A file the trace export reads (a ProfilerHook step or a trace file), not a tool's."""
    return bool(TIMELINE_PATTERN.match(name)) or is_trace_source(name)
