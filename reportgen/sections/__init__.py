"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.inventory import InventorySection
from reportgen.sections.kernel_stats import KernelStatsSection

SECTIONS: list[Section] = [
    InventorySection(),
    KernelStatsSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
