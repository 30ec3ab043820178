"""One site build shared by the publishing tests (site, single file, GCS, serve, safety).

The logdir sits under a distinctive absolute path and holds the bundled
sample runs, a run whose run, host, plane, line and op names are HTML/JS
payloads, and a corrupt host file (so an error message is shown). It is
built once per test session, through the command line, with an environment
variable whose value must never reach the output.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.session_once import once
from tests.xspace import Space

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PROFILE = REPO / "reportgen" / "sample" / "plugins" / "profile"

# Every capture string below ends up on a page; none may act as markup or code.
# File and folder names cannot hold "/", hence no closing tags in those two.
XSS_RUN = 'run<script>alert("run")<\\script>"\'&lt&amp'  # no ";": the emulator cannot serve it
XSS_HOST = 'host<img src=x onerror=alert("host")>"'
XSS_PLANE = '/host:CPU</script><script>alert("plane")</script>"'
XSS_LINE = '<script>alert("line")</script>"\' onmouseover="alert(1)'
XSS_OP = '</script><script>alert("op")</script>"<!--'
PATH_MARKER = "local-machine-path-8f3kq"
ENV_NAME = "REPORTGEN_TEST_ENV_MARKER"
ENV_VALUE = "environment-value-p2x7w"


def xss_xspace() -> bytes:
    """A small but valid capture: one CPU plane, one line of nested events."""
    space = Space((XSS_HOST,))
    plane = space.plane(XSS_PLANE, 1)
    t0 = 1_000_000 * 1000  # the lines' timestamp, in ps
    line = plane.line(1, XSS_LINE, display_name=XSS_LINE, display_id=1, timestamp_ns=1_000_000)
    for i in range(20):
        name = (XSS_OP, "op-plain")[i % 2]
        line.event(name, t0 + i * 1_000_000, 900_000, display_name=name, stats=[(XSS_OP, XSS_OP)])
    plane.line(2, "second line", timestamp_ns=1_000_000).event(XSS_LINE, t0, 5_000_000, display_name=XSS_LINE)
    return space.serialize()


def make_logdir(root: Path) -> Path:
    logdir = root / PATH_MARKER / "logs"
    profile = logdir / "plugins" / "profile"
    profile.mkdir(parents=True)
    for run in SAMPLE_PROFILE.iterdir():
        shutil.copytree(run, profile / run.name)
    xss = profile / XSS_RUN
    xss.mkdir()
    (xss / f"{XSS_HOST}.xplane.pb").write_bytes(xss_xspace())
    (xss / "broken.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a capture")
    return logdir


@dataclass
class BuiltSite:
    root: Path  # the distinctive folder everything local lives under
    logdir: Path
    site: Path
    single_file: Path
    exit_code: int


def built_site() -> BuiltSite:
    """Build once per session (shared by every test module, and every worker process, that asks)."""
    return once("built-site", _build)


def _build(root: Path) -> BuiltSite:
    from reportgen.cli.main import main

    logdir = make_logdir(root)
    out = root / PATH_MARKER / "out"
    previous = os.environ.get(ENV_NAME)
    os.environ[ENV_NAME] = ENV_VALUE
    try:
        code = main(["build", str(logdir), "-o", str(out / "site"), "--single-file",
                     str(out / "report.html"), "--jobs", "1", "-q"])
    finally:
        if previous is None:
            os.environ.pop(ENV_NAME, None)
        else:
            os.environ[ENV_NAME] = previous
    return BuiltSite(root=root, logdir=logdir, site=out / "site", single_file=out / "report.html", exit_code=code)
