"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.inventory import InventorySection
from reportgen.sections.trace import TraceSection

SECTIONS: list[Section] = [
    InventorySection(),
    TraceSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
