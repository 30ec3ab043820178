"""Every tool section of the site, in page order: the list the build runs."""

from __future__ import annotations

from reportgen.legacy.sections import LEGACY_SECTIONS
from reportgen.sections.base import Section
from reportgen.sections.findings import FindingsSection
from reportgen.sections.graph_viewer import GraphViewerSection
from reportgen.sections.hlo_stats import HloStatsSection
from reportgen.sections.input_pipeline import InputPipelineSection
from reportgen.sections.inventory import InventorySection
from reportgen.sections.kernel_stats import KernelStatsSection
from reportgen.sections.memory_profile import MemoryProfileSection
from reportgen.sections.memory_viewer import MemoryViewerSection
from reportgen.sections.op_profile import OpProfileSection
from reportgen.sections.overview import OverviewSection
from reportgen.sections.pod_viewer import PodViewerSection
from reportgen.sections.roofline import RooflineSection
from reportgen.sections.step_ledger import StepLedgerSection
from reportgen.sections.tf_stats import TfStatsSection
from reportgen.sections.trace import TraceSection

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
    # Reads the overview's steps; the findings and the run page read it.
    StepLedgerSection(),
    # Last: its rules read what every section above computed; the run page shows its findings.
    FindingsSection(),
]

__all__ = ["SECTIONS"]
