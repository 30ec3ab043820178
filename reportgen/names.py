"""File and folder names made from names a capture chose (runs, hosts, HLO modules, allocators).

Every such name goes through `file_part` (or `joined_file_name` for a name made of several): the result
is one safe path component, never `.`, `..` or hidden, holds no separator or control character, fits the
file system's 255-byte limit with room for what the caller appends later (`-2`, `-000.json.gz`, …), and
two distinct names never give one result.

A name that is already safe and short is kept as it is, so ordinary names read as before. Any other
name is written readably (unsafe characters as `_`, cut to fit) followed by `~` and 16 hex digits of the
SHA-256 of the name itself. No kept name holds `~`, so a rewritten name never equals a kept one, and two
rewritten ones are equal only if their hashes are (2^-64): `a b`, `a:b` and `a_b` stay three files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

NAME_MAX = 255  # bytes in one path component (ext4, XFS, APFS, NTFS as UTF-16 units: fewer than this)
MARK = "~"  # between the readable part of a rewritten name and its hash; never in a kept name
HASH_CHARS = 16

# What is kept: in file names that embed a name (CSV, script and chunk names, comparison pages), the
# characters any URL path and file system take as they are; in run folders and trace host folders,
# which were always spelled as the run or host is, any printable character but `/` and `~` (a `\` is
# no separator on the POSIX file systems a site is built on, and links percent-encode it). Surrogates
# (the bytes of a file name that is not UTF-8, as Python decodes them) are rewritten too: every name
# written is UTF-8, as the pages and JSON files that link to it must be.
SAFE = re.compile(r"[A-Za-z0-9._()-]+")
PRINTABLE = re.compile(r"[^\x00-\x1f\x7f-\x9f/~\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]+")


def _hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def _cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def is_kept(name: str, room: int = 0, separator: str = "", keep: re.Pattern = SAFE) -> bool:
    """Whether `file_part` keeps `name` as it is."""
    if not name or name.startswith(".") or not keep.fullmatch(name):
        return False
    if len(name.encode("utf-8", "surrogatepass")) > NAME_MAX - room:
        return False
    # Joined with `separator`, a part must not hold it nor end with the start of it: then the first
    # separator in the joined name ends the first part (`a_` + `__` + `b` and `a` + `__` + `_b` would
    # otherwise be one name). A rewritten part ends in hex digits, which no separator here starts with.
    return not separator or (separator not in name
                             and not any(name.endswith(separator[:i]) for i in range(1, len(separator))))


def file_part(name: str, room: int = 0, separator: str = "", keep: re.Pattern = SAFE) -> str:
    """`name` as one path component of at most NAME_MAX - `room` bytes (see the module's docstring).

    `room`: the bytes the caller appends to this component later. `separator`: the string the caller
    joins this part to others with (in one component). `keep`: the characters kept as they are (SAFE,
    or PRINTABLE for folders that have always been spelled as the run or host is)."""
    if is_kept(name, room, separator, keep):
        return name
    readable = "".join(c if keep.fullmatch(c) else "_" for c in name)
    if readable.startswith("."):
        readable = "_" + readable[1:]  # never hidden, never a path step
    if separator:
        readable = readable.replace(separator, MARK)
    limit = NAME_MAX - room - len(MARK) - HASH_CHARS
    if limit < 1:
        raise ValueError(f"no room for a name: {room} bytes of {NAME_MAX} are taken")
    return f"{_cut(readable, limit)}{MARK}{_hash(name)}"


def joined_file_name(names: Sequence[str], separator: str = "__", suffix: str = "", room: int = 0,
                     keep: re.Pattern = SAFE) -> str:
    """Several names in one component (`host__allocator__breakdown.csv`), each made by `file_part`
    with an equal share of the bytes left by the separators, `suffix` and `room` (appended later)."""
    fixed = len(separator) * (len(names) - 1) + len(suffix.encode("utf-8")) + room
    share = (NAME_MAX - fixed) // max(1, len(names))
    return separator.join(file_part(n, NAME_MAX - share, separator, keep) for n in names) + suffix


# A host's trace folder (`<run>/trace/<host>/`) and file stem: the longest name the export appends to
# it is `-NNNN.json.gz` (13 bytes).
TRACE_FILE_ROOM = 16


def host_folder(host: str) -> str:
    """The folder and file stem of a host's trace export."""
    return file_part(host, TRACE_FILE_ROOM, keep=PRINTABLE)


__all__ = ["NAME_MAX", "PRINTABLE", "SAFE", "TRACE_FILE_ROOM", "file_part", "host_folder", "is_kept",
           "joined_file_name"]
