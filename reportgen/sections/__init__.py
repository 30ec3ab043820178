"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.inventory import InventorySection
from reportgen.sections.overview import OverviewSection
from reportgen.sections.tf_stats import TfStatsSection

SECTIONS: list[Section] = [
    InventorySection(),
    OverviewSection(),
    TfStatsSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
