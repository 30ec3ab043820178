"""Chrome trace JSON chunk files (gzip) of an XSpace host, written as a stream.

A chunk is a complete document that opens alone in Perfetto UI or
chrome://tracing: the header (`displayTimeUnit`, `metadata` with host and run),
every process and thread name and sort order as metadata events, then the
chunk's events. Batches of events are written by the compiled writer into
reusable buffers and compressed on a few threads by `gzip_stream.GzipStream`,
while the calling thread writes the finished ones in order: memory stays at a
few buffers whatever the number of events, and every core works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import orjson

from reportgen.export.gzip_stream import GzipStream
from reportgen.export.json_kernel import write_events
from reportgen.export.strings import dumps_sized
from reportgen.export.tables import TraceTables
from reportgen.kernels import ensure_compiled

BUFFER_BYTES = 8 << 20  # per batch; a batch that needs more gets extra buffers
BATCH_EVENTS = 16384  # about 5 MB of JSON
PIECE_BYTES = 4 << 20  # rendered objects are deflated in pieces of about this size, on the gzip threads


@dataclass
class WrittenChunk:
    events: int
    json_bytes: int  # uncompressed
    file_bytes: int  # on disk


def metadata_events(tables: TraceTables) -> list[dict]:
    """process_name / process_sort_index / thread_name / thread_sort_index, as XProf writes them."""
    out: list[dict] = []
    for proc in tables.layout.processes:
        threads = proc.sorted_threads()
        out.append({"args": {"name": proc.name}, "name": "process_name", "ph": "M", "pid": proc.pid,
                    "thread_count": len(threads)})
        out.append({"args": {"sort_index": proc.pid}, "name": "process_sort_index", "ph": "M", "pid": proc.pid})
        for thread in threads:
            out.append({"args": {"name": thread.name}, "name": "thread_name", "ph": "M", "pid": proc.pid,
                        "tid": thread.tid})
            out.append({"args": {"sort_index": thread.tid}, "name": "thread_sort_index", "ph": "M",
                        "pid": proc.pid, "tid": thread.tid})
    return out


def document_head(metadata: dict, meta_events: list[dict]) -> bytes:
    head = {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True, **metadata}}
    body = b",\n".join([dumps_sized(e) for e in meta_events]) if meta_events else b'{"name":"trace","ph":"M","pid":0}'
    return orjson.dumps(head)[:-1] + b',"traceEvents":[\n' + body


DOCUMENT_TAIL = b"\n]}\n"


class KernelArgs:
    """The compiled writer's table arguments, built once per host."""

    def __init__(self, tables: TraceTables):
        # On a machine's first build the writer may be compiling in another process.
        ensure_compiled("trace-writer")
        cap = tables.capture
        cols = tables.columns
        pool, pool_off = tables.pool.json_fragments()
        es, ms = cap.event_stats, cap.metadata_stats
        syn = tables.synthetic
        flows = tables.flows
        self.tables = tables
        self.args = (
            cols.ev_line, cols.ev_md, cols.ev_start, cols.ev_duration,
            tables.name_sid, flows.flow_id, flows.flow_bits, flows.flow_cat,
            tables.layout.line_pid, tables.layout.line_tid, tables.layout.line_kind,
            tables.md_long_sid, tables.md_stat_start, ms.key, ms.kind, ms.raw, ms.str_id,
            tables.ev_stat_start, es.key, es.kind, es.raw, es.str_id,
            tables.role, pool, pool_off, tables.double_keys, tables.double_sid, tables.cat_sid,
            tables.long_name_sid,
            syn.line, syn.start_ps, syn.duration_ps, syn.name_sid,
        )


def _render(rows: np.ndarray, lo: int, hi: int, buf: np.ndarray, args: tuple) -> list[np.ndarray]:
    """rows[lo:hi] as JSON bytes: views of `buf` (and of extra buffers when it overflows)."""
    parts = []
    i = lo
    while i < hi:
        n, nxt = write_events(rows, i, hi, buf, *args)
        if nxt == i:  # one event larger than the buffer
            buf = np.empty(len(buf) * 4, dtype=np.uint8)
            continue
        parts.append(buf[:n])
        if nxt < hi:
            buf = np.empty(len(buf), dtype=np.uint8)
        i = nxt
    return parts


def render_runs(rows: np.ndarray, bounds: np.ndarray, kernel: KernelArgs, buf: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Every row's objects (`,\n{…}` each), one after another in one buffer, and where each run starts.

    Runs are rows[bounds[k]:bounds[k + 1]]; the result's `offsets[k]` is the byte where run k starts and
    `offsets[-1]` the end of the last. `buf` is filled from its start and replaced by a larger one (the
    written part copied) when the rows do not fit; the buffer returned has a byte to spare after the end,
    and is meant to be passed again for the next rows: a fresh buffer per window of events costs a page
    fault per 4 KiB, which on a large host is a tenth of the writing.
    """
    if buf is None:
        buf = np.empty(BUFFER_BYTES, dtype=np.uint8)
    offsets = np.empty(len(bounds), dtype=np.int64)
    pos = 0
    for k in range(len(bounds) - 1):
        offsets[k] = pos
        i, end = int(bounds[k]), int(bounds[k + 1])
        while i < end:
            n, i = write_events(rows, i, end, buf[pos:], *kernel.args)
            pos += n
            if i < end:  # the buffer is full
                grown = np.empty(max(2 * len(buf), pos + BUFFER_BYTES), dtype=np.uint8)
                grown[:pos] = buf[:pos]
                buf = grown
    offsets[-1] = pos
    if pos >= len(buf):
        grown = np.empty(pos + 1, dtype=np.uint8)
        grown[:pos] = buf[:pos]
        buf = grown
    return buf, offsets


class ChunkWriter:
    """One chunk document being written (gzip): its head, then events, then its tail.

    Events come as rows, rendered in batches on the gzip stream's threads (the compiled writer and ISA-L
    release the GIL) while this thread writes finished batches in order; a batch's buffer is reused once
    it is written, so memory stays bounded. Or they come already rendered (`add_rendered`): the timeline's
    windows render each event once, for their own file and for the chunk (host_export.ChunkFiles).
    """

    def __init__(self, path: str, head: bytes, threaded: bool = True):
        self._file = open(path, "wb")
        self._gzip = GzipStream(self._file, threaded=threaded)
        self._free: list[np.ndarray] = []
        self.events = 0
        self._gzip.write(head)

    def add_rows(self, rows: np.ndarray, kernel: KernelArgs, buffer_bytes: int = BUFFER_BYTES) -> None:
        for lo in range(0, len(rows), BATCH_EVENTS):
            buf = self._free.pop() if self._free else np.empty(buffer_bytes, dtype=np.uint8)
            self._gzip.submit(partial(_render, rows, lo, min(lo + BATCH_EVENTS, len(rows)), buf, kernel.args),
                              done=partial(self._free.append, buf))
        self.events += len(rows)

    def add_rendered(self, parts: list, events: int, done: Callable[[], None]) -> None:
        """Objects already rendered (`parts`: byte views of whole `,\n{…}` objects), deflated in pieces of
        about PIECE_BYTES on the stream's threads; `done` runs on this thread once the last is written (the
        views must stay as they are until then)."""
        pieces: list[list] = [[]]
        size = 0
        for part in parts:
            for lo in range(0, len(part), PIECE_BYTES):
                if size >= PIECE_BYTES:
                    pieces.append([])
                    size = 0
                piece = part[lo:lo + PIECE_BYTES]
                pieces[-1].append(piece)
                size += len(piece)
        for k, piece in enumerate(pieces):
            self._gzip.submit(partial(list, piece), done=done if k == len(pieces) - 1 else None)
        self.events += events

    def write_oldest(self) -> bool:
        """Write the oldest piece submitted and not written yet (its `done` runs); False when none is left."""
        return self._gzip.write_oldest()

    def close(self) -> WrittenChunk:
        try:
            self._gzip.write(DOCUMENT_TAIL)
            self._gzip.close()
            size = self._file.tell()
        except BaseException:
            self.abandon()
            raise
        self._file.close()
        return WrittenChunk(events=self.events, json_bytes=self._gzip.size, file_bytes=size)

    def abandon(self) -> None:
        """Stop without finishing the document (an error elsewhere): nothing of it runs once this returns."""
        self._gzip.discard()
        self._file.close()


def write_chunk(path: str, head: bytes, rows: np.ndarray, kernel: KernelArgs,
                buffer_bytes: int = BUFFER_BYTES) -> WrittenChunk:
    """Write one chunk document holding `rows` (exported event rows) to `path` (gzip)."""
    # A chunk of one batch (every chunk of a small host) is written on this thread: see GzipStream.
    writer = ChunkWriter(path, head, threaded=len(rows) > BATCH_EVENTS)
    try:
        writer.add_rows(rows, kernel, buffer_bytes)
    except BaseException:
        writer.abandon()
        raise
    return writer.close()


def measure_rows(rows: np.ndarray, kernel: KernelArgs) -> int:
    """Exact JSON bytes of some events (used on samples to size chunks)."""
    buf = np.empty(1 << 20, dtype=np.uint8)
    total, i = 0, 0
    while i < len(rows):
        n, nxt = write_events(rows, i, len(rows), buf, *kernel.args)
        if nxt == i:
            buf = np.empty(len(buf) * 4, dtype=np.uint8)
            continue
        total += n
        i = nxt
    return total
