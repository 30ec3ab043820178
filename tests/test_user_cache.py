"""Made once per machine and version, in the user cache folder: the compiled templates."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from reportgen.user_cache import cache_subdir, user_cache_dir
from tests.conftest import REPO


def test_the_user_cache_folder_is_private_and_follows_xdg(tmp_path, monkeypatch):
    if sys.platform in ("win32", "darwin"):
        pytest.skip("XDG_CACHE_HOME is the Linux and Unix convention")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "reportgen"
    folder = cache_subdir("templates")
    assert folder == tmp_path / "xdg" / "reportgen" / "templates"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the folder should be: no cache
    assert cache_subdir("templates") is None


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
