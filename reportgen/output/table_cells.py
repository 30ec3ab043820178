"""The cells and rows of the data tables, each cell by its column's format.

Written in Python rather than as a Jinja macro: a TF stats page holds tens of
thousands of cells, and a macro call per cell made that page's rendering the
largest single cost of a small build (≈ 0.3 s of the bundled sample's 1.5 s).
"""

from __future__ import annotations

from numbers import Real

from markupsafe import Markup, escape

from reportgen.output.formatting import fmt_bytes, fmt_gflops, fmt_gib_per_s, fmt_int, fmt_num, fmt_pct

# Text columns: the cell's opening tag (names are cut to one line by the style sheet).
_NAME_FORMATS = {"name": '<td class="name">', "label": '<td class="name short">', "text": "<td>"}


def _shown(value, fmt: str) -> str:
    if fmt == "pct":
        return fmt_pct(value, 2)
    if fmt == "bytes":
        return fmt_bytes(value)
    if fmt == "gflops":
        return fmt_gflops(value) if value else "0"
    if fmt == "gib_per_s":
        return fmt_gib_per_s(value) if value else "0"
    return fmt_num(value, 3)  # us, ms and any other number


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
