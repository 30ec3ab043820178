"""One build of every shared capture (and the older formats, and a comparison), shared by the tests that read it.

Built once per test session (by one worker process when several run) through the command line, without the
rebuild cache: the chart-spec check and the browser tests of what users see (every page at two screen sizes,
accessibility) all read the same site.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CAPTURES, LOGDIR
from tests.session_once import once

LEGACY = CAPTURES / "legacy"
COMPARED = ("tf_keras_input_bound", "tf_keras_fast")


def shared_site() -> Path:
    """The site of ../shared/captures/logdir (plus legacy/ when present), with one comparison page."""
    return once("shared-site", _build)


def _build(root: Path) -> Path:
    from reportgen.cli.main import main

    site = root / "site"
    logdirs = [str(LOGDIR)] + ([str(LEGACY)] if LEGACY.exists() else [])
    assert main(["build", *logdirs, "-o", str(site), "-q", "--jobs", "1", "--no-cache"]) in (0, 2)
    assert main(["compare", f"{site}:{COMPARED[0]}", f"{site}:{COMPARED[1]}", "-q"]) == 0
    return site
