"""What reading one host may cost in memory: the budget, and the reads that keep to it.

A capture's size on disk says little about what decoding it costs: two bytes
of protobuf are an empty event (about half a kilobyte once decoded and
analysed), and a megabyte of gzip can hold a gigabyte of them. So every
reader estimates what it will need from the bytes actually present (the
counts the wire walker finds, each bounded by what the remaining bytes can
hold) and checks that estimate against the budget *before* allocating;
gzip is inflated in bounded steps and abandoned once past the budget. A host
over budget is refused with a `CaptureError` naming the file, the estimate
and the budget; the other hosts build.

The budget is set per host stage with `memory_budget(bytes)` (a context
variable: each worker process or Dask thread sets its own); None means no
limit (library use, tests).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import fsspec

from reportgen.errors import CaptureError

try:  # ISA-L's inflate: about twice zlib's speed, same interface
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency
    _zlib = zlib

GZIP_MAGIC = b"\x1f\x8b"
INFLATE_STEP = 1 << 24  # bytes of output per inflate call: the overshoot past the budget is at most this
# Python objects per byte of JSON: `[{},{},…]` is 3 bytes per dict (≈ 64 bytes each, plus its list slot),
# and a real trace event of ~150 bytes of JSON becomes ≈ 1.5 KB of dicts and strings.
JSON_BYTES_PER_BYTE = 24

# What one row (process and thread) of an older profiler's timeline costs once its busy bins, its label and its
# share of the trace page exist: 100,000 threads of one event each peaked 1.2 GiB above the process's own.
TRACE_ROW_BYTES = 12 << 10

_BUDGET: ContextVar[int | None] = ContextVar("reportgen_memory_budget", default=None)


@contextmanager
def memory_budget(limit: int | None) -> Iterator[None]:
    """Within the block, every read and decode of this thread keeps to `limit` bytes (None: no limit)."""
    token = _BUDGET.set(limit)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def current_budget() -> int | None:
    return _BUDGET.get()


def format_bytes(n: int | float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def check(path: str, estimate: int, what: str, at_least: bool = False) -> None:
    """Raise a CaptureError when `estimate` bytes (to hold or decode `what`) exceed the budget."""
    limit = _BUDGET.get()
    if limit is not None and estimate > limit:
        raise CaptureError(
            path,
            f"needs {'at least' if at_least else 'about'} {format_bytes(estimate)} of memory ({what}), more "
            f"than the {format_bytes(limit)} one host may use; refused (raise the limit with --max-memory)",
        )


def read_input(path: str, size: int | None = None) -> bytes:
    """A whole input file, after checking that holding it fits the budget."""
    with fsspec.open(path, "rb") as handle:
        if size is None:
            size = getattr(handle, "size", None)
            if size is None and hasattr(handle, "seek"):
                size = handle.seek(0, 2)
                handle.seek(0)
        if size is not None:
            check(path, int(size), f"to hold its {format_bytes(size)} of bytes")
        limit = _BUDGET.get()
        data = handle.read() if limit is None else handle.read(limit + 1)
    check(path, len(data), "to hold its bytes")
    return data


def gunzip(path: str, data: bytes) -> bytes:
    """Inflate a gzip file's bytes (every member), in bounded steps: never more than the budget.

    The output is kept in pieces and joined once, so holding it costs twice
    its size for a moment: that is what is checked.
    """
    if not data.startswith(GZIP_MAGIC):
        raise CaptureError(path, "named .gz but is not gzip data")
    limit = _BUDGET.get()
    pieces: list[bytes] = []
    total = 0
    rest = memoryview(data)
    try:
        while len(rest):
            inflater = _zlib.decompressobj(16 + zlib.MAX_WBITS)
            tail = rest
            while True:
                piece = inflater.decompress(tail, INFLATE_STEP)
                total += len(piece)
                if limit is not None and 2 * total > limit:
                    check(path, 2 * total, f"its gzip data inflates to more than {format_bytes(total)}",
                          at_least=True)
                pieces.append(piece)
                tail = inflater.unconsumed_tail
                if inflater.eof:
                    break
                if not piece and not len(tail):
                    raise EOFError("compressed data ended before the end-of-stream marker")
            rest = memoryview(inflater.unused_data)
            if len(rest) and bytes(rest[:2]) != GZIP_MAGIC:  # members may follow each other; nothing else may
                raise OSError(f"{len(rest)} bytes after the gzip data are not a gzip member")
    except (OSError, EOFError, zlib.error, _zlib.error) as exc:
        raise CaptureError(path, f"gzip data is corrupt or truncated ({exc})") from exc
    return b"".join(pieces)


def check_json(path: str, data: bytes) -> None:
    """Parsing JSON makes Python objects: refuse a document whose objects would not fit."""
    check(path, len(data) * JSON_BYTES_PER_BYTE, f"to parse {format_bytes(len(data))} of JSON into objects")


def check_trace_rows(path: str, events: int, rows: int) -> None:
    """A timeline's rows (threads) cost memory of their own, however few events each holds."""
    check(path, rows * TRACE_ROW_BYTES, f"{events:,} events on {rows:,} timeline rows (threads)")
