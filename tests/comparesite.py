"""A private copy of the session's built sample site, for tests that write comparisons
into it, and a reader for the tables of a built page."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from tests.builtsite import built_site

BASELINE, CANDIDATE = "tf_keras_input_bound", "tf_keras_fast"
PAGE = f"compare/{BASELINE}--vs--{CANDIDATE}.html"


def copy_of_built_site(dest: Path) -> Path:
    """The sample runs (and the hostile-names run) as `reportgen build` wrote them."""
    shutil.copytree(built_site().site, dest)
    return dest


@dataclass
class Cell:
    attrs: dict
    text: str = ""


@dataclass
class Row:
    attrs: dict
    cells: list[Cell] = field(default_factory=list)


class _TableReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[Row]] = {}
        self._table: list[Row] | None = None
        self._cell: Cell | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id") or f"table-{len(self.tables)}", [])
        elif tag == "tr" and self._table is not None:
            self._table.append(Row(attrs))
        elif tag in ("td", "th") and self._table:
            self._cell = Cell(attrs)
            self._table[-1].cells.append(self._cell)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.text += data


def read_tables(html: str) -> dict[str, list[Row]]:
    """Every table of the page by id: rows of cells with their attributes and text."""
    reader = _TableReader()
    reader.feed(html)
    reader.close()
    return reader.tables


def keyed_rows(rows: list[Row]) -> dict[str, Row]:
    return {row.attrs["data-key"]: row for row in rows if "data-key" in row.attrs}
