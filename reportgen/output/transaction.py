"""Replacing the output folder: whole, at once, only when it is reportgen's, one build at a time.

A build writes the site into a temporary folder beside the output folder
(`.<name>.building-<random>`) and, once complete, swaps the two:

- Only a folder reportgen wrote is ever replaced: every site holds a marker
  file (`.reportgen-site`) naming the top-level entries reportgen wrote. A
  folder without it (a mistyped `-o`, a folder holding a summary.json of
  someone else's), or holding top-level files reportgen did not write, is
  refused with what is in the way; an empty or absent folder is fine.
- One build at a time per output folder: the build holds an exclusive lock
  on `.<name>.lock` beside it from start to end; a second build into the
  same folder is refused at once, naming the first one's process. The lock
  goes with its process (a killed build frees it), so the next build, once
  it holds the lock, knows that any `.<name>.building-*` or `.<name>.old-*`
  folder is a dead build's leftover and removes it.
- The swap leaves no moment without a site: on Linux, renameat2 with
  RENAME_EXCHANGE swaps the two folders in one step. Elsewhere (or on file
  systems without it) the old site is renamed aside first; a build killed
  between the two renames leaves it as `.<name>.old-<pid>`, and the next
  build puts it back before anything else.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from reportgen import __version__

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock (builds into one folder are not serialised there)
    fcntl = None

MARKER = ".reportgen-site"
MARKER_FORMAT = 1
# `reportgen compare` writes its pages into a site's compare/, `reportgen trend` its page into trends/
ALSO_OURS = frozenset({MARKER, "compare", "trends"})


class OutputError(Exception):
    """The output folder cannot be used; the message says why and what to do."""


class OutputNotASiteError(OutputError):
    """The output folder exists, is not empty and was not written by reportgen."""


def marker_entries(target: Path) -> set[str] | None:
    """The top-level entries reportgen wrote into `target`, as its marker file says; None without one."""
    try:
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(marker, dict) and str(marker.get("generator", "")).startswith("reportgen")
            and isinstance(marker.get("entries"), list)):
        return None
    return {str(e) for e in marker["entries"]}


def write_marker(site: Path) -> None:
    """The marker of a complete site: written last, naming everything at its top level."""
    entries = sorted(p.name for p in site.iterdir() if p.name != MARKER)
    (site / MARKER).write_text(json.dumps({"generator": f"reportgen {__version__}", "format": MARKER_FORMAT,
                                           "entries": entries}), encoding="utf-8")


def is_site_or_empty(target: Path) -> bool:
    """True when `target` is absent, an empty folder, or a site reportgen wrote (it has the marker)."""
    if not target.exists():
        return True
    if not target.is_dir():
        return False
    return not any(target.iterdir()) or marker_entries(target) is not None


def check_replaceable(target: Path, shown: str) -> None:
    """Raise OutputError unless `target` is absent, an empty folder, or a site of reportgen's own."""
    if not target.exists():
        return
    if not target.is_dir():
        raise OutputError(f"{shown}: is a file, not a folder; choose another output folder (-o)")
    try:
        present = {p.name for p in target.iterdir()}
    except OSError as exc:
        raise OutputError(f"{shown}: cannot be read ({exc.strerror or exc})") from exc
    if not present:
        return
    ours = marker_entries(target)
    if ours is None:
        raise OutputNotASiteError(
            f"{shown}: exists and is not a reportgen site (it has no {MARKER} marker file; a site built by an "
            "older reportgen has none either: delete it once); choose an empty or new output folder")
    foreign = sorted(present - ours - ALSO_OURS)
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputNotASiteError(
            f"{shown}: holds files reportgen did not write ({listed}), which a build would delete; move them out "
            "of the site or choose another output folder")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); False where that is not possible."""
    rename = getattr(_libc(), "renameat2", None) if os.name == "posix" else None
    if rename is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if rename(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # this file system or kernel cannot: the two-step swap does
    raise OSError(code, os.strerror(code), str(b))


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        except OSError:  # pragma: no cover
            _LIBC = False
    return _LIBC or None


class SiteTransaction:
    """A temporary site folder that replaces `target` only on commit(); holds the folder's lock meanwhile."""

    def __init__(self, target: Path, shown: str | None = None):
        shown = shown if shown is not None else str(target)
        if not str(shown).strip():
            raise OutputError("the output folder is empty (-o \"\"): name a folder for the site")
        self.target = target.resolve()
        self.shown = shown
        if self.target.parent == self.target:
            raise OutputError(f"{shown}: a file system's root cannot be the output folder")
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{shown}: its parent folder cannot be created ({exc.strerror or exc})") from exc
        check_replaceable(self.target, shown)  # before the lock file is made beside a folder that is not ours
        self._lock = self._acquire_lock()
        try:
            self._recover()
            check_replaceable(self.target, shown)  # again: it may have changed while the lock was not ours
            self._remove_leftovers()
            try:
                self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.building-", dir=self.target.parent))
            except OSError as exc:
                raise OutputError(f"{shown}: the site cannot be written beside it, in {self.target.parent} "
                                  f"({exc.strerror or exc})") from exc
            self.tmp.chmod(0o755)
        except BaseException:
            self.release()
            raise

    # --- the lock ---------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.target.with_name(f".{self.target.name}.lock")

    def _acquire_lock(self) -> int | None:
        if fcntl is None:  # pragma: no cover
            return None
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"{self.shown}: the site cannot be written beside it, in {self.target.parent} "
                              f"({exc.strerror or exc})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "another process"
            except OSError:
                holder = "another process"
            os.close(fd)
            raise OutputError(
                f"{self.shown}: another reportgen build is writing this folder ({holder}); run this one when it "
                "is done, or give another output folder") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"process {os.getpid()}".encode())
        return fd

    def release(self) -> None:
        if getattr(self, "_lock", None) is not None:
            os.close(self._lock)  # the lock goes with the descriptor; the file stays (see the module notes)
            self._lock = None

    # --- leftovers of dead builds (the lock is ours: nobody else is building) -----
    def _leftovers(self, kind: str) -> list[Path]:
        return sorted(self.target.parent.glob(f".{glob_escape(self.target.name)}.{kind}-*"),
                      key=lambda p: p.stat().st_mtime if p.exists() else 0)

    def _recover(self) -> None:
        """A build killed between the two renames of the two-step swap left the site aside: put it back."""
        if not self.target.exists() and not self.target.is_symlink():
            old = [p for p in self._leftovers("old") if p.is_dir()]
            if old:
                os.rename(old[-1], self.target)

    def _remove_leftovers(self) -> None:
        for path in self._leftovers("building") + self._leftovers("old"):
            shutil.rmtree(path, ignore_errors=True)

    # --- commit or abort ----------------------------------------------------------
    def commit(self) -> None:
        write_marker(self.tmp)
        if self.target.exists():
            if _exchange(self.tmp, self.target):
                shutil.rmtree(self.tmp, ignore_errors=True)  # now the old site
            else:
                old = self.target.with_name(f".{self.target.name}.old-{os.getpid()}")
                if old.exists():
                    shutil.rmtree(old)
                os.replace(self.target, old)
                os.replace(self.tmp, self.target)
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.target)
        self.release()

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.release()


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
