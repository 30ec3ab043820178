"""The run index's line table and activity overview (reportgen/core/tools/inventory.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reportgen.core.tools.inventory import line_activity, line_inventory
from reportgen.loaders.xspace import decode_xspace
from tests.xspace import Space

US = 1_000_000  # ps


def _space() -> Space:
    space = Space()
    plane = space.plane("/host:CPU", 1)
    # Line 1: an outer event [0, 40) with a nested one (not counted twice), and [60, 80).
    plane.line(1, "busy").event("outer", 0, 40 * US).event("inner", 10 * US, 10 * US).event("late", 60 * US, 20 * US)
    # Line 2: overlapping siblings [20, 50) and [30, 70) → busy [20, 70).
    plane.line(2, "overlap").event("a", 20 * US, 30 * US).event("b", 30 * US, 40 * US)
    return space


def test_activity_is_the_union_of_each_lines_events_per_bin():
    activity = pd.DataFrame(line_activity(_space().capture(sort_lines=True), bins=4))  # span [0, 80) µs: 20 µs bins
    busy = activity.pivot(index="line", columns="bin", values="busy_percent").round(6)
    assert busy.loc[0].tolist() == [100.0, 100.0, 0.0, 100.0]
    assert busy.loc[1].tolist() == [0.0, 100.0, 100.0, 50.0]
    assert activity["bin_start_ms"].max() == pytest.approx(0.06)
    assert activity["bin_end_ms"].max() == pytest.approx(0.08)


def test_events_out_of_order_in_the_file_give_the_same_activity():
    space = _space()
    in_order = line_activity(space.capture(sort_lines=True), bins=8)
    # Reverse every line's events and decode the file as written (no re-sorting).
    for line in space.planes[0].proto.lines:
        events = list(line.events)[::-1]
        copies = [type(e).FromString(e.SerializeToString()) for e in events]
        del line.events[:]
        line.events.extend(copies)
    shuffled = decode_xspace("x.xplane.pb", space.proto.SerializeToString(), host="x")
    assert not np.array_equal(shuffled.events["start_ps"].to_numpy(), np.sort(shuffled.events["start_ps"].to_numpy()))
    out_of_order = line_activity(shuffled, bins=8)
    assert out_of_order.keys() == in_order.keys()
    assert all(np.array_equal(out_of_order[c], in_order[c]) for c in in_order)


def test_line_inventory_counts_events_and_spans():
    table = line_inventory(_space().capture(sort_lines=True))
    assert table["line"].tolist() == ["busy", "overlap"]
    assert table["events"].tolist() == [3, 2]
    assert table["first_ps"].tolist() == [0, 20 * US]
    assert table["last_ps"].tolist() == [80 * US, 70 * US]
