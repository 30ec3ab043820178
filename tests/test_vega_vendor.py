"""The vendored Vega, Vega-Lite and vega-embed builds: pinned, intact, the versions vl-convert draws
PNGs with, and carried by a site as one script with their licences beside it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import vl_convert

from reportgen.output import site
from tests.conftest import REPO

FOLDER = REPO / "reportgen" / "static" / "vendor" / "vega"


def _pins() -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in (FOLDER / "VERSION").read_text().splitlines())


def test_each_build_is_the_pinned_file_with_its_licence():
    pins = _pins()
    for build in site.VEGA_BUILDS:
        assert hashlib.sha256((FOLDER / build).read_bytes()).hexdigest() == pins[f"sha256 {build}"], build
    for package in ("vega", "vega-lite", "vega-embed"):
        assert "Redistribution and use in source and binary forms" in (FOLDER / f"LICENSE-{package}").read_text()
    notices = (FOLDER / "THIRD_PARTY_NOTICES.txt").read_text(encoding="utf-8")
    # What the builds bundle, each with its licence text.
    for bundled in ("d3-array", "d3-scale", "vega-dataflow", "vega-tooltip", "vega-themes", "fast-json-patch"):
        assert re.search(rf"^{re.escape(bundled)} \S+ — \S+", notices, re.MULTILINE), bundled
    assert "(no licence file)" not in notices
    script = (REPO / "scripts" / "vendor" / "refresh_vega.py").read_text()
    assert "npm" in script and "VERSION" in script


def test_the_builds_are_the_versions_vl_convert_renders_with():
    """The Markdown summary's PNGs (vl-convert) and the pages (these builds) draw with the same libraries."""
    pins = _pins()
    assert pins["vega"] == vl_convert.get_vega_version()
    assert pins["vega-embed"] == vl_convert.get_vega_embed_version()
    assert pins["vega-lite"].rsplit(".", 1)[0] == site.VEGA_LITE_VERSION
    assert site.VEGA_LITE_VERSION in vl_convert.get_vegalite_versions()
    # The files are those versions (each build states its own).
    assert f'version="{pins["vega"]}"' in (FOLDER / "vega.min.js").read_text()
    assert f'"{pins["vega-lite"]}"' in (FOLDER / "vega-lite.min.js").read_text()[:2000]


def test_a_site_carries_them_as_one_script_with_the_licences(tmp_path: Path):
    assets = site.write_assets(tmp_path)
    bundle = (tmp_path / assets["vega"]).read_bytes()
    parts = [(FOLDER / build).read_bytes() for build in site.VEGA_BUILDS]
    # In page order (vega-lite needs vega, vega-embed both), whole, without the source-map comments
    # (the maps are not shipped: a browser's developer tools would ask for them).
    offsets = [bundle.index(part[:200]) for part in parts]
    assert offsets == sorted(offsets)
    assert b"sourceMappingURL" not in bundle
    assert len(bundle) >= sum(len(part) for part in parts) - 200
    names = {path.name.rsplit("-", 1)[0] for path in (tmp_path / "assets").iterdir()}
    assert {"vega-LICENSE", "vega-lite-LICENSE", "vega-embed-LICENSE", "vega-THIRD_PARTY_NOTICES"} <= names
