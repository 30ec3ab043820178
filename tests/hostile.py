"""Hostile captures made in code: small on disk, enormous (or absurd) once read.

Each is a valid framing of the XSpace wire format (tests/wirebytes.py), built without ever holding what it
expands to: a gzip file may hold many members, so a megabyte of events is compressed once and its member
repeated.
"""

from __future__ import annotations

import gzip
import resource
import subprocess
from pathlib import Path

from tests.wirebytes import key, ld, varint

EMPTY_EVENT = ld(4, b"")  # an XLine.events entry with no fields: 2 bytes, the smallest event there is
BLOCK_EVENTS = 1 << 19  # empty events per repeated gzip member (1 MiB of them)


def _frame(number: int, length: int) -> bytes:
    """The tag and length of a length-delimited field whose payload (length bytes) follows separately."""
    return key(number, 2) + varint(length)


def empty_events_parts(events: int, hostname: bytes = b"bomb") -> tuple[bytes, int, bytes]:
    """(head, events, tail) of an XSpace whose one line holds `events` empty events: head + EMPTY_EVENT ×
    events + tail is the file."""
    line_head = key(1, 0) + varint(1) + ld(2, b"events")
    line_len = len(line_head) + events * len(EMPTY_EVENT)
    plane_head = key(1, 0) + varint(0) + ld(2, b"/host:CPU")
    line_field = _frame(3, line_len)
    plane_len = len(plane_head) + len(line_field) + line_len
    head = _frame(1, plane_len) + plane_head + line_field + line_head
    return head, events, ld(4, hostname)


def empty_events(events: int) -> bytes:
    """The plain file (2 bytes per event: hold it only for a few million)."""
    head, n, tail = empty_events_parts(events)
    return head + EMPTY_EVENT * n + tail


def gzip_bomb(path: Path, events: int) -> Path:
    """`events` empty events (2 bytes each once inflated) in a file of about events / 1,000 bytes."""
    head, n, tail = empty_events_parts(events)
    block = gzip.compress(EMPTY_EVENT * BLOCK_EVENTS, compresslevel=9, mtime=0)
    whole, rest = divmod(n, BLOCK_EVENTS)
    with open(path, "wb") as out:
        out.write(gzip.compress(head, mtime=0))
        for _ in range(whole):
            out.write(block)
        out.write(gzip.compress(EMPTY_EVENT * rest + tail, mtime=0))
    return path


def absurd_length() -> bytes:
    """A plane whose length prefix claims 2^62 bytes, in a file of a few bytes."""
    return _frame(1, 1 << 62) + key(1, 0) + varint(0)


def run_capped(args: list[str], address_space: int, cwd: Path, user_cache: Path,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m reportgen ARGS` with its address space (and its workers') capped by setrlimit(RLIMIT_AS):
    a regression that allocates without bound fails the test instead of the machine. `user_cache`
    stands for the user's cache folder (the compiled templates go there)."""
    from reportgen.kernels import CACHE_DIR
    from tests.clirun import reportgen

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    env = {"XDG_CACHE_HOME": str(user_cache), "NUMBA_CACHE_DIR": str(CACHE_DIR)}  # the kernels stay where they are
    return reportgen(*args, cwd=cwd, preexec_fn=cap, timeout=timeout, env=env)

