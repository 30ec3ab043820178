"""The trace export's one gzip writer: pieces deflated on threads, one valid member, content in order."""

from __future__ import annotations

import gzip
import io
import random
import zlib

import pytest

from reportgen.export import gzip_stream
from reportgen.export.gzip_stream import GzipStream


def _pieces(n: int = 40) -> list[bytes]:
    rng = random.Random(7)
    return [bytes(rng.choice(b'{"ph":"X","name":"op",}0123456789\n') for _ in range(rng.randint(0, 5000)))
            for _ in range(n)]


def test_pieces_come_out_in_order_as_one_member_and_buffers_are_handed_back():
    pieces = _pieces()
    out, released = io.BytesIO(), []
    with GzipStream(out, in_flight=2) as stream:
        stream.write(b"HEAD")
        for i, piece in enumerate(pieces):
            stream.submit(lambda piece=piece: [piece[:10], piece[10:]], done=lambda i=i: released.append(i))
        stream.write(b"TAIL")
    expected = b"HEAD" + b"".join(pieces) + b"TAIL"
    assert gzip.decompress(out.getvalue()) == expected
    assert stream.size == len(expected)
    assert released == list(range(len(pieces)))
    with gzip.GzipFile(fileobj=io.BytesIO(out.getvalue())) as member:  # CRC and length checked on read
        assert member.read() == expected


def test_a_stream_without_threads_writes_the_same_bytes_on_the_calling_thread():
    """A tiny host's chunk is written without the threads: the same file, byte for byte, each piece produced on
    the calling thread as it is submitted."""
    import threading

    pieces = _pieces(12)
    files, producers = [], set()
    for threaded in (True, False):
        out, released = io.BytesIO(), []
        with GzipStream(out, threaded=threaded) as stream:
            stream.write(b"HEAD")
            for i, piece in enumerate(pieces):
                def produce(piece=piece, threaded=threaded):
                    producers.add((threaded, threading.current_thread() is threading.main_thread()))
                    return [piece]
                stream.submit(produce, done=lambda i=i, released=released: released.append(i))
            stream.write(b"TAIL")
        files.append(out.getvalue())
        assert released == list(range(len(pieces)))
    assert files[0] == files[1]
    assert gzip.decompress(files[1]) == b"HEAD" + b"".join(pieces) + b"TAIL"
    assert producers == {(True, False), (False, True)}


@pytest.mark.parametrize("sizes", [(0, 0), (1, 0), (0, 1), (5, 1 << 20), (123_457, 98_765)])
def test_crc32_combine_in_python_matches_zlib(sizes):
    a, b = (bytes(random.Random(n).randbytes(n)) for n in sizes)
    expected = zlib.crc32(a + b)
    assert gzip_stream._crc32_combine_py(zlib.crc32(a), zlib.crc32(b), len(b)) == expected
    assert gzip_stream.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == expected


def test_without_isal_zlib_writes_the_same_content(monkeypatch):
    monkeypatch.setattr(gzip_stream, "_deflate", zlib)
    monkeypatch.setattr(gzip_stream, "_crc32_combine", None)
    pieces = _pieces(10)
    out = io.BytesIO()
    with GzipStream(out) as stream:
        for piece in pieces:
            stream.submit(lambda piece=piece: [piece])
    with gzip.GzipFile(fileobj=io.BytesIO(out.getvalue())) as member:
        assert member.read() == b"".join(pieces)
