"""The shape every tool section shares.

A section is computed in two stages so that hosts can be processed in
parallel processes (or on Dask workers) and only small aggregates travel:

1. `host_part(host)` runs where the capture was decoded and returns a
   picklable per-host result (or None when the host has nothing for it);
2. `combine(run, parts)` merges the per-host parts into the section's data
   (or None: the tool has nothing to show for this run, so no page).

The combined data then feeds `summary()` (its block in summary.json) and
`render()` (its pages and CSV downloads). Sections never read captures in
`combine`/`render`, and never touch another section's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reportgen.capture import HostCapture
    from reportgen.site import PageWriter


@dataclass
class HostContext:
    """What a section sees of one host while its capture is in memory."""

    run: str
    host: str
    capture: HostCapture
    site_dir: str  # the temporary site folder, for sections that stream files (trace)
    trace_format: str = "json"  # trace export: "json", "perfetto" or "both"

    @cached_property
    def environment(self):
        from reportgen.core.environment import host_environment

        return host_environment(self.capture)


@dataclass
class HostSummary:
    """Capture facts of one host, shown on the index pages."""

    host: str
    path: str
    size_bytes: int
    planes: int
    lines: int
    events: int
    duration_ps: int
    device_type: str
    device_core_count: int


@dataclass
class RunContext:
    """What a section sees of a run when combining its hosts."""

    name: str
    hosts: list[HostSummary]
    errors: list[dict] = field(default_factory=list)

    @property
    def host_names(self) -> list[str]:
        return [h.host for h in self.hosts]


class Section:
    """Base class: override what the tool needs."""

    slug: str = ""
    title: str = ""
    # Shown in the run page's tool list; False for sections that only feed
    # other pages (e.g. the run index itself).
    listed: bool = True

    def host_part(self, host: HostContext) -> Any | None:
        return None

    def combine(self, run: RunContext, parts: dict[str, Any]) -> Any | None:
        return None

    def summary(self, data: Any) -> dict | None:
        return None

    def render(self, data: Any, page: PageWriter) -> None:
        raise NotImplementedError
