"""Compiled passes of the in-page timeline's data: nesting depth and level-of-detail blocks.

Both walk events in one pass in an order the caller sorted them in; the work
is per event, so it is compiled rather than written as Python loops. As in
`reportgen.core.events.nesting`, the kernels allocate nothing (numba compiles
each allocation's dtype and shape anew, on a machine's first build): their
Python callers here pass the arrays in.
"""

from __future__ import annotations

import numpy as np
from numba.core import types

from reportgen.kernels import array_type, kernel


def nesting_depth(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each event within its lane, for events sorted by (lane, start, longest first).

    An event sits one level below the innermost earlier event of its lane that is
    still running when it starts (a stack of open ends), as the trace viewers draw
    it; an event that only overlaps its predecessor partly also goes one level down.
    """
    depth = np.zeros(len(start), np.int32)
    _nesting_depth(lane, start, end, depth, np.empty(max(len(start), 1), np.int64))
    return depth


@kernel()
def _nesting_depth(lane, start, end, depth, stack):
    n = len(start)
    top = 0
    for i in range(n):
        if i == 0 or lane[i] != lane[i - 1]:
            top = 0
        while top > 0 and stack[top - 1] <= start[i]:
            top -= 1
        depth[i] = top
        stack[top] = end[i]
        top += 1


def detail_blocks(track: np.ndarray, level: np.ndarray, start: np.ndarray, end: np.ndarray, origin: int,
                  tile_span: int, resolution: int, capacity: int) -> tuple[np.ndarray, ...]:
    """Level-of-detail blocks for events sorted by (track, level, start).

    Tiles are `tile_span` long from `origin`. An event at least `resolution` long is
    kept alone, in every tile it overlaps; shorter events of one (track, level) that
    follow each other within `resolution` merge into one block of their tile, which
    counts them. `capacity` bounds the blocks (`block_capacity`). Returns (first
    event, tile, start, end, count) per block: a block of count 1 is that event.
    """
    out = np.empty((5, capacity), np.int64)
    m = _detail_blocks(track, level, start, end, origin, tile_span, resolution, *out)
    return tuple(out[:, :m])


@kernel()
def _detail_blocks(track, level, start, end, origin, tile_span, resolution, out_event, out_tile, out_start, out_end,
                   out_count):
    n = len(start)
    m = 0
    open_block = False
    b_first = 0
    b_tile = 0
    b_start = 0
    b_end = 0
    b_count = 0
    for i in range(n + 1):
        last_turn = i == n
        if not last_turn:
            new_run = i == 0 or track[i] != track[i - 1] or level[i] != level[i - 1]
            s = start[i]
            e = end[i]
            tile = (s - origin) // tile_span
            long_event = e - s >= resolution
        if open_block and (last_turn or new_run or long_event or tile != b_tile or s > b_end + resolution):
            out_event[m] = b_first
            out_tile[m] = b_tile
            out_start[m] = b_start
            out_end[m] = b_end
            out_count[m] = b_count
            m += 1
            open_block = False
        if last_turn:
            break
        if long_event:
            for t in range(tile, (e - 1 - origin) // tile_span + 1):
                out_event[m] = i
                out_tile[m] = t
                out_start[m] = s
                out_end[m] = e
                out_count[m] = 1
                m += 1
        elif open_block:
            b_end = max(b_end, e)
            b_count += 1
        else:
            open_block = True
            b_first = i
            b_tile = tile
            b_start = s
            b_end = e
            b_count = 1
    return m


def block_capacity(start: np.ndarray, end: np.ndarray, origin: int, tile_span: int) -> int:
    """An upper bound of `detail_blocks`' output: each event ends at most one block and
    starts at most one per tile it overlaps."""
    tiles = (end - 1 - origin) // tile_span - (start - origin) // tile_span + 1
    return int(len(start) + np.maximum(tiles, 1).sum()) + 1


def precompile() -> None:
    """Compile `nesting_depth`'s kernel for a build's argument types (the "timeline" group of `reportgen.kernels`);
    `detail_blocks`, for long timelines only, compiles where used."""
    _nesting_depth.compile((array_type(types.int64),) * 3 + (array_type(types.int32), array_type(types.int64)))
