"""The cells and rows of the data tables, each cell by its column's format.

Written in Python rather than as a Jinja macro: a TF stats page holds tens of
thousands of cells, and a macro call per cell made that page's rendering the
largest single cost of a small build (≈ 0.3 s of the bundled sample's 1.5 s).
"""

from __future__ import annotations

import math
from numbers import Real

import orjson
from markupsafe import Markup, escape

from reportgen.output.formatting import (
    fmt_bytes,
    fmt_duration_us,
    fmt_gflops,
    fmt_gib_per_s,
    fmt_int,
    fmt_ms,
    fmt_num,
    fmt_pct,
)

# Text columns: the cell's opening tag (names are cut to one line by the style sheet).
_NAME_FORMATS = {"name": '<td class="name">', "label": '<td class="name short">', "text": "<td>"}


def _shown(value, fmt: str) -> str:
    if fmt.startswith("pct"):  # "pct", or "pct:3" for three decimals
        return fmt_pct(value, int(fmt[4:]) if len(fmt) > 4 else 2)
    if fmt == "bytes":
        return fmt_bytes(value)
    if fmt == "gflops":
        return fmt_gflops(value) if value else "0"
    if fmt == "gib_per_s":
        return fmt_gib_per_s(value) if value else "0"
    if fmt == "us":
        return fmt_duration_us(value)
    if fmt == "ms":
        return fmt_duration_us(value * 1e3) if isinstance(value, Real) else fmt_num(value)
    if fmt.startswith("ms:"):  # in ms with that many decimals, for a column of step times read side by side
        return fmt_ms(value, int(fmt[3:]))
    return fmt_num(value, int(fmt[4:]) if fmt.startswith("num:") else 3)  # any other number ("num:2": 2 decimals)


def _cell_html(value, fmt: str) -> str:
    opening = _NAME_FORMATS.get(fmt)
    if opening is not None:
        return f"{opening}{escape(value)}</td>"
    if fmt == "int":
        return f'<td class="num">{fmt_int(value)}</td>'
    # A number's text and its formatted forms are digits, signs, separators and units: nothing to escape
    # (≈ 0.1 s of the bundled sample's TF stats pages, 29,000 cells); anything else is escaped.
    raw = value if isinstance(value, Real) else escape(value)
    return f'<td class="num" data-sort="{raw}">{_shown(value, fmt)}</td>'


def table_cell(value, fmt: str) -> Markup:
    """`<td>` for `value` in a column of format `fmt`: int, num, pct, us, ms, bytes, gflops, gib_per_s, name
    (a long name: one line, cut, whole on click), label (the same, narrower) or text; numbers other than int
    carry their raw value in `data-sort` for the table's sorting."""
    return Markup(_cell_html(value, fmt))


def table_rows(rows, formats: list[str], anchors=None) -> Markup:
    """The `<tr>` lines of a table body: one per row, its cells in `formats`' order, `id` from `anchors`."""
    lines = []
    for index, row in enumerate(rows):
        opening = f'<tr id="{escape(anchors[index])}">' if anchors else "<tr>"
        cells = "".join(_cell_html(value, fmt) for value, fmt in zip(row, formats))
        lines.append(f"{opening}{cells}</tr>\n")
    return Markup("".join(lines))


# What `</script>`, `<!--` and HTML entities could open inside a JSON script block, as Jinja's `tojson` escapes it.
_SCRIPT_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", ord("'"): "\\u0027"}


def script_json(value) -> str:
    """`value` as JSON safe inside `<script type="application/json">`: NaN and infinities become null (which
    JSON.parse accepts), and no text from a capture can end the block or start markup."""
    text = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()
    return text.translate(_SCRIPT_SAFE)


def _compact(value, fmt: str):
    """A cell's value with no more digits than its shown text and sorting need (the CSV keeps them all): counts
    as integers, other numbers to 9 significant digits."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return value
    if value != value or value in (math.inf, -math.inf):
        return None
    if fmt == "int":
        return int(value)
    rounded = float(f"{value:.9g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def table_data(table_id: str, rows, formats: list[str], anchors=None) -> Markup:
    """A data table's rows as data: a JSON block that reportgen.js renders a page of rows from, each cell as
    `table_cell` writes it. A table of thousands of rows as `<tr>`s cost seconds of layout and megabytes of
    page; its values as JSON are a fifth of the bytes and only the rows shown become elements. The table's
    `<tbody>` stays empty (`data-rows` names this block).

    A cell of a text format (name, label, text, code) holds its text, or `[text, link, title, short]` (`link_cell`);
    a "timeline" cell holds a link's attributes or None. Numbers take the number formats `table_cell` knows."""
    # `block`: the block's own id, so that the page's script can tell the prefix the single-file report puts on
    # every id of a page (output/single_file.py) and give the rows' ids the same.
    payload = {"block": f"{table_id}-rows", "formats": list(formats),
               "rows": [[_compact(v, f) for v, f in zip(row, formats)] for row in rows]}
    if anchors:
        payload["ids"] = [str(a) for a in anchors]
    return Markup(f'<script type="application/json" id="{escape(table_id)}-rows">{script_json(payload)}</script>')


def link_cell(text: str, href: str | None = None, link_title: str | None = None, title: str | None = None,
              short: str | None = None) -> list | str:
    """A text cell of a data table with more than its text: a link around it (`href`, with `link_title` on hover),
    a `title` for the cell, a `short` text shown until the row is opened. The link is an <a>'s attributes, so that
    the single-file report rewrites them as it rewrites every link of a page."""
    if href is None and title is None and short is None:
        return text
    link = link_attrs(href, link_title) if href is not None else None
    return [text, link, title, short]


def link_attrs(href: str, title: str | None = None, css_class: str | None = None) -> dict[str, str]:
    """The attributes of a link in a data table's rows (reportgen.js sets each on the <a> it makes)."""
    attrs = {"href": href}
    if css_class:
        attrs["class"] = css_class
    if title:
        attrs["title"] = title
    return attrs
