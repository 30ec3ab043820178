"""The trace page: every event exported as files for Perfetto UI / chrome://tracing.

The export runs in the per-host stage, where the capture is in memory, and
streams its files into `<site>/<run>/trace/<host>/`; only the file list, the
step marks and a binned activity overview come back. `render` writes the
manifest and the page that helps users pick what to open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import altair as alt
import numpy as np

from reportgen import __version__
from reportgen.capture import NO_STRING
from reportgen.core.events.derived_timeline import derived_tpu_lines, has_tensor_core_planes
from reportgen.core.tools.inventory import profile_start_ns
from reportgen.core.tools.memory_profile import ALLOCATION_EVENT, DEALLOCATION_EVENT, _memory_events, snapshot_table
from reportgen.export.host_export import HostExport, export_host
from reportgen.export.tables import AddedRows
from reportgen.export.timeline import CounterSeries
from reportgen.names import host_folder
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.busy_chart import busy_heatmap, busy_rects, busy_slices, pool_threads, short_label
from reportgen.sections.vega import responsive, vega_spec, with_datasets
from reportgen.summary_blocks import TraceBlock

MAX_STEP_MARKS = 2000  # beyond this the overview marks every n-th step


def derived_rows(host: HostContext) -> AddedRows | None:
    """The rows XProf derives on TPU cores (Framework Ops, Framework Name Scope, Source code, Host
    Offload Ops), for the export; None where the capture has no TensorCore plane."""
    if not has_tensor_core_planes(host.capture):
        return None
    derived = derived_tpu_lines(host.events, host.grouping)
    return AddedRows(lines=derived.lines, line=derived.line, start_ps=derived.start_ps,
                     duration_ps=derived.duration_ps, name=derived.name)


def has_memory_events(host: HostContext) -> bool:
    """Whether the capture names an allocator's memory events (read from its strings, not its analyses)."""
    capture = host.capture
    return any(capture.string_id(name) != NO_STRING for name in (ALLOCATION_EVENT, DEALLOCATION_EVENT))


def memory_counters(host: HostContext) -> list[CounterSeries]:
    """The memory profile's memory in use (stack + heap, as XProf's memory profile counts it) per allocator, at
    each of its memory events, for the timeline's counter tracks under the host's threads."""
    if not has_memory_events(host):
        return []
    snapshots = snapshot_table(host.events)
    if snapshots.empty:
        return []
    # The trace's times of the same rows (snapshot_table's time_ps counts from each line's start).
    times = host.events.start[_memory_events(host.events)]
    in_use = (snapshots["stack_bytes"] + snapshots["heap_bytes"]).to_numpy(np.float64)
    ids = snapshots["memory_id"].to_numpy()
    return [CounterSeries("", f"Memory in use · {memory_id or 'allocator'}", "bytes", times[ids == memory_id],
                          in_use[ids == memory_id]) for memory_id in sorted(set(ids.tolist()))]


@dataclass
class TraceHostPart:
    export: HostExport
    # Hosts from older profilers: what their format means for the export, said on the page.
    notes: list[str] = field(default_factory=list)
    # Files the requested format would have had but the host cannot give:
    # {"host", "format", "reason"}, listed in the manifest and the summary block.
    not_produced: list[dict] = field(default_factory=list)
    # When the host's profiler started (ns since the epoch, its `Task Environment` plane), None when the capture
    # does not say: the timeline of every host lays the hosts on one axis by it.
    profile_start_ns: int | None = None


@dataclass
class TraceData:
    run: RunContext
    hosts: list[TraceHostPart]

    @property
    def chunks(self) -> list:
        return [c for h in self.hosts for c in h.export.chunks]


def overview_chart(part: TraceHostPart) -> tuple[dict, int]:
    """Busy share per line over time, with step starts and chunk cuts marked; and how many thread lines it draws
    as pool rows."""
    export = part.export
    labels = [short_label(label) for label in export.row_labels]  # as busy_slices shows them
    # Every row is of this host (the page says which): its name does not start each label.
    prefix = f"{export.host} "
    strip = len(prefix) if labels and all(label.startswith(prefix) for label in labels) else 0
    labels = [label[strip:] for label in labels]
    busy, labels, pooled = pool_threads(busy_slices(export.activity, strip), labels)
    datasets: dict = {"busy": busy_rects(busy)}
    steps = export.steps
    if steps:
        every = max(1, len(steps) // MAX_STEP_MARKS)
        datasets["steps"] = [{"step": n, "start_ms": s / 1e3, "end_ms": e / 1e3} for n, s, e in steps[::every]]
    if export.cuts_us:
        datasets["cuts"] = [{"cut_ms": c / 1e3, "chunk": f"{export.host}-{k + 1:03d}"}
                            for k, c in enumerate(export.cuts_us)]
    spec = _overview_spec(len(labels), bool(steps), bool(export.cuts_us))
    return with_datasets(_with_row_order(spec, list(labels)), datasets), pooled


def combined_timeline(parts: list[TraceHostPart]) -> dict | None:
    """The timeline of every host of a multi-host run: each host's offset on one time axis (ps, added to its own
    times) and what that axis means; None for a run of one host with a timeline.

    A capture's times count from its own profiler's start (XProf's trace viewer shows each host at those times).
    Where every host records that start (`Task Environment`'s profile_start_time, ns since the epoch), hosts are
    placed by it, so that one instant is one x; where one does not, each host keeps its own times and the page
    says that times of two hosts are not comparable.
    """
    members = [p for p in parts if p.export.timeline is not None]
    if len(members) < 2:
        return None
    starts = [p.profile_start_ns for p in members]
    aligned = all(s is not None for s in starts)
    first = min(s for s in starts if s is not None) if aligned else 0
    hosts = []
    for part, start in zip(members, starts):
        timeline = part.export.timeline
        offset = (start - first) * 1000 if aligned and start is not None else 0
        hosts.append({"host": part.export.host, "folder": host_folder(part.export.host), "timeline": timeline,
                      "offset_ps": offset, "span": [timeline.start_ps + offset, timeline.end_ps + offset]})
    return {"hosts": hosts, "aligned": aligned}


def _with_row_order(spec: dict, labels: list[str]) -> dict:
    """A copy of an overview spec whose heatmap rows are these labels, in this order (only the path to the
    row order is copied: specs are never changed once built)."""
    heat, *others = spec["layer"]
    y = heat["encoding"]["y"]
    if "sort" not in y:
        return spec
    heat = {**heat, "encoding": {**heat["encoding"], "y": {**y, "sort": labels}}}
    return {**spec, "layer": [heat, *others]}


@lru_cache(maxsize=64)
def _overview_spec(rows: int, steps: bool, cuts: bool) -> dict:
    """The overview chart of a host with this many rows, without its data or row names: building it
    through Altair costs more than a tiny host's whole export, and a pod's run has thousands of hosts."""
    height = max(80, min(14 * rows, 2400))
    x = alt.X("bin_start_ms:Q", title="Trace time (ms)", scale=alt.Scale(zero=False, nice=False))
    layers = [busy_heatmap("busy", x, [str(row) for row in range(rows)], 300)]
    if steps:
        layers.append(alt.Chart(alt.Data(name="steps")).mark_rule(color="#59636e", strokeDash=[2, 3]).encode(
            x="start_ms:Q",
            tooltip=[alt.Tooltip("step:Q", title="Step"),
                     alt.Tooltip("start_ms:Q", title="Starts (ms)", format=",.3f"),
                     alt.Tooltip("end_ms:Q", title="Ends (ms)", format=",.3f")],
        ))
    if cuts:
        layers.append(alt.Chart(alt.Data(name="cuts")).mark_rule(color="#cf222e", strokeWidth=2).encode(
            x="cut_ms:Q",
            tooltip=[alt.Tooltip("chunk:N", title="Chunk starts"),
                     alt.Tooltip("cut_ms:Q", title="At (ms)", format=",.3f")],
        ))
    return responsive(vega_spec(alt.layer(*layers).properties(height=height)))


class TraceSection(Section):
    slug = "trace"
    title = "Trace"
    # The export reads the capture alone; its JSON writer and deflate release the GIL.
    capture_only = True

    def reads_capture_only(self, host: HostContext) -> bool:
        # On TPU cores the export also takes the rows derived from the host's shared event table and
        # step grouping (`derived_rows`), and with memory events the memory in use from that table
        # (`memory_counters`): computed by the analyses, so not on a thread beside them.
        return not has_tensor_core_planes(host.capture) and not has_memory_events(host)

    def host_part(self, host: HostContext) -> TraceHostPart | None:
        out_dir = f"{host.site_dir}/{host.run}/trace/{host_folder(host.host)}"
        export = export_host(host.capture, host.run, out_dir, host.trace_format,
                             generator=f"reportgen {__version__}", added=derived_rows(host),
                             counters=memory_counters(host))
        if export.events == 0:
            return None
        return TraceHostPart(export=export, profile_start_ns=profile_start_ns(host.capture))

    def combine(self, run: RunContext, parts: dict[str, TraceHostPart]) -> TraceData | None:
        hosts = [parts[h] for h in run.host_names if h in parts]
        return TraceData(run=run, hosts=hosts) if hosts else None

    def summary(self, data: TraceData) -> TraceBlock:
        chunks = data.chunks
        return TraceBlock(chunks=len(chunks), events=sum(h.export.events for h in data.hosts),
                          bytes=sum(c.bytes for c in chunks),
                          not_produced=tuple(entry for h in data.hosts for entry in h.not_produced))

    def render(self, data: TraceData, page) -> None:
        manifest: dict = {"chunks": [c.manifest_entry() for c in data.chunks]}
        not_produced = [entry for h in data.hosts for entry in h.not_produced]
        if not_produced:
            manifest["not_produced"] = not_produced
        page.write_json("trace/manifest.json", manifest)
        hosts = []
        for part in data.hosts:
            export = part.export
            chart, pooled = (overview_chart(part) if export.activity is not None and len(export.activity["label"])
                             else (None, 0))
            hosts.append({
                "host": export.host,
                "folder": host_folder(export.host),  # trace/<folder>/: the host's files
                "events": export.events,
                "flows": export.flows,
                "steps": len(export.steps),
                "chunks": export.chunks,
                # Each file's time range as the overview counts time (from the host's origin), in ms.
                "ranges_ms": [((c.first_us - export.origin_us) / 1e3, (c.last_us - export.origin_us) / 1e3)
                              for c in export.chunks],
                "chart": chart,
                "pooled": pooled,
                "json_bytes": sum(c.json_bytes or 0 for c in export.chunks),
                "notes": part.notes,
                "timeline": export.timeline,
            })
        combined = combined_timeline(data.hosts)
        if combined:  # every member's span on the common axis, for each to share it (timeline.js)
            lo = min(m["span"][0] for m in combined["hosts"])
            hi = max(m["span"][1] for m in combined["hosts"])
            combined["span"] = [lo, hi]
        page.write_html("trace.html", "trace.html", hosts=hosts, errors=data.run.errors,
                        total=self.summary(data), combined=combined)
