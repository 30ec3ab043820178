"""Static checks over a built site, shared by the tests.

`broken_links(site)` reads every HTML page and reports each relative `href`
or `src` that does not resolve to a file inside the site (and each
`#fragment` that names no element of its target page; a fragment of
`key=value` pairs is a view its page's timeline opens), plus any resource
(script, stylesheet, image) fetched from outside the site: the pages must
work offline and from `file://`.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRIBUTES = ("href", "src")
# Elements whose `href`/`src` the browser fetches by itself (not a navigation).
RESOURCE_TAGS = {"script", "link", "img", "iframe", "source", "video", "audio", "embed", "track", "input"}
HARMLESS_SCHEMES = {"data", "mailto"}


class _PageParser(HTMLParser):
    """A page's ids and links, those of the rows a data table ships as data (table_cells.table_data) included:
    the page's script makes those rows, their ids and their links' attributes as the block gives them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()
        self._rows: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            if name in LINK_ATTRIBUTES:
                self.links.append((tag, name, value))
        values = dict(attrs)
        if tag == "script" and values.get("type") == "application/json" and (values.get("id") or "").endswith("-rows"):
            self._rows = []

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        if self._rows is not None:
            self._rows.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != "script" or self._rows is None:
            return
        block = json.loads("".join(self._rows))
        self._rows = None
        self.ids.update(block.get("ids", []))
        for row in block["rows"]:
            for cell in row:
                link = cell[1] if isinstance(cell, list) and len(cell) > 1 else cell
                if isinstance(link, dict) and "href" in link:
                    self.links.append(("a", "href", link["href"]))


def parse_page(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser


def html_pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def page_links(path: Path) -> list[tuple[str, str, str]]:
    """(tag, attribute, value) of every href/src on the page."""
    return parse_page(path).links


def broken_links(site: Path) -> list[str]:
    """Every problem found, as 'page: tag attr=value: why' lines (empty when all is well)."""
    site = site.resolve()
    pages = html_pages(site)
    ids: dict[Path, set[str]] = {}
    problems: list[str] = []

    def ids_of(page: Path) -> set[str]:
        if page not in ids:
            ids[page] = parse_page(page).ids
        return ids[page]

    for page in pages:
        where = page.relative_to(site)
        for tag, attr, value in page_links(page):
            label = f"{where}: <{tag} {attr}={value!r}>"
            parts = urlsplit(value)
            if parts.scheme in HARMLESS_SCHEMES:
                continue
            if parts.scheme or parts.netloc:
                if tag in RESOURCE_TAGS or (tag == "a" and parts.scheme == "javascript"):
                    problems.append(f"{label}: resource outside the site (pages must work offline)")
                continue
            if parts.path.startswith("/"):
                problems.append(f"{label}: root-absolute path breaks under file:// and sub-folders")
                continue
            if not parts.path:
                if parts.fragment and parts.fragment not in ids_of(page):
                    problems.append(f"{label}: no element with id {parts.fragment!r} on this page")
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if site not in target.parents:
                problems.append(f"{label}: points outside the site folder")
            elif not target.is_file():
                problems.append(f"{label}: {target.relative_to(site)} does not exist")
            elif "=" in parts.fragment:
                # A view of a page (trace.html#host=…&t0=…), which the page's script opens: its timeline.
                if "data-timeline" not in target.read_text(encoding="utf-8"):
                    problems.append(f"{label}: a view link, but {target.relative_to(site)} has no timeline")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in ids_of(target):
                problems.append(f"{label}: no element with id {parts.fragment!r} in {target.relative_to(site)}")
    return problems


def assert_links_resolve(site: Path) -> None:
    problems = broken_links(site)
    assert not problems, f"{len(problems)} broken link(s) in {site}:\n  " + "\n  ".join(problems[:40])
