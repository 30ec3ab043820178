"""LevelDB table files (SSTables), read from their documented layout (LevelDB's doc/table_format.md).

Cloud TPU's `capture_tpu_profile` 1.9 wrote its streaming trace (`.tracetable`)
as one such table, through TensorFlow's copy of LevelDB's table code. A table
is, front to back:

    data blocks | meta blocks | metaindex block | index block | footer (48 bytes)

* footer: the metaindex and index blocks' handles (offset and size, two
  varint64 each), zero padding to 40 bytes, then the magic number
  0xdb4775248b80fb57 as 8 little-endian bytes;
* every block is followed by a 5-byte trailer: its compression type (0
  none, 1 Snappy) and the masked CRC-32C of the block and that type byte;
* a block holds entries — shared key prefix length, unshared key length and
  value length (varint32 each), the unshared key bytes, the value — then an
  array of restart offsets (uint32 each) and their count (uint32);
* the index block has one entry per data block, whose value is that block's
  handle.

`read_table(data)` returns every entry in table order (sorted by key) as a
`Table` (`items()` gives (key, value) pairs), checking each block's checksum
as LevelDB's reader does. Blocks are walked by a compiled kernel: a table of
a million trace events reads in a fraction of a second. Anything that
does not fit raises `TableError`, whose message is a whole clause saying
what and where (its subject the file, a block or an entry); the caller
names the file. Snappy blocks are decompressed by `cramjam`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import cramjam
import numpy as np

from reportgen.kernels import kernel

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
NO_COMPRESSION = 0
SNAPPY_COMPRESSION = 1
_MASK_DELTA = 0xA282EAD8


class TableError(ValueError):
    """The bytes are not a (whole, intact) LevelDB table; the message says why."""


def _crc32c_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[i] = crc
    return table


_CRC_TABLE = _crc32c_table()


@kernel(nogil=True)
def _crc32c(buf, start, end, table):
    crc = np.uint32(0xFFFFFFFF)
    for p in range(start, end):
        crc = table[(crc ^ buf[p]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli), as LevelDB checksums blocks."""
    buf = np.frombuffer(data, dtype=np.uint8)
    return int(_crc32c(buf, 0, len(buf), _CRC_TABLE))


def masked_crc(crc: int) -> int:
    """LevelDB stores a CRC rotated right by 15 bits plus a constant (crc32c::Mask)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _varint(data: bytes | memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            break
    raise TableError(f"a malformed varint in {what}")


def _handle(data: bytes | memoryview, pos: int, end: int, what: str) -> tuple[int, int, int]:
    offset, pos = _varint(data, pos, end, what)
    size, pos = _varint(data, pos, end, what)
    return offset, size, pos


def _block(data: bytes, offset: int, size: int, limit: int, what: str) -> bytes:
    """A block's contents, checksum verified and decompressed."""
    if offset + size + BLOCK_TRAILER_SIZE > limit:
        raise TableError(f"{what} (bytes {offset}–{offset + size + BLOCK_TRAILER_SIZE}) runs past the table's data "
                         f"({limit} bytes before the footer): truncated?")
    view = memoryview(data)
    kind = data[offset + size]
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    if masked_crc(crc32c(view[offset:offset + size + 1])) != stored:
        raise TableError(f"{what} at byte {offset} fails its checksum (corrupt)")
    contents = data[offset:offset + size]
    if kind == NO_COMPRESSION:
        return contents
    if kind == SNAPPY_COMPRESSION:
        try:
            # A Snappy copy op yields at most 64 bytes from 2: a larger claimed size is corruption
            # (and would be allocated before the data runs out).
            claimed = cramjam.snappy.decompress_raw_len(contents)
            if claimed > 32 * len(contents) + 64:
                raise TableError(f"{what} at byte {offset} claims {claimed} bytes of Snappy output from "
                                 f"{len(contents)} (corrupt)")
            return bytes(cramjam.snappy.decompress_raw(contents))
        except cramjam.DecompressionError as exc:
            raise TableError(f"{what} at byte {offset} is not valid Snappy data ({exc})") from exc
    raise TableError(f"{what} at byte {offset} has an unknown compression type {kind}")


WALK_OK, WALK_MALFORMED, WALK_FULL = 0, 1, 2


@kernel(nogil=True)
def _walk_block(buf, start, end, key_buf, key_fill, out, n):
    """Entries of the block buf[start:end] into out[n:] as (key offset, key length, value offset, value
    length), keys rebuilt into key_buf from key_fill on. Returns (entries, key_fill, status, position):
    WALK_MALFORMED with the position where the block stopped making sense, WALK_FULL when `out` or
    `key_buf` is too small (nothing of the block is kept then)."""
    if end - start < 4:
        return n, key_fill, WALK_MALFORMED, start
    restarts = (np.int64(buf[end - 4]) | np.int64(buf[end - 3]) << 8 | np.int64(buf[end - 2]) << 16
                | np.int64(buf[end - 1]) << 24)
    limit = end - 4 - 4 * restarts
    if restarts == 0 or limit < start:
        return n, key_fill, WALK_MALFORMED, end - 4
    first_n = n
    first_fill = key_fill
    pos = start
    last_off = key_fill
    last_len = np.int64(0)
    fields = np.zeros(3, dtype=np.int64)
    while pos < limit:
        at = pos
        for f in range(3):
            value = np.int64(0)
            shift = 0
            while True:
                if pos >= limit or shift > 28:
                    return n, key_fill, WALK_MALFORMED, at
                byte = np.int64(buf[pos])
                pos += 1
                value |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            fields[f] = value
        shared, unshared, value_size = fields[0], fields[1], fields[2]
        if shared > last_len or pos + unshared + value_size > limit:
            return n, key_fill, WALK_MALFORMED, at
        if n >= out.shape[0] or key_fill + shared + unshared > key_buf.shape[0]:
            return first_n, first_fill, WALK_FULL, at
        for k in range(shared):
            key_buf[key_fill + k] = key_buf[last_off + k]
        for k in range(unshared):
            key_buf[key_fill + shared + k] = buf[pos + k]
        pos += unshared
        out[n, 0] = key_fill
        out[n, 1] = shared + unshared
        out[n, 2] = pos
        out[n, 3] = value_size
        last_off = key_fill
        last_len = shared + unshared
        key_fill += last_len
        pos += value_size
        n += 1
    return n, key_fill, WALK_OK, -1


@dataclass
class Table:
    """A table's entries, in table order: keys in `key_buffer`, values in `buffer` (the decompressed data
    blocks, one after the other), each entry's (key offset, key length, value offset, value length) in
    `entries`."""

    buffer: np.ndarray
    key_buffer: np.ndarray
    entries: np.ndarray  # int64, shape (n, 4)

    def __len__(self) -> int:
        return len(self.entries)

    def key(self, i: int) -> bytes:
        off, length = self.entries[i, 0], self.entries[i, 1]
        return self.key_buffer[off:off + length].tobytes()

    def value(self, i: int) -> bytes:
        off, length = self.entries[i, 2], self.entries[i, 3]
        return self.buffer[off:off + length].tobytes()

    def items(self) -> list[tuple[bytes, bytes]]:
        return [(self.key(i), self.value(i)) for i in range(len(self))]


def _walk(blocks: list[bytes], names: list[str]) -> Table:
    starts = np.cumsum([0] + [len(b) for b in blocks])
    buffer = np.frombuffer(b"".join(blocks), dtype=np.uint8)
    # An entry takes at least 3 bytes; keys rebuilt from shared prefixes may outgrow the first guess.
    out = np.zeros((max(len(buffer) // 3, 1), 4), dtype=np.int64)
    key_buffer = np.zeros(max(len(buffer), 64), dtype=np.uint8)
    n = fill = 0
    for b, name in enumerate(names):
        while True:
            n, fill, status, at = _walk_block(buffer, int(starts[b]), int(starts[b + 1]), key_buffer, fill, out, n)
            if status == WALK_OK:
                break
            if status == WALK_FULL:
                key_buffer = np.concatenate([key_buffer, np.zeros_like(key_buffer)])
                out = np.concatenate([out, np.zeros_like(out)])
                continue
            raise TableError(f"{name} has an entry that does not fit (at byte {at - int(starts[b])} of the block)")
    return Table(buffer=buffer, key_buffer=key_buffer[:fill], entries=out[:n])


@kernel(nogil=True)
def _fields(buffer, entries, rows, tag, out):
    pos = 0
    for r in rows:
        out[pos] = tag
        pos += 1
        length = entries[r, 3]
        while length >= 0x80:
            out[pos] = (length & 0x7F) | 0x80
            length >>= 7
            pos += 1
        out[pos] = length
        pos += 1
        start = entries[r, 2]
        for k in range(entries[r, 3]):
            out[pos + k] = buffer[start + k]
        pos += entries[r, 3]
    return pos


def values_as_field(table: Table, rows: np.ndarray, field_number: int) -> bytes:
    """The values of `rows` as one protobuf message's repeated length-delimited field `field_number`
    (each value is a serialized message: this is that message's repeated field, in serialized form)."""
    if field_number >= 16:
        raise ValueError("one-byte tags only")
    sizes = table.entries[rows, 3]
    total = int(sizes.sum()) + len(rows) * 11
    out = np.empty(max(total, 1), dtype=np.uint8)
    used = _fields(table.buffer, table.entries, rows.astype(np.int64), field_number << 3 | 2, out)
    return out[:used].tobytes()


def _stored_size(data: bytes, offset: int, size: int) -> int:
    """What a block will take once decompressed (a Snappy block says so in its first bytes)."""
    if offset + size < len(data) and data[offset + size] == SNAPPY_COMPRESSION:
        try:
            return int(cramjam.snappy.decompress_raw_len(data[offset:offset + min(size, 16)]))
        except cramjam.DecompressionError:
            return size  # _block says what is wrong with it
    return size


def read_table(data: bytes, check_size=None) -> Table:
    """Every entry of the table, in table order. `check_size(bytes)`, when given, is called with what the
    decompressed blocks will take before any is decompressed (a memory budget check may raise there)."""
    if len(data) < FOOTER_SIZE:
        raise TableError(f"the file is {len(data)} bytes, shorter than a table's {FOOTER_SIZE}-byte footer "
                         "(truncated?)")
    footer_at = len(data) - FOOTER_SIZE
    if struct.unpack_from("<Q", data, len(data) - 8)[0] != MAGIC:
        raise TableError("the file does not end with LevelDB's table magic number (not an SSTable, or truncated)")
    _, _, pos = _handle(data, footer_at, len(data) - 8, "the footer")
    index_offset, index_size, _ = _handle(data, pos, len(data) - 8, "the footer")
    index = _walk([_block(data, index_offset, index_size, footer_at, "the index block")], ["the index block"])
    if check_size is not None:
        handles = [_handle(index.value(n), 0, len(index.value(n)), f"the index block's entry {n}")
                   for n in range(len(index))]
        check_size(sum(_stored_size(data, offset, size) for offset, size, _ in handles))
    blocks, names = [], []
    for n in range(len(index)):
        handle = index.value(n)
        offset, size, _ = _handle(handle, 0, len(handle), f"the index block's entry {n}")
        names.append(f"data block {n}")
        blocks.append(_block(data, offset, size, footer_at, names[-1]))
    return _walk(blocks, names)


__all__ = ["MAGIC", "NO_COMPRESSION", "SNAPPY_COMPRESSION", "Table", "TableError", "crc32c", "masked_crc",
           "read_table", "values_as_field"]
