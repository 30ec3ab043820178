"""Made once per machine and version, in the user cache folder: the Vega bundle and the compiled templates."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from reportgen.output import site
from reportgen.user_cache import cache_subdir, user_cache_dir
from tests.conftest import REPO


@pytest.fixture
def counted_bundle(monkeypatch):
    """`site._vega_bundle` replaced by a stand-in that counts how often the bundle is made."""
    made = []

    def make() -> bytes:
        made.append(1)
        return b"(function(){ /* bundle */ })();\n"

    monkeypatch.setattr(site, "_vega_bundle", make)
    return made


def test_the_bundle_is_made_once_and_then_read_from_the_cache(tmp_path, counted_bundle):
    first = site.vega_bundle(tmp_path / "assets")
    again = site.vega_bundle(tmp_path / "assets")
    assert first == again and len(counted_bundle) == 1
    names = sorted(p.name for p in (tmp_path / "assets").iterdir())
    assert len(names) == 2 and names[0].startswith("vega-bundle-") and names[1] == names[0] + ".sha256"


def test_a_damaged_cached_bundle_is_made_again(tmp_path, counted_bundle):
    site.vega_bundle(tmp_path)
    cached = next(tmp_path.glob("vega-bundle-*.js"))
    cached.write_bytes(cached.read_bytes()[:10])  # truncated: its checksum no longer matches
    assert site.vega_bundle(tmp_path) == b"(function(){ /* bundle */ })();\n"
    assert len(counted_bundle) == 2
    assert site.vega_bundle(tmp_path) and len(counted_bundle) == 2


def test_an_unwritable_cache_still_gives_the_bundle(tmp_path, counted_bundle):
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")
    assert site.vega_bundle(blocker / "assets") == b"(function(){ /* bundle */ })();\n"
    assert len(counted_bundle) == 1


def test_the_user_cache_folder_is_private_and_follows_xdg(tmp_path, monkeypatch):
    if sys.platform in ("win32", "darwin"):
        pytest.skip("XDG_CACHE_HOME is the Linux and Unix convention")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "reportgen"
    folder = cache_subdir("assets")
    assert folder == tmp_path / "xdg" / "reportgen" / "assets"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the folder should be: no cache
    assert cache_subdir("assets") is None


def test_the_cached_bundle_is_what_vl_convert_makes(tmp_path):
    """The real bundle, made afresh, and the one the cache returns are the same bytes."""
    fresh = site._vega_bundle()
    site.vega_bundle(tmp_path)
    assert site.vega_bundle(tmp_path) == fresh
    assert fresh.startswith(b"(function(){\n") and b"vegaEmbed" in fresh


RENDER = """
import sys
from pathlib import Path
from reportgen.output.site import PageWriter
from reportgen.sections.site_index import site_index_context
PageWriter(site_dir=Path(sys.argv[1]), assets={"css": "a.css", "js": "a.js", "vega": "v.js"}).write_html(
    "index.html", "site_index.html", errors=[], **site_index_context([]))
"""


def test_templates_compile_once_into_the_user_cache(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(REPO)}
    pages = []
    for attempt in range(2):
        out = tmp_path / f"site{attempt}"
        subprocess.run([sys.executable, "-c", RENDER, str(out)], env=env, check=True)
        pages.append((out / "index.html").read_bytes())
        compiled = sorted((tmp_path / "xdg" / "reportgen" / "templates").iterdir())
        assert compiled, "no compiled template in the cache"
        if attempt == 0:
            first = {p.name: p.stat().st_mtime_ns for p in compiled}
    assert {p.name: p.stat().st_mtime_ns for p in compiled} == first  # read, not written again
    assert pages[0] == pages[1] and b"<html" in pages[0]
