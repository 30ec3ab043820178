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

The folder is created private to the user (numba's cache files are pickles), made private again when
it is the user's with looser permissions, and not used when another user owns it.
When it cannot be written, kernels are compiled in memory for the process (the
build still works, only the first-use cost is paid every time) and
`CACHE_PROBLEM` says why, for the command line to print once. Only reportgen's
kernels use this folder: other numba code in the same process keeps numba's
own settings.

The first build on a machine compiles the kernels it needs (12–16 seconds of CPU on
this project's 2-core reference machine). While the building process
imports the rest of reportgen and compiles the decoder's passes, `start_precompile`
compiles the others ahead in a child process, one group of `PRECOMPILED` after the
other, for the argument types their modules declare; with more than two cores each
group has a child of its own. `ensure_compiled(group)`, called before a group's
first use in any process, waits for the process that compiles that group (through
a lock on a file of the cache folder) instead of compiling the same kernels a
second time, or compiles the group itself when no process has started on it yet.

What a first compile costs is numba's, per function and per argument type: the
kernels allocate nothing themselves (each `np.zeros` / `np.empty` / `np.full`
dtype and shape in a kernel is compiled anew, 0.1–0.5 s each) and call their
helpers with one argument type each.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no ahead-of-time compile, kernels compile where used
    fcntl = None

from numba import njit
from numba.core import caching, config, event, types
from numba.core.runtime import rtsys

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

    def load_overload(self, sig, target_context):
        # numba's own first refreshes its compiler's registries (imports and installs every lowering numba
        # has: 0.45 s of each process's first kernel, a sixth of a small build). Machine code loaded from
        # the cache needs only numba's runtime (its symbols), and a compile refreshes the registries itself
        # before it starts.
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


def kernel(**options) -> Callable:
    """`numba.njit(**options)`, cached in reportgen's kernel folder when it is writable."""

    def decorate(func):
        dispatcher = njit(**options)(func)
        if CACHE_PROBLEM is None:
            dispatcher._cache = _KernelCache(func)
        return dispatcher

    return decorate


def helper_kernel(**options) -> Callable:
    """`kernel(**options)` for a function that only other kernels call: compiled without the wrappers that
    let Python (or C) call it, which cost a tenth to a third of a small function's first compile (the
    trace writer's thirteen helpers compiled in 4.0–5.2 s with them gone against 5.5–6.3 s). Calling
    such a kernel from Python fails."""
    return kernel(no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)


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
# Those compiled ahead on a machine's first build, in this order (`start_precompile` says why): group →
# its modules, each with a `precompile()` that compiles its kernels for the argument types a build
# passes. The decoder's passes are not among them: they are the first thing a build needs.
PRECOMPILED = {
    # The decoder's last two kernels: the building process compiles the passes that walk the file meanwhile.
    "decoder-tail": ("reportgen.loaders.wire",),
    "analysis": ("reportgen.core.events.nesting",),
    "trace-writer": ("reportgen.export.json_kernel",),
    # Last: the building process reaches the timeline export while the child still compiles the writer, and
    # compiles this one itself meanwhile (`ensure_compiled`), instead of waiting for the child to get to it.
    "timeline": ("reportgen.export.timeline_kernel",),
}
_waited: set[str] = set()
# The children this process started to compile ahead (`start_precompile`).
_STARTED: list[subprocess.Popen] = []


class _CompileClock(event.Listener):
    """When a first build's compiling started and (so far) ended: its children's exits and the end of the
    last compile in this process, which numba reports as `numba:compile` events (on any thread)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.ended: float | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.started is None:
            self.started = time.perf_counter()
            event.register("numba:compile", self)

    def on_start(self, ev) -> None:
        pass

    def on_end(self, ev) -> None:
        self.ended_now()

    def ended_now(self) -> None:
        with self._lock:
            self.ended = time.perf_counter()

    def watch(self, child: subprocess.Popen) -> None:
        def wait() -> None:
            child.wait()
            self.ended_now()

        threading.Thread(target=wait, name="reportgen-kernel-child", daemon=True).start()


_COMPILE_CLOCK = _CompileClock()


def cache_key() -> str:
    """A name for this machine's compiled kernels, for CI caches that keep `CACHE_DIR` between jobs: numba's
    machine code holds for one reportgen (its version, and its sources: a ref installed from git keeps its
    version), one numba version and one CPU (its name and features, which numba's cache index also checks).
    A cache restored under a key is not saved again, so the key must change whenever the kernels would."""
    import hashlib

    import llvmlite.binding as ll
    import numba

    from reportgen import __version__

    package = Path(__file__).resolve().parent
    sources = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        sources.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    features = hashlib.sha256(ll.get_host_cpu_features().flatten().encode()).hexdigest()[:12]
    return (f"reportgen-kernels-{__version__}-{sources.hexdigest()[:12]}-numba-{numba.__version__}-"
            f"{ll.get_host_cpu_name()}-{features}")


def compile_seconds() -> float | None:
    """Wall-clock seconds from the start of this process's first-build compiling (`start_precompile`) to its
    last compiled kernel, here or in a child, or None when it compiled nothing. Asked once the children have
    exited (`started_children`)."""
    clock = _COMPILE_CLOCK
    if clock.started is None or clock.ended is None:
        return None
    return max(0.0, clock.ended - clock.started)


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

    With more than two cores each group has a child of its own. With two or fewer, one child compiles
    them in the order given while this process compiles the decoder on the other core: a second child
    would only share the first one's core and import numba and reportgen once more (≈ 1.3 s of a first
    build's CPU). `PRECOMPILED` is in the order a build needs the groups: the decoder's tail, the
    analyses, the trace writer (measured with bench/first_run.py on 2 cores, 3 rounds: a first build
    12.97 s with this order against 15.86 s with the writer before the analyses, which the building
    process then compiled itself), then the timeline's kernel, which the building process compiles
    while the child compiles the writer. A group that no process has started on by the time a build
    needs it, the build compiles itself (`ensure_compiled`), and the child skips it.
    """
    children: list[subprocess.Popen] = []
    if CACHE_PROBLEM is not None or fcntl is None or _STARTED:  # once per process (cli/build.py, build_site)
        return children
    if cold_modules():  # the build compiles the decoder itself: its time counts from here too
        _COMPILE_CLOCK.start()
    cold = [group for group in groups if cold_modules(PRECOMPILED[group])]
    # The children import this very package, wherever it was imported from: they search this process's
    # module path, this package's folder first. `python -c` alone would put the current folder first, and
    # run from a clone's root (the README's quick start) a child imported the clone's sources instead of
    # the installed package, whose kernels it then compiled into cache entries of those other files: the
    # build compiled every kernel again itself (a first build 15-18 s instead of 8-10 s, 8 s more CPU).
    here = str(Path(__file__).resolve().parent.parent)
    module_path = json.dumps([here, *(entry for entry in sys.path if isinstance(entry, str))])  # importers skip others
    per_child = max(len(cold), 1) if _cores() <= 2 else 1
    for first in range(0, len(cold), per_child):
        children.append(subprocess.Popen(
            [sys.executable, "-c", _CHILD, module_path, *cold[first:first + per_child]],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
    _STARTED.extend(children)
    for child in children:
        _COMPILE_CLOCK.start()
        _COMPILE_CLOCK.watch(child)
    return children


# What a child of `start_precompile` runs: argv[1] is the module path (JSON), the rest the groups.
_CHILD = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
          "from reportgen.kernels import precompile_groups; precompile_groups(sys.argv[2:])")


def started_children() -> list[subprocess.Popen]:
    """Every child this process started to compile kernels ahead (done or not)."""
    return list(_STARTED)


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _take_lock(group: str) -> int | None:
    """The group's lock file, locked exclusively by this process, or None when another process holds it."""
    lock = os.open(_lock_path(group), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return None
    return lock


def ensure_compiled(group: str) -> None:
    """Before a group's first use in this process (checked once per process and group): when its kernels
    are not cached yet, wait for the process that compiles them for this cache folder, or, when none
    does, compile them here (holding the group's lock, so that a child that gets to it later skips it)."""
    if group in _waited or CACHE_PROBLEM is not None or fcntl is None:
        return
    _waited.add(group)
    if not cold_modules(PRECOMPILED[group]):
        return
    lock = _take_lock(group)
    if lock is None:  # being compiled elsewhere: a shared lock waits for its end
        lock = os.open(_lock_path(group), os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH)
        finally:
            os.close(lock)
        return
    try:
        precompile(group)
    finally:
        os.close(lock)


def precompile(group: str) -> None:
    """Compile the kernels of `group` that are not cached yet."""
    for name in cold_modules(PRECOMPILED[group]):
        importlib.import_module(name).precompile()


def precompile_groups(groups: list[str]) -> None:
    """In a child of `start_precompile`: compile each of `groups` in turn, holding its lock meanwhile; a
    group whose lock another process holds (a build compiling it itself, another first build) is skipped."""
    for group in groups:
        lock = _take_lock(group)
        if lock is None:
            continue
        try:
            precompile(group)
        finally:
            os.close(lock)


__all__ = ["BUILD_KERNELS", "CACHE_DIR", "CACHE_PROBLEM", "PRECOMPILED", "array_type", "cold_modules", "is_cached",
           "cache_key", "compile_seconds", "ensure_compiled", "groups_for", "helper_kernel", "kernel",
           "kernel_cache_dir", "precompile", "precompile_groups", "start_precompile", "started_children"]
