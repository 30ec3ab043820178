"""The busy-% heatmap shared by the run index and the trace page: one row per line, one
rect per time slice, coloured by how much of the slice the line's events cover."""

from __future__ import annotations

import hashlib

import altair as alt
import numpy as np
import pandas as pd

# A row label is repeated in every busy slice of its row: a capture's names are free text of any length (a
# 1 MB line name made a 361 MB trace page), so a long one is shown shortened, kept unique by a hash of the
# whole name. The full names are on the page once, in the tables.
LABEL_LIMIT = 120


def short_label(text: str) -> str:
    if len(text) <= LABEL_LIMIT:
        return text
    return f"{text[:LABEL_LIMIT - 12]}… #{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def busy_slices(activity: pd.DataFrame) -> pd.DataFrame:
    """Only the busy slices and the columns the chart reads, rounded: a capture of many lines
    or a run of many hosts otherwise carries megabytes of idle bins into its page."""
    busy = activity["busy_percent"].to_numpy() > 0
    # Built from numpy columns: DataFrame.loc and .round cost milliseconds per host, and a run can have
    # thousands of hosts (np.round is what DataFrame.round calls).
    labels = activity["label"].to_numpy()[busy]
    if any(len(label) > LABEL_LIMIT for label in labels):
        labels = np.array([short_label(label) for label in labels], dtype=object)
    return pd.DataFrame({"label": labels,
                         "bin_start_ms": np.round(activity["bin_start_ms"].to_numpy()[busy], 4),
                         "bin_end_ms": np.round(activity["bin_end_ms"].to_numpy()[busy], 4),
                         "busy_percent": np.round(activity["busy_percent"].to_numpy()[busy], 2)})


def busy_heatmap(data_name: str, x: alt.X, sort: list[str] | None, label_limit: int) -> alt.Chart:
    """The heatmap layer over the named dataset `data_name` (rows of busy_slices)."""
    return alt.Chart(alt.Data(name=data_name)).mark_rect().encode(
        x=x,
        x2="bin_end_ms:Q",
        y=alt.Y("label:N", title=None, sort=sort, axis=alt.Axis(labelLimit=label_limit)),
        color=alt.Color("busy_percent:Q", title="Busy %", scale=alt.Scale(scheme="blues", domain=[0, 100])),
        tooltip=[
            alt.Tooltip("label:N", title="Line"),
            alt.Tooltip("bin_start_ms:Q", title="From (ms)", format=",.3f"),
            alt.Tooltip("bin_end_ms:Q", title="To (ms)", format=",.3f"),
            alt.Tooltip("busy_percent:Q", title="Busy %", format=".1f"),
        ],
    )
