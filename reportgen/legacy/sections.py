"""Pages for runs written by older profilers (per-tool files, ProfilerHook timelines).

These files hold finished tool results, not events, so the XSpace sections
cannot recompute them; each page shows the numbers its file holds and says
what the format cannot provide. The `overview`, `input_pipeline` and
`tf_stats` summary blocks use the XSpace sections' keys, so an old run and a
new one compare side by side.
"""

from __future__ import annotations

import typing
from dataclasses import asdict, replace
from typing import Any

import altair as alt
import pandas as pd

from reportgen.core.input.advice import in_our_words
from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.core.tools.overview import dominant_category
from reportgen.core.tools.tf_stats import TOP_OPS_IN_SUMMARY
from reportgen.legacy.memory_viewer import legacy_memory_viewer
from reportgen.legacy.step_stats import LegacyTimeline
from reportgen.legacy.tool_files import (
    LegacyHost,
    LegacyInputPipeline,
    LegacyKernelStats,
    LegacyMemoryProfile,
    LegacyOpProfile,
    LegacyOverview,
    LegacyPodViewer,
    LegacyTfStats,
)
from reportgen.names import file_part, joined_file_name
from reportgen.sections.base import RunContext, Section
from reportgen.sections.charts import step_chart
from reportgen.sections.vega import vega_spec
from reportgen.summary_blocks import (
    Allocator,
    Block,
    KernelStatsBlock,
    MemoryBlock,
    OpCategory,
    RecordedInputPipelineBlock,
    RecordedOpProfileBlock,
    RecordedOverviewBlock,
    RecordedPodViewerBlock,
    RecordedTimelineBlock,
    StepTime,
    TfStatsBlock,
    TfStatsOp,
)

TABLE_ROWS = 500  # on the page; the CSV has every row


# What each tool page misses for a run with no XSpace, by tool.
MISSING = {
    "legacy_overview": "Older overview files hold the finished analysis: no trace, no per-op HLO detail, "
                       "no memory timeline, and no numbers the profiler of the day did not write.",
    "legacy_input_pipeline": "No tf.data iterator tree: older input-pipeline files hold the per-op totals only.",
    "legacy_tf_stats": "The with-IDLE table and the pie charts of the XSpace page are left out; the table is "
                       "the file's without-IDLE one.",
    "legacy_kernel_stats": "Kernels aggregated as the file holds them: no per-host split and no pie charts.",
    "legacy_op_profile": "The op tree by category as the file holds it (time and FLOPS utilization as shares); "
                         "no memory-bandwidth utilization and no HLO program view.",
    "legacy_memory_profile": "The memory timeline and peak per allocator as the file holds them; the table of "
                             "allocations live at the peak is left out.",
    "legacy_pod_viewer": "Cloud TPU pod-viewer files hold per-core step stats and all-reduce ops; no topology "
                         "chart and no channel view.",
    "legacy_timeline": "ProfilerHook step stats hold op spans per device only: no memory timeline, no "
                       "input-pipeline analysis, no step breakdown into categories.",
}


def _step_chart(steps: pd.DataFrame) -> dict | None:
    """The stacked step chart of the categories the file has time in."""
    present = [k for k in CATEGORY_KEYS if k in steps and float(steps[k].abs().sum()) > 0]
    if steps.empty or not present:
        return None
    return step_chart(steps.rename(columns={"step": "step_name"}), {k: CATEGORY_LABELS[k] for k in present})


def timeline_chart(steps: pd.DataFrame) -> dict | None:
    if steps.empty:
        return None
    chart = (
        alt.Chart(steps)
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="Step (timeline file)"),
            y=alt.Y("step_time_ms:Q", title="Step time (ms): first op start to last op end"),
            tooltip=[alt.Tooltip("step:O"), alt.Tooltip("step_time_ms:Q", format=",.3f"), alt.Tooltip("ops:Q")],
        )
        .properties(width=800, height=240)
    )
    return vega_spec(chart)


# What the pages show of the files' tables: each one's identifying column and its key numbers by default, the
# rest under the table's Columns chooser; labels in words, units as the pages write them. The CSVs keep every column
# under the files' own names.
KEY_COLUMNS = {"rank", "step", "op_name", "kernel_name", "name", "op", "operation", "path", "device", "core",
               "occurrences", "count", "total_self_time_us", "total_duration_us", "duration_us", "total_us", "time_ms",
               "self_time_ms", "host_self_percent", "device_self_percent", "self_time_percent", "time_percent",
               "percent_of_device", "step_time_ms", "bottleneck"}
HIDDEN_COLUMNS = {"avg_time_us", "avg_self_time_us", "device_cumulative_percent", "host_cumulative_percent",
                  "cumulative_percent", "gflops", "memory_bw_gbps", "operational_intensity", "registers_per_thread",
                  "shmem_bytes", "block_dim", "grid_dim", "min_duration_us", "max_duration_us", "depth",
                  "is_op_tensor_core_eligible", "replica", "total_time_us", "bound_by"}
UNIT_SUFFIXES = {"_us": " (µs)", "_ms": " (ms)", "_percent": " (%)", "_bytes": " (bytes)", "_gbps": " (GiB/s)"}
# The names the other pages give these columns.
LABELS = {"flops_percent": "FLOPS utilization (%)", "gflops": "FLOP rate (GFLOP/s)"}


def _label(column: str) -> str:
    """`total_self_time_us` → `Total self time (µs)`."""
    if column in LABELS:
        return LABELS[column]
    unit = ""
    for suffix, text in UNIT_SUFFIXES.items():
        if column.endswith(suffix):
            column, unit = column[: -len(suffix)], text
            break
    words = column.replace("_", " ").strip()
    return (words[:1].upper() + words[1:] + unit) if words else column


def _table(frame: pd.DataFrame, table_id: str) -> dict:
    shown = frame.head(TABLE_ROWS)
    columns = [{"key": str(c), "label": _label(str(c)), "key_column": c in KEY_COLUMNS, "hidden": c in HIDDEN_COLUMNS,
                # shares as the other pages write them: two decimals and a % sign
                "format": "pct" if str(c).endswith("_percent") else ""}
               for c in shown.columns]
    return {"id": table_id, "columns": columns, "rows": shown.to_dict("split")["data"], "total": int(len(frame))}


class LegacySection(Section):
    """One tool of an older capture; `host_part` is never called for it: the
    legacy loader hands its parts over directly (build.process_host)."""

    tool = ""  # LegacyHost attribute

    def declared_part_type(self) -> Any:
        """The part is the LegacyHost field of the tool, as the legacy loader fills it."""
        hint = typing.get_type_hints(LegacyHost)[self.slug.removeprefix("legacy_")]
        return next(a for a in typing.get_args(hint) if a is not type(None))

    def combine(self, run: RunContext, parts: dict[str, Any]) -> dict | None:
        if not parts:
            return None
        # In a run that also has XSpace hosts, their blocks speak for the run.
        return {"hosts": parts, "in_summary": not (set(run.host_names) - set(parts))}

    def summary(self, data: dict) -> Block | None:
        return self.block(next(iter(data["hosts"].values()))) if data["in_summary"] else None

    def block(self, part: Any) -> Block:
        raise NotImplementedError

    def render(self, data: dict, page) -> None:
        panels = []
        for index, (host, part) in enumerate(data["hosts"].items()):
            panels.append({"host": host, "index": index, **self.panel(host, part, page)})
        page.write_html(f"{self.slug}.html", "legacy.html", title=self.title, tool=self.slug,
                        panels=panels, missing=MISSING[self.slug])

    def panel(self, host: str, part: Any, page) -> dict:
        raise NotImplementedError


def _safe(host: str) -> str:
    """The host in its CSV names (`<host>__all_reduce_ops.csv`, the longest suffix) and table ids."""
    return file_part(host, room=len("__all_reduce_ops.csv"))


class LegacyOverviewSection(LegacySection):
    slug = "legacy_overview"
    title = "Overview"
    summary_key = "overview"

    def block(self, o: LegacyOverview) -> RecordedOverviewBlock:
        # The run's answer (sections/verdict.py) reads the statement and the bottleneck as it reads an XSpace run's.
        stated = bool(len(o.steps)) or o.step_time is not None
        return RecordedOverviewBlock(
            source=o.source, steps=int(len(o.steps)),
            step_time_ms=StepTime(**asdict(o.step_time)) if o.step_time is not None else None,
            breakdown_ms=o.breakdown_ms, input_percent=o.input_percent, input_bound=o.input_bound,
            device_idle_percent=o.device_idle_percent, host_idle_percent=o.host_idle_percent,
            device_core_count=o.device_core_count, host_count=o.host_count, device_type=o.device_type,
            statement=o.statement if stated else None,
            bottleneck=dominant_category(o.breakdown_ms or {}) if stated else None)

    def panel(self, host: str, o: LegacyOverview, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__steps.csv", o.steps)
        page.write_csv(f"data/{self.slug}/{_safe(host)}__top_ops.csv", o.top_ops)
        return {"o": o, "chart": _step_chart(o.steps), "top_ops": _table(o.top_ops, f"top-{_safe(host)}"),
                "breakdown": [(CATEGORY_LABELS[k], v) for k, v in (o.breakdown_ms or {}).items() if v]}


class LegacyInputPipelineSection(LegacySection):
    slug = "legacy_input_pipeline"
    title = "Input pipeline"
    summary_key = "input_pipeline"

    def block(self, p: LegacyInputPipeline) -> RecordedInputPipelineBlock:
        return RecordedInputPipelineBlock(host_ms={k: v / 1e3 for k, v in p.host_us.items()},
                                          input_percent=p.input_percent)

    def panel(self, host: str, p: LegacyInputPipeline, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__input_ops.csv", p.input_ops)
        p = replace(p, next_step=in_our_words(p.next_step, on_input_page=True))
        return {"p": p, "chart": _step_chart(p.steps), "ops": _table(p.input_ops, f"inops-{_safe(host)}"),
                "host_ms": {k: v / 1e3 for k, v in p.host_us.items()}}


class LegacyTfStatsSection(LegacySection):
    slug = "legacy_tf_stats"
    title = "TF stats"
    summary_key = "tf_stats"

    def block(self, t: LegacyTfStats) -> TfStatsBlock:
        ops = t.ops
        top = []
        for side in ("Device", "Host"):
            rows = ops[ops["host_or_device"] == side].nlargest(TOP_OPS_IN_SUMMARY, "total_self_time_us", keep="first")
            top += [TfStatsOp(side=side, name=str(r.op_name), type=str(r.op_type),
                              self_time_us=float(r.total_self_time_us),
                              self_time_percent=float(getattr(r, f"{side.lower()}_self_percent")))
                    for r in rows.itertuples()]
        return TfStatsBlock(
            ops=int(len(ops)),
            host_self_us=float(ops.loc[ops["host_or_device"] == "Host", "total_self_time_us"].sum()),
            device_self_us=float(ops.loc[ops["host_or_device"] == "Device", "total_self_time_us"].sum()),
            top_ops=tuple(top),
        )

    def panel(self, host: str, t: LegacyTfStats, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__tf_stats.csv", t.ops)
        return {"t": t, "ops": _table(t.ops, f"tfstats-{_safe(host)}")}


class LegacyTimelineSection(LegacySection):
    slug = "legacy_timeline"
    title = "Step stats"

    def block(self, t: LegacyTimeline) -> RecordedTimelineBlock:
        return RecordedTimelineBlock(
            steps=int(len(t.steps)), ops=int(len(t.ops)),
            step_time_ms_average=float(t.steps["step_time_ms"].mean()) if len(t.steps) else None)

    def panel(self, host: str, t: LegacyTimeline, page) -> dict:
        page.write_csv(f"data/{self.slug}/op_stats.csv", t.ops)
        page.write_csv(f"data/{self.slug}/steps.csv", t.steps)
        by_type = (t.ops.groupby(["device", "op_type"], sort=False)
                   .agg(occurrences=("occurrences", "sum"), total_us=("total_us", "sum")).reset_index()
                   .sort_values(["device", "total_us"], ascending=[True, False], ignore_index=True))
        page.write_csv(f"data/{self.slug}/op_type_stats.csv", by_type)
        return {"t": t, "chart": timeline_chart(t.steps), "ops": _table(t.ops, "timeline-ops"),
                "types": _table(by_type, "timeline-types")}


class LegacyKernelStatsSection(LegacySection):
    slug = "legacy_kernel_stats"
    title = "Kernel stats"
    summary_key = "kernel_stats"

    def block(self, k: LegacyKernelStats) -> KernelStatsBlock:
        table = k.kernels
        total = float(table["total_duration_us"].sum())
        tensor_core = float(table.loc[table["is_kernel_using_tensor_core"], "total_duration_us"].sum())
        return KernelStatsBlock(kernels=int(len(table)), total_us=round(total, 3),
                                tensor_core_percent=round(100 * tensor_core / total, 2) if total > 0 else 0.0)

    def panel(self, host: str, k: LegacyKernelStats, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__kernel_stats.csv", k.kernels)
        return {"k": k, "kernels": _table(k.kernels, f"kernels-{_safe(host)}")}


class LegacyOpProfileSection(LegacySection):
    slug = "legacy_op_profile"
    title = "Op profile"
    summary_key = "op_profile"

    def block(self, o: LegacyOpProfile) -> RecordedOpProfileBlock:
        top = o.nodes[o.nodes["depth"] == 1]
        return RecordedOpProfileBlock(
            categories=tuple(OpCategory(name=n, time_percent=t) for n, t in zip(top["name"], top["time_percent"])),
            flops_utilization_percent=o.flops_percent)

    def panel(self, host: str, o: LegacyOpProfile, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__op_profile.csv", o.nodes)
        return {"op": o, "nodes": _table(o.nodes, f"opprofile-{_safe(host)}")}


def memory_chart(timeline: pd.DataFrame) -> dict | None:
    if timeline.empty:
        return None
    long = timeline.melt(id_vars=["time_ms"], value_vars=["heap_bytes", "stack_bytes"], var_name="kind",
                         value_name="bytes")
    long["GiB"] = long["bytes"] / 2**30
    chart = (
        alt.Chart(long)
        .mark_area(interpolate="step-after")
        .encode(
            x=alt.X("time_ms:Q", title="Time (ms)"),
            y=alt.Y("GiB:Q", title="Memory in use (GiB)", stack="zero"),
            color=alt.Color("kind:N", title=None),
            tooltip=[alt.Tooltip("time_ms:Q", format=",.3f"), alt.Tooltip("kind:N"),
                     alt.Tooltip("GiB:Q", format=",.4f")],
        )
        .properties(width=800, height=240)
    )
    return vega_spec(chart)


class LegacyMemoryProfileSection(LegacySection):
    slug = "legacy_memory_profile"
    title = "Memory profile"
    summary_key = "memory"

    def block(self, m: LegacyMemoryProfile) -> MemoryBlock:
        return MemoryBlock(profiles={a.memory_id: Allocator(
            peak_bytes=a.peak_bytes, peak_time_ms=a.peak_time_ms, capacity_bytes=a.capacity_bytes,
            fragmentation_percent=a.fragmentation_percent, allocations=a.allocations,
            deallocations=a.deallocations) for a in m.allocators})

    def summary(self, data: dict) -> MemoryBlock | None:
        if not data["in_summary"]:
            return None
        # Every host's allocators, keyed `<host>/<memory id>` as the XSpace block is.
        profiles = {}
        for host, part in data["hosts"].items():
            for memory_id, allocator in (self.block(part).profiles or {}).items():
                profiles[f"{host}/{memory_id}"] = allocator
        return MemoryBlock(profiles=profiles)

    def panel(self, host: str, m: LegacyMemoryProfile, page) -> dict:
        allocators = []
        for index, a in enumerate(m.allocators):
            page.write_csv(f"data/{self.slug}/{joined_file_name([host, a.memory_id], '__', '__timeline.csv')}",
                           a.timeline)
            allocators.append({"a": a, "chart": memory_chart(a.timeline), "id": f"mem-{_safe(host)}-{index}"})
        return {"m": m, "allocators": allocators}


class LegacyPodViewerSection(LegacySection):
    slug = "legacy_pod_viewer"
    title = "Pod viewer"

    def block(self, v: LegacyPodViewer) -> RecordedPodViewerBlock:
        return RecordedPodViewerBlock(steps=int(v.cores["step"].nunique()) if len(v.cores) else 0,
                                      cores=int(v.cores["core"].nunique()) if len(v.cores) else 0,
                                      all_reduce_ops=int(v.all_reduce_ops["name"].nunique()))

    def panel(self, host: str, v: LegacyPodViewer, page) -> dict:
        page.write_csv(f"data/{self.slug}/{_safe(host)}__cores.csv", v.cores)
        page.write_csv(f"data/{self.slug}/{_safe(host)}__all_reduce_ops.csv", v.all_reduce_ops)
        return {"v": v, "cores": _table(v.cores, f"cores-{_safe(host)}"),
                "ops": _table(v.all_reduce_ops, f"allreduce-{_safe(host)}")}


class LegacyRunSection(Section):
    """The inventory page of an older capture: each host's device and the files
    read for it (the richest per tool), in place of the XSpace inventory."""

    slug = "legacy_run"
    part_type = list[str]  # the files read for the host (LegacyHost.files)
    title = "Inventory"
    listed = False
    nav_page = "inventory.html"

    def combine(self, run: RunContext, parts: dict[str, Any]) -> dict | None:
        if set(run.host_names) - set(parts):
            return None  # a run that also has XSpace hosts keeps the inventory page
        return {"run": run, "hosts": parts}

    def render(self, data: dict, page) -> None:
        run: RunContext = data["run"]
        hosts = []
        for h in run.hosts:
            device = h.device_type + (f" × {h.device_core_count}" if h.device_core_count else "")
            hosts.append({"host": h.host, "device": device, "files": data["hosts"].get(h.host, [])})
        page.write_html("inventory.html", "legacy_inventory.html", hosts=hosts)


LEGACY_SECTIONS: list[Section] = [
    LegacyRunSection(),
    LegacyOverviewSection(),
    LegacyInputPipelineSection(),
    LegacyTfStatsSection(),
    LegacyKernelStatsSection(),
    LegacyOpProfileSection(),
    LegacyMemoryProfileSection(),
    LegacyPodViewerSection(),
    LegacyTimelineSection(),
]


def legacy_parts(decoded: LegacyHost) -> dict[str, Any]:
    """The per-host parts of the legacy sections, keyed by slug (the memory viewer's is the XSpace section's)."""
    parts: dict[str, Any] = {"legacy_run": decoded.files}
    if decoded.memory_viewer is not None:
        parts["memory_viewer"] = legacy_memory_viewer(decoded.memory_viewer)
    for section in LEGACY_SECTIONS:
        if not isinstance(section, LegacySection):
            continue
        value = getattr(decoded, section.slug.removeprefix("legacy_"))
        if value is not None:
            parts[section.slug] = value
    return parts
