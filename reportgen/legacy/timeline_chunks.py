"""Trace export for timelines that are Chrome trace events already (older profilers' files).

`<host>.trace.json.gz`, ProfilerHook `timeline-<step>.json` and Cloud TPU
`.trace` files (read by `reportgen.legacy.chrome_trace`) are written to the
same `<run>/trace/<host>/` chunks, manifest entries and trace page as an
XSpace host's export, one input file at a time: a file's events are held
while its chunks are written, then dropped, so memory stays at one input
file's events whatever their number.

Each input file gives one chunk, or several cut on time when it exceeds the
chunk caps (1,000,000 events, about 100 MB of JSON); events are kept as the
file has them (pid, tid, name, ts, dur, args; XProf's mapping does not apply,
the file is already a trace), and every chunk repeats the file's metadata
events (process and thread names, sort order) and header
(`displayTimeUnit`, `metadata`, to which host, run and the source file are
added). Events that start at the same time are never split; an event is in
the chunk in whose range it starts. The page's activity overview is computed
from the files' complete (`X`) events per process and thread.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import numpy as np
import orjson

from reportgen.export.chunks import MAX_CHUNK_BYTES, MAX_CHUNK_EVENTS
from reportgen.export.gzip_stream import GzipStream
from reportgen.export.host_export import ChunkRecord, HostExport
from reportgen.export.strings import dumps_sized
from reportgen.legacy.chrome_trace import ChromeTrace
from reportgen.names import host_folder
from reportgen.timebins import covered_per_bin, time_bins

BATCH_EVENTS = 16384  # events serialized per orjson call
SIZE_SAMPLE = 1024  # events serialized to estimate a file's JSON bytes per event
DOCUMENT_TAIL = b"\n]}\n"


def _us(value: float) -> float:
    return round(float(value), 6)


def plan_time_chunks(ts: np.ndarray, bytes_per_event: float, max_events: int = MAX_CHUNK_EVENTS,
                     max_bytes: int = MAX_CHUNK_BYTES) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(order, bounds): events by start time and the [lo, hi) ranges of `order` that make the chunks.

    Cut on time only (these files mark no steps the export could cut on), as
    many events per chunk as both caps allow, never between events that start
    at the same time (a chunk then exceeds the event cap: the only way to keep
    them whole).
    """
    if max_events < 1 or max_bytes < 1:
        raise ValueError("chunk caps must be positive")
    order = np.argsort(ts, kind="stable")
    start = ts[order]
    n = len(start)
    per_chunk = max(1, min(max_events, int(max_bytes // max(bytes_per_event, 1.0))))
    bounds: list[tuple[int, int]] = []
    lo = 0
    while lo < n:
        cap = lo + per_chunk
        if cap >= n:
            bounds.append((lo, n))
            break
        hi = int(np.searchsorted(start, start[cap], side="left"))
        if hi <= lo:  # everything from lo to the cap starts together
            hi = int(np.searchsorted(start, start[lo], side="right"))
        bounds.append((lo, hi))
        lo = hi
    return order, bounds


def _document_head(trace: ChromeTrace, metadata: dict) -> bytes:
    """The file's own header with our metadata added, then its metadata events."""
    head = {k: v for k, v in trace.head.items() if k not in ("displayTimeUnit", "metadata")}
    head["displayTimeUnit"] = trace.head.get("displayTimeUnit") or "ns"
    head["metadata"] = {**(trace.head.get("metadata") or {}), **metadata}
    meta = b",\n".join([dumps_sized(e) for e in trace.meta])
    return orjson.dumps(head)[:-1] + b',"traceEvents":[\n' + meta


def _number(value, fallback: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else fallback


class _RowLabels:
    """`<process> · <thread>` for each (pid, tid), named by a file's metadata events.

    Rows are ordered by process sort index (else pid), then thread sort index
    (else tid), as trace viewers order them; the first file naming a row sets its place.
    """

    def __init__(self):
        self.keys: dict[str, tuple] = {}
        self._names: tuple[dict, dict, dict, dict] = ({}, {}, {}, {})

    def use(self, trace: ChromeTrace) -> None:
        """Name rows after this file's metadata events (a few per process and thread)."""
        processes, process_order, threads, thread_order = {}, {}, {}, {}
        for e in trace.meta:
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            pid, tid, kind = e.get("pid"), e.get("tid"), e.get("name")
            if kind == "process_name":
                processes[pid] = args.get("name")
            elif kind == "process_sort_index":
                process_order[pid] = args.get("sort_index")
            elif kind == "thread_name":
                threads[(pid, tid)] = args.get("name")
            elif kind == "thread_sort_index":
                thread_order[(pid, tid)] = args.get("sort_index")
        self._names = (processes, process_order, threads, thread_order)

    def label(self, pid, tid) -> str:
        processes, process_order, threads, thread_order = self._names
        pname = processes.get(pid) or f"pid {pid}"
        tname = threads.get((pid, tid)) or f"tid {tid}"
        label = f"{pname} · {tname}"
        self.keys.setdefault(label, (
            _number(process_order.get(pid), _number(pid, float("inf"))), str(pname),
            _number(thread_order.get((pid, tid)), _number(tid, float("inf"))), str(tname),
        ))
        return label

    def ordered(self) -> list[str]:
        return sorted(self.keys, key=lambda k: self.keys[k])


def _merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals (any order) as sorted, disjoint intervals."""
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    opens = np.concatenate([[True], start[1:] > reach[:-1]])
    group = np.cumsum(opens) - 1
    merged_end = np.full(group[-1] + 1, -np.inf)
    np.maximum.at(merged_end, group, reach)
    return start[opens], merged_end


class ChromeTraceExport:
    """Writes one host's Chrome-trace files as chunks; `add` one input file at a time, then `finish`."""

    def __init__(self, host: str, run: str, out_dir: str | Path, generator: str = "reportgen",
                 max_events: int = MAX_CHUNK_EVENTS, max_bytes: int = MAX_CHUNK_BYTES, activity_bins: int = 200):
        self.host, self.run, self.generator = host, run, generator
        self.out = Path(out_dir)
        self.max_events, self.max_bytes = max_events, max_bytes
        self.activity_bins = activity_bins
        self.result = HostExport(host=host, events=0, flows=0)
        self._labels = _RowLabels()
        self._busy: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._started = time.perf_counter()
        # The page counts time from the host's first event (µs in the files' own
        # time base, e.g. since the epoch for ProfilerHook steps): step marks and
        # chunk cuts are kept in file time until `finish` knows it.
        self._first_us = np.inf
        self._steps: list[tuple[int, float, float]] = []
        self._cuts: list[float] = []

    def add(self, trace: ChromeTrace, step: int | None = None, stem: str | None = None) -> None:
        """Write one input file's chunks (`<stem>.json.gz`, or `<stem>-<k>.json.gz` when cut)."""
        n = trace.count
        if n == 0:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        ts = trace.ts_us
        known = ~np.isnan(ts)
        # An event without a start (rare: metadata-like events) goes with the file's first events.
        first_known = float(ts[known].min()) if known.any() else 0.0
        ts = np.where(known, ts, first_known)
        end = np.maximum(ts + trace.dur_us, ts)
        sample = np.arange(0, n, max(1, n // SIZE_SAMPLE))[:SIZE_SAMPLE]
        per_event = (len(trace.to_json(sample)) + 2) / len(sample) + 1  # as the sample's JSON list
        order, bounds = plan_time_chunks(ts, per_event, self.max_events, self.max_bytes)
        stem = stem or host_folder(self.host)
        for k, (lo, hi) in enumerate(bounds):
            rows = np.sort(order[lo:hi])  # the file's own order within a chunk
            name = (f"{stem}.json.gz" if len(bounds) == 1 and stem != host_folder(self.host)
                    else f"{stem}-{k:03d}.json.gz")
            first_us, last_us = _us(ts[order[lo]]), _us(end[rows].max())
            chunk_index = len(self.result.chunks)
            if chunk_index:
                self._cuts.append(float(ts[order[lo]]))
            metadata = {"host": self.host, "run": self.run, "generator": self.generator, "source": trace.source,
                        "chunk": chunk_index, "source_chunk": k, "source_chunks": len(bounds),
                        "first_us": first_us, "last_us": last_us, "first_step": step, "last_step": step}
            events, json_bytes, file_bytes = self._write(self.out / name, _document_head(trace, metadata), trace,
                                                         rows)
            self.result.chunks.append(ChunkRecord(
                host=self.host, file=f"{host_folder(self.host)}/{name}", format="json.gz", first_us=first_us,
                last_us=last_us,
                first_step=step, last_step=step, events=events, bytes=file_bytes, json_bytes=json_bytes,
            ))
        self.result.events += n
        complete, flows = trace.phases()
        self.result.flows += flows
        if step is not None:
            self._steps.append((int(step), float(ts.min()), float(end.max())))
        self._first_us = min(self._first_us, float(ts.min()))
        self._add_activity(trace, complete, ts, end)

    @staticmethod
    def _write(path: Path, head: bytes, trace: ChromeTrace, rows: np.ndarray) -> tuple[int, int, int]:
        """Stream one chunk: header, then the events in batches (serialized and deflated on the
        gzip stream's threads), then the tail."""
        separator = b",\n" if head.endswith(b"}") else b"\n"  # after the metadata events, if any

        def batch(lo: int, first: bool) -> list[bytes]:
            return [(separator if first else b",\n") + trace.to_json(rows[lo:lo + BATCH_EVENTS])]

        with open(path, "wb") as out:
            with GzipStream(out) as gzip:
                gzip.write(head)
                for lo in range(0, len(rows), BATCH_EVENTS):
                    gzip.submit(partial(batch, lo, lo == 0))
                gzip.write(DOCUMENT_TAIL)
            size = out.tell()
        return len(rows), gzip.size, size

    def _add_activity(self, trace: ChromeTrace, complete: np.ndarray, ts: np.ndarray, end: np.ndarray) -> None:
        """Busy intervals per trace row from the file's complete (X) events, merged per row."""
        complete = np.flatnonzero(complete)
        if len(complete) == 0:
            return
        self._labels.use(trace)
        codes, threads = trace.threads(complete)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(threads) + 1))
        start, stop = ts[complete][order], end[complete][order]
        for code, (pid, tid) in enumerate(threads):  # per row (process and thread), never per event
            lo, hi = bounds[code], bounds[code + 1]
            label = self._labels.label(pid, tid)
            self._busy.setdefault(label, []).append(_merged(start[lo:hi], stop[lo:hi]))

    def finish(self) -> HostExport:
        result = self.result
        origin = self._first_us if np.isfinite(self._first_us) else 0.0
        result.origin_us = _us(origin)
        result.cuts_us = [_us(c - origin) for c in self._cuts]
        result.steps = sorted((n, _us(a - origin), _us(b - origin)) for n, a, b in self._steps)
        result.activity = self._activity(origin)
        result.row_labels = [label for label in self._labels.ordered() if label in self._busy]
        result.seconds = time.perf_counter() - self._started
        return result

    def _activity(self, origin: float) -> dict[str, np.ndarray] | None:
        """Busy share per row and time bin, times in µs since `origin` (the bins span the busy time)."""
        if not self._busy:
            return None
        merged = {}
        for label, parts in self._busy.items():
            start, end = _merged(np.concatenate([s for s, _ in parts]), np.concatenate([e for _, e in parts]))
            merged[label] = (start - origin, end - origin)
        t0 = min(float(s[0]) for s, _ in merged.values())
        t1 = max(float(e.max()) for _, e in merged.values())
        t1 = max(t1, t0 + 1e-6)
        edges, width = time_bins(t0, t1, self.activity_bins)
        labels = [label for label in self._labels.ordered() if label in merged]
        busy = [covered_per_bin(*merged[label], edges) for label in labels]
        bin_of = np.tile(np.arange(self.activity_bins), len(labels))
        return {"label": np.repeat(np.array(labels, dtype=object), self.activity_bins),
                "bin_start_ms": edges[bin_of] / 1e3, "bin_end_ms": edges[bin_of + 1] / 1e3,
                "busy_percent": 100.0 * np.concatenate(busy) / width}
