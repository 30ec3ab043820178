"""The busy-% heatmap shared by the inventory and the trace page: one row per line, one rect per
time slice (adjacent slices of one busy % joined), coloured by how much of the slice the line's
events cover."""

from __future__ import annotations

import hashlib
import re

import altair as alt
import numpy as np
import pandas as pd

# Beyond this many rows a heatmap's labels become unreadable: the threads of one pool (lines named
# `<pool>/<thread id>`, e.g. `tf_Compute/188715669`) are drawn as one row, their average busy %.
POOL_ROWS_ABOVE = 40
_THREAD = re.compile(r"^(?P<pool>.+)/\d+$")

# A row label is repeated in every busy slice of its row: a capture's names are free text of any length (a
# 1 MB line name made a 361 MB trace page), so a long one is shown shortened, kept unique by a hash of the
# whole name. The full names are on the page once, in the tables.
LABEL_LIMIT = 120


def short_label(text: str) -> str:
    if len(text) <= LABEL_LIMIT:
        return text
    return f"{text[:LABEL_LIMIT - 12]}… #{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def busy_slices(activity: dict[str, np.ndarray], strip: int = 0) -> dict[str, np.ndarray]:
    """Only the busy slices and the columns the chart reads, rounded, as numpy columns (label,
    bin_start_ms, bin_end_ms, busy_percent): a capture of many lines or a run of many hosts otherwise
    carries megabytes of idle bins into its page. `activity`: the host's activity columns (label, bin_start_ms,
    bin_end_ms, busy_percent). `strip`: how many characters to take off the start of
    each (shortened) label, a prefix every label has."""
    busy = activity["busy_percent"] > 0
    # Numpy columns, not a frame: a frame costs ≈ 0.3 ms to build and read back, twice per host of a run's
    # pages, and a run can have thousands of hosts (np.round is what DataFrame.round calls).
    labels = activity["label"][busy]
    if strip or any(len(label) > LABEL_LIMIT for label in labels):
        # Each distinct label once: a row's label repeats in each of its slices, and a string made per slice
        # cost 4 GB for a capture of 100,000 lines.
        codes, distinct = pd.factorize(labels)
        shown = np.array([short_label(label)[strip:] for label in distinct], dtype=object)
        labels = shown[codes] if len(labels) else labels
    return {"label": labels,
            "bin_start_ms": np.round(activity["bin_start_ms"][busy], 4),
            "bin_end_ms": np.round(activity["bin_end_ms"][busy], 4),
            "busy_percent": np.round(activity["busy_percent"][busy], 2)}


def busy_rects(slices: pd.DataFrame | dict[str, np.ndarray]) -> list[dict]:
    """The heatmap's rows (records) for `slices` (busy_slices' columns, after pool_threads), each run of adjacent
    slices of one row and one busy % joined into one rect spanning them: the same picture, and its tooltip gives
    the whole span. A line busy all along is one rect instead of one per time slice (a pod's tiny hosts carried
    20 KB of identical slices each into the trace page, 23 MB at a thousand hosts)."""
    label = np.asarray(slices["label"])
    start = np.asarray(slices["bin_start_ms"])
    end = np.asarray(slices["bin_end_ms"])
    busy = np.asarray(slices["busy_percent"])
    if len(label) > 1:
        joined = (label[1:] == label[:-1]) & (busy[1:] == busy[:-1]) & (start[1:] == end[:-1])
        first = np.flatnonzero(np.concatenate(([True], ~joined)))  # the slices that start a rect
        last = np.append(first[1:] - 1, len(label) - 1)
        label, start, end, busy = label[first], start[first], end[last], busy[first]
    return [{"label": name, "bin_start_ms": a, "bin_end_ms": b, "busy_percent": pct}
            for name, a, b, pct in zip(label.tolist(), start.tolist(), end.tolist(), busy.tolist())]


def busy_heatmap(data_name: str, x: alt.X, sort: list[str] | None, label_limit: int) -> alt.Chart:
    """The heatmap layer over the named dataset `data_name` (rows of busy_rects)."""
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


def pool_threads(shown: pd.DataFrame | dict[str, np.ndarray], order: list[str]
                 ) -> tuple[pd.DataFrame | dict[str, np.ndarray], list[str], int]:
    """`shown` (busy_slices' columns) with each thread pool's lines as one row when there are many rows:
    (slices, row order, how many lines were folded into pool rows); `shown` itself when nothing is folded, a
    frame of the same columns otherwise. A pool row's busy % is its threads' average."""
    if len(order) <= POOL_ROWS_ABOVE:
        return shown, order, 0
    pools: dict[str, list[str]] = {}
    for label in order:
        match = _THREAD.match(label)
        pools.setdefault(match.group("pool") if match else label, []).append(label)
    rename = {label: f"{pool} ({len(lines)} threads)" for pool, lines in pools.items() if len(lines) > 1
              for label in lines}
    if not rename:
        return shown, order, 0
    threads = {f"{pool} ({len(lines)} threads)": len(lines) for pool, lines in pools.items() if len(lines) > 1}
    shown = pd.DataFrame(shown)
    renamed = shown.assign(label=shown["label"].map(lambda label: rename.get(label, label)))
    summed = renamed.groupby(["label", "bin_start_ms", "bin_end_ms"], sort=False, as_index=False)["busy_percent"].sum()
    per_thread = summed["label"].map(lambda label: threads.get(label, 1))
    summed["busy_percent"] = (summed["busy_percent"] / per_thread).round(2)
    # Each row's slices in time order (the group-by keeps first appearances: the first thread's slices, then the
    # others'), so that busy_rects joins a pool row's equal neighbours too.
    summed = summed.sort_values(["label", "bin_start_ms"], kind="stable", ignore_index=True)
    rows = list(dict.fromkeys(rename.get(label, label) for label in order))
    return summed, rows, len(rename)
