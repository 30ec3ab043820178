"""Compiled kernels: the one decorator every numba kernel of reportgen uses, and where they are cached.

numba compiles a kernel on its first call and, with caching, keeps the machine
code on disk for later processes. Its default cache sits beside the source in
`__pycache__`, which for an installed package is `site-packages`: files pip
does not track (an install over them leaves a stale package folder behind) and
a folder that is read-only on shared installs. reportgen's kernels are cached
in a folder of the user's instead:

- `NUMBA_CACHE_DIR` when it is set (numba's own setting),
- else `kernels/` in the user cache folder (`reportgen.user_cache`):
  `~/.cache/reportgen/kernels` on Linux.

The folder is created private to the user (numba's cache files are pickles).
When it cannot be written, kernels are compiled in memory for the process (the
build still works, only the first-use cost is paid every time) and
`CACHE_PROBLEM` says why, for the command line to print once. Only reportgen's
kernels use this folder: other numba code in the same process keeps numba's
own settings.

The first build on a machine compiles the kernels it needs (about fifteen seconds
of CPU). The largest, the trace JSON writer, is needed last: `start_precompile`
compiles it in a child process, for the argument types its module declares,
while this process decodes and analyses the first host, and
`wait_for_precompile` (called before the writer's first use, in any process)
waits for that child through a lock on a file of the cache folder instead of
compiling the same kernel a second time.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no ahead-of-time compile, kernels compile where used
    fcntl = None

from numba import njit
from numba.core import caching, config

from reportgen.user_cache import user_cache_dir, writable_dir

# Class names of numba ≥ 0.61 first, then those of 0.60.
_LocatorBase = getattr(caching, "UserProvidedCacheLocator", None) or caching._UserProvidedCacheLocator
_ImplBase = caching.CompileResultCacheImpl


def kernel_cache_dir() -> Path:
    """Where compiled kernels are kept: NUMBA_CACHE_DIR, else the user cache folder."""
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR)
    return user_cache_dir() / "kernels"


CACHE_DIR = kernel_cache_dir()
# Why kernels are not cached on disk in this process (None when they are).
CACHE_PROBLEM = writable_dir(CACHE_DIR)
# Kernel cache folders already made and found writable by this process.
_READY_FOLDERS: set[str] = set()


class _Locator(_LocatorBase):
    """numba's "user-provided folder" locator, pointed at reportgen's folder
    (source-file stamps and per-file subfolders as numba's own)."""

    def __init__(self, py_func, py_file):  # numba's own reads config.CACHE_DIR, which may be unset
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(str(CACHE_DIR), self.get_suitable_cache_subpath(py_file))

    def ensure_cache_path(self):
        # numba makes the folder and writes a temporary file into it for every kernel, as its module
        # is imported (65 kernels, in every process a build starts); the kernels of one source file
        # share a folder, so it is checked once per folder and process.
        if self._cache_path not in _READY_FOLDERS:
            super().ensure_cache_path()
            _READY_FOLDERS.add(self._cache_path)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.exists(py_file):
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:
            return None
        return locator


class _CacheImpl(_ImplBase):
    _locator_classes = [_Locator]


class _KernelCache(caching.FunctionCache):
    _impl_class = _CacheImpl


def kernel(**options) -> Callable:
    """`numba.njit(**options)`, cached in reportgen's kernel folder when it is writable."""

    def decorate(func):
        dispatcher = njit(**options)(func)
        if CACHE_PROBLEM is None:
            dispatcher._cache = _KernelCache(func)
        return dispatcher

    return decorate


def is_cached(dispatcher) -> bool:
    """Whether the kernel cache holds compiled code of `dispatcher` for its current source."""
    cache = getattr(dispatcher, "_cache", None)
    try:
        return bool(cache._cache_file._load_index())
    except Exception:  # no disk cache (in-memory compile), or a numba without these internals
        return False


# The kernels every XSpace build needs, by module, each named by the entry point
# whose presence in the cache says that the module was compiled here.
BUILD_KERNELS = {
    "reportgen.loaders.wire": "_fill_pass",
    "reportgen.core.events.nesting": "_line_parents",
    "reportgen.export.json_kernel": "write_events",
}
# Those compiled ahead in a child process on a machine's first build: module →
# its function that compiles them for the argument types a build passes.
PRECOMPILED = {"reportgen.export.json_kernel": "precompile"}
PRECOMPILE_LOCK = ".precompiling.lock"
_waited = False


def cold_modules(modules=tuple(BUILD_KERNELS)) -> list[str]:
    """Those of `modules` whose kernels are not compiled on this machine yet."""
    return [name for name in modules
            if not is_cached(getattr(importlib.import_module(name), BUILD_KERNELS[name]))]


def start_precompile() -> subprocess.Popen | None:
    """Compile the ahead-compiled kernels in a child process when they are not cached yet.

    The child inherits an exclusive lock on the cache folder's lock file and
    holds it until it is done; returns None when there is nothing to do.
    """
    if CACHE_PROBLEM is not None or fcntl is None or not cold_modules(tuple(PRECOMPILED)):
        return None
    lock = os.open(CACHE_DIR / PRECOMPILE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another build compiles them already: wait_for_precompile waits for it
            return None
        # The child imports this very package, wherever it was imported from.
        here = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
        return subprocess.Popen(
            [sys.executable, "-c", "from reportgen.kernels import precompile; precompile()"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(lock,), env={**os.environ, "PYTHONPATH": path},
        )
    finally:
        os.close(lock)  # the child's copy keeps the lock until it exits


def wait_for_precompile() -> None:
    """Wait (once per process) until no process compiles kernels ahead for this cache folder, unless
    this process's ahead-compiled kernels are in the cache already (another reportgen sharing the
    folder may be compiling its own)."""
    global _waited
    if _waited or CACHE_PROBLEM is not None or fcntl is None:
        return
    _waited = True
    if not cold_modules(tuple(PRECOMPILED)):
        return
    try:
        lock = os.open(CACHE_DIR / PRECOMPILE_LOCK, os.O_RDONLY)
    except OSError:  # never created: nothing was ever compiled ahead here
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
    finally:
        os.close(lock)


def precompile() -> None:
    """Compile every ahead-compiled kernel that is not cached yet (run in the child process)."""
    for name in cold_modules(tuple(PRECOMPILED)):
        getattr(importlib.import_module(name), PRECOMPILED[name])()


__all__ = ["BUILD_KERNELS", "CACHE_DIR", "CACHE_PROBLEM", "cold_modules", "is_cached", "kernel", "kernel_cache_dir",
           "precompile", "start_precompile", "wait_for_precompile"]

