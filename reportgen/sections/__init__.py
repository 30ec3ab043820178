"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

import altair as alt

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.graph_viewer import GraphViewerSection
from reportgen.sections.hlo_stats import HloStatsSection
from reportgen.sections.input_pipeline import InputPipelineSection
from reportgen.sections.inventory import InventorySection
from reportgen.sections.kernel_stats import KernelStatsSection
from reportgen.sections.legacy import LEGACY_SECTIONS
from reportgen.sections.memory_profile import MemoryProfileSection
from reportgen.sections.memory_viewer import MemoryViewerSection
from reportgen.sections.op_profile import OpProfileSection
from reportgen.sections.overview import OverviewSection
from reportgen.sections.pod_viewer import PodViewerSection
from reportgen.sections.roofline import RooflineSection
from reportgen.sections.tf_stats import TfStatsSection
from reportgen.sections.trace import TraceSection

# Charts embed their data in the page on purpose (the site works offline and
# from file://); the sections size that data, so Altair's 5,000-row guard,
# meant for notebooks, does not apply.
alt.data_transformers.disable_max_rows()

SECTIONS: list[Section] = [
    InventorySection(),
    # Runs from older profilers: per-tool files and ProfilerHook timelines
    # (their memory viewer and trace share the sections below).
    *LEGACY_SECTIONS,
    OverviewSection(),
    InputPipelineSection(),
    TfStatsSection(),
    KernelStatsSection(),
    OpProfileSection(),
    HloStatsSection(),
    RooflineSection(),
    MemoryProfileSection(),
    MemoryViewerSection(),
    GraphViewerSection(),
    PodViewerSection(),
    TraceSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
