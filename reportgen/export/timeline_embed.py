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
from urllib.parse import quote, unquote

from reportgen.export.timeline import REGISTER

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
        if not text.startswith(",", end):
            raise ValueError("not a timeline data file")
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
    keys = [excerpt["key"], excerpt["args"]] if excerpt else []
    # A part's size from index.js, or from its file's size: a file is read only once it is known to fit (most
    # hosts' excerpts no longer do once the budget is spent).
    files = {key: folder / f"{key}.js" for key in keys if key not in inline}
    sizes = [inline[key][2] if key in inline else files[key].stat().st_size for key in keys
             if key in inline or files[key].is_file()]
    size = sum(sizes)
    fits = bool(keys) and len(sizes) == len(keys) and size <= budget
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
        parts = [inline[key] if key in inline else read_calls(files[key].read_bytes())[0] for key in keys]
        blocks += [_data(h, payload) for h, payload, _ in parts]
    return blocks, size if fits else 0


def embed_timelines(site_dir: Path, page: str, main_html: str, budget: int,
                    data_element: Callable[[str, str], str]) -> tuple[str, int]:
    """`main_html` with each timeline's data blocks (made elements by `data_element(text, base attribute)`)
    inserted before it; the bytes of the budget used.

    Each timeline's `data-base` becomes its folder from the site's root, and its blocks carry the same: the
    page keeps a timeline's files by folder and host, and one document holds every run's pages, in which two
    runs' hosts may share a name (and their folders from their own pages, `trace/<host>/timeline/`)."""
    used = 0
    out, last = [], 0
    for match in _TIMELINE_DIV.finditer(main_html):
        base = unquote(html.unescape(match.group(1)))
        from_root = posixpath.normpath(posixpath.join(posixpath.dirname(page), base))
        folder = site_dir / from_root
        if not (folder / "index.js").is_file():
            continue
        blocks, size = excerpt_blocks(folder, budget - used)
        used += size
        attribute = html.escape(quote(from_root + "/"), quote=True)
        out.append(main_html[last:match.start()])
        out.extend(data_element(text, attribute) for text in blocks)
        out.append(main_html[match.start():match.start(1)] + attribute)
        last = match.end(1)
    out.append(main_html[last:])
    return "".join(out), used
