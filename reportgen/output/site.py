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
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import orjson
import pandas as pd

from reportgen import __version__
from reportgen.output.formatting import FILTERS
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
    # `tojson` (chart specs, page data) through orjson: the standard encoder took
    # seconds on pages with large chart datasets. Jinja still escapes <, >, & and '
    # for HTML; NaN becomes null, which JSON.parse (unlike NaN) accepts.
    env.policies["json.dumps_function"] = _json_text
    env.policies["json.dumps_kwargs"] = {}
    return env


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()


_BUNDLE_SCRIPT = "import sys, vl_convert; sys.stdout.write(vl_convert.javascript_bundle(vl_version=sys.argv[1]))"


def _javascript_bundle() -> str:
    """vl-convert's bundle, made in a child process when possible.

    Bundling takes seconds and vl-convert holds the GIL all along: in a child
    process it runs beside the build (the build starts it on a thread)
    instead of stopping every other thread of this one. It runs at a lower
    priority, on the CPU time the host workers leave: it is needed only when
    pages are rendered.
    """
    try:
        with subprocess.Popen([sys.executable, "-c", _BUNDLE_SCRIPT, VEGA_LITE_VERSION],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
            try:
                os.setpriority(os.PRIO_PROCESS, child.pid, 10)
            except (AttributeError, OSError):
                pass
            out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise subprocess.CalledProcessError(child.returncode, "vl-convert bundle")
        return out.decode("utf-8")
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        import vl_convert

        return vl_convert.javascript_bundle(vl_version=VEGA_LITE_VERSION)


@lru_cache(maxsize=1)
def _vega_bundle() -> bytes:
    # The bundle declares short top-level names (`t`, `n`, …); an IIFE keeps
    # them out of the page's global scope. It exports vega/vegaLite/vegaEmbed
    # on `window` itself.
    code = _javascript_bundle()
    return ("(function(){\n" + code + "\n})();\n").encode()


def _static_asset(name: str) -> bytes:
    return resources.files("reportgen").joinpath("static", name).read_bytes()


def _hashed_name(stem: str, suffix: str, content: bytes) -> str:
    return f"{stem}-{hashlib.sha256(content).hexdigest()[:12]}{suffix}"


# Asset key (as templates name it: `assets.<key>`) → (file stem, static file).
# A page-specific script is one more row here; the Vega bundle is generated.
STATIC_ASSETS: dict[str, tuple[str, str]] = {
    "css": ("style", "style.css"),
    "js": ("reportgen", "reportgen.js"),
    "memory_viewer_js": ("memory-viewer", "memory_viewer.js"),
    "trace_js": ("trace", "trace.js"),
    "op_profile_js": ("op-profile", "op_profile.js"),
    "timeline_js": ("timeline", "timeline.js"),
    # Vendored from the npm registry (scripts/vendor/refresh_flame_chart_js.sh), with its licence below.
    "flame_chart_js": ("flame-chart", "vendor/flame-chart-js/flame-chart.min.js"),
}
# Licences of vendored components, copied beside the assets (content-hashed like them: the assets
# folder is published with an immutable cache policy).
VENDOR_NOTICES: dict[str, str] = {
    "vendor/flame-chart-js/LICENSE": "flame-chart-js-LICENSE.txt",
}

# Asset key → path relative to the site root. Names are content-hashed, so
# browsers (and buckets with long cache lifetimes) never serve a stale copy.
Assets = dict


def vega_bundle(cache_dir: Path | None = None) -> bytes:
    """The Vega bundle. Generating it takes seconds of CPU, and it is the same for every build of one
    vl-convert version: it is kept per version in `cache_dir` (default: the user cache folder's
    `assets/`) and generated only when missing or damaged."""
    import vl_convert

    if cache_dir is None:
        cache_dir = cache_subdir("assets")
        if cache_dir is None:
            return _vega_bundle()
    path = cache_dir / f"vega-bundle-{vl_convert.__version__}-{VEGA_LITE_VERSION}.js"
    checksum = path.with_name(path.name + ".sha256")
    try:
        content = path.read_bytes()
        if hashlib.sha256(content).hexdigest() == checksum.read_text(encoding="ascii").strip():
            return content
    except OSError:
        pass
    content = _vega_bundle()
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for target, data in ((path, content), (checksum, hashlib.sha256(content).hexdigest().encode())):
            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)
    except OSError:
        pass  # the cache is an optimisation only
    return content


def write_assets(site_dir: Path, cache_dir: Path | None = None) -> Assets:
    assets_dir = site_dir / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    files = [("vega", "vega-bundle", ".js", vega_bundle(cache_dir))]
    for key, (stem, filename) in STATIC_ASSETS.items():
        files.append((key, stem, Path(filename).suffix, _static_asset(filename)))
    written = {}
    for key, stem, suffix, content in files:
        name = _hashed_name(stem, suffix, content)
        (assets_dir / name).write_bytes(content)
        written[key] = "assets/" + name
    for source, name in VENDOR_NOTICES.items():
        content = _static_asset(source)
        stem, suffix = name.rsplit(".", 1)
        (assets_dir / _hashed_name(stem, "." + suffix, content)).write_bytes(content)
    return Assets(written)


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
            assets={k: root + v for k, v in self.assets.items()},
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
