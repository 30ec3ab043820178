"""File names made from capture names (reportgen/names.py), fuzzed: one safe component that fits, kept as
it was when it was already safe, and never one file for two names."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reportgen.names import NAME_MAX, PRINTABLE, SAFE, file_part, joined_file_name

POLICIES = st.sampled_from([SAFE, PRINTABLE])
ROOMS = st.sampled_from([0, 2, 8, 16, 40])
# Names a capture can hold: any Unicode (surrogates included: a file name that is not UTF-8 decodes to
# them), control characters, path steps, fsspec's `::`, the separators the site joins names with, and
# names of 255 bytes and more.
PIECES = st.sampled_from(["", ".", "..", "/", "\\", "::", "__", "--vs--", "~", "\n", "\x1b[31m", "%0A", " ", "-2",
                          "é", "\u202e", "\x00", "\udcff", "a" * 120, "ü" * 90, "x" * 255])
NAMES = st.one_of(st.text(max_size=300), st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=6).map("".join),
                  st.text(alphabet="ab_.-~", max_size=12))
FEW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _is_one_safe_component(part: str, room: int, keep=SAFE) -> bool:
    return (part not in ("", ".", "..") and not part.startswith(".") and "/" not in part
            and (keep is PRINTABLE or "\\" not in part)
            and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in part)
            and len(part.encode("utf-8", "surrogatepass")) <= NAME_MAX - room)


@FEW
@given(st.lists(NAMES, min_size=2, max_size=12, unique=True), POLICIES, ROOMS)
@example(["a b", "a:b", "a_b"], SAFE, 0)
@example(["x y", "x_y"], SAFE, 0)
@example(["." , "..", "...", "_", "_."], PRINTABLE, 16)
@example(["r" * 255, "r" * 254 + "s", "r" * 256], PRINTABLE, 8)
def test_distinct_names_give_distinct_safe_components(names, keep, room):
    parts = [file_part(n, room, keep=keep) for n in names]
    assert len(set(parts)) == len(names)
    assert all(_is_one_safe_component(p, room, keep) for p in parts), parts


@FEW
@given(st.lists(st.tuples(NAMES, NAMES), min_size=2, max_size=8, unique=True),
       st.sampled_from(["__", "--vs--"]), st.sampled_from(["", "__breakdown.csv", ".html"]))
@example([("a_", "b"), ("a", "_b"), ("a", "b")], "__", "__breakdown.csv")
@example([("a--vs", "b"), ("a", "vs--vs--b"), ("a--vs--vs", "b")], "--vs--", ".html")
def test_joined_names_never_share_a_file(pairs, separator, suffix):
    joined = [joined_file_name(p, separator, suffix) for p in pairs]
    assert len(set(joined)) == len(pairs)
    assert all(_is_one_safe_component(j, 0) and j.endswith(suffix) for j in joined)


@FEW
@given(st.from_regex(r"[A-Za-z0-9()_-][A-Za-z0-9._()-]{0,60}", fullmatch=True), ROOMS)
def test_safe_short_names_are_kept_as_they_were(name, room):
    assert file_part(name, room) == name
    assert file_part(name, room, keep=PRINTABLE) == name


def test_rewritten_names_are_stable_and_readable():
    # Pinned: a site rebuilt later (or by another machine) names the same file the same way.
    assert file_part("a b") == "a_b~c8687a08aa5d6ed2"
    assert file_part("a b", keep=PRINTABLE) == "a b"  # run and host folders keep what they always did
    assert file_part("..", keep=PRINTABLE) == "_.~5ec1f7e700f37c3d"
    long = file_part("r" * 255, room=8, keep=PRINTABLE)
    assert long.startswith("r" * 200) and len(long) == NAME_MAX - 8


@settings(max_examples=60, deadline=None)
@given(st.lists(NAMES, min_size=1, max_size=10, unique=True), POLICIES)
def test_every_component_is_a_file_of_its_own_on_disk(tmp_path_factory, names, keep):
    folder = tmp_path_factory.mktemp("names")
    for name in names:  # with the longest suffix the trace export appends to a host's name
        (folder / (file_part(name, 16, keep=keep) + "-000.json.gz")).write_bytes(b"")
    assert len(os.listdir(folder)) == len(names)
