"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.input_pipeline import InputPipelineSection
from reportgen.sections.inventory import InventorySection

SECTIONS: list[Section] = [
    InventorySection(),
    InputPipelineSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
