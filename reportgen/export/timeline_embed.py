"""The timeline of a single-file report: each host's excerpt (its busiest step) embedded in the page.

The site's trace page reads its timeline files as the view needs them; a single HTML file cannot
carry them all, so it carries, per host, the index rewritten to one window (the excerpt that the
export wrote for this purpose) and that window's two files, as JSON data blocks
(`<script type="application/json" data-timeline-data>[header, payload]`) placed before the
timeline's element, which the page's script registers as if the files had been loaded. Hosts
whose excerpt does not fit in the budget get the index alone, with no window, and the page says
where the whole trace is.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

from reportgen.export.timeline import REGISTER

MAX_EMBEDDED_BYTES = 6 * 2**20  # every embedded timeline of one report together
_PREFIX_TEXT = REGISTER + "("
_TIMELINE_DIV = re.compile(r'<div class="timeline" data-timeline data-host="[^"]*" data-base="([^"]*)"')


def read_calls(raw: bytes) -> list[tuple[dict, object, int]]:
    """(header, payload, bytes of its call) of each call in a timeline file, the payload as written (an
    object, or base64 text). A small host's index.js holds every part's call before its own."""
    calls = []
    text = raw.decode("utf-8")
    decoder = json.JSONDecoder()
    at = 0
    while at < len(text):
        if not text.startswith(_PREFIX_TEXT, at):
            raise ValueError("not a timeline data file")
        header, end = decoder.raw_decode(text, at + len(_PREFIX_TEXT))
        payload, end = decoder.raw_decode(text, end + 1)
        if not text.startswith(");\n", end):
            raise ValueError("not a timeline data file")
        calls.append((header, payload, len(text[at:end + 3].encode("utf-8"))))
        at = end + 3
    if not calls:
        raise ValueError("not a timeline data file")
    return calls


def _data(header: dict, payload) -> str:
    # A JSON data block, not code: capture text stays data. No `<` in it (JSON has it only inside
    # strings), so nothing in it can end the element.
    return json.dumps([header, payload]).replace("<", "\\u003c")


def excerpt_blocks(folder: Path, budget: int) -> tuple[list[str], int]:
    """JSON texts `[header, payload]` of a host's excerpt files (or of its index alone), and the bytes they
    take of the budget."""
    *held, (header, index, _) = read_calls((folder / "index.js").read_bytes())
    inline = {h.get("key"): (h, payload, size) for h, payload, size in held}
    excerpt = index.get("excerpt")
    parts = []
    for key in (excerpt["key"], excerpt["args"]) if excerpt else ():
        if key in inline:
            parts.append(inline[key])
        elif (folder / f"{key}.js").is_file():
            parts.append(read_calls((folder / f"{key}.js").read_bytes())[0])
    size = sum(part[2] for part in parts)
    fits = bool(excerpt) and len(parts) == 2 and size <= budget
    whole = {k: index[k] for k in ("events", "start", "end")}
    index = {**index, "lod": [], "whole": whole}
    if fits:
        index["windows"] = [{"key": excerpt["key"], "args": excerpt["args"], "start": excerpt["start"],
                             "end": excerpt["end"], "events": excerpt["events"]}]
        index["start"], index["end"] = excerpt["start"], excerpt["end"]
    else:
        index["windows"] = []
    blocks = [_data(header, index)]
    if fits:
        blocks += [_data(h, payload) for h, payload, _ in parts]
    return blocks, size if fits else 0


def embed_timelines(site_dir: Path, page: str, main_html: str, budget: int,
                    data_element: Callable[[str], str]) -> tuple[str, int]:
    """`main_html` with each timeline's data blocks (made elements by `data_element`) inserted
    before it; the bytes of the budget used."""
    used = 0
    out, last = [], 0
    for match in _TIMELINE_DIV.finditer(main_html):
        base = unquote(html.unescape(match.group(1)))
        folder = site_dir / posixpath.normpath(posixpath.join(posixpath.dirname(page), base))
        if not (folder / "index.js").is_file():
            continue
        blocks, size = excerpt_blocks(folder, budget - used)
        used += size
        out.append(main_html[last:match.start()])
        out.extend(data_element(text) for text in blocks)
        last = match.start()
    out.append(main_html[last:])
    return "".join(out), used
