"""Runs to compare, read from built sites.

A comparison works from what a build already computed: the run's block in
`summary.json` and the CSV tables of its tool pages. A run is named as

- `SITE:RUN` (or `SITE` when the site holds one run): a folder (or fsspec
  URL) written by `reportgen build`;
- `LOGDIR:RUN` (or `LOGDIR` with one run), or a run folder: not built yet,
  so it is built first into scratch space, then read the same way.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import fsspec
import pandas as pd

from reportgen.output.formatting import terminal_text
from reportgen.output.site import restore_formulas
from reportgen.summary_blocks import RunSummary, SiteSummary

SUMMARY_FILE = "summary.json"


class RunNotFoundError(Exception):
    """A run reference that names nothing readable; the message says what was looked for."""


def _join(base: str, relative: str) -> str:
    return base.rstrip("/") + "/" + relative


def _is_url(location: str) -> bool:
    return "://" in location


def _read_bytes(url: str) -> bytes | None:
    try:
        # A local path is opened as one: fsspec reads `::` in it as URL chaining, so a run
        # named `a::b` (or `…::warning::x`) would name a protocol ("warning") instead of a file.
        with (fsspec.open(url, "rb") if _is_url(url) else open(url, "rb")) as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@dataclass(frozen=True)
class RunRef:
    """A run as the user named it: a location and, optionally, a run name in it."""

    location: str
    run: str | None = None

    @classmethod
    def parse(cls, text: str) -> RunRef:
        """`PATH:RUN` or `PATH`. An existing local path is taken whole (run names and
        folders may hold ':'); otherwise the text after the last ':' is the run
        unless it holds a '/' (as in `gs://bucket/logs`)."""
        if os.path.exists(text) or ":" not in text:
            return cls(text)
        if not _is_url(text):
            # A run name may hold ':' too (`site:e::f`): the longest head that is a local path wins.
            for cut in reversed([i for i, c in enumerate(text) if c == ":"]):
                if cut and cut < len(text) - 1 and os.path.exists(text[:cut]):
                    return cls(text[:cut], text[cut + 1:])
        head, tail = text.rsplit(":", 1)
        if head and tail and "/" not in tail and not head.endswith(":"):
            return cls(head, tail)
        return cls(text)

    def __str__(self) -> str:
        return self.location if self.run is None else f"{self.location}:{self.run}"


@dataclass
class BuiltSite:
    """A site written by `reportgen build`: its summary.json and its files."""

    location: str  # local folder or fsspec URL
    summary: SiteSummary
    temporary: bool = False  # built by this command into scratch space

    @classmethod
    def open(cls, location: str, temporary: bool = False) -> BuiltSite | None:
        """The site at `location`, or None when it is not a reportgen site."""
        data = _read_bytes(_join(location, SUMMARY_FILE))
        if data is None:
            return None
        try:
            summary = json.loads(data)
        except (ValueError, RecursionError):  # RecursionError: arrays nested past the parser's depth
            return None
        if not (isinstance(summary, dict) and str(summary.get("generator", "")).startswith("reportgen")
                and isinstance(summary.get("runs"), dict)):
            return None
        return cls(location, SiteSummary.from_json(summary), temporary)

    @property
    def run_names(self) -> list[str]:
        return list(self.summary.runs)

    def run(self, name: str | None) -> BuiltRun:
        names = self.run_names
        listed = ", ".join(terminal_text(n) for n in names) or "none"  # one line, whatever a name holds
        if name is None:
            if len(names) != 1:
                raise RunNotFoundError(
                    f"{self.location} holds {len(names)} runs; name one as {self.location}:RUN "
                    f"(runs: {listed})")
            name = names[0]
        if name not in self.summary.runs:
            raise RunNotFoundError(f"{self.location} has no run {name!r} (runs: {listed})")
        return BuiltRun(self, name, self.summary.runs[name])

    def is_local_folder(self, folder: str | os.PathLike) -> bool:
        """True when this site is the local folder `folder`."""
        try:
            return Path(self.location).resolve() == Path(folder).resolve()
        except (OSError, ValueError):
            return False


@dataclass
class BuiltRun:
    """One run of a built site: its summary block and its CSV tables."""

    site: BuiltSite
    name: str
    summary: RunSummary  # its entry of summary.json
    _tables: dict = field(default_factory=dict, repr=False)

    @cached_property
    def folder(self) -> str:
        """The run's folder in the site, as its tool pages are listed (a run folder
        need not be spelled like the run)."""
        for tool in self.summary.tools.values():
            page = tool.page
            if "/" in page:
                return page.rsplit("/", 1)[0]
        return self.name

    def has_tool(self, slug: str) -> bool:
        return slug in self.summary.tools

    def table(self, relative: str) -> pd.DataFrame | None:
        """`<run>/data/<relative>` as a DataFrame, None when the run has no such table."""
        if relative not in self._tables:
            data = _read_bytes(_join(_join(self.site.location, self.folder), "data/" + relative))
            self._tables[relative] = (
                restore_formulas(pd.read_csv(io.BytesIO(data), keep_default_na=False)) if data else None)
        return self._tables[relative]

    def step_times_ms(self) -> list[float]:
        """Per-step times of the view the summary block describes (the first in steps.csv:
        all hosts combined, or the only host)."""
        steps = self.table("overview/steps.csv")
        if steps is None or steps.empty or "Step time (ms)" not in steps:
            return []
        first_view = steps["Host"].iloc[0]
        return [float(v) for v in steps.loc[steps["Host"] == first_view, "Step time (ms)"]]

    @property
    def label(self) -> str:
        return self.name


class RunResolver:
    """Turns run references into built runs, building what is not built yet (once per
    location) into `scratch`."""

    def __init__(self, scratch: Path, jobs: int = 1, warn: Callable[[str], None] | None = None):
        self.scratch = scratch
        self.jobs = jobs
        self.warn = warn or (lambda _message: None)
        self._sites: dict[str, BuiltSite] = {}

    def site(self, location: str, runs: set[str] | None = None) -> BuiltSite:
        """The site at `location`, or the site built from the captures there (only
        `runs` of them when given)."""
        site = self._built_site(location)
        if site is None:
            site = self._sites[location] = self._build(location, runs)
        return site

    def resolve(self, refs: list[RunRef]) -> list[BuiltRun]:
        # The runs wanted from each location that needs building, so that a logdir is
        # built once for all the runs named in it (None: every run).
        wanted: dict[str, set[str] | None] = {}
        for ref in refs:
            if self._built_site(ref.location) is not None:
                continue
            if ref.run is None:
                wanted[ref.location] = None
            elif wanted.get(ref.location, set()) is not None:
                wanted.setdefault(ref.location, set()).add(ref.run)
        return [self.site(ref.location, wanted.get(ref.location)).run(ref.run) for ref in refs]

    def _built_site(self, location: str) -> BuiltSite | None:
        if location not in self._sites:
            site = BuiltSite.open(location)
            if site is None:
                return None
            self._sites[location] = site
        return self._sites[location]

    def _build(self, location: str, runs: set[str] | None) -> BuiltSite:
        from reportgen.errors import NoCapturesError
        from reportgen.pipeline.build import BuildOptions, build_site

        output = self.scratch / f"site-{len(self._sites) + 1}"
        try:
            # A scratch build: no rebuild cache beside it, nothing to reuse later.
            options = BuildOptions(output=str(output), runs=runs, jobs=self.jobs, cache=False)
            report = build_site([location], options)
        except NoCapturesError as exc:
            raise RunNotFoundError(f"{location}: not a reportgen site, and {exc}") from exc
        for error in report.errors:
            self.warn(error.get("local_message", error["message"]))
        site = BuiltSite.open(str(output), temporary=True)
        assert site is not None, "a finished build always writes summary.json"
        return site


__all__ = ["BuiltRun", "BuiltSite", "RunNotFoundError", "RunRef", "RunResolver"]
