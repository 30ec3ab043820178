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

from reportgen import __version__
from reportgen.core.events.derived_timeline import derived_tpu_lines, has_tensor_core_planes
from reportgen.export.host_export import HostExport, export_host
from reportgen.export.tables import AddedRows
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


@dataclass
class TraceHostPart:
    export: HostExport
    # Hosts from older profilers: what their format means for the export, said on the page.
    notes: list[str] = field(default_factory=list)
    # Files the requested format would have had but the host cannot give:
    # {"host", "format", "reason"}, listed in the manifest and the summary block.
    not_produced: list[dict] = field(default_factory=list)


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
        # step grouping (`derived_rows`): computed by the analyses, so not on a thread beside them.
        return not has_tensor_core_planes(host.capture)

    def host_part(self, host: HostContext) -> TraceHostPart | None:
        out_dir = f"{host.site_dir}/{host.run}/trace/{host_folder(host.host)}"
        export = export_host(host.capture, host.run, out_dir, host.trace_format,
                             generator=f"reportgen {__version__}", added=derived_rows(host))
        if export.events == 0:
            return None
        return TraceHostPart(export=export)

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
        page.write_html("trace.html", "trace.html", hosts=hosts, errors=data.run.errors,
                        total=self.summary(data))
