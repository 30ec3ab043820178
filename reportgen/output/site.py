"""Writing the static site: templates, charts, CSVs, assets, atomic swap.

The site is written into a temporary sibling folder and moved into place
only when complete, so a failed build never leaves a half-written site and
never destroys the previous one.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any

import jinja2
import numpy as np
import orjson
import pandas as pd

from reportgen import __version__
from reportgen.output.formatting import FILTERS, UNITS_NOTE
from reportgen.output.table_cells import table_cell, table_data, table_rows
from reportgen.user_cache import cache_subdir

VEGA_LITE_VERSION = "6.4"  # the schema Altair 6 writes


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # Compiling the templates costs ≈ 0.3 s of CPU per process; Jinja keeps the compiled code in
    # the user cache folder, checked against each template's source, and compiles again on a change.
    folder = cache_subdir("templates")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reportgen", "templates"),
        bytecode_cache=jinja2.FileSystemBytecodeCache(str(folder)) if folder is not None else None,
        autoescape=jinja2.select_autoescape(["html", "htm", "xml"], default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals.update(runs_script=RUNS_SCRIPT, units_note=UNITS_NOTE, table_cell=table_cell,
                       table_rows=table_rows, table_data=table_data)
    # `tojson` (chart specs, page data) through orjson: the standard encoder took
    # seconds on pages with large chart datasets. Jinja still escapes <, >, & and '
    # for HTML; NaN becomes null, which JSON.parse (unlike NaN) accepts.
    env.policies["json.dumps_function"] = _json_text
    env.policies["json.dumps_kwargs"] = {}
    return env


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()


# Vega, Vega-Lite and vega-embed, vendored from the npm registry (static/vendor/vega/NOTICE.md), in the
# order a page must run them. A site carries them as one script, `assets/vega-bundle-<hash>.js`.
VEGA_BUILDS = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
_SOURCE_MAP_COMMENT = re.compile(rb"\n//# sourceMappingURL=[^\n]*\s*$")


@lru_cache(maxsize=1)
def vega_bundle() -> bytes:
    """The site's Vega script: the three vendored UMD builds one after the other (each defines its
    global, `vega`, `vegaLite`, `vegaEmbed`), without the source-map comments of maps not shipped."""
    builds = [_SOURCE_MAP_COMMENT.sub(b"\n", _static_asset(f"vendor/vega/{name}")) for name in VEGA_BUILDS]
    return b";\n".join(builds)


def _static_asset(name: str) -> bytes:
    return resources.files("reportgen").joinpath("static", name).read_bytes()


def _hashed_name(stem: str, suffix: str, content: bytes) -> str:
    return f"{stem}-{hashlib.sha256(content).hexdigest()[:12]}{suffix}"


# Asset key (as templates name it: `assets.<key>`) → (file stem, static file).
# A page-specific script is one more row here; the Vega script is made of three (`vega_bundle`).
STATIC_ASSETS: dict[str, tuple[str, str]] = {
    "css": ("style", "style.css"),
    "js": ("reportgen", "reportgen.js"),
    "memory_viewer_js": ("memory-viewer", "memory_viewer.js"),
    "memory_profile_js": ("memory-profile", "memory_profile.js"),
    "trace_js": ("trace", "trace.js"),
    "op_profile_js": ("op-profile", "op_profile.js"),
    "graph_viewer_js": ("graph-viewer", "graph_viewer.js"),
    # Graphviz compiled to WebAssembly (vendored from npm, see static/vendor/hpcc-js-wasm/NOTICE.md).
    "graphviz_js": ("graphviz", "vendor/hpcc-js-wasm/graphviz.umd.js"),
    "timeline_js": ("timeline", "timeline.js"),
    # Vendored from the npm registry (scripts/vendor/refresh_flame_chart_js.sh), with its licence below.
    "flame_chart_js": ("flame-chart", "vendor/flame-chart-js/flame-chart.min.js"),
}
# Licences of vendored components, copied beside the assets (content-hashed like them: the assets
# folder is published with an immutable cache policy).
VENDOR_NOTICES: dict[str, str] = {
    "vendor/flame-chart-js/LICENSE": "flame-chart-js-LICENSE.txt",
    "vendor/vega/LICENSE-vega": "vega-LICENSE.txt",
    "vendor/vega/LICENSE-vega-lite": "vega-lite-LICENSE.txt",
    "vendor/vega/LICENSE-vega-embed": "vega-embed-LICENSE.txt",
    "vendor/vega/THIRD_PARTY_NOTICES.txt": "vega-THIRD_PARTY_NOTICES.txt",
}
# Assets that only one tool's pages load (a section names them in `Section.assets`): every page knows
# their names from the start, but the files go into the site only when some run has such a page
# (`write_page_assets`), so that a site without HLO modules carries no 797 KiB Graphviz bundle.
ON_DEMAND_ASSETS = frozenset({"graph_viewer_js", "graphviz_js"})
# Licences of vendored on-demand assets, written beside them (as VENDOR_NOTICES).
ON_DEMAND_NOTICES: dict[str, dict[str, str]] = {
    "graphviz_js": {"vendor/hpcc-js-wasm/LICENSE": "hpcc-js-wasm-LICENSE.txt",
                    "vendor/hpcc-js-wasm/NOTICE.md": "hpcc-js-wasm-NOTICE.md"},
}

# The list of the site's runs and their pages, for every run page's run switcher. Written by each build (never
# content-hashed: pages reused from the rebuild cache must see the runs of the build that reused them).
RUNS_SCRIPT = "runs.js"


def write_runs_script(site_dir: Path, runs: list[dict]) -> None:
    """`runs`: {"name", "folder" (URL-quoted), "pages" (file names)} per run, in site order."""
    payload = _json_text({"runs": runs})
    # JSON inside a classic script (pages are opened from file://, where fetch() is blocked): escape what could end
    # the script or open markup.
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        payload = payload.replace(raw, escaped)
    target = site_dir / RUNS_SCRIPT
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"window.reportgenRuns = {payload};\n", encoding="utf-8")


# Asset key → path relative to the site root. Names are content-hashed, so
# browsers (and buckets with long cache lifetimes) never serve a stale copy.
Assets = dict


def asset_files() -> tuple[Assets, dict[str, bytes]]:
    """The assets every site needs, not yet written: their names (key → path relative to the site root,
    on-demand ones included, written later by `write_page_assets`) and what to write now (path → bytes)."""
    files = [("vega", "vega-bundle", ".js", vega_bundle())]
    for key, (stem, filename) in STATIC_ASSETS.items():
        files.append((key, stem, Path(filename).suffix, _static_asset(filename)))
    assets, contents = {}, {}
    for key, stem, suffix, content in files:
        assets[key] = "assets/" + _hashed_name(stem, suffix, content)
        if key not in ON_DEMAND_ASSETS:
            contents[assets[key]] = content
    for source, name in VENDOR_NOTICES.items():
        content = _static_asset(source)
        stem, suffix = name.rsplit(".", 1)
        contents["assets/" + _hashed_name(stem, "." + suffix, content)] = content
    return Assets(assets), contents


def write_asset_files(site_dir: Path, contents: dict[str, bytes]) -> None:
    for relative, content in contents.items():
        (site_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        (site_dir / relative).write_bytes(content)


def write_assets(site_dir: Path) -> Assets:
    """Write the assets every site needs; return the names of all of them (see `asset_files`)."""
    assets, contents = asset_files()
    write_asset_files(site_dir, contents)
    return assets


def _write_notice(assets_dir: Path, source: str, name: str) -> None:
    content = _static_asset(source)
    stem, suffix = name.rsplit(".", 1)
    (assets_dir / _hashed_name(stem, "." + suffix, content)).write_bytes(content)


def write_page_assets(site_dir: Path, assets: Assets, keys: set[str] | frozenset[str]) -> list[str]:
    """Write the on-demand assets `keys` (those the site's pages load) under the names `assets` gave them."""
    written = []
    for key in sorted(keys & ON_DEMAND_ASSETS):
        target = site_dir / assets[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_static_asset(STATIC_ASSETS[key][1]))
        for source, name in ON_DEMAND_NOTICES.get(key, {}).items():
            _write_notice(target.parent, source, name)
        written.append(assets[key])
    return written


@dataclass
class PageWriter:
    """Writes the pages and tables of one run (or the site root).

    `prefix` is the path from the page folder back to the site root, so that
    every link stays relative and the site can be moved or served anywhere.
    """

    site_dir: Path
    assets: Assets
    folder: str = ""  # relative to the site root; "" for the root
    nav: list[dict] = field(default_factory=list)
    run: str | None = None
    hosts: list[str] = field(default_factory=list)  # the run's hosts, named in every page's header

    @property
    def prefix(self) -> str:
        return "../" * len([p for p in self.folder.split("/") if p])

    def path(self, relative: str) -> Path:
        target = self.site_dir / self.folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_html(self, relative: str, template: str, **context: Any) -> None:
        env = _environment()
        depth = "../" * relative.count("/")
        root = depth + self.prefix
        html = env.get_template(template).render(
            root=root,
            assets={k: root + v for k, v in self.assets.items()},
            nav=self.nav,
            run=self.run,
            run_hosts=self.hosts,
            generator=f"reportgen {__version__}",
            page=relative,
            **context,
        )
        self.path(relative).write_text(html, encoding="utf-8")

    def write_csv(self, relative: str, frame: pd.DataFrame) -> str:
        neutralize_formulas(frame).to_csv(self.path(relative), index=False)
        return relative

    def write_json(self, relative: str, payload: Any) -> None:
        self.path(relative).write_text(json.dumps(payload, indent=1, default=_json_default), encoding="utf-8")


# A spreadsheet evaluates a cell that starts with = + - @ (or a tab or carriage return) as a formula, and
# capture names are text anyone can choose: such a text cell gets a leading apostrophe (OWASP's advice for
# CSV injection), which the spreadsheet shows as text. A cell that starts with an apostrophe gets one too,
# so that `restore_formulas` reads every cell back as written; plain numbers stay as they are.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _needs_quote(cell: str) -> bool:
    return cell.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(cell)


def _rewrite_text_cells(frame: pd.DataFrame, select, rewrite) -> pd.DataFrame:
    """`frame`, or a copy with `rewrite(cell)` in each text cell for which `select(cell)` holds."""
    out = None
    for i, dtype in enumerate(frame.dtypes):
        if not (dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype)):
            continue
        column = frame.iloc[:, i]
        values = column.to_numpy(object)
        chosen = [j for j, cell in enumerate(values.tolist()) if isinstance(cell, str) and select(cell)]
        if not chosen:
            continue
        values = values.copy()
        values[chosen] = [rewrite(values[j]) for j in chosen]
        out = frame.copy() if out is None else out
        out.isetitem(i, pd.Series(values, index=column.index, dtype=dtype))
    return frame if out is None else out


def neutralize_formulas(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell a spreadsheet would evaluate prefixed by an apostrophe (a copy when any is)."""
    return _rewrite_text_cells(frame, _needs_quote, lambda cell: "'" + cell)


def write_csv_columns(handle: IO[str], columns: dict[str, np.ndarray]) -> None:
    """`neutralize_formulas(pd.DataFrame(columns)).to_csv(handle, index=False)`, the same text without a frame, for
    the small tables a host stage writes: the frame, its check and pandas' writer cost ≈ 1 ms a table, and a pod's
    run has thousands of hosts. `handle` is a text file opened with `newline=""`. Cells are written as pandas
    writes them: floats by their shortest repr (NaN as an empty cell), text made safe for spreadsheets, through
    the csv module's minimal quoting, which pandas' writer uses too."""
    writer = csv.writer(handle, lineterminator=os.linesep)
    writer.writerow(list(columns))
    cells = []
    for values in columns.values():
        values = np.asarray(values)
        if values.dtype.kind == "f":
            cells.append(["" if v != v else repr(v) for v in values.tolist()])
        elif values.dtype.kind == "O":
            cells.append([("'" + v if _needs_quote(v) else v) if isinstance(v, str) else v for v in values.tolist()])
        else:
            cells.append(values.tolist())
    writer.writerows(zip(*cells))


def restore_formulas(frame: pd.DataFrame) -> pd.DataFrame:
    """A CSV table of reportgen's as read back: the apostrophe `neutralize_formulas` added is taken off."""
    return _rewrite_text_cells(frame, lambda cell: cell.startswith("'"), lambda cell: cell[1:])


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
