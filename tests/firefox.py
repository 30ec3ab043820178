"""Headless Firefox ESR through Marionette, Firefox's own remote protocol (no geckodriver).

Debian packages firefox-esr but not geckodriver (its npm and PyPI installers download the binary
from GitHub at install time, which is not reachable here); Marionette is built into Firefox and
driven by the `marionette-driver` client from PyPI. Scripts run with `sandbox=None` so that they
see the page's own JavaScript objects (the default sandbox hides expandos behind Xray wrappers).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox") or "/usr/bin/firefox-esr"
HAVE_FIREFOX = Path(FIREFOX).exists()
SKIP_REASON = f"needs Debian's firefox-esr ({FIREFOX}): apt-get install firefox-esr"
needs_firefox = pytest.mark.skipif(not HAVE_FIREFOX, reason=SKIP_REASON)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def firefox(profile_dir: Path, width: int = 1280, height: int = 800) -> Iterator:
    """A Marionette client of a new headless Firefox with its own profile; quits it afterwards."""
    if not HAVE_FIREFOX:
        pytest.skip(SKIP_REASON)
    marionette = pytest.importorskip("marionette_driver.marionette", reason="marionette-driver is a test dependency")
    port = _free_port()
    profile_dir.mkdir(parents=True, exist_ok=True)
    # Pages' console output goes to stdout (devtools.console.stdout.content), read by console_errors().
    (profile_dir / "user.js").write_text(f'user_pref("marionette.port", {port});\n'
                                         'user_pref("devtools.console.stdout.content", true);\n', encoding="utf-8")
    log = (profile_dir / "console.log").open("wb")
    proc = subprocess.Popen([FIREFOX, "--headless", "--marionette", "--no-remote", "--profile", str(profile_dir)],
                            stdout=log, stderr=subprocess.STDOUT)
    client = None
    try:
        client = marionette.Marionette(host="127.0.0.1", port=port, startup_timeout=60)
        client.start_session()
        client.set_window_rect(width=width, height=height)
        yield client
    finally:
        if client is not None:
            try:
                client.delete_session()
            except Exception:  # the browser may already be gone
                pass
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def console_errors(profile_dir: Path) -> list[str]:
    """Errors pages logged so far: uncaught exceptions of file:// pages and their console.error() calls
    (Firefox's own components log theirs as `console.error: <Component>:`, left out)."""
    text = (profile_dir / "console.log").read_text(encoding="utf-8", errors="replace")
    return [line for line in text.splitlines()
            if line.startswith("JavaScript error: file:") or line.startswith('console.error: "')]
