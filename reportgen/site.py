"""Writing the static site: templates, charts, CSVs, assets, atomic swap.

The site is written into a temporary sibling folder and moved into place
only when complete, so a failed build never leaves a half-written site and
never destroys the previous one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from reportgen import __version__
from reportgen.formatting import FILTERS

VEGA_LITE_VERSION = "6.4"  # the schema Altair 6 writes


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reportgen", "templates"),
        autoescape=jinja2.select_autoescape(["html", "htm", "xml"], default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


@lru_cache(maxsize=1)
def _vega_bundle() -> bytes:
    import vl_convert

    # The bundle declares short top-level names (`t`, `n`, …); an IIFE keeps
    # them out of the page's global scope. It exports vega/vegaLite/vegaEmbed
    # on `window` itself.
    code = vl_convert.javascript_bundle(vl_version=VEGA_LITE_VERSION)
    return ("(function(){\n" + code + "\n})();\n").encode()


def _static_asset(name: str) -> bytes:
    return resources.files("reportgen").joinpath("static", name).read_bytes()


def _hashed_name(stem: str, suffix: str, content: bytes) -> str:
    return f"{stem}-{hashlib.sha256(content).hexdigest()[:12]}{suffix}"


@dataclass
class Assets:
    """Asset names (content-hashed, so browsers never show stale copies)."""

    vega: str
    css: str
    js: str
    trace_js: str


def write_assets(site_dir: Path) -> Assets:
    assets_dir = site_dir / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, stem, suffix, content in (
        ("vega", "vega-bundle", ".js", _vega_bundle()),
        ("css", "style", ".css", _static_asset("style.css")),
        ("js", "reportgen", ".js", _static_asset("reportgen.js")),
        ("trace_js", "trace", ".js", _static_asset("trace.js")),
    ):
        name = _hashed_name(stem, suffix, content)
        (assets_dir / name).write_bytes(content)
        written[key] = "assets/" + name
    return Assets(**written)


def chart_spec(chart: Any) -> dict:
    """An Altair chart (or a ready Vega-Lite dict) as a Vega-Lite spec dict."""
    return chart if isinstance(chart, dict) else chart.to_dict()


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
            assets={k: root + v for k, v in vars(self.assets).items()},
            nav=self.nav,
            run=self.run,
            generator=f"reportgen {__version__}",
            page=relative,
            **context,
        )
        self.path(relative).write_text(html, encoding="utf-8")

    def write_csv(self, relative: str, frame: pd.DataFrame) -> str:
        frame.to_csv(self.path(relative), index=False)
        return relative

    def write_json(self, relative: str, payload: Any) -> None:
        self.path(relative).write_text(json.dumps(payload, indent=1, default=_json_default), encoding="utf-8")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class OutputNotASiteError(Exception):
    """The output folder exists, is not empty and was not written by reportgen."""


def is_replaceable(target: Path) -> bool:
    """True when `target` is absent, empty, or a site reportgen wrote.

    A build replaces its output folder whole; this keeps a mistyped `-o`
    from ever deleting a folder of the user's.
    """
    if not target.exists():
        return True
    if not target.is_dir():
        return False
    if not any(target.iterdir()):
        return True
    try:
        summary = json.loads((target / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and str(summary.get("generator", "")).startswith("reportgen")


class SiteTransaction:
    """A temporary site folder that replaces `target` only on commit()."""

    def __init__(self, target: Path):
        self.target = target.resolve()
        if not is_replaceable(self.target):
            raise OutputNotASiteError(
                f"{target}: exists and is not a reportgen site (no reportgen summary.json); "
                "choose an empty or new output folder"
            )
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.building-", dir=self.target.parent))
        self.tmp.chmod(0o755)

    def commit(self) -> None:
        old = None
        if self.target.exists():
            old = self.target.with_name(f".{self.target.name}.old-{os.getpid()}")
            if old.exists():
                shutil.rmtree(old)
            os.replace(self.target, old)
        os.replace(self.tmp, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
