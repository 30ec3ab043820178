"""One host while its capture is in memory: `HostContext`, what every section's `host_part` reads.

It holds the decoded capture and the host's HLO modules (both as the loaders
made them: plain columns and dataclasses), and computes the analyses that
several tools share on first use, once per host: the event table, the step
grouping, the host's OpStats and its device op details.

Files written by the per-host stage
-----------------------------------
A section that must write files while the capture is in memory (the trace
export streams its chunks) writes them with `host.open_output(relpath)` (or
`host.output_path(relpath)` for writers that want a file name), `relpath`
being relative to the run's folder of the site, e.g.
`trace/<host>/chunk-001.json.gz` for `<site>/<run>/trace/<host>/…`.

The host stage may run in a worker process, on another machine (Dask) or
not at all (its result comes from the rebuild cache), so these files never
go straight into the site:

* they are written into a folder of their own for this host, laid out like
  the site (`host.site_dir` is its root; never assume it is the site);
* when the stage succeeds, the build moves them into the site (same machine:
  a rename), keeps them in the rebuild cache with the host's result, and
  restores them from there on a cache hit;
* on a Dask worker the folder is worker-local scratch space: its files travel
  back to the client as (relative path, bytes) with the host's result and
  the client writes them. They cost memory and network once per build, so
  keep them to what the site needs (compressed);
* when the stage fails, its files are discarded with it.

Two hosts must not write the same path (put the host name in it); the host
stage never reads or changes files outside its own folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO

from reportgen.capture import HostCapture
from reportgen.core.hlo.model import HloModule


@dataclass
class HostContext:
    """What a section sees of one host while its capture is in memory.

    The host's shared analyses are computed on first use and kept, so that
    a capture is read into an event table, grouped and its HLO modules parsed
    once per build, whichever sections ask for them.
    """

    run: str
    host: str
    capture: HostCapture
    # Root of this host's own output folder, laid out like the site (see the
    # module notes); write through open_output()/output_path().
    site_dir: str
    # The capture's HLO modules by program id, as the loader converted them (loaders.hlo.hlo_modules).
    hlo_modules: dict[int, HloModule] = field(default_factory=dict)
    trace_format: str = "json"  # trace export: "json", "perfetto" or "both"

    def output_path(self, relpath: str) -> str:
        """Local path for `<run>/<relpath>` in this host's output folder (parent folders made)."""
        parts = relpath.replace("\\", "/").split("/")
        if relpath.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"output path must be relative and plain, not {relpath!r}")
        path = os.path.join(self.site_dir, self.run, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def open_output(self, relpath: str, mode: str = "wb") -> IO:
        """Open `<run>/<relpath>` of the site for writing (see the module notes)."""
        if not mode.startswith(("w", "x")):
            raise ValueError("outputs are opened for writing only")
        return open(self.output_path(relpath), mode)

    def forget_stat_columns(self) -> None:
        """Drop the per-event stat columns the event table extracted so far (see
        `EventTable.forget_stats`); the host stage calls it after the core and after each section:
        their stats hardly overlap, and each column costs 9 bytes per event."""
        if "events" in self.__dict__:
            self.events.forget_stats()

    @cached_property
    def events(self):
        """The capture's per-event columns and stat lookup (`reportgen.core.events.table.EventTable`),
        shared by the core and every section that reads events, so stat columns are extracted once."""
        from reportgen.core.events.table import EventTable

        return EventTable(self.capture)

    @cached_property
    def grouping(self):
        """The step group of every event (`reportgen.core.events.grouping.Grouping`)."""
        from reportgen.core.events.grouping import group_events

        return group_events(self.events)

    @cached_property
    def op_stats(self):
        """The host's core result (`reportgen.core.ops.op_stats.HostOpStats`), computed once
        and shared by every section; its `environment` is the host's run environment."""
        from reportgen.core.ops.op_stats import compute_host_op_stats

        return compute_host_op_stats(self.capture, self.hlo_modules, self.events, grouping=self.grouping)

    @cached_property
    def device_op_details(self):
        """Details of the host's device ops for the op tools (`reportgen.core.ops.device_details`),
        computed once and shared; None when the host has no GPU or TPU."""
        from reportgen.core.ops.device_details import device_op_details

        op_stats = self.op_stats
        if not op_stats.environment.has_device:
            return None
        return device_op_details(self.capture, op_stats.device_db, op_stats.environment.hardware_type == "TPU",
                                 self.hlo_modules, self.events)
