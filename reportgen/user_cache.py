"""reportgen's per-user cache folder: what is made once per machine and version, not once per build.

The compiled kernels (`reportgen.kernels`) and the compiled page templates are the same for every build
of one reportgen version, so they are kept here and made again only when their version changes:

- `$XDG_CACHE_HOME/reportgen` (`~/.cache/reportgen`) on Linux and other Unix systems,
- `~/Library/Caches/reportgen` on macOS, `%LOCALAPPDATA%\\reportgen\\Cache` on Windows.

Each use gets a subfolder, private to the user (some caches hold pickles or code): made 0700 when it
is ours, refused when another user owns it. When one cannot be used, its user goes without a cache:
the build stays correct and only pays the first-use cost again. This module imports nothing heavy: the
command line and the site writer read it.
"""

from __future__ import annotations

import os
import stat
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


def private_dir_problem(path: Path) -> str | None:
    """None when `path` is (or is made) a folder of this user's that nobody else can write, else why not.

    A folder of ours with looser permissions is made private (0700); one that belongs to another user is
    refused: whoever owns it can put files in it or give others the right to. Missing folders are created
    private, parents included.
    """
    missing = []
    folder = path
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for created in missing:  # mkdir's mode is filtered by the umask: these folders are ours
            os.chmod(created, 0o700)
        info = path.stat()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path}: not a folder"
    uid = getattr(os, "geteuid", None)
    if uid is None:  # Windows: the folder's access list, not Unix modes, decides; the user's profile is private
        return None
    if info.st_uid != uid():
        return f"{path}: belongs to another user (uid {info.st_uid}), who could put files in it"
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            return f"{path}: cannot be made private ({exc.strerror or exc})"
    return None


def writable_dir(path: Path) -> str | None:
    """None when `path` is (or can be made) a folder private to this user that this process can
    write, else why not."""
    if (problem := private_dir_problem(path)) is not None:
        return problem
    try:
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


KEY_BYTES = 32


def secret_key(name: str) -> tuple[bytes | None, str | None]:
    """(a random key of this user's, kept in `<user cache folder>/keys/<name>`, made on first use;
    None and why when it cannot be kept). Only this user (and root) can read it."""
    folder = user_cache_dir() / "keys"
    if (problem := writable_dir(folder)) is not None:
        return None, problem
    path = folder / name
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(KEY_BYTES))
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(KEY_BYTES + 1)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    uid = getattr(os, "geteuid", None)
    if uid is not None and (info.st_uid != uid() or stat.S_IMODE(info.st_mode) & 0o077):
        return None, f"{path}: not private to this user"
    if len(key) != KEY_BYTES:
        return None, f"{path}: not a key of {KEY_BYTES} bytes (delete it to make a new one)"
    return key, None


def cache_subdir(name: str) -> Path | None:
    """`<user cache folder>/<name>`, made when missing; None when it cannot be written."""
    path = user_cache_dir() / name
    return path if writable_dir(path) is None else None


__all__ = ["cache_subdir", "private_dir_problem", "secret_key", "user_cache_dir", "writable_dir"]
