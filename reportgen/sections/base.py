"""The shape every tool section shares.

A section is computed in two stages so that hosts can be processed in
parallel processes (or on Dask workers) and only small aggregates travel:

1. `host_part(host)` runs where the capture was decoded and returns a
   per-host result of the section's declared type (`part_type`, or None when
   the host has nothing for it): a dataclass whose annotated fields are its
   schema (`reportgen/pipeline/result.py` stores it as Arrow tables);
2. `combine(run, parts)` merges the per-host parts into the section's data
   (or None: the tool has nothing to show for this run, so no page).

The combined data then feeds `summary()` (its block in summary.json) and
`render()` (its pages and CSV downloads). Sections never read captures in
`combine`/`render`, and never touch another section's data — except the
findings section, last in the registry, whose rules read what every other
section computed (`RunContext.sections`), and the run page, which shows the
findings at its top.

The per-host stage gets a `reportgen.core.host.HostContext`: the decoded capture,
its shared analyses, and the host's own output folder for files written while
the capture is in memory (see that module's notes).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reportgen.core.host import HostContext
from reportgen.summary_blocks import Block

if TYPE_CHECKING:
    from reportgen.output.site import PageWriter


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
    # The combined data of every section combined so far (registry order), by slug. Filled by the build;
    # only the findings section, last in the registry, reads other sections' data (never writes it).
    sections: dict[str, Any] = field(default_factory=dict)

    @property
    def host_names(self) -> list[str]:
        return [h.host for h in self.hosts]


class Section:
    """Base class: override what the tool needs."""

    slug: str = ""
    title: str = ""
    # Shown in the run page's tool list (and summary.json's `tools`); False for
    # sections that only feed other pages or draw the capture inventory.
    listed: bool = True
    # The page an unlisted section adds to the run's navigation (the inventory), or "".
    nav_page: str = ""
    # The run's summary.json key for this section's block ("" = the slug).
    # Sections sharing a key (memory profile and memory viewer write
    # `memory`) have their blocks merged.
    summary_key: str = ""
    # True when `host_part` reads only the capture and the host's names and output folder, none of
    # the host's shared analyses: the host stage then runs it on a thread beside the others (from
    # the decode on), so that its compiled, GIL-free work overlaps theirs.
    capture_only: bool = False
    # Assets only this tool's pages load (keys of `output.site.ON_DEMAND_ASSETS`): written into the
    # site when a run has this tool's page.
    assets: tuple[str, ...] = ()
    # The declared type of the per-host part (its schema): None takes `host_part`'s return annotation
    # without its `| None`. `part_version` numbers what the part means: raise it when a number it holds
    # is computed differently with its fields unchanged (a new field changes the schema by itself), so
    # that the rebuild cache does not serve parts of the old meaning.
    part_type: Any = None
    part_version: int = 1

    def declared_part_type(self) -> Any:
        """The type `host_part` returns (None: the section has no per-host part)."""
        if self.part_type is not None:
            return self.part_type
        hint = typing.get_type_hints(type(self).host_part).get("return")
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            hint = args[0] if len(args) == 1 else None
        return None if hint in (Any, None, type(None)) else hint

    def reads_capture_only(self, host: HostContext) -> bool:
        """Whether `host_part` reads only the capture on this host (`capture_only`, unless a section
        knows better from the capture)."""
        return self.capture_only

    def host_part(self, host: HostContext) -> Any | None:
        return None

    def combine(self, run: RunContext, parts: dict[str, Any]) -> Any | None:
        return None

    def summary(self, data: Any) -> Block | None:
        return None

    def render(self, data: Any, page: PageWriter) -> None:
        raise NotImplementedError
