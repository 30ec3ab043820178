"""Reading the in-page timeline's files back in Python, as the page does (tests only)."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PREFIX = b"reportgenTimeline.add("
SUFFIX = b");\n"


def _calls(path: Path) -> list[tuple[dict, object]]:
    raw = path.read_bytes()
    assert raw.startswith(PREFIX) and raw.endswith(SUFFIX), f"{path}: not a reportgenTimeline.add(…) call"
    text = raw.decode("utf-8")
    decoder = json.JSONDecoder()
    calls, at = [], 0
    while at < len(text):
        assert text.startswith(PREFIX.decode(), at), f"{path}: not a reportgenTimeline.add(…) call at {at}"
        header, end = decoder.raw_decode(text, at + len(PREFIX))
        assert text[end] == ","
        payload, end = decoder.raw_decode(text, end + 1)
        assert text.startswith(SUFFIX.decode(), end)
        calls.append((header, payload))
        at = end + len(SUFFIX)
    return calls


def read_script(path: Path) -> tuple[dict, object]:
    """(header, payload) of one part: the index's payload is its object, others' their decoded bytes.

    A part is its own file, or, in a small host's timeline, a call in index.js before the index's own (which
    is then the file's last call)."""
    if path.is_file():
        calls = _calls(path)
        assert path.name == "index.js" or len(calls) == 1, f"{path}: {len(calls)} calls in a part's file"
        header, payload = calls[-1]
    else:
        held = {h["key"]: (h, p) for h, p in _calls(path.parent / "index.js")[:-1]}
        assert path.stem in held, f"{path}: no such file, and not in index.js"
        header, payload = held[path.stem]
    if isinstance(payload, str):
        return header, zlib.decompress(base64.b64decode(payload))
    return header, payload


def inline_parts(folder: Path) -> list[str]:
    """Keys of the parts a small host's index.js carries."""
    return [h["key"] for h, _ in _calls(folder / "index.js")[:-1]]


@dataclass
class Columns:
    start: np.ndarray  # ps
    dur: np.ndarray
    name: list[str]  # per row ("" for a merged block)
    long_name: list[str] | None  # full-detail windows: the `long_name` arg, "" where none
    count: np.ndarray | None
    track: np.ndarray
    level: np.ndarray
    carried: list[int]


def read_columns(path: Path) -> tuple[dict, Columns]:
    header, raw = read_script(path)
    n = header["n"]
    lod = header["key"].startswith("l")
    length = int.from_bytes(raw[:4], "little")
    names = json.loads(raw[4:4 + length])
    off = 4 + length + (-(4 + length) % 8)

    def take(dtype: str, size: int) -> np.ndarray:
        nonlocal off
        out = np.frombuffer(raw, dtype=dtype, count=n, offset=off)
        off += size * n
        return out

    delta = take("<f8", 8)
    dur = take("<f8", 8)
    name = take("<i4", 4)
    long_name = None if lod else take("<i4", 4)
    count = take("<u4", 4) if lod else None
    track = take("<u2", 2)
    level = take("<u2", 2)
    assert off == len(raw), f"{path}: {len(raw) - off} bytes left over"
    return header, Columns(
        start=np.cumsum(delta), dur=dur, name=[names[i] if i >= 0 else "" for i in name], count=count,
        long_name=None if long_name is None else [names[i] if i >= 0 else "" for i in long_name],
        track=track.astype(np.int64), level=level.astype(np.int64), carried=header.get("carried", []),
    )


def read_index(folder: Path) -> dict:
    return read_script(folder / "index.js")[1]


def events_in_slice(folder: Path, index: dict, lo: float = -np.inf, hi: float = np.inf) -> int:
    """The full-detail events (each once) that overlap [lo, hi] ps: what the page hands its tracks for a slice
    (every event of the host without one)."""
    seen: set[tuple[int, int, float]] = set()
    for window in index["windows"]:
        if window["end"] < lo or window["start"] > hi:
            continue
        _, cols = read_columns(folder / f"{window['key']}.js")
        inside = (cols.start <= hi) & (cols.start + cols.dur >= lo)
        seen.update(zip(cols.track[inside].tolist(), cols.level[inside].tolist(), cols.start[inside].tolist()))
    return len(seen)
