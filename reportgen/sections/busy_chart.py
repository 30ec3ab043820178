"""The busy-% heatmap shared by the run index and the trace page: one row per line, one
rect per time slice, coloured by how much of the slice the line's events cover."""

from __future__ import annotations

import hashlib

import altair as alt
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
    shown = activity.loc[activity["busy_percent"] > 0, ["label", "bin_start_ms", "bin_end_ms", "busy_percent"]]
    shown = shown.round({"bin_start_ms": 4, "bin_end_ms": 4, "busy_percent": 2})
    long = shown["label"].str.len() > LABEL_LIMIT
    if long.any():
        shown = shown.assign(label=shown["label"].map(short_label))
    return shown


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
