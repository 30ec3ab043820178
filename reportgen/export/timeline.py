"""The trace page's in-page timeline: its data, per time window and level of detail, as `<script>` files.

Written in the per-host stage (where the capture is in memory) beside the
chunks, into `<out_dir>/timeline/`:

* `index.js`: the tracks (XProf's processes and threads, in its order; the
  threads of a thread pool share one collapsible track), the steps, the time
  windows and the level-of-detail tiles with their time ranges and counts;
* `w-NNN.js`: every event that starts in one time window, at full detail
  (track, nesting level, name and long name, start, duration), plus the
  longer events of earlier windows still running in it;
* `a-NNN.js`: the same events as the chunks write them (Chrome trace JSON
  objects: args, flow ids, category), read only when an event is selected;
* `x-000.js`, `xa-000.js`: an excerpt (the busiest step, at most EXCERPT_EVENTS
  events) that the single-file report embeds instead of the whole trace;
* `c-NNN.js`: one counter track's samples (time, value), drawn under its
  process: the capture's own counter samples (the `_counters_` line, one track
  per counter name, valued as the Perfetto file values them) and the series the
  trace section hands in (the memory profile's memory in use per allocator);
* `lL-NNNNN.js`: level-of-detail tiles. Level L cuts the host's span into 4^L
  tiles, each drawn at about LOD_BINS blocks per lane: events shorter than a
  block that follow each other on one lane merge into one block that counts
  them; longer events stay whole. The page shows the coarsest level fine
  enough for its zoom where its view holds many events per pixel (counted from
  the index's `density`, event starts per 1/1024 of the span), and full-detail
  windows where it holds few: it never loads the whole trace.

A host whose parts take at most SMALL_TIMELINE_BYTES has `index.js` alone: it
carries every part's call before the index's own.

Every file is a script that hands its data to `reportgenTimeline.add(header,
payload)`, so that a page opened from `file://` can load it by inserting a
`<script>` element (browsers refuse to fetch local files). Event columns are
binary, behind their name table (`_with_names`), zlib-compressed and
base64-encoded; the page inflates them with the browser's DecompressionStream.
Times are integer picoseconds from the host's time origin, exact in a JavaScript number up to 2^53 ps (2.5 hours).
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np
import orjson
from zlib_ng import zlib_ng

from reportgen.export import schema
from reportgen.export.chunks import plan_chunks
from reportgen.export.flows import FLOW_ASYNC
from reportgen.export.json_writer import KernelArgs, render_runs
from reportgen.export.layout import LINE_EVENTS
from reportgen.export.perfetto_writer import _counter_values
from reportgen.export.tables import TraceTables
from reportgen.export.timeline_kernel import block_capacity, detail_blocks, nesting_depth

WINDOW_EVENTS = 100_000  # events per full-detail window (cut on step starts where possible)
LOD_BINS = 2000  # blocks per lane across one level-of-detail tile
# Below this many events a host has no tiles: the page draws every event at any zoom. Above it the page picks
# the detail from the events per pixel in its view (the index's `density`), so a host of a few tens of thousands
# of events crowded into a few pixels (a TPU core's ops at the whole capture's zoom) is drawn from tiles too.
LOD_MIN_EVENTS = 20_000
MAX_LOD_LEVELS = 8
# A level whose blocks are at least this share of the host's events merges too little to need a finer one.
LOD_STOP_SHARE = 0.5
DENSITY_BINS = 1024  # the index's histogram of event starts over the host's span, for the page's events per pixel
# The index's `format`: 2 added `density` (and, with LOD_MIN_EVENTS lowered, tiles for smaller hosts); 3 `counters`.
FORMAT = 3
# A host's timeline whose parts (windows, excerpt, tiles) take at most this many bytes is one file: its index.js
# carries every part's call before its own. A pod's run has hundreds of hosts with a few events each: four files
# fewer per host (creating a file costs 0.1–0.7 ms on ext4; a published object, a request). The page finds the
# parts registered when the index has loaded and never asks for their files.
SMALL_TIMELINE_BYTES = 64 * 1024
EXCERPT_EVENTS = 50_000  # the single-file report's excerpt (the busiest step) holds at most this many events
WRITER_THREADS = 2
WINDOWS_AHEAD = WRITER_THREADS  # windows given to the writer threads ahead of the one taken to its chunk
# zlib-ng, not ISA-L: the same input must give the same file whatever process or thread writes it (a
# Dask worker's and a local build's sites are equal byte for byte), and ISA-L's deflate was seen to give
# two different (both valid) streams for one 259-byte payload, in a Dask worker and in a local build.
# Level 2: output within 1 % of ISA-L's level 2; on the ×50 capture's timeline (355 MB) 0.48–0.55 s
# against ISA-L's 0.23–0.25 s.
COMPRESS_LEVEL = 2
POOL_THREAD = re.compile(r"^(.+)/-?[0-9]+$")  # "tf_Compute/188715669": thread 188715669 of pool tf_Compute
REGISTER = "reportgenTimeline.add"
DIR = "timeline"


class ChunkSink(Protocol):
    """Where the windows' rendered events go when the host's JSON chunks are written from them
    (`host_export.ChunkFiles`)."""

    cuts_ps: np.ndarray  # the chunks' cuts: windows are cut there too

    def chunk_of(self, start_ps: int) -> int: ...

    def add_window(self, chunk: int, parts: list, events: int, done: Callable[[], None]) -> None: ...

    def write_oldest(self) -> bool: ...


@dataclass
class CounterSeries:
    """A counter track handed to the export: samples of one quantity, each holding until the next."""

    process: str  # the trace process it is drawn under (its name, as the tracks' `process`); "": the host's threads
    name: str
    unit: str  # "bytes", or "" for a plain number
    time_ps: np.ndarray  # int64, the host's trace time
    value: np.ndarray  # float64


@dataclass
class TimelineFiles:
    """What the timeline export wrote for one host (the trace page reports it)."""

    index: str  # relative to the host's trace folder: "timeline/index.js"
    events: int  # events drawn (counter samples are not)
    tracks: int
    windows: int
    lod_levels: int
    files: int
    bytes: int
    seconds: float
    counter_samples: int = 0
    files_written: list[str] = field(default_factory=list)
    start_ps: int = 0  # the index's span, in the host's own time: the page lays several hosts on one axis with it
    end_ps: int = 0


@dataclass
class _Tracks:
    """Lanes (one per trace thread) grouped into tracks (a thread, or a pool's threads)."""

    entries: list[dict]  # index.js `tracks`
    lane_of_line: np.ndarray  # int64 per capture line, -1 when not drawn
    lane_track: np.ndarray  # int64 per lane
    lane_offset: np.ndarray  # int64 per lane: first level of the lane in its track (after depths)


def _pool(name: str) -> str | None:
    match = POOL_THREAD.match(name)
    return match.group(1) if match else None


def _tracks(tables: TraceTables) -> tuple[list[tuple[str, str, list[tuple[int, str, list[int]]]]], np.ndarray]:
    """(process name, track title, [(tid, thread name, lines)]) per track, in XProf's order, and lane of each line.

    Threads are ordered by tid within their process, as XProf orders them; the threads of a
    pool (names `<pool>/<id>`) are grouped into one track where the first of them stands.
    """
    layout = tables.layout
    lane_of_line = np.full(len(layout.line_kind), -1, dtype=np.int64)
    tracks = []
    lane = 0
    for proc in layout.processes:
        threads = proc.sorted_threads()
        pools: dict[str, list] = {}
        for thread in threads:
            key = _pool(thread.name)
            if key is not None:
                pools.setdefault(key, []).append(thread)
        placed: set[str] = set()
        for thread in threads:
            key = _pool(thread.name)
            members = pools.get(key, []) if key is not None else []
            if len(members) > 1:
                if key in placed:
                    continue
                placed.add(key)
                title = f"{key} ({len(members)} threads)"
            else:
                members = [thread]
                title = thread.name
            group = []
            for member in members:
                lines = [ln for ln in member.lines if layout.line_kind[ln] == LINE_EVENTS]
                lane_of_line[lines] = lane
                lane += 1
                group.append((member.tid, member.name, lines))
            tracks.append((proc.name, title, group))
    return tracks, lane_of_line


def _js_text(value) -> bytes:
    # No `<` at all (JSON has it only inside strings): `</script` would end the element when the file
    # is inlined into a page (the single-file report), and capture text stays inert there.
    return orjson.dumps(value).replace(b"<", b"\\u003c")


def _script(header: dict, payload) -> bytes:
    """`payload`: bytes, or a contiguous uint8 array (compressed as it is, never copied into bytes)."""
    packed = base64.b64encode(zlib_ng.compress(payload, COMPRESS_LEVEL))
    return REGISTER.encode() + b"(" + _js_text(header) + b',"' + packed + b'");\n'


def _columns(start: np.ndarray, dur: np.ndarray, name: np.ndarray, track: np.ndarray, level: np.ndarray,
             count: np.ndarray | None = None, long_name: np.ndarray | None = None) -> bytes:
    """Event columns, little-endian, 8-byte columns first so that every typed array view is aligned.

    Starts are stored as differences from the previous row (exact integers in a double):
    rows are sorted by (track, level, start), so most differences are small and compress well.
    """
    # np.diff(start, prepend=0) without np.diff's set-up and prepended copy, which cost more than the
    # subtraction on a tiny host's window.
    delta = np.empty(len(start), dtype="<f8")
    if len(start):
        delta[0] = start[0]
        delta[1:] = start[1:] - start[:-1]  # integer differences, then converted (as np.diff's)
    parts = [delta.tobytes(), dur.astype("<f8").tobytes(), name.astype("<i4").tobytes()]
    if long_name is not None:
        parts.append(long_name.astype("<i4").tobytes())
    if count is not None:
        parts.append(count.astype("<u4").tobytes())
    parts += [track.astype("<u2").tobytes(), level.astype("<u2").tobytes()]
    return b"".join(parts)


def _with_names(names: list[str], columns: bytes) -> bytes:
    """The payload of an events file: its name table (uint32 length, JSON, padded to 8 bytes), then its columns.

    Names go inside the compressed payload: a window's distinct full names (XProf's long_name) can
    take more room than its events.
    """
    text = orjson.dumps(names)
    pad = -(4 + len(text)) % 8
    return len(text).to_bytes(4, "little") + text + b" " * pad + columns


def _names(sids: np.ndarray, tables: TraceTables) -> tuple[list[str], np.ndarray]:
    """The distinct names of some events, and each event's index into them (-1 stays -1)."""
    valid = sids >= 0
    if len(tables.pool) <= 4 * len(sids):
        # A window's ids against a pool of not many more strings: marks in a table the pool's size cost an
        # eighth of np.unique's sort (a window of the ×200 capture: 1.5 ms against 12 ms).
        present = np.zeros(len(tables.pool) + 1, dtype=bool)
        present[sids + 1] = True  # -1 (no name) marks the table's first entry, left out below
        present[0] = False
        distinct = np.flatnonzero(present) - 1
        index = np.where(valid, np.cumsum(present)[sids + 1] - 1, -1)
    else:
        distinct, inverse = np.unique(sids[valid], return_inverse=True)
        index = np.full(len(sids), -1, dtype=np.int64)
        index[valid] = inverse
    return [tables.pool.text(int(s)) for s in distinct], index


def _objects_array(buf: np.ndarray, total: int, in_out_async: np.ndarray) -> np.ndarray:
    """The objects at buf[:total] (`,\n{…}` each, as `render_runs` writes them) as an `a-NNN.js` array
    `[{…},\n{…}]`, one object per row.

    The compiled writer closes an in-out async event with a second object (its end); that one is dropped
    so that object i is row i. Without such events the result is a view of `buf`, whose second byte and
    the byte after the objects become the brackets (the bytes a chunk takes from the buffer are the
    objects' others: see `_chunk_parts`).
    """
    if total < 2:
        return np.frombuffer(b"[]", dtype=np.uint8)
    if in_out_async.any():
        # Objects start at ",\n{" (JSON strings hold no raw newline); mark the bytes of each dropped one.
        body = buf[:total]
        starts = np.flatnonzero((body[:-2] == 44) & (body[1:-1] == 10) & (body[2:] == 123))
        owner_piece = np.cumsum(in_out_async.astype(np.int64) + 1) - 1  # the last object written for each row
        drop = np.zeros(len(starts), dtype=bool)
        drop[owner_piece[in_out_async]] = True
        bounds = np.append(starts, total)
        keep = np.repeat(~drop, np.diff(bounds))
        kept = int(np.count_nonzero(keep))
        buf = np.empty(kept + 1, np.uint8)
        np.compress(keep, body, out=buf[:kept])
        total = kept
    # The first object's leading ",\n" becomes " [" and the result starts at its "[".
    buf[1] = ord("[")
    buf[total] = ord("]")
    return buf[1:total + 1]


def _chunk_parts(buf: np.ndarray, offsets: np.ndarray, carried: np.ndarray) -> list:
    """The objects of a window's runs that are not carried from an earlier window, for its chunk: byte
    views of `buf`. The buffer's second byte is the array's "[" (`_objects_array`), so the first
    object's separator is given apart."""
    parts = []
    for k in np.flatnonzero(~carried):
        lo, hi = int(offsets[k]), int(offsets[k + 1])
        if lo == 0 and hi > 2:
            parts += [b",\n", buf[2:hi]]
        elif hi > lo:
            parts.append(buf[lo:hi])
    return parts


def export_timeline(tables: TraceTables, out: Path, kernel: KernelArgs | None = None,
                    window_events: int | None = None, chunks: ChunkSink | None = None,
                    counters: list[CounterSeries] | None = None) -> TimelineFiles | None:
    """Write the host's timeline files into `out / DIR`; None when the host has no event to draw.

    `chunks`: the host's JSON chunks, written from the windows' events as they are rendered (windows
    are then also cut where the chunks are). `counters`: series drawn as counter tracks besides the
    capture's own counter samples."""
    started = time.perf_counter()
    layout = tables.layout
    rows = tables.exported
    lines = tables.line_of(rows)
    drawn = layout.line_kind[lines] == LINE_EVENTS
    counter_samples = int(np.count_nonzero(~drawn))
    rows, lines = rows[drawn], lines[drawn]
    if len(rows) == 0:
        return None
    kernel = kernel or KernelArgs(tables)
    track_list, lane_of_line = _tracks(tables)
    lane = lane_of_line[lines]
    start = tables.start_ps(rows)
    end = start + np.maximum(tables.end_ps(rows) - start, 1)  # every event lasts at least 1 ps, as in XProf

    # Nesting depth per lane, then each lane's levels placed under the previous lanes of its track.
    n_lanes = int(lane_of_line.max()) + 1
    by_lane = _lane_order(lane, start, end, n_lanes)
    # Per-event arrays in 32 bits where the values allow: a large host has millions of events, and these live
    # through the whole export, beside the host's analyses.
    depth = np.empty(len(rows), dtype=np.int32)
    depth[by_lane] = nesting_depth(lane[by_lane], start[by_lane], end[by_lane])
    lane_levels = np.zeros(n_lanes, dtype=np.int64)
    np.maximum.at(lane_levels, lane, depth + 1)
    lane_track = np.empty(n_lanes, dtype=np.int32)
    lane_offset = np.zeros(n_lanes, dtype=np.int32)
    entries = []
    lane_id = 0
    for k, (process, title, threads) in enumerate(track_list):
        offset = 0
        thread_entries = []
        for tid, name, _lines in threads:
            lane_track[lane_id] = k
            if len(threads) > 1 and lane_levels[lane_id]:
                offset += 1  # in a pool, a row above each thread's events names the thread
            lane_offset[lane_id] = offset
            thread_entries.append({"tid": tid, "name": name, "level": offset, "levels": int(lane_levels[lane_id])})
            offset += int(lane_levels[lane_id])
            lane_id += 1
        entries.append({"process": process, "title": title, "threads": thread_entries, "levels": offset,
                        "pool": len(threads) > 1})
    track = lane_track[lane]
    level = lane_offset[lane] + depth
    # Arrays of every event are let go as soon as they are used: a large host has millions.
    del depth, lane, lines, drawn
    track_events = np.bincount(track, minlength=len(entries))
    for k, entry in enumerate(entries):
        entry["events"] = int(track_events[k])
    keep_tracks = [k for k, e in enumerate(entries) if e["events"]]
    if len(keep_tracks) != len(entries):  # threads whose every event is a counter sample
        renumber = np.full(len(entries), -1, dtype=np.int32)
        renumber[keep_tracks] = np.arange(len(keep_tracks))
        track = renumber[track]
        entries = [entries[k] for k in keep_tracks]

    order = _track_level_order(by_lane, start, track, level)
    del by_lane
    # Rows in 32 bits too (the writer takes a window's as int64); names and flows are looked up per window.
    rows, start, end, track, level = rows[order].astype(np.int32), start[order], end[order], track[order], level[order]
    del order

    target = out / DIR
    target.mkdir(parents=True, exist_ok=True)
    host = tables.capture.host
    written: list[tuple[str, int]] = []
    # The parts are held back while they are small: a small timeline is one file (see SMALL_TIMELINE_BYTES).
    held: list[tuple[str, bytes]] | None = []
    held_bytes = 0
    holding = threading.Lock()  # windows are written on threads

    def write_file(name: str, content: bytes) -> None:
        (target / name).write_bytes(content)
        written.append((name, len(content)))

    def write(name: str, content: bytes) -> None:
        nonlocal held, held_bytes
        with holding:
            if held is not None:
                held_bytes += len(content)
                if held_bytes <= SMALL_TIMELINE_BYTES:
                    held.append((name, content))
                    return
                spilled, held = held, None
            else:
                spilled = []
        for part in spilled:
            write_file(*part)
        write_file(name, content)

    # Full-detail windows, cut like the chunks: on step starts where the caps allow, and where chunks are cut.
    chunk_cuts = chunks.cuts_ps if chunks is not None else np.zeros(0, dtype=np.int64)
    if len(rows) <= (window_events or WINDOW_EVENTS) and not len(chunk_cuts):
        # One window holds every event, none carried (what the plan below comes to), without its sorts:
        # a pod's run has thousands of such hosts.
        member = np.arange(len(rows))
        member_carried = np.zeros(len(rows), dtype=bool)
        cuts = np.zeros(0, dtype=np.int64)
        n_windows = 1
        window_bounds = np.array([0, len(rows)])
    else:
        member, member_carried, cuts, window_bounds = _window_members(start, end, tables.steps.start_ps,
                                                                      window_events or WINDOW_EVENTS, chunk_cuts)
        n_windows = len(window_bounds) - 1

    def write_window(key: str, args_key: str, sel: np.ndarray, carried_here: np.ndarray, buf: np.ndarray | None,
                     for_chunk: bool) -> tuple[np.ndarray, list]:
        """Write a window's two files; return the buffer its objects were rendered into and, `for_chunk`,
        its objects for the chunk (views of that buffer)."""
        # The full names XProf shows as `long_name` (e.g. a TF op's scope path) are searched too.
        window_rows = rows[sel].astype(np.int64)
        names, index_of = _names(np.concatenate([_name_sids(tables, window_rows), _long_sids(tables, window_rows)]),
                                 tables)
        name_index, long_index = index_of[:len(sel)], index_of[len(sel):]
        header = {"host": host, "key": key, "n": len(sel), "carried": carried_here.tolist()}
        write(f"{key}.js", _script(header, _with_names(names, _columns(
            start[sel], end[sel] - start[sel], name_index, track[sel], level[sel], long_name=long_index))))
        # Runs of members carried from an earlier window and of its own: only its own go to the chunk.
        carried = np.zeros(len(sel), dtype=bool)
        carried[carried_here] = True
        runs = np.concatenate([[0], np.flatnonzero(carried[1:] != carried[:-1]) + 1, [len(sel)]]) \
            if for_chunk and len(sel) else np.array([0, len(sel)])
        buf, offsets = render_runs(window_rows, runs, kernel, buf)
        write(f"{args_key}.js", _script({"host": host, "key": args_key, "n": len(sel)},
                                        _objects_array(buf, int(offsets[-1]), _in_out_async(tables, window_rows))))
        if not for_chunk or not len(sel):
            return buf, []
        return buf, _chunk_parts(buf, offsets, carried[runs[:-1]])

    windows = []
    carried_in = []  # per window, its members carried from an earlier window (positions among them)
    t_first, t_last = int(start.min()), int(end.max())
    for k in range(n_windows):
        carried_in.append(np.flatnonzero(member_carried[window_bounds[k]:window_bounds[k + 1]]))
        w0 = int(cuts[k - 1]) if k > 0 else t_first
        w1 = int(cuts[k]) if k < len(cuts) else t_last
        windows.append({"key": f"w-{k:03d}", "args": f"a-{k:03d}", "start": w0, "end": w1,
                        "events": int(window_bounds[k + 1] - window_bounds[k] - len(carried_in[k]))})

    def window_task(k: int, buf: np.ndarray | None) -> Callable[[], tuple[np.ndarray, list]]:
        return partial(write_window, windows[k]["key"], windows[k]["args"],
                       member[window_bounds[k]:window_bounds[k + 1]], carried_in[k], buf, chunks is not None)

    # Windows are written on a few threads: the JSON writer and zlib-ng release the GIL. A host of one window
    # (most hosts of a pod's run) writes it here: starting threads cost more than its whole window. Each window
    # renders into a buffer that a later window reuses once the chunk has written the window's events: this
    # thread hands the buffers on, in window order, so no window ever waits for one. WINDOWS_AHEAD windows are
    # being written while this thread takes the next one's events to its chunk, whose deflating threads
    # work on the one before.
    with ThreadPoolExecutor(max_workers=WRITER_THREADS) if n_windows > 1 else nullcontext() as pool:
        def run(task: Callable[[], tuple[np.ndarray, list]]) -> Future:
            if pool is not None:
                return pool.submit(task)
            future: Future = Future()
            future.set_result(task())
            return future

        free: list[np.ndarray | None] = [None] * (WINDOWS_AHEAD + 1)  # None: allocated by the window
        pending = deque(run(window_task(k, free.pop())) for k in range(min(WINDOWS_AHEAD, n_windows)))
        for k in range(n_windows):
            buf, parts = pending.popleft().result()
            if chunks is not None:
                chunks.add_window(chunks.chunk_of(windows[k]["start"]), parts, windows[k]["events"],
                                  partial(free.append, buf))
            else:
                free.append(buf)
            if k + WINDOWS_AHEAD < n_windows:
                while not free and chunks is not None and chunks.write_oldest():
                    pass
                pending.append(run(window_task(k + WINDOWS_AHEAD, free.pop())))

    # An excerpt for the single-file report: the busiest step (most events starting in it), at most
    # EXCERPT_EVENTS of its events; without steps, the first EXCERPT_EVENTS events.
    excerpt = _excerpt_range(start, tables.steps, t_first, t_last)
    inside = np.flatnonzero((start >= excerpt["start"]) & (start < excerpt["end"]))
    running = np.flatnonzero((start < excerpt["start"]) & (end > excerpt["start"]))
    sel = np.union1d(inside, running)  # in (track, level, start) order, like every window
    write_window("x-000", "xa-000", sel, np.searchsorted(sel, running), None, False)
    excerpt.update(key="x-000", args="xa-000", events=int(len(inside)))

    lod = _write_lod(tables, host, start, end, track, level, rows, t_first, t_last, windows, write)
    # A series of the host (the memory profile's) goes under the host's threads, else under the first process.
    host_process = next((e["process"] for e in entries if e["process"].endswith("/host:CPU")), entries[0]["process"])
    handed = [CounterSeries(c.process or host_process, c.name, c.unit, c.time_ps, c.value) for c in counters or ()]
    counter_tracks = _write_counters(host, _capture_counters(tables) + handed, write)
    marks = tables.steps
    index = {
        "format": FORMAT,
        "host": host,
        "start": t_first,
        "end": t_last,
        "events": int(len(rows)),
        "counter_samples": counter_samples,
        "tracks": entries,
        "steps": [[int(n), int(s), int(e)] for n, s, e in zip(marks.number, marks.start_ps, marks.end_ps)],
        "windows": windows,
        "lod": lod,
        "density": _density(start, t_first, t_last),
        "counters": counter_tracks,
        "excerpt": excerpt,
    }
    index_call = REGISTER.encode() + b"(" + _js_text({"host": host, "key": "index"}) + b"," + _js_text(index) + b");\n"
    # The held parts' calls first (in name order: the same file whatever order threads wrote them in), so that
    # they are registered when the page's wait for the index ends.
    write_file("index.js", b"".join(content for _, content in sorted(held or ())) + index_call)
    return TimelineFiles(
        index=f"{DIR}/index.js", events=int(len(rows)), tracks=len(entries), windows=len(windows),
        lod_levels=len(lod), files=len(written), bytes=sum(size for _, size in written),
        seconds=time.perf_counter() - started, counter_samples=counter_samples,
        files_written=[f"{DIR}/{name}" for name, _ in written], start_ps=t_first, end_ps=t_last,
    )


def _lane_order(lane: np.ndarray, start: np.ndarray, end: np.ndarray, n_lanes: int) -> np.ndarray:
    """Events by lane, start and longest first, ties in row order: `np.lexsort((-end, start, lane))`.

    A capture's rows are its lines' events by start time, so within a lane they are mostly in that
    order already: a stable sort by lane (a radix sort below 2^16 lanes), checked, costs a fifth of the
    lexsort on a large host (0.65 s at ×200), which runs only where the check fails.
    """
    by_lane = np.argsort(lane.astype(np.uint16) if n_lanes <= 1 << 16 else lane, kind="stable")
    ordered_lane, ordered_start, ordered_end = lane[by_lane], start[by_lane], end[by_lane]
    step = ordered_start[1:] - ordered_start[:-1]
    out_of_order = (ordered_lane[1:] == ordered_lane[:-1]) & (
        (step < 0) | ((step == 0) & (ordered_end[1:] > ordered_end[:-1])))
    if out_of_order.any():
        return np.lexsort((-end, start, lane))
    return by_lane


def _track_level_order(by_lane: np.ndarray, start: np.ndarray, track: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Events by track, level and start: `np.lexsort((start, level, track))`, from the lane order.

    A (track, level) holds the events of one lane (a pool's threads have levels of their own), and no
    two of them start together (an event that starts with another sits a level below it), so two stable
    radix passes over the lane order (by start within each lane), by level then by track, give the
    lexsort's order at a fraction of its cost.
    """
    if len(track) and max(int(track.max()), int(level.max())) >= 1 << 16:
        return np.lexsort((start, level, track))
    by_level = by_lane[np.argsort(level[by_lane].astype(np.uint16), kind="stable")]
    return by_level[np.argsort(track[by_level].astype(np.uint16), kind="stable")]


def _window_cuts(sorted_start: np.ndarray, step_starts: np.ndarray, window_events: int,
                 fixed_cuts: np.ndarray) -> np.ndarray:
    """Where the full-detail windows are cut: on step starts where the cap allows (as chunks are), and on
    each of `fixed_cuts` (the chunks' own) with events both before and after it."""
    edges = np.concatenate([[0], np.searchsorted(sorted_start, fixed_cuts, side="left"), [len(sorted_start)]])
    cuts: list[int] = []
    for k in range(len(edges) - 1):
        a, b = int(edges[k]), int(edges[k + 1])
        if b == a:
            continue
        if a > 0:
            cuts.append(int(fixed_cuts[k - 1]))
        cuts += plan_chunks(np.arange(b - a), sorted_start[a:b], np.ones(b - a, np.int32), step_starts,
                            window_events, 1 << 62).cuts_ps
    return np.array(cuts, dtype=np.int64)


def _window_members(start: np.ndarray, end: np.ndarray, step_starts: np.ndarray, window_events: int,
                    fixed_cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The full-detail windows' members (event indices, by window, then in (track, level, start) order),
    whether each is carried from an earlier window, the windows' cuts and their bounds into the members."""
    cuts = _window_cuts(np.sort(start), step_starts, window_events, fixed_cuts)
    n_windows = len(cuts) + 1
    first_window = np.searchsorted(cuts, start, side="right")
    last_window = np.searchsorted(cuts, end - 1, side="right")
    spans = last_window - first_window
    carried = np.flatnonzero(spans > 0)
    counts = spans[carried]
    carry_rows = np.repeat(carried, counts)
    # Each carried event's later windows, first + 1 to last, without a loop over the events: position p of
    # its run (which starts at offset o) is window first + 1 + p - o.
    carry_window = np.repeat(first_window[carried] + 1 - (np.cumsum(counts) - counts), counts) \
        + np.arange(len(carry_rows))
    member = np.concatenate([np.arange(len(start), dtype=np.int32), carry_rows.astype(np.int32)])
    member_window = np.concatenate([first_window, carry_window])
    member_carried = np.concatenate([np.zeros(len(start), bool), np.ones(len(carry_rows), bool)])
    del first_window, last_window, spans, carried, counts, carry_rows, carry_window
    grouped = np.lexsort((member, member_window))  # by window, then in (track, level, start) order
    member, member_window, member_carried = member[grouped], member_window[grouped], member_carried[grouped]
    del grouped
    window_bounds = np.searchsorted(member_window, np.arange(n_windows + 1))
    return member, member_carried, cuts, window_bounds


def _capture_counters(tables: TraceTables) -> list[CounterSeries]:
    """The capture's own counter samples (each process's `_counters_` line), one series per counter name."""
    out = []
    for proc in tables.layout.processes:
        if not proc.counter_lines:
            continue
        rows = tables.rows_on_lines(proc.counter_lines)
        rows = rows[rows < tables.n_events]
        if not len(rows):
            continue
        rows = rows[np.argsort(tables.start_ps(rows), kind="stable")]
        names, values = tables.name_sid[rows], _counter_values(tables, rows)
        for sid in np.unique(names).tolist():
            mine = names == sid
            out.append(CounterSeries(proc.name, tables.pool.text(int(sid)), "", tables.start_ps(rows[mine]),
                                     values[mine]))
    return out


def _write_counters(host: str, series: list[CounterSeries], write) -> list[dict]:
    """One `c-NNN.js` per series (time deltas and values, float64), and its entry of the index."""
    entries = []
    for k, s in enumerate(x for x in series if len(x.time_ps)):
        order = np.argsort(s.time_ps, kind="stable")
        t, v = np.asarray(s.time_ps, dtype=np.int64)[order], np.asarray(s.value, dtype=np.float64)[order]
        delta = np.empty(len(t), dtype="<f8")
        delta[0] = t[0]
        delta[1:] = t[1:] - t[:-1]
        key = f"c-{k:03d}"
        payload = delta.tobytes() + v.astype("<f8").tobytes()
        write(f"{key}.js", _script({"host": host, "key": key, "n": len(t)}, payload))
        entries.append({"key": key, "process": s.process, "name": s.name, "unit": s.unit, "n": int(len(t)),
                        "min": float(v.min()), "max": float(v.max()), "start": int(t[0]), "end": int(t[-1])})
    return entries


def _density(start: np.ndarray, t_first: int, t_last: int) -> dict:
    """{bins, counts}: how many events start in each of DENSITY_BINS equal slices of [t_first, t_last], so that
    the page counts the events in its view (and so per pixel) without reading them."""
    span = max(t_last - t_first, 1)
    # In floating point: a capture's times may reach int64's range, where `(start - t_first) * DENSITY_BINS`
    # wraps around to negative slots.
    fraction = (start - t_first).astype(np.float64) / float(span)
    slot = np.clip((fraction * DENSITY_BINS).astype(np.int64), 0, DENSITY_BINS - 1)
    return {"bins": DENSITY_BINS, "counts": np.bincount(slot, minlength=DENSITY_BINS).tolist()}


def _excerpt_range(start: np.ndarray, steps, t_first: int, t_last: int) -> dict:
    """{start, end, step}: the busiest step's time range, cut to EXCERPT_EVENTS events."""
    by_time = np.sort(start)
    if len(steps):
        counts = np.searchsorted(by_time, steps.end_ps) - np.searchsorted(by_time, steps.start_ps)
        k = int(np.argmax(counts))
        lo, hi, step = int(steps.start_ps[k]), int(steps.end_ps[k]), int(steps.number[k])
    else:
        lo, hi, step = t_first, t_last + 1, None
    first = int(np.searchsorted(by_time, lo))
    if int(np.searchsorted(by_time, hi)) - first > EXCERPT_EVENTS:
        hi = int(by_time[first + EXCERPT_EVENTS])  # the events starting before it: at most the cap (ties aside)
    return {"start": lo, "end": hi, "step": step}


def _name_sids(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    n = tables.n_events
    real = rows < n
    out = np.empty(len(rows), dtype=np.int32)
    out[real] = tables.name_sid[rows[real]]
    out[~real] = tables.synthetic.name_sid[rows[~real] - n]
    return out


def _long_sids(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    n = tables.n_events
    real = rows < n
    out = np.full(len(rows), -1, dtype=np.int32)
    out[real] = tables.md_long_sid[tables.columns.ev_md[rows[real]]]
    return out


def _in_out_async(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    """Rows the JSON writer writes as two objects (async events with an in-out flow)."""
    n = tables.n_events
    real = rows < n
    bits = np.zeros(len(rows), dtype=np.int64)
    bits[real] = tables.flows.flow_bits[rows[real]]
    return ((bits & FLOW_ASYNC) != 0) & ((bits & 3) == schema.FLOW_IN_OUT)


def _write_lod(tables: TraceTables, host: str, start: np.ndarray, end: np.ndarray, track: np.ndarray,
               level: np.ndarray, rows: np.ndarray, t_first: int, t_last: int, windows: list[dict],
               write) -> list[dict]:
    """Level-of-detail tiles, coarsest first, down to tiles about as long as a window."""
    if len(start) < LOD_MIN_EVENTS:
        return []
    span = max(t_last - t_first, 1)
    window_span = span / max(len(windows), 1)
    levels = []
    for lod_level in range(MAX_LOD_LEVELS):
        tile_span = -(-span // 4 ** lod_level)
        resolution = max(1, tile_span // LOD_BINS)
        capacity = block_capacity(start, end, t_first, tile_span)
        event, tile, b_start, b_end, count = detail_blocks(track, level, start, end, t_first, tile_span,
                                                           resolution, capacity)
        by_tile = np.argsort(tile, kind="stable")
        event, tile, b_start, b_end, count = event[by_tile], tile[by_tile], b_start[by_tile], b_end[by_tile], \
            count[by_tile]
        # A merged block has no name of its own.
        sids = np.where(count == 1, _name_sids(tables, rows[event].astype(np.int64)), -1)
        b_track, b_level = track[event], level[event]
        tiles = {}
        bounds = np.flatnonzero(np.diff(tile, prepend=-1, append=-1))
        for a, b in zip(bounds[:-1], bounds[1:]):
            t = int(tile[a])
            names, name_index = _names(sids[a:b], tables)
            key = f"l{lod_level}-{t:05d}"
            header = {"host": host, "key": key, "n": int(b - a)}
            write(f"{key}.js", _script(header, _with_names(names, _columns(
                b_start[a:b], b_end[a:b] - b_start[a:b], name_index, b_track[a:b], b_level[a:b], count[a:b]))))
            tiles[str(t)] = [key, int(b - a)]
        levels.append({"tile": int(tile_span), "resolution": int(resolution), "tiles": tiles})
        # Finer levels are not needed once a tile is about a window long, holds on average no more events than a
        # host without tiles, or merges little: the page draws full detail there.
        if ((len(windows) > 1 and tile_span <= window_span) or len(start) <= LOD_MIN_EVENTS * 4 ** lod_level
                or len(event) >= LOD_STOP_SHARE * len(start)):
            break
    return levels
