"""The capture's table columns the trace export reads, as numpy arrays and lists, each taken once per host.

A column read through pandas (`frame[name].to_numpy()`) costs ≈ 25 µs whatever its length, and
comparing a string column ≈ 200 µs: the export read the same few columns some forty times per host,
about a tenth of a tiny host's whole export, and a pod's run has thousands of tiny hosts. Each
column is read on first use and kept (the arrays are the frames' own, not copies), with the
capture's dtypes unchanged: the compiled writers are specialised on them.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from reportgen.capture import HostCapture


class CaptureColumns:
    def __init__(self, capture: HostCapture):
        self.capture = capture

    # --- events ---------------------------------------------------------------
    @cached_property
    def ev_line(self) -> np.ndarray:
        return self.capture.events["line"].to_numpy()

    @cached_property
    def ev_md(self) -> np.ndarray:
        return self.capture.events["md"].to_numpy()

    @cached_property
    def ev_start(self) -> np.ndarray:
        return self.capture.events["start_ps"].to_numpy()

    @cached_property
    def ev_duration(self) -> np.ndarray:
        return self.capture.events["duration_ps"].to_numpy()

    def plane_of(self, rows: np.ndarray) -> np.ndarray:
        """The plane of some events: their line's (the loader's event `plane` column is just that; read
        through a line, a few events' planes need no column of every event)."""
        return self.line_plane[self.ev_line[rows]]

    # --- event metadata --------------------------------------------------------
    def md_names(self, rows: np.ndarray) -> list[str]:
        """The names of some metadata rows, through their interned ids (read from the frame's string
        column, they cost more than the ids and the strings list together)."""
        strings = self.capture.strings
        return [strings[sid] for sid in self.md_name_id[rows].tolist()]

    @cached_property
    def md_name_id(self) -> np.ndarray:
        return self.capture.event_metadata["name_id"].to_numpy()

    @cached_property
    def md_display_name_id(self) -> np.ndarray:
        return self.capture.event_metadata["display_name_id"].to_numpy()

    def md_named(self, names) -> np.ndarray:
        """Metadata rows whose name is one of `names` (by interned id: every metadata name is one of the
        capture's strings, so a name the capture never interned names no row)."""
        sids = [sid for sid in map(self.capture.string_id, names) if sid >= 0]
        if not sids:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(self.md_name_id, sids))

    # --- lines and planes ---------------------------------------------------------
    @cached_property
    def line_plane(self) -> np.ndarray:
        return self.capture.lines["plane"].to_numpy()

    @cached_property
    def line_first(self) -> np.ndarray:
        return self.capture.lines["first_event"].to_numpy()

    @cached_property
    def line_count(self) -> np.ndarray:
        return self.capture.lines["event_count"].to_numpy()

    @cached_property
    def line_name(self) -> list[str]:
        return self.capture.lines["name"].tolist()

    @cached_property
    def plane_name(self) -> list[str]:
        return self.capture.planes["name"].tolist()
