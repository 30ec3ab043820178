"""Running `python -m reportgen` as a real subprocess, as users do."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO
from tests.session_once import once

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2


def reportgen(*args: str, cwd: Path | None = None, preexec_fn: Callable[[], None] | None = None,
              timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m reportgen ARGS`, this checkout first on the import path (`env`: variables to set)."""
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "reportgen", *args],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def sample_site_build() -> tuple[Path, subprocess.CompletedProcess]:
    """`reportgen build` with no arguments, run once per test session in a fresh folder.

    Returns (the folder it ran in, the finished process); the site is
    `<folder>/site`. Shared by the CLI and browser tests: a build process
    costs seconds, and neither test changes the site.
    """
    return once("sample-site", lambda cwd: (cwd, reportgen("build", "--jobs", "2", cwd=cwd)))


def _drop_file_permission_override() -> None:
    """In the child, before exec: give up root's right to ignore file permissions.

    Removing CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH from the bounding set means
    the program exec'd next runs as root but is refused a mode-000 file, the
    way any other user is.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) refused")


def unreadable_file_runner(path: Path) -> tuple[Callable[[], None] | None, str | None]:
    """Make `path` unreadable for a child process.

    Returns (preexec_fn for the child, None) when a real way exists, or
    (None, reason) when none does. chmod 000 is enough for ordinary users; root
    ignores file modes unless it gives up CAP_DAC_OVERRIDE first.
    """
    path.chmod(0o000)
    preexec = _drop_file_permission_override if os.geteuid() == 0 else None
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; open(sys.argv[1], 'rb').read()", str(path)],
            capture_output=True, text=True, preexec_fn=preexec,
        )
    except subprocess.SubprocessError as exc:  # the child could not drop the capability
        return None, f"running as root and cannot drop CAP_DAC_OVERRIDE ({exc})"
    if probe.returncode == 0:
        return None, "chmod 000 does not stop this user from reading the file and capabilities cannot be dropped"
    if "PermissionError" not in probe.stderr:
        return None, f"could not make a file unreadable: {probe.stderr.strip().splitlines()[-1:]}"
    return preexec, None
