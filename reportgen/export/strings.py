"""The strings a trace writes, JSON-escaped once and concatenated for the compiled writers.

Ids are the capture's interned string ids; strings the export adds (renamed
steps, truncated long names, formatted doubles) get ids after them. Escaping
is per distinct string, never per event.
"""

from __future__ import annotations

import math

import numpy as np
import orjson


class StringPool:
    def __init__(self, strings: list):
        self._base = strings
        self._extra: list[str] = []
        self._extra_index: dict[str, int] = {}
        self._verbatim: set[int] = set()  # ids whose JSON fragment is the text itself

    def __len__(self) -> int:
        return len(self._base) + len(self._extra)

    def add(self, text: str) -> int:
        """Id of `text`, adding it when the capture does not hold it as a string."""
        sid = self._extra_index.get(text)
        if sid is None:
            sid = self._extra_index[text] = len(self._base) + len(self._extra)
            self._extra.append(text)
        return sid

    def add_json(self, fragment: str) -> int:
        """Id of a ready JSON value (a number literal), written as is."""
        key = "\0json\0" + fragment
        sid = self._extra_index.get(key)
        if sid is None:
            sid = self.add(key)
            self._verbatim.add(sid)
        return sid

    def text(self, sid: int) -> str:
        value = self._base[sid] if sid < len(self._base) else self._extra[sid - len(self._base)]
        return value if isinstance(value, str) else ""

    def json_fragments(self) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, offsets): string `i` as a quoted JSON string is bytes[offsets[i]:offsets[i+1]].

        Bytes values (serialised protos) are never written: they read as "".
        """
        parts = [dumps_sized(s) if isinstance(s, str) else b'""' for s in self._base]
        base = len(self._base)
        parts.extend(
            s[6:].encode() if base + i in self._verbatim else dumps_sized(s) for i, s in enumerate(self._extra)
        )
        return _concat(parts)

    def utf8_fragments(self) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, offsets) of the raw UTF-8 text, for protobuf strings."""
        parts = [s.encode("utf-8") if isinstance(s, str) else b"" for s in self._base]
        parts.extend(s.encode("utf-8") for s in self._extra)
        return _concat(parts)


def dumps_sized(value: object) -> bytes:
    """`orjson.dumps(value)` in a bytes object of its own size, for results held many at a time.

    orjson's result keeps the allocation it wrote into (about 4 KiB, however
    short the text): a million short names held at once, or joined from a
    generator (join lists it first), would cost 4 GiB. The copy costs less
    time than the allocator's handling of that slack.
    """
    return bytes(memoryview(orjson.dumps(value)))


def _concat(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(parts), dtype=np.uint8) if parts else np.zeros(0, np.uint8)
    if len(data) == 0:
        data = np.zeros(1, np.uint8)  # compiled code wants a non-empty array
    return data, offsets


def double_json(value: float) -> str:
    """A double as the trace writes it: shortest round-trip repr; NaN/Inf as strings (as XProf)."""
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return orjson.dumps(value).decode()


def double_table(raw_bits: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Distinct double bit patterns (sorted, as int64) and their JSON text, for a binary search."""
    keys = np.unique(raw_bits.astype(np.int64))
    texts = [double_json(float(v)) for v in keys.view(np.float64)]
    return keys, texts
