"""Protobuf wire bytes assembled by hand, for decoder tests that need what protobuf will not write
(fields out of order, unknown fields, wrong wire types, cut messages)."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """A base-128 varint; negative values as their 64-bit two's complement, as protobuf writes int64."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, payload: bytes) -> bytes:
    """A length-delimited field (message, string or bytes)."""
    return key(number, 2) + varint(len(payload)) + payload
