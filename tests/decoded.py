"""Shared captures decoded once per test session."""

from __future__ import annotations

from functools import cache

from reportgen.capture import HostCapture
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import host_files


@cache
def decoded_hosts(run: str) -> tuple[HostCapture, ...]:
    return tuple(decode_xspace(str(p), p.read_bytes()) for p in host_files(run))
