"""Where the per-host stage runs: one `Executor` interface, with three behind it.

`Serial` (this process), `ProcessPool` (worker processes beside this one) and `DaskCluster` (the workers of
a Dask scheduler); `choose_executor` picks one for a build's work. Each takes the same work list,
`(task, out_dir, hash_content)` per host, calls `started(task)` as a host starts and `done(task, outcome)`
as it finishes (in any order, always on the calling thread), and leaves the host's output files in
`out_dir`. The build then merges in task order, so the site does not depend on the executor or on timing.

On Dask, a worker lost mid-build hands its hosts to the others (the scheduler reschedules them); when none
is left for `NO_WORKERS_TIMEOUT_S`, the build fails naming the hosts not built, instead of waiting for
workers that may never come.

Worker processes are started with the `forkserver` method: a fresh
interpreter imports reportgen and warms the compiled decoder once
(`reportgen.pipeline.preload`), and each worker is forked from it. Plain
`fork` would copy the building process with its threads (asset bundling
runs in the background, fsspec keeps an I/O thread) and their locks;
`spawn` would import reportgen and load the decoder again in every worker.
Measured here (2 vCPUs): a pool's first task after ≈ 0.04 s with fork,
≈ 1.3–2.6 s with the fork server (once per build), ≈ 6 s with spawn; later
tasks ≈ 1 ms. Only per-host results travel back, as their declared data
(`result.py`, through `HostOutcome.__reduce__`: 0.1–4.4 MB for the shared captures' hosts).

With `--jobs N` the building process is one of the N: it starts on a host
at once, while the N - 1 workers start (on a thread of their own: the first
`submit` blocks until the fork server has imported reportgen), and takes the
next host whenever they are all busy, so the start-up costs no idle core. A worker is handed
its first host only once it has started (a no-op task comes back from it):
until then the hosts go to the building process, so a host never waits for
a worker that is still starting. Starting the workers costs ≈ 1.5–2 s of CPU
(an interpreter importing reportgen and loading the kernels), about the work
of 50 MB of host files. Each host also costs a fixed ≈ 30–40 ms whatever its
size (its analyses' frames, its pages' files): about the work of 1 MB, so a
host weighs its size plus `HOST_FIXED_BYTES`. A build whose hosts weigh less
than `PARALLEL_MIN_BYTES` together runs them in this process (`worth_a_pool`):
the bundled sample's two hosts do, a pod's run of a thousand tiny hosts does
not (measured: 1,000 hosts of 300 bytes, 47 s in this process, 32 s with a
worker beside it).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from reportgen.errors import SchedulerError
from reportgen.pipeline.host_stage import HostOutcome, HostTask, code_fingerprint, process_host, process_host_remote
from reportgen.pipeline.stopping import end_with

Work = list[tuple[HostTask, Path, bool]]
Done = Callable[[HostTask, HostOutcome], None]
# Called as a host's stage starts here or is handed to a worker (from any thread), for the progress bar.
Started = Callable[[HostTask], None]


def _nothing(_task: HostTask) -> None:
    pass


class Executor(Protocol):
    """Runs the host stage of every host of `work` (see the module notes)."""

    name: ClassVar[str]  # as `BuildReport.runner` says it

    def run(self, work: Work, done: Done, started: Started = _nothing) -> None: ...


@dataclass(frozen=True)
class Serial:
    """Every host in this process, one after the other."""

    name: ClassVar[str] = "serial"

    def run(self, work: Work, done: Done, started: Started = _nothing) -> None:
        run_serial(work, done, started)


@dataclass(frozen=True)
class ProcessPool:
    """`jobs - 1` worker processes and this one (`run_pool`)."""

    jobs: int
    name: ClassVar[str] = "processes"

    def run(self, work: Work, done: Done, started: Started = _nothing) -> None:
        run_pool(work, self.jobs, done, started)


@dataclass(frozen=True)
class DaskCluster:
    """Each host one task on the workers of the Dask scheduler at `scheduler` (`run_dask`)."""

    scheduler: str
    no_workers_timeout_s: float
    name: ClassVar[str] = "dask"

    def run(self, work: Work, done: Done, started: Started = _nothing) -> None:
        run_dask(work, self.scheduler, done, started, self.no_workers_timeout_s)


def choose_executor(work: Work, scheduler: str | None, jobs: int,
                    min_bytes: int = 0) -> Executor | None:
    """Where `work` runs: on Dask when given a scheduler, in a pool when it is worth one, else here;
    None when there is nothing to run (every host came from the cache)."""
    if not work:
        return None
    if scheduler:
        return DaskCluster(scheduler, NO_WORKERS_TIMEOUT_S)
    if jobs > 1 and worth_a_pool(work, min_bytes):
        return ProcessPool(jobs)
    return Serial()


PRELOAD = ["reportgen.pipeline.preload"]
CONNECT_TIMEOUT_S = 20
# Host-file bytes below which worker processes cost more than they save (see the module notes);
# gzipped files count as this many times their size.
PARALLEL_MIN_BYTES = 64 * 2**20
GZIP_EXPANSION = 8
HOST_FIXED_BYTES = 2**20
# Hosts that weigh at most this (files of 1 MiB or less: tens of ms of work) are handed to a worker two
# at a time (`_feed_pool`); a heavier host queued behind another could leave this process idle at the end.
PREFETCH_WEIGHT = 2 * HOST_FIXED_BYTES
# A Dask build whose cluster has had no worker for this long fails, naming the hosts it did not build: workers
# killed or gone, none coming back (a cluster scaling from zero starts one well within it).
NO_WORKERS_TIMEOUT_S = 60.0
# How often a Dask build with no host finished meanwhile asks the scheduler how many workers it has.
WORKERS_POLL_S = 1.0
# Hosts named by the message of a build that ran out of workers; the rest are counted.
NAMED_HOSTS = 10


def worth_a_pool(work: Work, min_bytes: int = PARALLEL_MIN_BYTES) -> bool:
    """Whether the hosts of `work` are enough work to start worker processes for."""
    if len(work) < 2:
        return False
    return sum(host_weight(task) for task, _, _ in work) >= min_bytes


def host_weight(task: HostTask) -> int:
    """A host's work in bytes of plain host file: its size (gzip counted expanded) plus the fixed cost."""
    return task.host.size * (GZIP_EXPANSION if task.host.path.endswith(".gz") else 1) + HOST_FIXED_BYTES


def _started() -> bool:
    """The no-op a new worker runs first: its result says that the worker is up."""
    return True


def _failed(task: HostTask, where: str, exc: BaseException) -> HostOutcome:
    problem = f"the host stage failed {where} ({type(exc).__name__}: {exc})"
    return HostOutcome(
        run=task.run, host=task.host.host, path=task.shown_path,
        error=f"{task.shown_path}: {problem}", local_error=f"{task.host.path}: {problem}",
    )


def run_serial(work: Work, done: Done, started: Started = _nothing) -> None:
    for task, out_dir, hash_content in work:
        started(task)
        done(task, process_host(task, str(out_dir), hash_content))


# After a build killed outright (SIGKILL) or ended by a signal it does not handle, multiprocessing's resource
# tracker removes the pool's semaphores, as it should, and warns of each as "leaked" on the build's stderr
# once the build is gone. The tracker is a process of its own started with this process's warning options.
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def pool_context() -> multiprocessing.context.BaseContext:
    if QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_TRACKER)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def run_pool(work: Work, jobs: int, done: Done, started: Started = _nothing) -> None:
    """`jobs - 1` worker processes and this one; `done` is always called on this thread.

    Each worker ends with this process, however it ends (`stopping.end_with`); a build stopped or failing
    here ends its workers at once instead of waiting for their current hosts.
    """
    workers = min(jobs, len(work)) - 1
    if workers < 1:
        run_serial(work, done, started)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(), initializer=end_with,
                               initargs=(os.getpid(),))
    try:
        _feed_pool(pool, workers, work, done, started)
    except BaseException:
        _end_workers(pool)
        raise
    # Every host is done: a worker still starting (its no-op pending) is not waited for.
    pool.shutdown(wait=False, cancel_futures=True)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    # The executor keeps its processes by pid; it has no public way to end them before Python 3.14.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)


class _Handout:
    """The hosts not taken yet, shared by the building process and its pool's thread.

    A started worker keeps one host queued behind the one it works on while the hosts are light
    (`PREFETCH_WEIGHT`): its next host is handed over by the building process's pool thread, which
    waits for the GIL while the building process works on a host of its own. Measured with 1,000 tiny
    hosts and one worker: handed one at a time, the worker sat idle ≈ 9 ms after each host, a third
    of its time.
    """

    def __init__(self, work: Work) -> None:
        self.waiting = deque(work)
        self.lock = threading.Lock()
        self.started = 0  # workers up (their no-op came back)
        self.in_flight = 0  # hosts handed to the workers and not back yet

    def for_this_process(self) -> tuple[HostTask, Path, bool] | None:
        with self.lock:
            return self.waiting.popleft() if self.waiting else None

    def for_workers(self) -> tuple[HostTask, Path, bool] | None:
        """The next host for the workers, or None when none is left or each has enough queued."""
        with self.lock:
            if not self.waiting:
                return None
            depth = 2 if host_weight(self.waiting[0][0]) <= PREFETCH_WEIGHT else 1
            if self.in_flight >= self.started * depth:
                return None
            self.in_flight += 1
            return self.waiting.popleft()

    def worker_started(self) -> None:
        with self.lock:
            self.started += 1

    def back(self, _: Future | None = None) -> None:
        """A host handed to the workers is done (or could not be handed over)."""
        with self.lock:
            self.in_flight -= 1


def _feed_pool(pool: ProcessPoolExecutor, workers: int, work: Work, done: Done, started: Started) -> None:
    hosts = _Handout(work)
    finished: queue.Queue[tuple[HostTask, Future | BaseException]] = queue.Queue()

    def submit_next(_: Future | None = None) -> None:
        # Called as each worker starts and, as each worker finishes a host, on the pool's own thread.
        while (item := hosts.for_workers()) is not None:
            task, out_dir, hash_content = item
            started(task)
            try:
                future = pool.submit(process_host, task, str(out_dir), hash_content)
            except Exception as exc:  # the pool broke (a worker died), or it is shutting down
                hosts.back()
                finished.put((task, exc))
                return
            future.add_done_callback(lambda f, t=task: finished.put((t, f)))
            future.add_done_callback(hosts.back)
            future.add_done_callback(submit_next)

    def worker_started(ping: Future) -> None:
        # A worker that could not start takes no host: the building process keeps them all.
        if not ping.cancelled() and ping.exception() is None:
            hosts.worker_started()
            submit_next()

    def start_workers() -> None:
        # The first submit starts the fork server and waits until it has imported reportgen and
        # loaded the kernels (≈ 1.3–2.6 s): on this thread the building process would sit idle.
        for _ in range(workers):
            try:
                ping = pool.submit(_started)
            except Exception:  # the build ended (or failed) before its workers started
                return
            ping.add_done_callback(worker_started)

    threading.Thread(target=start_workers, name="reportgen-start-workers", daemon=True).start()
    remaining = len(work)

    def report(task: HostTask, result: Future | BaseException) -> None:
        try:
            if isinstance(result, BaseException):
                raise result
            outcome = result.result()
        except Exception as exc:  # a worker that died (out of memory, killed)
            outcome = _failed(task, "in its worker process", exc)
        done(task, outcome)

    while remaining:
        while not finished.empty():
            report(*finished.get())
            remaining -= 1
        if not remaining:
            break
        item = hosts.for_this_process()
        if item is None:  # every host is taken: wait for the workers
            report(*finished.get())
            remaining -= 1
            continue
        task, out_dir, hash_content = item
        started(task)
        done(task, process_host(task, str(out_dir), hash_content))
        remaining -= 1


def check_scheduler_address(scheduler: str) -> None:
    """Refuse an address Dask cannot dial, before anything is built.

    Given one without a port or with a scheme Dask has no transport for, `Client` raises a ValueError
    half-way through starting, and the half-started client then spends 40 s timing out its own close
    at exit: the address is checked here with distributed's own parser instead."""
    try:
        from distributed.comm.addressing import get_address_host_port, parse_address
        from distributed.comm.registry import get_backend
    except ImportError as exc:
        raise SchedulerError("--scheduler needs Dask distributed: pip install 'reportgen[dask]'") from exc
    try:
        scheme, _location = parse_address(scheduler)
        get_backend(scheme)
        if scheme != "inproc":  # every network transport dials a host and a port
            _host, port = get_address_host_port(scheduler)
            if not 0 < port < 65536:
                raise ValueError(f"port {port} is out of range")
    except ValueError as exc:
        raise SchedulerError(f"--scheduler {scheduler}: not a Dask scheduler address ({exc}); "
                             "give tcp://HOST:PORT (a scheduler listens on port 8786 unless told otherwise)"
                             ) from None


def run_dask(work: Work, scheduler: str, done: Done, started: Started = _nothing,
             no_workers_timeout_s: float = NO_WORKERS_TIMEOUT_S) -> None:
    """Each host is one Dask task; the workers read the host files from their URLs."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise SchedulerError(
            "--scheduler needs Dask distributed: pip install 'reportgen[dask]'"
        ) from exc
    check_scheduler_address(scheduler)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
    expected = code_fingerprint()
    try:
        futures = {}
        build = uuid.uuid4().hex[:12]  # keys of this build only: another build may share the cluster
        for task, out_dir, hash_content in work:
            started(task)  # the cluster schedules them: each is under way once submitted
            future = client.submit(process_host_remote, task, hash_content, pure=False,
                                   key=f"reportgen-host-{build}-{task.index}")
            futures[future] = (task, out_dir)
        for future, outcome, exc in _as_finished(client, futures, scheduler, no_workers_timeout_s):
            task, out_dir = futures[future]
            if exc is not None:  # the worker died or could not run the task
                done(task, _failed(task, f"on the Dask cluster {scheduler}", exc))
                continue
            if outcome.code != expected:
                raise SchedulerError(
                    f"the Dask workers of {scheduler} run other reportgen code than this build "
                    "(install the same reportgen version on the client and the workers)"
                )
            _write_payload(outcome, out_dir)
            done(task, outcome)
    finally:
        client.close()


def _as_finished(client, futures: dict, scheduler: str, no_workers_timeout_s: float):
    """(future, its result, its error) as the futures finish; SchedulerError once the cluster has had no worker
    for the timeout.

    A worker lost mid-build is survived by the scheduler, which hands its tasks to the others; with none
    left, the tasks would wait for a worker forever."""
    finished: queue.Queue = queue.Queue()
    for future in futures:
        future.add_done_callback(finished.put)  # called on a thread of distributed's
    waiting = dict(futures)  # not back yet
    alone_since: float | None = None
    while waiting:
        try:
            future = finished.get(timeout=WORKERS_POLL_S)
        except queue.Empty:
            future = None
        if future is not None:
            # A finished task's result lives on the worker that ran it: a worker lost before it was fetched makes
            # the scheduler run the task again, and with no worker left the fetch would wait forever. Fetched with
            # a timeout; a future not back in time waits its turn again while the workers are counted below.
            try:
                outcome, exc = future.result(timeout=WORKERS_POLL_S), None
            except (TimeoutError, asyncio.TimeoutError):
                finished.put(future)
                future = None
            except Exception as error:  # noqa: BLE001 (the task failed: said as that host's failure)
                outcome, exc = None, error
        if future is not None:
            alone_since = None
            del waiting[future]
            yield future, outcome, exc
            continue
        if _has_workers(client):
            alone_since = None
            continue
        alone_since = alone_since if alone_since is not None else time.monotonic()
        if time.monotonic() - alone_since >= no_workers_timeout_s:
            left = sorted((task for task, _ in waiting.values()), key=lambda t: t.index)
            named = ", ".join(t.shown_path for t in left[:NAMED_HOSTS])
            more = f" and {len(left) - NAMED_HOSTS} more" if len(left) > NAMED_HOSTS else ""
            raise SchedulerError(f"the Dask cluster {scheduler} has had no worker for {no_workers_timeout_s:g} s; "
                                 f"{len(left)} host{'s' if len(left) != 1 else ''} not built: {named}{more}")


def _has_workers(client) -> bool:
    try:
        return bool(client.nthreads())
    except Exception:  # noqa: BLE001 (a scheduler that cannot answer has no worker for this build either)
        return False


def _write_payload(outcome: HostOutcome, out_dir: Path) -> None:
    """The files a Dask worker wrote, as they travelled back with its outcome, into the host's folder here."""
    for rel, content in outcome.payload or []:
        if rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
            raise SchedulerError(f"a Dask worker returned an output path outside the site: {rel!r}")
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    outcome.payload = None
