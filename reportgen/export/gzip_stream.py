"""The one gzip writer of the trace export: a document's pieces deflated on threads, written in order.

Every Chrome-JSON chunk (an XSpace host's and an older profiler's timeline) is written through it. The
file is one gzip member built the way pigz builds it: each piece is a raw deflate stream (ISA-L, level
1) ended with a sync flush, so that the pieces concatenate into one valid stream, and the member's
CRC-32 is combined from the pieces' own. Readers see an ordinary `.json.gz`.

Pieces are produced and deflated by a few threads (the compiled JSON writer, orjson and ISA-L release
the GIL) while the calling thread writes finished ones in submission order; at most `IN_FLIGHT` exist
at a time, so memory stays at a few pieces whatever the document's size. Without ISA-L, zlib deflates
the same way (its pieces differ in bytes, not in content) and the CRC-32s are combined in Python.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass

try:  # ISA-L's deflate: level 1 at ≈ 1 GB/s here, about 5× zlib's, with smaller output
    from isal import isal_zlib as _deflate

    _crc32_combine = _deflate.crc32_combine
except ImportError:  # pragma: no cover - isal is a dependency; zlib's module has no crc32_combine
    import zlib as _deflate

    _crc32_combine = None

GZIP_LEVEL = 1
THREADS = 2
IN_FLIGHT = 6
# A gzip member header: deflate, no name, no modification time (the files are
# reproducible), no extra flags, OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

Parts = Sequence  # of bytes-like objects (bytes, numpy uint8 views)


_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    """The deflating threads, shared by every stream of this process: a pool per stream started two
    threads per file, ≈ 3–6 ms of a tiny host's export (a pod slice has thousands). A forked process
    makes its own (threads do not survive a fork)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="reportgen-deflate")
            _pool_pid = os.getpid()
        return _pool


@dataclass
class _Piece:
    deflated: bytes  # raw deflate, ended with a sync flush
    crc: int
    size: int  # uncompressed bytes


def _deflate_piece(parts: Parts) -> _Piece:
    deflate = _deflate.compressobj(GZIP_LEVEL, _deflate.DEFLATED, -15)
    out = [deflate.compress(part) for part in parts]
    out.append(deflate.flush(_deflate.Z_SYNC_FLUSH))
    crc, size = 0, 0
    for part in parts:
        crc = _deflate.crc32(part, crc)
        size += len(part)
    return _Piece(b"".join(out), crc, size)


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from CRC-32(A), CRC-32(B) and len(B) (zlib's crc32_combine, for zlib's fallback)."""
    if _crc32_combine is not None:
        return _crc32_combine(crc1, crc2, len2)
    return _crc32_combine_py(crc1, crc2, len2)


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, i = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, row) for row in matrix]


def _crc32_combine_py(crc1: int, crc2: int, len2: int) -> int:
    """zlib's algorithm: apply len2 zero bytes to crc1 by repeated squaring of the CRC operator."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << i for i in range(31)]  # the operator for one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    while True:
        even = _gf2_square(odd)  # first pass: one zero byte
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return (crc1 ^ crc2) & 0xFFFFFFFF


class GzipStream:
    """One gzip member written to `out` from pieces; use as a context manager.

    `submit(produce, done)`: `produce()` returns the piece's parts (run on a worker thread, then
    deflated there); `done()`, if given, runs on this thread once the piece is written (e.g. to hand
    its buffer back). `size` is the uncompressed length written so far.

    `threaded=False`: every piece is produced and deflated on this thread, as it is submitted — for a
    document of one small piece (a tiny host's chunk), where handing pieces to the threads and waiting
    for them costs more than the work.
    """

    def __init__(self, out, in_flight: int = IN_FLIGHT, threaded: bool = True):
        self.out = out
        self.crc = 0
        self.size = 0
        self._in_flight = in_flight
        self._pool = _threads() if threaded else None
        self._pending: deque[tuple[Future, Callable[[], None] | None]] = deque()
        out.write(GZIP_HEADER)

    def __enter__(self) -> GzipStream:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None:
                self.close()
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop the pieces not written yet. This stream's pieces only (the threads are shared): nothing of
        it runs once this returns."""
        pending = [future for future, _ in self._pending if not future.cancel()]
        self._pending.clear()
        wait_for(pending)

    def submit(self, produce: Callable[[], Parts], done: Callable[[], None] | None = None) -> None:
        if self._pool is None:
            self._write_piece(_deflate_piece(produce()), done)
            return
        if len(self._pending) >= self._in_flight:
            self._write_oldest()
        self._pending.append((self._pool.submit(lambda: _deflate_piece(produce())), done))

    def write(self, data: bytes) -> None:
        """A piece that is already at hand (a header, a tail)."""
        self.submit(lambda: [data])

    def _write_oldest(self) -> None:
        future, done = self._pending.popleft()
        self._write_piece(future.result(), done)

    def _write_piece(self, piece: _Piece, done: Callable[[], None] | None) -> None:
        self.out.write(piece.deflated)
        self.crc = crc32_combine(self.crc, piece.crc, piece.size)
        self.size += piece.size
        if done is not None:
            done()

    def write_oldest(self) -> bool:
        """Wait for the oldest piece not written yet and write it (its `done` runs); False when none is left."""
        if not self._pending:
            return False
        self._write_oldest()
        return True

    def close(self) -> None:
        """Write the pending pieces, the final empty block and the member's trailer."""
        while self.write_oldest():
            pass
        self.out.write(_deflate.compressobj(GZIP_LEVEL, _deflate.DEFLATED, -15).flush(_deflate.Z_FINISH))
        self.out.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))


__all__ = ["GZIP_HEADER", "GzipStream", "crc32_combine"]
