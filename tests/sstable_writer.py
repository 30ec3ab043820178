"""A LevelDB table writer for the tests, from LevelDB's doc/table_format.md (independent of the reader).

    data = write_table([(key, value), ...], compression="snappy", block_size=4096)

Keys must come sorted. Like LevelDB's TableBuilder: data blocks cut near
`block_size`, prefix-compressed keys with a restart point every 16 entries,
a block Snappy-compressed only when that saves at least an eighth of it,
each block followed by its compression type and masked CRC-32C, an (empty)
metaindex block, an index block of one entry per data block (its last key,
its handle), and the 48-byte footer ending in the magic number.

`tracetable(trace)` lays a `Trace` out as capture_tpu_profile 1.9's
streaming trace did: the devices under the key `trace`, each event under its
zoom level (one character), its start time (8 bytes, big-endian) and a
tie-break byte, at the coarsest of eight levels (10 ms … 1 ns) whose
resolution its duration reaches.
"""

from __future__ import annotations

import struct

import cramjam

from reportgen.loaders.proto import trace_events_pb2 as tpb

MAGIC = 0xDB4775248B80FB57
RESTART_INTERVAL = 16
LEVELS_PS = [10_000_000_000, 1_000_000_000, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000]


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _block(entries: list[tuple[bytes, bytes]], restart_interval: int) -> bytes:
    out, restarts, last = bytearray(), [], b""
    for n, (key, value) in enumerate(entries):
        if n % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            while shared < min(len(key), len(last)) and key[shared] == last[shared]:
                shared += 1
        out += _varint(shared) + _varint(len(key) - shared) + _varint(len(value)) + key[shared:] + value
        last = key
    restarts = restarts or [0]
    for offset in restarts:
        out += struct.pack("<I", offset)
    return bytes(out + struct.pack("<I", len(restarts)))


class _Writer:
    def __init__(self, compression: str, crc=_crc32c):
        self.out = bytearray()
        self.compression = compression
        self.crc = crc

    def write_block(self, contents: bytes, kind: int | None = None) -> bytes:
        """Writes the block and its trailer (`kind` forces the type byte); returns its handle."""
        if kind is not None:
            handle = _varint(len(self.out)) + _varint(len(contents))
            self.out += contents + bytes([kind]) + struct.pack("<I", _mask(self.crc(contents + bytes([kind]))))
            return handle
        kind = 0
        if self.compression == "snappy":
            packed = bytes(cramjam.snappy.compress_raw(contents))
            if len(packed) < len(contents) - len(contents) // 8:
                contents, kind = packed, 1
        handle = _varint(len(self.out)) + _varint(len(contents))
        self.out += contents + bytes([kind]) + struct.pack("<I", _mask(self.crc(contents + bytes([kind]))))
        return handle


def write_table(entries: list[tuple[bytes, bytes]], compression: str = "snappy", block_size: int = 4096,
                data_block_kind: int | None = None, crc=_crc32c) -> bytes:
    """The table's bytes; `data_block_kind` forces every data block's type byte (for broken tables);
    `crc` computes CRC-32C (a faster one for large tables)."""
    keys = [k for k, _ in entries]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), "keys must be sorted and distinct"
    writer = _Writer(compression, crc)
    index: list[tuple[bytes, bytes]] = []
    pending: list[tuple[bytes, bytes]] = []
    size = 0
    for key, value in entries:
        pending.append((key, value))
        size += len(key) + len(value) + 3
        if size >= block_size:
            index.append((key, writer.write_block(_block(pending, RESTART_INTERVAL), data_block_kind)))
            pending, size = [], 0
    if pending:
        index.append((pending[-1][0], writer.write_block(_block(pending, RESTART_INTERVAL), data_block_kind)))
    metaindex = writer.write_block(_block([], RESTART_INTERVAL))
    index_handle = writer.write_block(_block(index, 1))
    footer = (metaindex + index_handle).ljust(40, b"\x00")
    return bytes(writer.out + footer + struct.pack("<II", MAGIC & 0xFFFFFFFF, MAGIC >> 32))


def _level(duration_ps: int) -> int:
    for level, resolution in enumerate(LEVELS_PS):
        if duration_ps >= resolution:
            return level
    return len(LEVELS_PS) - 1


def tracetable_entries(trace: tpb.Trace) -> list[tuple[bytes, bytes]]:
    devices = tpb.Trace()
    for did, device in trace.devices.items():
        devices.devices[did].CopyFrom(device)
    entries = [(b"trace", devices.SerializeToString())]
    seen: dict[bytes, int] = {}
    for event in trace.trace_events:
        prefix = str(_level(event.duration_ps)).encode() + struct.pack(">Q", event.timestamp_ps)
        serial = seen.get(prefix, 0)
        seen[prefix] = serial + 1
        entries.append((prefix + bytes([serial]), event.SerializeToString()))
    return sorted(entries)


def tracetable(trace: tpb.Trace, compression: str = "snappy", block_size: int = 4096, crc=_crc32c) -> bytes:
    return write_table(tracetable_entries(trace), compression, block_size, crc=crc)


def write_raw_table(data_blocks: list[tuple[bytes, bytes, int]]) -> bytes:
    """A table of the given data blocks as they are: (last key, contents, type byte), checksums right."""
    writer = _Writer("none")
    index = [(last_key, writer.write_block(contents, kind)) for last_key, contents, kind in data_blocks]
    metaindex = writer.write_block(_block([], RESTART_INTERVAL))
    index_handle = writer.write_block(_block(index, 1))
    footer = (metaindex + index_handle).ljust(40, b"\x00")
    return bytes(writer.out + footer + struct.pack("<II", MAGIC & 0xFFFFFFFF, MAGIC >> 32))
