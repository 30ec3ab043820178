"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

import altair as alt

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.input_pipeline import InputPipelineSection
from reportgen.sections.inventory import InventorySection
from reportgen.sections.kernel_stats import KernelStatsSection
from reportgen.sections.memory_profile import MemoryProfileSection
from reportgen.sections.memory_viewer import MemoryViewerSection
from reportgen.sections.overview import OverviewSection
from reportgen.sections.tf_stats import TfStatsSection

# Charts embed their data in the page on purpose (the site works offline and
# from file://); the sections size that data, so Altair's 5,000-row guard,
# meant for notebooks, does not apply.
alt.data_transformers.disable_max_rows()

SECTIONS: list[Section] = [
    InventorySection(),
    OverviewSection(),
    InputPipelineSection(),
    TfStatsSection(),
    KernelStatsSection(),
    MemoryProfileSection(),
    MemoryViewerSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
