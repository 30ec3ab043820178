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

The first build on a machine compiles the kernels it needs (about nineteen seconds
of CPU on this project's 2-core reference machine). While the building process
imports the rest of reportgen, compiles the decoder and decodes the first host,
`start_precompile` compiles the others ahead in a child process, for the argument
types their modules declare, one group of `PRECOMPILED` after the other: the
analyses' kernels (needed once the first host is decoded), then the trace JSON
writer (the largest, needed last); with more than two cores each group has a
child of its own. `wait_for_precompile(group)`, called before a group's first
use in any process, waits for that group through a lock on a file of the cache
folder instead of compiling the same kernels a second time.

What a first compile costs is numba's, per function and per argument type: the
kernels allocate nothing themselves (each `np.zeros` / `np.empty` / `np.full`
dtype and shape in a kernel is compiled anew, 0.1–0.5 s each) and call their
helpers with one argument type each.
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
from numba.core import caching, config, types

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
    "reportgen.export.timeline_kernel": "_nesting_depth",
    "reportgen.export.json_kernel": "write_events",
}
# Those compiled ahead on a machine's first build, in the order needed (`start_precompile`): group →
# its modules, each with a `precompile()` that compiles its kernels for the argument types a build
# passes. The decoder is not among them: it is the first thing a build needs.
PRECOMPILED = {
    "analysis": ("reportgen.core.events.nesting", "reportgen.export.timeline_kernel"),
    "trace-writer": ("reportgen.export.json_kernel",),
}
_waited: set[str] = set()
# The children this process started to compile ahead (`start_precompile`).
_STARTED: list[subprocess.Popen] = []


def array_type(dtype, readonly: bool = False) -> types.Array:
    """numba's type of a one-dimensional C-contiguous array of `dtype` (a numba scalar type), for the
    signatures a module's `precompile` compiles; `readonly` for views of the decoder's bytes."""
    return types.Array(dtype, 1, "C", readonly=readonly)


def _lock_path(group: str) -> Path:
    return CACHE_DIR / f".precompiling-{group}.lock"


def cold_modules(modules=tuple(BUILD_KERNELS)) -> list[str]:
    """Those of `modules` whose kernels are not compiled on this machine yet."""
    return [name for name in modules
            if not is_cached(getattr(importlib.import_module(name), BUILD_KERNELS[name]))]


def groups_for(trace_format: str) -> tuple[str, ...]:
    """The groups of `PRECOMPILED` that a build writing `trace_format` timelines uses."""
    return tuple(group for group in PRECOMPILED if group != "trace-writer" or trace_format in ("json", "both"))


def start_precompile(groups=tuple(PRECOMPILED)) -> list[subprocess.Popen]:
    """Compile those of `groups` whose kernels are not cached yet, ahead, in child processes.

    Each group's lock file in the cache folder is held locked by the child that compiles the group until
    the group is done; a group that another build compiles already (its lock taken) is left to it. With
    more than two cores each group has a child of its own. With two or fewer, one child compiles them in
    the order given while this process compiles the decoder on the other core: a second child would
    only share the first one's core and import numba and reportgen once more (≈ 1.3 s of a first
    build's CPU), and the analyses' kernels, needed first, would be ready later.
    """
    children: list[subprocess.Popen] = []
    if CACHE_PROBLEM is not None or fcntl is None:
        return children
    taken: list[tuple[str, int]] = []
    for group in groups:
        if not cold_modules(PRECOMPILED[group]):
            continue
        lock = os.open(_lock_path(group), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another build compiles them already: wait_for_precompile waits for it
            os.close(lock)
            continue
        taken.append((group, lock))
    # The children import this very package, wherever it was imported from.
    here = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    per_child = len(taken) if _cores() <= 2 else 1
    try:
        for first in range(0, len(taken), per_child or 1):
            batch = taken[first:first + per_child]
            children.append(subprocess.Popen(
                [sys.executable, "-c", "import sys; from reportgen.kernels import precompile_locked; "
                 "precompile_locked(sys.argv[1:])", *(str(part) for pair in batch for part in pair)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=tuple(lock for _, lock in batch), env={**os.environ, "PYTHONPATH": path},
            ))
    finally:
        for _, lock in taken:
            os.close(lock)  # the child's copy keeps the lock until the child releases it
    _STARTED.extend(children)
    return children


def started_children() -> list[subprocess.Popen]:
    """Every child this process started to compile kernels ahead (done or not)."""
    return list(_STARTED)


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def wait_for_precompile(group: str) -> None:
    """Wait (once per process and group) until no process compiles `group` ahead for this cache
    folder, unless its kernels are in the cache already."""
    if group in _waited or CACHE_PROBLEM is not None or fcntl is None:
        return
    _waited.add(group)
    if not cold_modules(PRECOMPILED[group]):
        return
    try:
        lock = os.open(_lock_path(group), os.O_RDONLY)
    except OSError:  # never created: nothing was ever compiled ahead here
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
    finally:
        os.close(lock)


def precompile(group: str) -> None:
    """Compile the kernels of `group` that are not cached yet (run in the child process)."""
    for name in cold_modules(PRECOMPILED[group]):
        importlib.import_module(name).precompile()


def precompile_locked(groups_and_locks: list[str]) -> None:
    """In a child of `start_precompile`: compile each group of `(group, lock descriptor)` pairs in turn,
    releasing a group's lock as soon as its kernels are cached (a build waiting for it goes on then)."""
    for group, lock in zip(groups_and_locks[::2], groups_and_locks[1::2], strict=True):
        precompile(group)
        os.close(int(lock))


__all__ = ["BUILD_KERNELS", "CACHE_DIR", "CACHE_PROBLEM", "PRECOMPILED", "array_type", "cold_modules", "is_cached",
           "groups_for", "kernel", "kernel_cache_dir", "precompile", "precompile_locked", "start_precompile",
           "started_children", "wait_for_precompile"]
