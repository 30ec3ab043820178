"""A minimal protobuf wire-format reader for the few small embedded messages
the core needs (`CoreDetails` plane stats, HLO op metadata), so that no
generated module is required for them."""

from __future__ import annotations


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: varints as int, length-delimited as bytes,
    fixed-width values as int (raw bits). Raises ValueError on malformed input."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    n = len(buf)
    try:
        while pos < n:
            key, pos = _varint(buf, pos)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                value, pos = _varint(buf, pos)
            elif wire_type == 2:
                length, pos = _varint(buf, pos)
                value = bytes(buf[pos:pos + length])
                if len(value) != length:
                    raise ValueError("truncated field")
                pos += length
            elif wire_type == 1:
                value = int.from_bytes(buf[pos:pos + 8], "little")
                pos += 8
            elif wire_type == 5:
                value = int.from_bytes(buf[pos:pos + 4], "little")
                pos += 4
            else:
                raise ValueError(f"unsupported wire type {wire_type}")
            out.append((number, value))
    except IndexError as exc:
        raise ValueError("truncated message") from exc
    return out


def first(buf: bytes, number: int, default=None):
    for num, value in fields(buf):
        if num == number:
            return value
    return default
