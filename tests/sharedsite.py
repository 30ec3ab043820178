"""One build of every shared capture (and the older formats, and a comparison), shared by the tests that read it.

Built once per test session through the command line, without the rebuild cache: the chart-spec check and the
browser tests of what users see (every page at two screen sizes, accessibility) all read the same site.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from tests.conftest import CAPTURES, LOGDIR

LEGACY = CAPTURES / "legacy"
COMPARED = ("tf_keras_input_bound", "tf_keras_fast")

_site: Path | None = None


def shared_site() -> Path:
    """The site of ../shared/captures/logdir (plus legacy/ when present), with one comparison page."""
    global _site
    if _site is None:
        from reportgen.cli.main import main

        root = Path(tempfile.mkdtemp(prefix="reportgen-shared-site-"))
        atexit.register(shutil.rmtree, root, True)
        site = root / "site"
        logdirs = [str(LOGDIR)] + ([str(LEGACY)] if LEGACY.exists() else [])
        assert main(["build", *logdirs, "-o", str(site), "-q", "--jobs", "1", "--no-cache"]) in (0, 2)
        assert main(["compare", f"{site}:{COMPARED[0]}", f"{site}:{COMPARED[1]}", "-q"]) == 0
        _site = site
    return _site
