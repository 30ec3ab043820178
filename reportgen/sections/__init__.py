"""Tool sections, in page order. A new tool is one module here plus a template."""

from __future__ import annotations

from reportgen.sections.base import HostContext, HostSummary, RunContext, Section
from reportgen.sections.inventory import InventorySection
from reportgen.sections.memory_profile import MemoryProfileSection
from reportgen.sections.memory_viewer import MemoryViewerSection

SECTIONS: list[Section] = [
    InventorySection(),
    MemoryProfileSection(),
    MemoryViewerSection(),
]

__all__ = ["SECTIONS", "HostContext", "HostSummary", "RunContext", "Section"]
