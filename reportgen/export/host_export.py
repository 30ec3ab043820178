"""Export one host's complete timeline: chunked Chrome JSON and/or one Perfetto file.

Runs where the capture is in memory (a section's per-host stage) and streams
files into `<out_dir>` (`<site>/<run>/trace/<host>/`). Only the list of files
written and small summaries travel back; memory stays bounded by the
capture's own tables plus a few buffers, whatever the number of events.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reportgen.capture import HostCapture
from reportgen.export.activity import row_activity
from reportgen.export.chunks import MAX_CHUNK_BYTES, MAX_CHUNK_EVENTS, ChunkPlan, chunk_steps, plan_chunks
from reportgen.export.json_writer import (
    ChunkWriter,
    KernelArgs,
    WrittenChunk,
    document_head,
    measure_rows,
    metadata_events,
    write_chunk,
)
from reportgen.export.layout import LINE_EVENTS
from reportgen.export.perfetto_writer import write_pftrace
from reportgen.export.steps import StepMarks
from reportgen.export.tables import AddedRows, TraceTables, build_tables
from reportgen.export.timeline import CounterSeries, TimelineFiles, export_timeline
from reportgen.kernels import ensure_compiled
from reportgen.names import host_folder

FORMATS = ("json", "perfetto", "both")
SAMPLE_PER_LINE = 512  # events measured per line to estimate chunk sizes


@dataclass
class ChunkRecord:
    """One file of the export: an entry of `<run>/trace/manifest.json`."""

    host: str
    file: str  # relative to the manifest
    format: str  # "json.gz" or "pftrace"
    first_us: float
    last_us: float
    first_step: int | None
    last_step: int | None
    events: int
    bytes: int
    json_bytes: int | None = None  # uncompressed size (JSON chunks)

    def manifest_entry(self) -> dict:
        entry = {k: getattr(self, k) for k in ("host", "file", "format", "first_us", "last_us", "first_step",
                                                 "last_step", "events", "bytes")}
        if self.json_bytes is not None:
            entry["uncompressed_bytes"] = self.json_bytes
        return entry


@dataclass
class HostExport:
    host: str
    events: int
    flows: int
    chunks: list[ChunkRecord] = field(default_factory=list)
    cuts_us: list[float] = field(default_factory=list)
    # Per trace row and time bin: busy share (the page's overview), export.activity.COLUMNS as numpy columns.
    activity: dict[str, np.ndarray] | None = None
    row_labels: list[str] = field(default_factory=list)  # "<process> · <thread>", in XProf's order
    steps: list[tuple[int, float, float]] = field(default_factory=list)  # (number, start µs, end µs)
    seconds: float = 0.0
    # The page's time origin, in the files' time (µs): `activity`, `steps` and
    # `cuts_us` count from it; chunk records keep the files' own times. 0 for
    # XSpace captures (their times already count from the profile's start);
    # the host's first event for older profilers' timelines (ProfilerHook
    # steps count µs since the epoch).
    origin_us: float = 0.0
    timeline: TimelineFiles | None = None  # the page's in-page timeline (`<host>/timeline/`)


def _estimate_bytes(tables: TraceTables, kernel: KernelArgs, rows: np.ndarray) -> np.ndarray:
    """JSON bytes per row: its line's mean, measured exactly on up to SAMPLE_PER_LINE of the line's events.

    Exported rows are in row order, so each line's events are one run of them (the capture
    stores lines as blocks); the added events follow, in line order.
    """
    lines = tables.line_of(rows)
    starts = np.concatenate([[0], np.flatnonzero(lines[1:] != lines[:-1]) + 1, [len(rows)]])
    estimate = np.empty(len(rows), dtype=np.int32)
    for a, b in zip(starts[:-1], starts[1:]):  # one turn per run of a line
        # Contiguous, as every batch the writer gets: one compiled specialization serves both.
        sample = np.ascontiguousarray(rows[a:b:max(1, (b - a) // SAMPLE_PER_LINE)][:SAMPLE_PER_LINE])
        estimate[a:b] = int(np.ceil(measure_rows(sample, kernel) / len(sample)))
    return estimate


def _us(ps) -> float:
    return round(float(ps) / 1e6, 6)


def export_host(capture: HostCapture, run: str, out_dir: str | Path, trace_format: str = "json",
                max_events: int = MAX_CHUNK_EVENTS, max_bytes: int = MAX_CHUNK_BYTES,
                steps: StepMarks | None = None, generator: str = "reportgen",
                activity_bins: int = 200, timeline: bool = True, added: AddedRows | None = None,
                counters: list[CounterSeries] | None = None) -> HostExport:
    """Write the host's trace files into out_dir; file names in the records are `<host>/<file>`.

    `added`: rows XProf derives while loading the capture (a TPU core's Framework Ops, …), exported
    beside the capture's own. `counters`: series the in-page timeline draws as counter tracks."""
    if trace_format not in FORMATS:
        raise ValueError(f"trace format must be one of {', '.join(FORMATS)}")
    started = time.perf_counter()
    out = Path(out_dir)
    host = capture.host
    stem = host_folder(host)  # the host's folder and file names: a capture's host name is not one
    out.mkdir(parents=True, exist_ok=True)
    try:
        tables = build_tables(capture, steps, added)
        result = HostExport(host=host, events=tables.event_total, flows=tables.flows.count)
        rows = tables.exported
        marks = tables.steps
        result.activity, result.row_labels = row_activity(tables, activity_bins)
        result.steps = [(int(n), _us(s), _us(e)) for n, s, e in zip(marks.number, marks.start_ps, marks.end_ps)]
        # The compiled writer's arguments (the string pool as JSON among them) serve the chunks and the
        # timeline's event objects alike: built once.
        if timeline and len(rows):
            # On a machine's first build: compiled here while the writer may still compile elsewhere.
            ensure_compiled("timeline")
        kernel = KernelArgs(tables) if len(rows) and (timeline or trace_format != "perfetto") else None
        chunks = None
        if trace_format in ("json", "both") and len(rows):
            if timeline:  # written with the timeline's windows, below
                chunks = ChunkFiles(tables, kernel, run, out, result, max_events, max_bytes, generator)
            else:
                _export_json(tables, kernel, run, out, result, max_events, max_bytes, generator)
        if timeline and len(rows):
            try:
                result.timeline = export_timeline(tables, out, kernel, chunks=chunks, counters=counters)
                if chunks is not None:
                    chunks.finish()
            except BaseException:
                if chunks is not None:
                    chunks.abandon()
                raise
        if trace_format in ("perfetto", "both") and len(rows):
            name = f"{stem}.pftrace"
            written = write_pftrace(str(out / name), tables)
            start, end = tables.start_ps(rows), tables.end_ps(rows)
            first, last = (int(marks.number[0]), int(marks.number[-1])) if len(marks) else (None, None)
            result.chunks.append(ChunkRecord(
                host=host, file=f"{stem}/{name}", format="pftrace", first_us=_us(start.min()),
                last_us=_us(end.max()), first_step=first, last_step=last, events=written.events,
                bytes=written.file_bytes,
            ))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # no half-written host in the site
        raise
    result.seconds = time.perf_counter() - started
    return result


def _plan_json(tables: TraceTables, kernel: KernelArgs, run: str, out: Path, result: HostExport, max_events: int,
               max_bytes: int, generator: str) -> tuple[ChunkPlan, list[tuple[str, bytes, ChunkRecord]]]:
    """Cut the host's rows into chunks: the plan and, per chunk, its path, its document head and its record
    (sizes to come)."""
    host = tables.capture.host
    rows = tables.exported
    plan = plan_chunks(rows, tables.start_ps(rows), _estimate_bytes(tables, kernel, rows),
                       tables.steps.start_ps, max_events, max_bytes)
    result.cuts_us = [_us(c) for c in plan.cuts_ps]
    meta_events = metadata_events(tables)
    marks = tables.steps
    chunks = []
    for k in range(len(plan)):
        lo, hi = plan.bounds[k]
        first_step, last_step = chunk_steps(plan, k, marks.start_ps, marks.end_ps, marks.number)
        first_ps = int(plan.start_ps[lo])
        last_ps = int(tables.end_ps(plan.order[lo:hi]).max())
        name = f"{host_folder(host)}-{k:03d}.json.gz"
        head = document_head({
            "host": host, "run": run, "generator": generator, "chunk": k, "chunks": len(plan),
            "first_us": _us(first_ps), "last_us": _us(last_ps), "first_step": first_step, "last_step": last_step,
        }, meta_events)
        record = ChunkRecord(host=host, file=f"{host_folder(host)}/{name}", format="json.gz", first_us=_us(first_ps),
                             last_us=_us(last_ps), first_step=first_step, last_step=last_step, events=hi - lo,
                             bytes=0)
        chunks.append((str(out / name), head, record))
    return plan, chunks


def _export_json(tables: TraceTables, kernel: KernelArgs, run: str, out: Path, result: HostExport, max_events: int,
                 max_bytes: int, generator: str) -> None:
    """The chunks alone (no in-page timeline): each rendered from its rows."""
    plan, plan_files = _plan_json(tables, kernel, run, out, result, max_events, max_bytes, generator)
    for k, (path, head, record) in enumerate(plan_files):
        written = write_chunk(path, head, plan.rows(k), kernel)
        _finish_record(result, record, written)


def _finish_record(result: HostExport, record: ChunkRecord, written: WrittenChunk) -> None:
    record.events, record.bytes, record.json_bytes = written.events, written.file_bytes, written.json_bytes
    result.chunks.append(record)


class ChunkFiles:
    """The host's JSON chunks, written from the in-page timeline's windows (`export_timeline(chunks=…)`).

    Every event drawn on the timeline is rendered once, per window, for the window's `a-NNN.js`; the
    same bytes are the chunk's events (`add_window`). Window cuts include the chunks' cuts (`cuts_ps`),
    so a window's events belong to one chunk; in a chunk they follow its windows' order (by track,
    nesting level and start), then the events the timeline does not draw (counter samples), in row
    order. Chunks are written one after the other, each once every window before its end is added.
    """

    def __init__(self, tables: TraceTables, kernel: KernelArgs, run: str, out: Path, result: HostExport,
                 max_events: int, max_bytes: int, generator: str):
        self._kernel, self._result = kernel, result
        plan, self._files = _plan_json(tables, kernel, run, out, result, max_events, max_bytes, generator)
        self.cuts_ps = np.asarray(plan.cuts_ps, dtype=np.int64)
        del plan  # its rows by start time are a large host's tens of MB, not wanted while the windows run
        # The rows the timeline does not draw (counter samples), per chunk, in row order.
        rows = tables.exported
        undrawn = rows[tables.layout.line_kind[tables.line_of(rows)] != LINE_EVENTS]
        chunk = np.searchsorted(self.cuts_ps, tables.start_ps(undrawn), side="right")
        by_chunk = np.argsort(chunk, kind="stable")
        self._undrawn = np.split(undrawn[by_chunk], np.searchsorted(chunk[by_chunk], np.arange(1, len(self._files))))
        self._next = 0  # the chunk to open next
        self._open: ChunkWriter | None = None

    def chunk_of(self, start_ps: int) -> int:
        """The chunk of an event starting at `start_ps`: as plan_chunks cuts (a cut's time starts the next)."""
        return int(np.searchsorted(self.cuts_ps, start_ps, side="right"))

    def add_window(self, chunk: int, parts: list, events: int, done: Callable[[], None]) -> None:
        """A window's rendered events (byte views of its buffer), part of `chunk`; `done` runs once they are
        written (the buffer is then free again)."""
        while self._open is None or self._next <= chunk:
            self._close_open()
            self._open_next()
        self._open.add_rendered(parts, events, done)

    def write_oldest(self) -> bool:
        """Write the oldest of the events added and not written yet; False when none is left."""
        return self._open is not None and self._open.write_oldest()

    def finish(self) -> None:
        """Write every chunk not finished yet (those whose events the timeline draws none of included)."""
        self._close_open()
        while self._next < len(self._files):
            self._open_next()
            self._close_open()

    def abandon(self) -> None:
        if self._open is not None:
            self._open.abandon()
            self._open = None

    def _open_next(self) -> None:
        path, head, _ = self._files[self._next]
        self._open = ChunkWriter(path, head)
        self._next += 1

    def _close_open(self) -> None:
        if self._open is None:
            return
        k = self._next - 1
        writer, self._open = self._open, None
        try:
            writer.add_rows(self._undrawn[k], self._kernel)
        except BaseException:
            writer.abandon()
            raise
        written = writer.close()
        _finish_record(self._result, self._files[k][2], written)
