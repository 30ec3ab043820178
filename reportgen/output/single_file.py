"""One self-contained HTML file from a built site, to attach to a pull request or mail.

It is composed from the site's own pages rather than rendered a second time,
so every tool page a section writes is included with nothing to register:

- pages in reading order: the site index, then per run its index page and its
  tool pages (summary.json order, overview first), then any other page;
- each page's `<main>` (and its header bar) becomes one `<section>`; element
  ids, and the attributes that refer to them, get a per-page prefix so that
  pages never collide (chart specs, filters, host selectors, fragments);
- links between pages become in-page anchors; small downloads (CSV tables,
  images) are inlined as data: URLs within a size budget; anything else, the
  trace in particular, is left out and a note on the page says where it is; the trace
  page's timeline keeps each host's busiest step, embedded by the function the caller hands in
  (`reportgen.export.timeline_embed.embed_timelines`, which knows the timeline's files: this package
  does not import the trace export, whose modules load numba);
- the graph viewer page is left out: it explores data that grows with the
  model (each HLO module's graph and text, loaded per module) and lays it out
  with a 797 KiB Graphviz library; a note at the top says where it is, and
  links to it become plain text marked as left out;
- the stylesheets and scripts the pages load (the Vega bundle among them) are
  inlined once. Chart specs already carry their data (Altair inlines it).

The pages' text is copied byte for byte: what the templates escaped stays
escaped; only the attributes rewritten here are re-encoded (and escaped).
"""

from __future__ import annotations

import base64
import html
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from reportgen import __version__
from reportgen.output.site import RUNS_SCRIPT
from reportgen.output.table_cells import script_json
from reportgen.output.web_types import content_type
from reportgen.summary_blocks import SiteSummary

# Downloads inlined as data: URLs (base64: +33%) stay within these budgets;
# a larger table is left out with a note, keeping the file easy to share.
MAX_INLINE_FILE = 1 * 2**20
MAX_INLINE_TOTAL = 4 * 2**20
INLINE_SUFFIXES = (".csv", ".png", ".svg", ".md", ".txt")
MAX_EMBEDDED_BYTES = 6 * 2**20  # every embedded timeline of one report together
TRACE_DIR = "trace"
# Run pages left out of the single file (file name → what the note calls them). The graph viewer
# loads each module's graph and text as a script of its own (0.36 MB for the 24 small modules of
# the shared captures, megabytes for a large model's) and lays them out with Graphviz (797 KiB):
# an explorer of the whole program that belongs to the site rather than to a file to attach or mail.
LEFT_OUT_PAGES = {"graph_viewer.html": "graph viewer"}
LEFT_OUT_TITLE = "not included in the single-file report: the {what} is in the site"

# Attributes holding one or more ids of the same page.
_ID_REF_ATTRS = frozenset(
    {"for", "headers", "list", "form", "aria-labelledby", "aria-describedby", "aria-controls", "aria-owns"}
)
# Attributes naming a group shared by elements of one page (reportgen.js).
_GROUP_ATTRS = frozenset({"data-host-select", "data-host-panel"})
_URL_ATTRS = frozenset({"href", "src"})

SINGLE_FILE_CSS = """
main.single-file { padding: 0; max-width: none; }
section.page { scroll-margin-top: 0; }
section.page + section.page { border-top: 4px solid var(--line, #d1d9e0); margin-top: 1.5rem; }
.page-main { padding: 1rem 1.5rem 3rem; max-width: 1400px; }
a.omitted { color: inherit; text-decoration: underline dotted; cursor: help; }
"""


# How a trace page's timelines go into the file: (site folder, page path, the page's `<main>` HTML, bytes of the
# budget left, the data element maker (text, base attribute) → element) → (the `<main>` HTML with the timelines'
# data blocks, bytes used). `reportgen.export.timeline_embed.embed_timelines` is the one the command hands in.
EmbedTimelines = Callable[[Path, str, str, int, Callable[[str, str], str]], tuple[str, int]]


@dataclass
class SingleFileReport:
    output: Path
    bytes: int
    pages: int
    charts: int
    omitted: list[str] = field(default_factory=list)  # site files left out (trace, oversized tables)


def _anchor_for(page: str, taken: set[str]) -> str:
    stem = page[:-5] if page.endswith(".html") else page
    base = "p-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-") or "page")
    anchor, n = base, 1
    while anchor in taken:
        n += 1
        anchor = f"{base}-{n}"
    taken.add(anchor)
    return anchor


def page_order(site_dir: Path) -> list[str]:
    """The site's HTML pages in reading order (paths relative to the root)."""
    pages = sorted(
        p.relative_to(site_dir).as_posix() for p in site_dir.rglob("*.html") if p.is_file()
    )
    present = set(pages)
    ordered: list[str] = []

    def add(page: str) -> None:
        if page in present and page not in ordered:
            ordered.append(page)

    add("index.html")
    try:
        summary = SiteSummary.from_json(json.loads((site_dir / "summary.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        summary = SiteSummary()
    for run, block in summary.runs.items():
        add(f"{run}/index.html")
        for slug in sorted(block.tools, key=lambda slug: slug != "overview"):  # stable: overview first
            add(block.tools[slug].page)
        for page in pages:
            if page.startswith(f"{run}/"):
                add(page)
    for page in pages:
        add(page)
    return ordered


class _IdCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


class _Inliner:
    """Site files as data: URLs, within the size budget."""

    def __init__(self, site_dir: Path):
        self.site_dir = site_dir
        self.used = 0

    def data_url(self, target: str) -> str | None:
        if not target.lower().endswith(INLINE_SUFFIXES) or f"/{TRACE_DIR}/" in f"/{target}":
            return None
        path = self.site_dir / target
        if not path.is_file():
            return None
        size = path.stat().st_size
        encoded_size = 4 * ((size + 2) // 3)
        if size > MAX_INLINE_FILE or self.used + encoded_size > MAX_INLINE_TOTAL:
            return None
        self.used += encoded_size
        media_type = content_type(target).replace(" ", "")
        return f"data:{media_type};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


@dataclass
class _Page:
    path: str
    anchor: str
    header: str
    main: str
    charts: int
    omitted: list[str]
    assets: list[tuple[str, str]]  # ("css" | "js", site-relative path) from the page head


class _PageRewriter(HTMLParser):
    """Streams one page, keeping its header bar and <main> with ids and links rewritten."""

    def __init__(self, page: str, anchor: str, ids: set[str], anchors: dict[str, str], inliner: _Inliner,
                 site_dir: Path):
        super().__init__(convert_charrefs=False)
        self.page = page
        self.anchor = anchor
        self.ids = ids
        self.anchors = anchors
        self.inliner = inliner
        self.site_dir = site_dir
        self.region: str | None = None
        self.depth = 0
        self.parts: dict[str, list[str]] = {"header": [], "main": []}
        self.assets: list[tuple[str, str]] = []
        self.omitted: list[str] = []
        self.left_out: list[str] = []  # links to pages left out of the single file
        self.charts = 0
        self.rows_block: list[str] | None = None  # the text of a data table's rows block being read

    # -- helpers -------------------------------------------------------------
    def _ns(self, value: str) -> str:
        return f"{self.anchor}--{value}"

    def _resolve(self, path: str) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(self.page), unquote(path)))
        if (self.site_dir / target).is_dir():
            target = posixpath.join(target, "index.html")
        return target

    def _rewrite_url(self, tag: str, name: str, value: str) -> tuple[str | None, str | None]:
        """(new value or None to drop it, a download file name when inlined)."""
        parts = urlsplit(value)
        if parts.scheme or value.startswith("//"):
            return value, None
        if not parts.path:
            return "#" + (self._ns(parts.fragment) if parts.fragment else self.anchor), None
        target = self._resolve(parts.path)
        anchor = self.anchors.get(target)
        if anchor is not None:
            return "#" + (f"{anchor}--{parts.fragment}" if parts.fragment else anchor), None
        if left_out_page(target):
            self.left_out.append(target)
            return None, None
        if not target.startswith("../"):
            inlined = self.inliner.data_url(target)
            if inlined is not None:
                return inlined, (posixpath.basename(target) if tag == "a" and name == "href" else None)
        self.omitted.append(target)
        return None, None

    def _rewrite_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> str:
        out = self._rewrite_attrs(tag, attrs)
        if out is None:
            return self.get_starttag_text() or ""
        rendered = "".join(
            f" {n}" if v is None else f' {n}="{html.escape(v, quote=True)}"' for n, v in out
        )
        return f"<{tag}{rendered}>"

    def _rewrite_link(self, link: dict) -> dict:
        """A link of a data table's rows (`table_cells.link_attrs`: an <a>'s attributes) rewritten as the page's
        own links are."""
        out = self._rewrite_attrs("a", list(link.items()))
        return link if out is None else {name: value or "" for name, value in out}

    def _rewrite_rows(self, text: str) -> str:
        """A data table's rows block (`table_cells.table_data`) with the links in its cells rewritten."""
        data = json.loads(text)
        for row in data.get("rows", []):
            for i, cell in enumerate(row):
                if isinstance(cell, dict):
                    row[i] = self._rewrite_link(cell)
                elif isinstance(cell, list) and len(cell) > 1 and isinstance(cell[1], dict):
                    cell[1] = self._rewrite_link(cell[1])
        return script_json(data)

    def _rewrite_attrs(self, tag: str, attrs: list[tuple[str, str | None]]) -> list[tuple[str, str | None]] | None:
        """A tag's attributes with ids, id references and links rewritten for the single file; None when none
        changes."""
        changed = drop_title = False
        out: list[tuple[str, str | None]] = []
        extra: list[tuple[str, str | None]] = []
        for name, value in attrs:
            new = value
            if value is None:
                pass
            elif name == "id":
                new = self._ns(value)
            elif name in _ID_REF_ATTRS:
                new = " ".join(self._ns(v) for v in value.split())
            elif name in _GROUP_ATTRS or (name.startswith("data-") and value in self.ids):
                new = self._ns(value)
            elif name in _URL_ATTRS:
                view = urlsplit(value).fragment if tag == "a" else ""
                if "=" in view:
                    # A link to a view of a page (trace.html#host=…&t0=…): to the page's section here, with
                    # the view for the page's script (timeline.js), which opens it on click.
                    value = value.split("#", 1)[0]
                    extra.append(("data-view", view))
                left_out = len(self.left_out)
                new, download = self._rewrite_url(tag, name, value)
                if new is None:
                    changed = True
                    if len(self.left_out) > left_out:  # its own title replaces the link's
                        what = LEFT_OUT_PAGES[posixpath.basename(self.left_out[-1])]
                        drop_title = True
                        extra += [("class", "omitted"), ("title", LEFT_OUT_TITLE.format(what=what))]
                    else:
                        extra += [("class", "omitted"), ("title", "not included in the single-file report")]
                    continue
                if download:
                    extra.append(("download", download))
            if name == "data-vega-spec":
                self.charts += 1
            changed |= new != value
            out.append((name, new))
        if not changed and not extra:
            return None
        if drop_title:
            out = [(n, v) for n, v in out if n != "title"]
        names = {n for n, _ in out}
        for name, value in extra:
            if name == "class" and "class" in names:
                out = [(n, f"{v} omitted" if n == "class" else v) for n, v in out]
            elif name not in names:
                out.append((name, value))
        return out

    # -- parser callbacks ----------------------------------------------------
    def _emit(self, text: str) -> None:
        if self.region in self.parts:
            self.parts[self.region].append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if self.region is None:
            if tag == "head":
                self.region = "head"
            elif tag == "header" and "top" in (values.get("class") or "").split():
                self.region, self.depth = "header", 1
            elif tag == "main":
                self.region, self.depth = "main", 1
            return
        if self.region == "head":
            if tag == "link" and "stylesheet" in (values.get("rel") or "").split() and values.get("href"):
                self.assets.append(("css", self._resolve(values["href"])))
            elif tag == "script" and values.get("src"):
                self.assets.append(("js", self._resolve(values["src"])))
            return
        if tag == ("header" if self.region == "header" else "main"):
            self.depth += 1
        self._emit(self._rewrite_tag(tag, attrs))
        if tag == "script" and values.get("type") == "application/json" and (values.get("id") or "").endswith("-rows"):
            self.rows_block = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.region in self.parts:
            self._emit(self._rewrite_tag(tag, attrs))
        elif self.region == "head":
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self.rows_block is not None and tag == "script":
            self._emit(self._rewrite_rows("".join(self.rows_block)))
            self.rows_block = None
        if self.region == "head" and tag == "head":
            self.region = None
            return
        if self.region in self.parts and tag == ("header" if self.region == "header" else "main"):
            self.depth -= 1
            if self.depth == 0:
                self.region = None
                return
        self._emit(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self.rows_block is not None:
            self.rows_block.append(data)
            return
        self._emit(data)

    def handle_entityref(self, name: str) -> None:
        self._emit(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self._emit(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        self._emit(f"<!--{data}-->")


def _compose_page(site_dir: Path, page: str, anchor: str, anchors: dict[str, str], inliner: _Inliner) -> _Page:
    text = (site_dir / page).read_text(encoding="utf-8")
    collector = _IdCollector()
    collector.feed(text)
    collector.close()
    rewriter = _PageRewriter(page, anchor, collector.ids, anchors, inliner, site_dir)
    rewriter.feed(text)
    rewriter.close()
    return _Page(
        path=page,
        anchor=anchor,
        header="".join(rewriter.parts["header"]),
        main="".join(rewriter.parts["main"]),
        charts=rewriter.charts,
        omitted=rewriter.omitted,
        assets=rewriter.assets,
    )


def _omitted_note(omitted: Iterable[str]) -> str:
    """Where the files a page links to, left out here, can be found."""
    folders: dict[str, int] = {}
    for target in omitted:
        folder = posixpath.dirname(target)
        folders[folder] = folders.get(folder, 0) + 1
    items = ", ".join(
        f"<code>{html.escape(folder or '.')}/</code> ({count} file{'s' if count != 1 else ''})"
        for folder, count in sorted(folders.items())
    )
    is_trace = any(f"/{TRACE_DIR}" in f"/{folder}/" for folder in folders)
    what = "The trace files and other downloads" if is_trace else "Some downloads"
    return (
        f'<p class="note">{what} linked from this page are not part of this single-file report: {items}. '
        "They are in the site that <code>reportgen build LOGDIR -o site/</code> writes "
        "(open it with <code>reportgen serve site</code>).</p>"
    )


def _inline_script(code: str) -> str:
    # `</script` or `<!--` inside inlined code would end or confuse the element.
    code = re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)
    return code.replace("<!--", "<\\!--")


def _inline_style(css: str) -> str:
    return re.sub(r"</(style)", r"<\\/\1", css, flags=re.IGNORECASE)


def left_out_page(page: str) -> bool:
    """A run page the single file leaves out (LEFT_OUT_PAGES)."""
    return "/" in page and posixpath.basename(page) in LEFT_OUT_PAGES


def _left_out_note(pages: list[str]) -> str:
    by_kind: dict[str, list[str]] = {}
    for page in pages:
        by_kind.setdefault(LEFT_OUT_PAGES[posixpath.basename(page)], []).append(page)
    notes = []
    for what, where in by_kind.items():
        places = ", ".join(f"<code>{html.escape(p)}</code>" for p in where)
        notes.append(f'<p class="note">The {what} is not included in this file: it loads each HLO module\'s graph '
                     f"and text when picked and lays them out with Graphviz (797 KiB), an explorer that stays "
                     f"with the site. It is in the site that <code>reportgen build LOGDIR -o site/</code> "
                     f"writes: {places}.</p>\n")
    return "".join(notes)


def _trace_runs(site_dir: Path, pages: list[str]) -> list[str]:
    runs = {p.split("/", 1)[0] for p in pages if "/" in p}
    return sorted(r for r in runs if (site_dir / r / TRACE_DIR).is_dir())


def compose(site_dir: Path, on_page: Callable[[str, int], None] | None = None,
            timelines: EmbedTimelines | None = None) -> tuple[str, SingleFileReport]:
    """The single-file document for a built site, and what went into it. `on_page(page, pages)` is called as
    each page starts being composed (for a progress bar: `pages` in all). `timelines` embeds the trace pages'
    timelines (see `EmbedTimelines`); without it they come without data, as the trace does."""
    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(f"{site_dir}: not a built site (no index.html)")
    every_page = page_order(site_dir)
    pages = [p for p in every_page if not left_out_page(p)]
    left_out = [p for p in every_page if left_out_page(p)]
    taken: set[str] = set()
    anchors = {page: _anchor_for(page, taken) for page in pages}
    inliner = _Inliner(site_dir)
    composed = []
    for page in pages:
        if on_page is not None:
            on_page(page, len(pages))
        composed.append(_compose_page(site_dir, page, anchors[page], anchors, inliner))

    assets: list[tuple[str, str]] = []
    for page in composed:
        for asset in page.assets:
            if asset not in assets:
                assets.append(asset)
    head: list[str] = []
    for kind, path in assets:
        file = site_dir / path
        # The site's run list feeds the pages' run switcher, which has no use in one file of every page.
        if not file.is_file() or path == RUNS_SCRIPT:
            continue
        code = file.read_text(encoding="utf-8")
        head.append(f"<style>\n{_inline_style(code)}\n</style>" if kind == "css"
                    else f"<script>\n{_inline_script(code)}\n</script>")

    body: list[str] = []
    omitted: list[str] = []
    timeline_bytes = 0
    for page in composed:
        # The trace page's timeline: each host's busiest step, embedded (the whole trace stays in the site).
        if timelines is not None:
            page.main, used = timelines(
                site_dir, page.path, page.main, MAX_EMBEDDED_BYTES - timeline_bytes,
                lambda data, base: (f'<script type="application/json" data-timeline-data data-base="{base}">'
                                    f'{data}</script>\n'))
            timeline_bytes += used
        note = _omitted_note(page.omitted) if page.omitted else ""
        omitted.extend(t for t in page.omitted if t not in omitted)
        header = f'<header class="top">{page.header}</header>\n' if page.header.strip() else ""
        body.append(
            f'<section class="page" id="{page.anchor}" data-page="{html.escape(page.path, quote=True)}">\n'
            f'{header}<div class="page-main">\n{note}{page.main}\n</div>\n</section>\n'
        )
    trace_runs = _trace_runs(site_dir, pages)
    top_notes = ""
    if trace_runs:
        where = ", ".join(f"<code>{html.escape(r)}/{TRACE_DIR}/</code>" for r in trace_runs)
        embedded = (f": each trace page's timeline holds the busiest step of each host (at most "
                    f"{MAX_EMBEDDED_BYTES // 2**20} MiB for them all). " if timelines is not None else ". ")
        top_notes = (
            f'<p class="note">The timeline trace is not included in this file{embedded}'
            f"The whole trace is in the site that <code>reportgen build LOGDIR -o site/</code> writes, under {where}; "
            "open its trace pages for every event, or serve the site with <code>reportgen serve site</code> to "
            "open the files in Perfetto UI.</p>\n"
        )
    top_notes += _left_out_note(left_out) if left_out else ""
    omitted.extend(left_out)
    left_out_names = sorted({"the " + LEFT_OUT_PAGES[posixpath.basename(p)] for p in left_out})
    every = "every page of the site" + (", but " + " and ".join(left_out_names) if left_out else "")
    generator = f"reportgen {__version__}"
    document = (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="{generator}">\n'
        '<link rel="icon" href="data:,">\n<title>Profile report · reportgen</title>\n'
        + "\n".join(head)
        + f"\n<style>{SINGLE_FILE_CSS}</style>\n</head>\n<body>\n"
        + '<main class="single-file">\n'
        + (f'<div class="page-main">{top_notes}</div>\n' if top_notes else "")
        + "".join(body)
        + "</main>\n"
        + f"<footer>Generated by {generator} as a single file: {every}, one after the other. "
        "Numbers follow XProf's definitions; differences are noted on the page.</footer>\n</body>\n</html>\n"
    )
    report = SingleFileReport(
        output=Path(),
        bytes=len(document.encode("utf-8")),
        pages=len(composed),
        charts=sum(p.charts for p in composed),
        omitted=omitted,
    )
    return document, report


def write_single_file(site_dir: Path | str, output: Path | str,
                      on_page: Callable[[str, int], None] | None = None,
                      timelines: EmbedTimelines | None = None) -> SingleFileReport:
    """Write the single-file report of a built site to `output` (atomically); `on_page`, `timelines`: see
    `compose`."""
    document, report = compose(Path(site_dir), on_page, timelines)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(document, encoding="utf-8")
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    report.output = output.resolve()
    return report


__all__ = ["MAX_EMBEDDED_BYTES", "EmbedTimelines", "SingleFileReport", "compose", "page_order", "write_single_file"]
