"""The per-host stage: read one host file, decode it and its HLO modules, run every section's `host_part`.

This is the unit of work that runs in a worker process or on a Dask worker.
Its result, `HostOutcome`, is what travels back: the host's summary, each
section's small per-host part, the stage timings, and the list of files the
sections wrote into the host's own output folder (see
`reportgen/core/host.py`). The decoded capture never leaves the worker.
Hosts of older profilers go through `reportgen.legacy.host_stage` instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import mmap
import os
import shutil
import tempfile
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from reportgen import __version__
from reportgen.capture import HostCapture
from reportgen.core.host import HostContext
from reportgen.errors import CaptureError
from reportgen.kernels import ensure_compiled
from reportgen.legacy.host_stage import process_legacy_host
from reportgen.loaders import limits
from reportgen.loaders.hlo import hlo_modules
from reportgen.loaders.logdir import FileChangedError, HostFile, file_name, read_host_file
from reportgen.loaders.xspace import decode_xspace
from reportgen.pipeline import result
from reportgen.pipeline.memory import default_budget
from reportgen.pipeline.stopping import stop_point, stops_held
from reportgen.pipeline.timings import peak_rss_bytes
from reportgen.sections.base import HostSummary
from reportgen.sections.registry import SECTIONS

CONTENT_HASH = "sha256"


@dataclass(frozen=True)
class HostTask:
    """One host file of one run, as the build names it."""

    index: int  # position in the build's host order: outputs are merged in this order
    run: str  # the run's name in the site (unique across logdirs)
    host: HostFile
    trace_format: str = "json"  # trace export: "json", "perfetto" or "both"
    memory_budget: int | None = None  # bytes this host's stage may use (loaders/limits.py); None: no limit

    @property
    def shown_path(self) -> str:
        """How the host file is named in the site: `<run>/<file name>`.

        The site is published and shared; the build machine's folders are not
        part of it.
        """
        return f"{self.run}/{file_name(self.host.path)}"


@dataclass
class HostOutcome:
    run: str
    host: str
    path: str  # shown path, `<run>/<file name>`
    summary: HostSummary | None = None
    parts: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # as the site shows it: paths relative to the logdir
    local_error: str | None = None  # for the terminal: the path as the user gave it
    # Files of an older profiler's host that could not be read while its other
    # files built (or, when the host failed, beyond the one `error` names):
    # {"path", "message", "local_message"}, as `error` and `local_error` name theirs.
    file_errors: list[dict] = field(default_factory=list)
    # Files the sections wrote, relative to the site root, sorted.
    files: list[str] = field(default_factory=list)
    # Stage seconds on the worker (`host.read`, `host.decode`, `host.<slug>`, …).
    timings: dict[str, float] = field(default_factory=dict)
    content_hash: str | None = None  # `sha256:<hex>` of the file's bytes, when asked for
    # Set by the Dask wrapper only: the files themselves, and the worker's code.
    payload: list[tuple[str, bytes]] | None = None
    code: str | None = None
    cached: bool = False  # filled from the rebuild cache, not computed in this build
    peak_rss: int = 0  # of the process that ran the stage, in bytes
    # The host's outputs could not be written (a full disk, a read-only folder): not the capture's fault, so
    # the build stops with it. (errno, reason, file) of the OSError.
    write_error: tuple[int, str, str] | None = None

    def __reduce__(self) -> tuple:
        # To a worker's parent or from a Dask worker as declared data (pipeline/result.py), never a pickle
        # of the parts' objects: the same bytes as the rebuild cache keeps.
        return outcome_from_bytes, (result.outcome_bytes(self),)


def outcome_from_bytes(data: bytes | memoryview) -> HostOutcome:
    """A host's result from its declared data (`ResultError` when the bytes are anything else)."""
    return result.outcome_from_bytes(data, HostOutcome)


PACKAGE = Path(__file__).resolve().parent.parent  # the reportgen package


def package_fingerprint(root: Path, patterns: tuple[str, ...]) -> str:
    """Hash of reportgen's version and of every file of the package matching `patterns`."""
    digest = hashlib.sha256(__version__.encode())
    files = sorted({path for pattern in patterns for path in root.rglob(pattern)})
    for path in files:
        if "__pycache__" in path.parts or not path.is_file():
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Every Python module of the package: what the per-host results depend on.

    Any change to the code invalidates cached host results, and a Dask worker
    running other code than the client is refused.
    """
    return package_fingerprint(PACKAGE, ("*.py",))


@lru_cache(maxsize=1)
def site_fingerprint() -> str:
    """The code plus the templates and static files: what a run's pages depend on."""
    return package_fingerprint(PACKAGE, ("*.py", "templates/*", "static/*"))


def summarize_host(ctx: HostContext, shown_path: str) -> HostSummary:
    capture = ctx.capture
    first, last = capture.time_span_ps()
    env = ctx.op_stats.environment
    return HostSummary(
        host=ctx.host,
        path=shown_path,
        size_bytes=capture.size_bytes,
        planes=len(capture.planes),
        lines=len(capture.lines),
        events=capture.event_count,
        duration_ps=last - first,
        device_type=env.device_type,
        device_core_count=env.device_core_count,
    )


def _without_local_paths(message: str, host: HostFile, shown: str) -> str:
    run_dir = host.path.rstrip("/").rsplit("/", 1)[0]
    return message.replace(host.path, shown).replace(run_dir, shown.rsplit("/", 1)[0])


def _file_error(exc: CaptureError, host: HostFile, shown: str) -> dict:
    """One bad file of an older profiler's host, named as the site and the terminal name it."""
    local = f"{exc.path}: {exc.problem}"
    return {"path": f"{shown.rsplit('/', 1)[0]}/{file_name(exc.path)}",
            "message": _without_local_paths(local, host, shown), "local_message": local}


class _BackgroundHash:
    """sha256 of the file's bytes on a second thread while the decoder runs.

    hashlib releases the GIL on large buffers, so on a multi-core machine the
    hash of a cold file costs (almost) no wall time. A mapped file is hashed
    piece by piece, each piece's pages handed back once hashed (as the
    decoder does with its own).
    """

    PIECE = 64 * 2**20

    def __init__(self, data: bytes | mmap.mmap):
        self._digest = hashlib.new(CONTENT_HASH)
        self._thread = threading.Thread(target=self._hash, args=(data,), daemon=True)
        self._thread.start()

    def _hash(self, data: bytes | mmap.mmap) -> None:
        if not isinstance(data, mmap.mmap):
            self._digest.update(data)
            return
        with memoryview(data) as view:
            for start in range(0, len(data), self.PIECE):
                self._digest.update(view[start : start + self.PIECE])
                end = min(start + self.PIECE, len(data))
                if hasattr(mmap, "MADV_DONTNEED") and end - start >= mmap.PAGESIZE:
                    data.madvise(mmap.MADV_DONTNEED, start, end - start - (end - start) % mmap.PAGESIZE)

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> str:
        self._thread.join()
        return f"{CONTENT_HASH}:{self._digest.hexdigest()}"


def _close(data: bytes | mmap.mmap) -> None:
    """Unmap a mapped host file now (not when the garbage collector gets to it)."""
    if isinstance(data, mmap.mmap):
        try:
            data.close()
        except BufferError:  # a view of it is still alive: it is unmapped when that goes
            pass


class _CaptureOnly:
    """The sections whose `host_part` reads the capture alone (`Section.reads_capture_only`: the
    trace export, but on TPU hosts), run one after the other on a thread from the start of the host's
    analyses.

    The export's compiled JSON writer and its deflate release the GIL, so on a second core they
    overlap the core and the other sections (≈ 40% of a large host's stage). The building thread
    runs every other section first, the ones after these included, then takes each part in section
    order (`result`), so the outcome, its errors included, is the one the sections give in sequence;
    `close` waits for the thread, so nothing is written after the stage returns. Their own time is
    kept as `host.<slug>`, the wait for them as `host.<slug> (waited for)`.

    Only a capture of `MIN_EVENTS` events or more gets the thread: below that there is little
    GIL-free work to overlap, and two threads taking the GIL in turn cost more than they save. Measured
    here (2 vCPUs, one host's stage alone, best of 3–5): the shared GPU host (23,000 events) 0.40–0.44 s
    in sequence against 0.53–0.70 s with the thread; tiled ×3 (69,000) 0.48 / 0.50–0.52 s; ×10
    (231,000) 0.83–0.92 s either way but 17–30 % more CPU with the thread; ×50 (1.16 M) 4.0–4.4 s in
    sequence against 3.3–4.0 s with it. A tiny host's stage takes 36 ms of CPU with the thread and
    30 ms without, which is most of a pod's build.
    """

    MIN_EVENTS = 500_000

    # A build stopped by a signal waits this long for the thread before it goes on unwinding.
    STOPPED_WAIT_S = 5.0

    def __init__(self, ctx: HostContext, timings: dict[str, float]):
        large = len(ctx.capture.events) >= self.MIN_EVENTS
        self._sections = [s for s in SECTIONS if s.reads_capture_only(ctx)] if large else []
        self._futures: dict[str, Future] = {s.slug: Future() for s in self._sections}
        self._stopping = False
        # A daemon thread, not an executor's (those are joined at exit): see `close`.
        self._thread = None
        if self._sections:
            self._thread = threading.Thread(target=self._run_all, args=(ctx, timings), daemon=True,
                                            name="reportgen-capture-only")
            self._thread.start()

    def _run_all(self, ctx: HostContext, timings: dict[str, float]) -> None:
        for section in self._sections:
            future = self._futures[section.slug]
            if self._stopping or not future.set_running_or_notify_cancel():
                continue
            started = time.perf_counter()
            try:
                future.set_result(section.host_part(ctx))
            except BaseException as exc:  # handed to the stage with the part, as the sections in sequence
                future.set_exception(exc)
            finally:
                timings[f"host.{section.slug}"] = time.perf_counter() - started

    def __contains__(self, slug: str) -> bool:
        return slug in self._futures

    def result(self, slug: str):
        return self._futures[slug].result()

    def close(self, stopped: bool = False) -> None:
        """Wait for the thread. A build stopped by a signal (`stopped`) waits a few seconds only: the
        signal's exception may have left the main thread holding a lock of the compiled code's runtime
        (numba's LLVM lock, taken while a kernel loads) that the thread waits for, and the process is
        ending anyway (the thread is a daemon: it does not hold the exit)."""
        self._stopping = True
        for future in self._futures.values():
            future.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self.STOPPED_WAIT_S if stopped else None)


def list_files(root: str) -> list[str]:
    """Files under `root`, relative to it with `/`, sorted."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        for name in sorted(names):
            found.append(name if rel == "." else f"{Path(rel).as_posix()}/{name}")
    return found


def plain_pages() -> None:
    """Stop numpy from asking for transparent huge pages for its large arrays (this process).

    numpy marks every array of 4 MiB or more for huge pages (`madvise`); where the kernel honours
    that with synchronous compaction (Linux's default `defrag` setting, `madvise`), each fresh array
    can stall on it. The build allocates many such arrays per host: measured on the ×200 benchmark
    capture (2 vCPUs), the core's analyses took 2.8 s of CPU (1.9 s of it in the kernel) with huge
    pages and 1.9 s without; the whole host stage 11.3 s and 9.7 s. Nothing else changes.
    """
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return
    _set_madvise_hugepage(False)


def host_context(run: str, capture: HostCapture, out_dir: str, trace_format: str = "json") -> HostContext:
    """What the sections see of a decoded host: the capture and its HLO modules, parsed once here."""
    return HostContext(run=run, host=capture.host, capture=capture, site_dir=out_dir,
                       hlo_modules=hlo_modules(capture), trace_format=trace_format)


def process_host(task: HostTask, out_dir: str, hash_content: bool = False) -> HostOutcome:
    """Decode one host file and run every section's per-host stage.

    Files the sections write go under `out_dir` (the host's own output
    folder, laid out like the site). Errors are returned in the outcome,
    never raised: one bad host must not take the others down. Every read
    and decode keeps to the task's memory budget.
    """
    plain_pages()
    with limits.memory_budget(task.memory_budget):
        return _process_host(task, out_dir, hash_content)


class _Clock:
    """The stage's timings: each `lap` adds the seconds since the last one to its stage."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
        self.last = now


def _process_host(task: HostTask, out_dir: str, hash_content: bool) -> HostOutcome:
    host = task.host
    shown = task.shown_path
    outcome = HostOutcome(run=task.run, host=host.host, path=shown)
    clock = _Clock(outcome.timings)
    try:
        if host.legacy:
            return _legacy_host(task, out_dir, outcome, clock)
        capture = _decode(task, outcome, clock, hash_content)
        # On a machine's first build the analyses' kernels may compile in a child process meanwhile.
        ensure_compiled("analysis")
        _run_sections(host_context(task.run, capture, out_dir, task.trace_format), outcome, clock)
    except OSError as exc:  # reading the capture raises CaptureError: this is writing the host's outputs
        outcome.write_error = (exc.errno or 0, exc.strerror or str(exc), str(exc.filename or ""))
        return outcome
    except CaptureError as exc:
        # An older profiler's host has several files: the error names the one at fault.
        bad = exc.path if host.legacy and exc.path in host.legacy else host.path
        outcome.local_error = f"{bad}: {exc.problem}"
        if bad != host.path:
            outcome.path = f"{task.run}/{file_name(bad)}"
    except Exception as exc:  # a bug must not take the other hosts down with it
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        outcome.local_error = f"{host.path}: internal error while processing this host: {detail}"
    if outcome.local_error is not None:
        outcome.error = _without_local_paths(outcome.local_error, host, shown)
    if outcome.error is None and os.path.isdir(out_dir):
        outcome.files = list_files(out_dir)
    outcome.peak_rss = peak_rss_bytes()
    return outcome


def _legacy_host(task: HostTask, out_dir: str, outcome: HostOutcome, clock: _Clock) -> HostOutcome:
    """Per-tool files of older profilers: no XSpace to decode; their timeline files are exported into the
    host's output folder."""
    host, shown = task.host, task.shown_path
    summary, parts, bad = process_legacy_host(host, shown, task.run, out_dir, task.trace_format)
    clock.lap("host.legacy")
    if len(bad) == len(host.legacy):  # not one of its files could be read: the host failed
        outcome.file_errors = [_file_error(e, host, shown) for e in bad[1:]]
        raise bad[0]
    outcome.summary, outcome.parts = summary, parts
    outcome.file_errors = [_file_error(e, host, shown) for e in bad]
    if os.path.isdir(out_dir):
        outcome.files = list_files(out_dir)
    outcome.peak_rss = peak_rss_bytes()
    return outcome


def _decode(task: HostTask, outcome: HostOutcome, clock: _Clock, hash_content: bool) -> HostCapture:
    """Read the host file within the task's budget and decode it, hashing its bytes meanwhile when asked to;
    what was decoded must be the file that was found, whole."""
    host = task.host
    try:
        data, snapshot = read_host_file(host.path, read=lambda path: limits.read_input(path, host.size or None),
                                        expected_size=host.size if host.size else None,
                                        expected_inode=host.inode)
    except FileChangedError as exc:
        raise CaptureError(host.path, str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise CaptureError(host.path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from exc
    clock.lap("host.read")
    hashing = None
    try:
        hashing = _BackgroundHash(data) if hash_content else None
        capture = decode_xspace(host.path, data, host=host.host)
        if snapshot is not None:
            try:
                snapshot.check()
            except FileChangedError as exc:
                raise CaptureError(host.path, str(exc)) from exc
        if len(capture.planes) == 0:
            raise CaptureError(host.path, "holds no planes (not an XSpace capture?)")
        clock.lap("host.decode")
        if hashing is not None:
            outcome.content_hash = hashing.result()
            clock.lap("host.hash (beyond decode)")
    finally:
        if hashing is not None:
            hashing.wait()
        _close(data)
    return capture


def _run_sections(ctx: HostContext, outcome: HostOutcome, clock: _Clock) -> None:
    """The shared analyses, the host's summary, then every section's part, in section order (those that read
    the capture alone on a thread beside the others, `_CaptureOnly`). A stop signal waits for the end of a
    section (see pipeline/stopping.py)."""
    with stops_held():
        beside = _CaptureOnly(ctx, clock.timings)
        try:
            # The shared core (HLO modules, event table, step grouping, OpStats) that every tool reads: timed
            # on its own so that it does not hide in the first section to ask for it.
            ctx.op_stats  # noqa: B018
            ctx.forget_stat_columns()
            clock.lap("host.core")
            stop_point()
            outcome.summary = summarize_host(ctx, outcome.path)
            clock.lap("host.summary")
            done = _parts_here(ctx, beside, clock)
            # The sections on the thread are waited for last: the main thread ran the ones after them meanwhile
            # (the findings, behind the trace export). An error is raised as in sequence: the first section's
            # in section order.
            for section in SECTIONS:
                if section.slug in beside:
                    part = beside.result(section.slug)
                    clock.lap(f"host.{section.slug} (waited for)")
                else:  # every section before the first error ran (`done`), and that error is raised
                    part, error = done[section.slug]
                    if error is not None:
                        raise error
                if part is not None:
                    outcome.parts[section.slug] = part
        except BaseException as exc:
            beside.close(stopped=not isinstance(exc, Exception))
            raise
        beside.close()


def _parts_here(ctx: HostContext, beside: _CaptureOnly, clock: _Clock) -> dict[str, tuple[object, Exception | None]]:
    """The parts of the sections not on the thread, in section order, up to the first that raises."""
    done: dict[str, tuple[object, Exception | None]] = {}
    for section in SECTIONS:
        if section.slug in beside:
            continue
        stop_point()
        try:
            done[section.slug] = (section.host_part(ctx), None)
        except Exception as exc:
            done[section.slug] = (None, exc)
            break  # no later section's part is wanted: this error or an earlier one is raised
        finally:
            ctx.forget_stat_columns()
            clock.lap(f"host.{section.slug}")
    return done


def process_host_remote(task: HostTask, hash_content: bool = False) -> HostOutcome:
    """The host stage on a Dask worker: outputs travel back as bytes with the result.

    The worker reads the host file from its URL itself; its output folder is
    worker-local scratch space, removed before returning.
    """
    if task.memory_budget is None:  # this worker's own share of its machine
        task = dataclasses.replace(task, memory_budget=default_budget(_dask_worker_threads()))
    scratch = tempfile.mkdtemp(prefix="reportgen-host-")
    try:
        outcome = process_host(task, scratch, hash_content)
        outcome.payload = [(rel, Path(scratch, rel).read_bytes()) for rel in outcome.files]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outcome.code = code_fingerprint()
    return outcome


def _dask_worker_threads() -> int:
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return os.cpu_count() or 1


def warm_up() -> None:
    """Load the compiled decoder (numba's on-disk cache) once, by decoding the bundled sample.

    Run in the process that forks the build's workers, so that each worker
    starts with the decoder ready instead of loading it again (≈ 1 s each).
    """
    from importlib import resources

    sample = resources.files("reportgen").joinpath("sample", "plugins", "profile", "tf_keras_fast", "vm.xplane.pb")
    try:
        data = sample.read_bytes()
    except OSError:
        return
    decode_xspace("warm-up", data, host="warm-up")
