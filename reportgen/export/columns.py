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


def _column(table: str, name: str) -> cached_property:
    """A column of one of the capture's tables as a numpy array, read on first use and kept."""
    return cached_property(lambda self: getattr(self.capture, table)[name].to_numpy())


class CaptureColumns:
    def __init__(self, capture: HostCapture):
        self.capture = capture

    # --- events ---------------------------------------------------------------
    ev_line = _column("events", "line")
    ev_md = _column("events", "md")
    ev_start = _column("events", "start_ps")
    ev_duration = _column("events", "duration_ps")

    def plane_of(self, rows: np.ndarray) -> np.ndarray:
        """The plane of some events: their line's (the loader's event `plane` column is just that; read
        through a line, a few events' planes need no column of every event)."""
        return self.line_plane[self.ev_line[rows]]

    # --- event metadata --------------------------------------------------------
    md_name_id = _column("event_metadata", "name_id")
    md_display_name_id = _column("event_metadata", "display_name_id")

    def md_names(self, rows: np.ndarray) -> list[str]:
        """The names of some metadata rows, through their interned ids (read from the frame's string
        column, they cost more than the ids and the strings list together)."""
        strings = self.capture.strings
        return [strings[sid] for sid in self.md_name_id[rows].tolist()]

    def md_named(self, names) -> np.ndarray:
        """Metadata rows whose name is one of `names` (by interned id: every metadata name is one of the
        capture's strings, so a name the capture never interned names no row)."""
        sids = [sid for sid in map(self.capture.string_id, names) if sid >= 0]
        if not sids:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(self.md_name_id, sids))

    # --- lines and planes ---------------------------------------------------------
    line_plane = _column("lines", "plane")
    line_first = _column("lines", "first_event")
    line_count = _column("lines", "event_count")

    @cached_property
    def line_name(self) -> list[str]:
        return self.capture.lines["name"].tolist()

    @cached_property
    def plane_name(self) -> list[str]:
        return self.capture.planes["name"].tolist()
