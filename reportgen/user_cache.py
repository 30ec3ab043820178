"""reportgen's per-user cache folder: what is made once per machine and version, not once per build.

The compiled kernels (`reportgen.kernels`) and the compiled page templates are the same for every build
of one reportgen version, so they are kept here and made again only when their version changes:

- `$XDG_CACHE_HOME/reportgen` (`~/.cache/reportgen`) on Linux and other Unix systems,
- `~/Library/Caches/reportgen` on macOS, `%LOCALAPPDATA%\\reportgen\\Cache` on Windows.

Each use gets a subfolder, created private to the user (some caches hold pickles or code). When one
cannot be written, its user goes without a cache: the build stays correct and only pays the first-use
cost again. This module imports nothing heavy: the command line and the site writer read it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def user_cache_dir() -> Path:
    """The platform's per-user cache folder for reportgen."""
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "reportgen" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "reportgen"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "reportgen"


def writable_dir(path: Path) -> str | None:
    """None when `path` is (or can be made) a folder private to this user that this process can
    write, else why not."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


def cache_subdir(name: str) -> Path | None:
    """`<user cache folder>/<name>`, made when missing; None when it cannot be written."""
    path = user_cache_dir() / name
    return path if writable_dir(path) is None else None


__all__ = ["cache_subdir", "user_cache_dir", "writable_dir"]
