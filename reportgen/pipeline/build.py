"""`reportgen build`: logdirs → decoded hosts → sections → a static site, in three stages.

1. **plan** (`plan_build`): find the runs and their host files, give each host its memory budget, and look
   every host up in the rebuild cache (`pipeline/cache.py`): a hit's files are restored into its staging
   folder, a miss becomes a task to run; a run whose hosts all hit gets its pages restored too.
2. **run** (`run_hosts`): the misses' per-host stage (`pipeline/host_stage.py`: decode, then every section's
   `host_part`) on one executor (`pipeline/runners.py`: in this process, in worker processes, or on a Dask
   cluster). Only the small per-host results travel back.
3. **render** (`render_site`): the hosts' files moved into the site in host order, each run combined and its
   pages written in run order (`pipeline/render.py`), then the site's index and summary.json; the cache
   written (`keep_in_cache`, the one place that writes it) and the site swapped in.

Hosts are independent until their run is combined, so the output is the same whatever the number of jobs,
the executor or the cache. What a build keeps up around the stages (the temporary site removed on failure,
the staging folder's removal, the heap kept out of full collections, the kernels compiling ahead) are
context managers composed once in `build_site` (`pipeline/guards.py`, `pipeline/heap.py`); a stop signal
(`pipeline/stopping.py`) unwinds through them like any failure.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from reportgen import __version__
from reportgen.errors import NoCapturesError
from reportgen.loaders.limits import format_bytes
from reportgen.loaders.logdir import RunSource, discover, file_name, merge_same_folder, problem_text
from reportgen.names import PRINTABLE, file_part
from reportgen.output.formatting import terminal_text
from reportgen.output.site import (
    Assets,
    PageWriter,
    asset_files,
    write_asset_files,
    write_page_assets,
    write_runs_script,
)
from reportgen.output.transaction import OutputError, SiteTransaction
from reportgen.pipeline.cache import HostCache, default_cache_dir
from reportgen.pipeline.guards import Staging, kernel_warm_up, site_swap
from reportgen.pipeline.heap import LongLived
from reportgen.pipeline.host_stage import HostOutcome, HostTask, plain_pages
from reportgen.pipeline.memory import default_budget
from reportgen.pipeline.progress import BuildProgress
from reportgen.pipeline.render import combine_run, render_run
from reportgen.pipeline.runners import PARALLEL_MIN_BYTES, Work, check_scheduler_address, choose_executor
from reportgen.pipeline.timings import Timings, peak_rss_bytes
from reportgen.sections.registry import SECTIONS
from reportgen.sections.site_index import site_index_context
from reportgen.summary_blocks import SCHEMA_VERSION

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARTIAL = 2

# Inside the temporary site: the pages of runs restored from the cache by the plan, moved into place by render.
RESTORED_RUNS = ".restored-runs"


@dataclass
class BuildOptions:
    output: str = "site"
    runs: set[str] | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    progress: bool = False
    cache: bool = True  # reuse unchanged hosts' results from the last build
    cache_dir: str | None = None  # default: .<output name>.reportgen-cache beside the output folder
    scheduler: str | None = None  # a Dask scheduler address: the host stage runs on its workers
    log: Callable[[str], None] | None = None  # -v: one line per stage and per host (decoded or from the cache)
    notes: Callable[[str], None] | None = None  # where one-off notes go when there is no progress bar
    trace_format: str = "json"  # trace export: "json", "perfetto" or "both"
    # Hosts weighing less than this together run in this process, whatever `jobs` says: starting
    # worker processes would cost more than they save (`reportgen.pipeline.runners.worth_a_pool`).
    parallel_min_bytes: int = PARALLEL_MIN_BYTES
    max_memory: int | None = None  # bytes one host's stage may use; default: the machine's share (plan_build)


@dataclass
class BuildReport:
    output: Path
    runs: int
    hosts: int
    events: int
    seconds: float
    errors: list[dict]
    exit_code: int
    timings: dict[str, float] = field(default_factory=dict)
    peak_rss: int = 0
    decoded: list[str] = field(default_factory=list)  # host files decoded by this build (shown paths)
    cached: list[str] = field(default_factory=list)  # host results reused from the rebuild cache
    warnings: list[str] = field(default_factory=list)
    runner: str = "none"  # where the host stage ran: "serial", "processes", "dask" or "none" (all cached)


@dataclass
class RunTask:
    """One run of the site: its name (and folder), where it was found, its hosts' tasks in host order."""

    name: str
    source: RunSource
    hosts: list[HostTask]
    # Its pages restored from the cache (every host hit) by the plan, with their summary block and index row:
    # render moves them into place.
    restored: Path | None = None
    summary: dict | None = None
    row: dict | None = None


@dataclass
class Plan:
    """What the build does: every run and host, what the cache holds already, what is left to run."""

    runs: list[RunTask]
    tasks: list[HostTask]  # every host, in host order (`HostTask.index`)
    budget: int | None  # bytes per host stage; None: each Dask worker sets its own
    cache: HostCache | None = None
    assets: Assets | None = None
    asset_contents: dict[str, bytes] = field(default_factory=dict)
    hits: dict[int, HostOutcome] = field(default_factory=dict)  # task index → its result from the cache
    work: Work = field(default_factory=list)  # the hosts to run: (task, staging folder, hash its content)
    stats: dict[int, list | None] = field(default_factory=dict)  # the files to run, as they were stat'ed


# -- the build ------------------------------------------------------------------------------------------


def build_site(locations: list[str], options: BuildOptions) -> BuildReport:
    """Build the site. Raises NoCapturesError when nothing can be built."""
    started = time.perf_counter()
    if options.scheduler:  # a bad address is one message now, not one after discovery and kernels
        check_scheduler_address(options.scheduler)
    plain_pages()
    timings = Timings()
    runs, tasks, budget = discover_runs(locations, options, timings)
    transaction = SiteTransaction(Path(options.output), shown=options.output)  # takes the output folder's lock
    progress = BuildProgress(bar=options.progress, log=options.log, notes=options.notes)
    try:
        with ExitStack() as guards:
            guards.callback(progress.close)
            site_dir = guards.enter_context(site_swap(transaction))
            heap = guards.enter_context(LongLived())
            staging = guards.enter_context(Staging(site_dir))
            plan = plan_build(runs, tasks, budget, options, transaction, staging, timings, progress)
            with timings.stage("kernels"):
                kernels = guards.enter_context(kernel_warm_up(all(t.host.legacy for t in tasks),
                                                              options.trace_format, progress))
            # Children compiling kernels ahead are among the N jobs while they run.
            jobs = max(1, options.jobs - len(kernels.children))
            outcomes, runner = run_hosts(plan, jobs, options, timings, progress, heap)
            summary, rendered, errors = render_site(plan, outcomes, site_dir, staging, timings, progress, heap,
                                                    options.log or (lambda _line: None))
            if all(o.error is not None for o in outcomes):
                raise NoCapturesError("no host file could be read:\n  "
                                      + "\n  ".join(terminal_text(e["local_message"]) for e in errors))
            keep_in_cache(plan, outcomes, rendered, site_dir, options, timings)
            with timings.stage("outputs (removal waited for)"):
                staging.finish()
            with timings.stage("commit"):
                transaction.commit()
            progress.close()
    except OSError as exc:  # a full disk, a folder that cannot be written: the previous site is untouched
        raise OutputError(f"{options.output}: the site could not be written ({_what_failed(exc, transaction)}); "
                          "the output folder is as it was") from exc
    worker_rss = max((o.peak_rss for o in outcomes), default=0)
    return BuildReport(
        output=transaction.target,
        runs=len(plan.runs),
        hosts=summary["hosts"],
        events=sum(o.summary.events for o in outcomes if o.summary),
        seconds=time.perf_counter() - started,
        errors=errors,
        exit_code=EXIT_PARTIAL if errors else EXIT_OK,
        timings=timings.seconds,
        peak_rss=max(peak_rss_bytes(), worker_rss),
        decoded=[o.path for o in outcomes if not o.cached and o.summary is not None],
        cached=[o.path for o in outcomes if o.cached],
        warnings=list(plan.cache.warnings) if plan.cache is not None else [],
        runner=runner,
    )


# -- 1. plan --------------------------------------------------------------------------------------------


# Names the site uses at its top level: a run folder must never take one.
RESERVED_RUN_NAMES = frozenset({"assets", "compare", "index.html", "runs.js", "summary.json"})
# The longest uniqueness suffix a run's name may get (`-99999`), kept free of its 255 bytes.
RUN_SUFFIX_ROOM = 6


def discover_runs(locations: list[str], options: BuildOptions, timings: Timings,
                  ) -> tuple[list[RunTask], list[HostTask], int | None]:
    """The runs of `locations` (named uniquely), their hosts' tasks in host order, and each host's budget."""
    with timings.stage("discover"):
        sources: list[RunSource] = []
        for location in locations:
            sources.extend(discover(location, options.runs))
        named = _unique_run_names(merge_same_folder(sources))
        hosts = [(name, host) for name, run in named for host in run.hosts]
        # On Dask, each worker sets its own default from its machine (pipeline/host_stage.py). Locally the
        # machine's share is divided among the host stages that can run at once: no more than there are hosts.
        budget = options.max_memory or (None if options.scheduler
                                        else default_budget(max(1, min(options.jobs, len(hosts)))))
        tasks = [HostTask(index=i, run=name, host=host, trace_format=options.trace_format, memory_budget=budget)
                 for i, (name, host) in enumerate(hosts)]
        runs = [RunTask(name, source, [t for t in tasks if t.run == name]) for name, source in named]
    if options.log is not None and budget is not None:
        options.log(f"memory budget: {format_bytes(budget)} per host (--max-memory to change it)")
    return runs, tasks, budget


def _unique_run_names(runs: list[RunSource]) -> list[tuple[str, RunSource]]:
    """Runs from several logdirs may share a name, or be named like a file of
    the site itself: suffix the later ones (`-2`, `-3`, …) until unique.

    The name is the run's folder too, so it is made by `file_part` first: a dot-folder (the site's
    are the rebuild cache's, not published), a name with control characters, or one too long for its
    suffix is written readably with a hash of the run's own name; ordinary names stay as they are."""
    taken = set(RESERVED_RUN_NAMES)
    named = []
    for run in runs:
        base = file_part(run.name, RUN_SUFFIX_ROOM, keep=PRINTABLE)
        name, count = base, 1
        while name in taken:
            count += 1
            name = f"{base}-{count}"
        taken.add(name)
        named.append((name, run))
    return named


def plan_build(runs: list[RunTask], tasks: list[HostTask], budget: int | None, options: BuildOptions,
               transaction: SiteTransaction, staging: Staging, timings: Timings, progress: BuildProgress) -> Plan:
    """The build's plan: every host either restored from the cache into its staging folder or left to run."""
    plan = Plan(runs=runs, tasks=tasks, budget=budget, cache=_open_cache(options, transaction))
    with timings.stage("assets"):  # their names are part of a run's key in the cache
        plan.assets, plan.asset_contents = asset_files()
    progress.stage("hosts", len(tasks), "host")
    cache = plan.cache
    if cache is None:
        plan.work = [(task, staging.out_dir(task.index), False) for task in tasks]
        return plan
    log = options.log or (lambda _line: None)
    with timings.stage("cache.lookup"):
        for task in tasks:
            hit = cache.lookup(task, staging.out_dir(task.index))
            if hit is not None:
                plan.hits[task.index] = hit
                log(f"{task.shown_path}: from the rebuild cache")
                progress.step(terminal_text(f"{task.run}/{task.host.host}"))
            else:
                plan.work.append((task, staging.out_dir(task.index), cache.needs_worker_hash(task)))
    plan.stats = {task.index: HostCache._stat_key(task.host.path) for task, _, _ in plan.work}
    with timings.stage("cache.runs"):
        for number, run in enumerate(plan.runs):
            if run.source.problems or not all(t.index in plan.hits for t in run.hosts):
                continue  # pages naming problems are rendered afresh, and so are those of hosts that run
            key = cache.run_key(run.name, run.hosts, [plan.hits[t.index] for t in run.hosts], plan.assets)
            restored = staging.site_dir / RESTORED_RUNS / f"{number:06d}"
            if key is not None and (found := cache.lookup_run(key, restored)) is not None:
                run.restored = restored
                run.summary, run.row = found
    return plan


def _open_cache(options: BuildOptions, transaction: SiteTransaction) -> HostCache | None:
    if not options.cache:
        return None
    # Host-stage settings that change what a host produces are part of its cache key.
    settings = {"trace_format": options.trace_format}
    root = Path(options.cache_dir) if options.cache_dir is not None else default_cache_dir(transaction.target)
    cache = HostCache(root, settings, log=options.log)
    cache.open(exclusive=options.cache_dir is None)  # the cache beside the site is under the site's lock
    return cache


# -- 2. run ---------------------------------------------------------------------------------------------


def run_hosts(plan: Plan, jobs: int, options: BuildOptions, timings: Timings, progress: BuildProgress,
              heap: LongLived) -> tuple[list[HostOutcome], str]:
    """Every host's outcome, in host order (the cache's hits and the work's results), and where the work ran."""
    outcomes: list[HostOutcome | None] = [plan.hits.get(task.index) for task in plan.tasks]
    log = options.log or (lambda _line: None)

    def started(task: HostTask) -> None:
        progress.begin(f"{task.run}/{task.host.host}")

    def done(task: HostTask, outcome: HostOutcome) -> None:
        if outcome.write_error is not None:  # the disk, not the capture: the build stops here
            raise OSError(*outcome.write_error)
        outcomes[task.index] = outcome
        heap.kept()
        timings.merge(outcome.timings)
        seconds = sum(outcome.timings.values())
        log(f"{task.shown_path}: " + (f"failed: {outcome.error}" if outcome.error else
                                      f"decoded, {outcome.summary.events:,} events in {seconds:.2f} s"))
        progress.step(terminal_text(f"{task.run}/{task.host.host}"))  # on the progress bar: names as text

    executor = choose_executor(plan.work, scheduler=options.scheduler, jobs=jobs,
                               min_bytes=options.parallel_min_bytes)
    with timings.stage("hosts"):
        if executor is not None:
            executor.run(plan.work, done, started)
    heap.freeze()
    return outcomes, executor.name if executor is not None else "none"


# -- 3. render ------------------------------------------------------------------------------------------


@dataclass
class RenderedRun:
    """A run whose pages this build rendered: what the cache keeps of it (`keep_in_cache`)."""

    run: RunTask
    outcomes: list[HostOutcome]
    summary: dict
    row: dict


def render_site(plan: Plan, outcomes: list[HostOutcome], site_dir: Path, staging: Staging, timings: Timings,
                progress: BuildProgress, heap: LongLived, log: Callable[[str], None],
                ) -> tuple[dict, list[RenderedRun], list[dict]]:
    """The site in its temporary folder: summary.json's document, the runs rendered afresh, every error."""
    with timings.stage("outputs"):
        staging.place([i for i, o in enumerate(outcomes) if o.error is None and o.files])
    with timings.stage("assets"):
        write_asset_files(site_dir, plan.asset_contents)
    summary, rows, all_errors, rendered = _render_runs(plan, outcomes, site_dir, timings, progress, heap, log)
    with timings.stage("assets (pages)"):
        shown = {slug for block in summary.values() for slug in block.get("tools", {})}
        write_page_assets(site_dir, plan.assets, {key for s in SECTIONS if s.slug in shown for key in s.assets})
    # What the site shows carries no path of the build machine.
    site_errors = [{k: v for k, v in e.items() if k != "local_message"} for e in all_errors]
    root = PageWriter(site_dir=site_dir, assets=plan.assets)
    with timings.stage("site index"):
        write_runs_script(site_dir, [{"name": r["name"], "folder": quote(r["name"]), "pages": r["pages"]}
                                     for r in rows])
        root.write_html("index.html", "site_index.html", errors=site_errors, **site_index_context(rows))
    document = {
        "schema": SCHEMA_VERSION,
        "generator": f"reportgen {__version__}",
        "runs": summary,
        "hosts": sum(1 for o in outcomes if o.error is None),
        "errors": site_errors,
    }
    with timings.stage("summary.json"):
        root.write_json("summary.json", document)
    return document, rendered, all_errors


def _render_runs(plan: Plan, outcomes: list[HostOutcome], site_dir: Path, timings: Timings,
                 progress: BuildProgress, heap: LongLived, log: Callable[[str], None],
                 ) -> tuple[dict[str, dict], list[dict], list[dict], list[RenderedRun]]:
    """Each run's pages, in the site's order (restored from the cache, or rendered): the runs' summary blocks,
    their index rows, every error, and the runs rendered."""
    progress.stage("pages", len(plan.runs), "run")
    summary: dict[str, dict] = {}
    rows, all_errors, rendered = [], [], []
    for run in plan.runs:
        progress.begin(run.name)
        host_outcomes = [outcomes[t.index] for t in run.hosts]
        errors = _run_errors(run, host_outcomes)
        all_errors.extend({"run": run.name, **e} for e in errors)
        if run.restored is not None:
            shutil.rmtree(site_dir / run.name, ignore_errors=True)  # its hosts' files: the restored pages hold them
            os.replace(run.restored, site_dir / run.name)
            run_summary, row = run.summary, run.row
            log(f"{run.name}: pages from the rebuild cache")
        else:
            shown_errors = [{k: v for k, v in e.items() if k != "local_message"} for e in errors]
            run_summary, row = render_run(run.name, host_outcomes, shown_errors, site_dir, plan.assets, timings, heap)
            rendered.append(RenderedRun(run, host_outcomes, run_summary, row))
        summary[run.name] = run_summary
        rows.append(row)
        progress.step(run.name)
    shutil.rmtree(site_dir / RESTORED_RUNS, ignore_errors=True)
    return summary, rows, all_errors, rendered


def _run_errors(run: RunTask, host_outcomes: list[HostOutcome]) -> list[dict]:
    """A run's errors, as its pages show them (`path`, `message`) and as the terminal says them (`local_message`)."""
    errors = []
    for path, why, detail in run.source.problems:  # inputs found but not usable (links, FIFOs, unreadable)
        shown = run.name if path.rstrip("/") == run.source.path.rstrip("/") else f"{run.name}/{file_name(path)}"
        errors.append({"path": shown, "message": f"{shown}: {why}", "local_message": problem_text(path, why, detail)})
    for o in host_outcomes:
        if o.error:
            errors.append({"path": o.path, "message": o.error, "local_message": o.local_error})
        errors.extend(dict(bad) for bad in o.file_errors)  # files of an older profiler's host: the rest built
    return errors


def keep_in_cache(plan: Plan, outcomes: list[HostOutcome], rendered: list[RenderedRun], site_dir: Path,
                  options: BuildOptions, timings: Timings) -> None:
    """Everything the build writes into the cache, from the finished temporary site, before it is swapped in:
    the hosts it ran (their files as placed in the site), the pages of the runs it rendered, and (for the cache
    beside the site, which holds that site's build only) the entries it did not use dropped."""
    cache = plan.cache
    if cache is None:
        return
    with timings.stage("cache.store"):
        for task, _, _ in plan.work:  # the content hashes the workers computed first: they key the entries
            cache.learn(task, outcomes[task.index], plan.stats.get(task.index))
        for task, _, _ in plan.work:
            cache.store(task, outcomes[task.index], site_dir)
    with timings.stage("cache.runs"):
        for done in rendered:
            if done.run.source.problems:  # pages naming problems are rendered afresh
                continue
            key = cache.run_key(done.run.name, done.run.hosts, done.outcomes, plan.assets)
            if key is not None:
                cache.store_run(key, site_dir / done.run.name, done.summary, done.row)
    with timings.stage("cache.prune"):
        if options.cache_dir is None:
            cache.prune()
        cache.save_memo()


def _what_failed(exc: OSError, transaction: SiteTransaction) -> str:
    """An OSError as the user can act on it: its reason, and the file within the site (not the temporary
    folder's name)."""
    reason = exc.strerror or str(exc)
    path = exc.filename
    if isinstance(path, (str, os.PathLike)) and str(path):  # a worker's error without a file comes back as ""
        try:
            return f"{reason}: {Path(path).relative_to(transaction.tmp).as_posix()}"
        except ValueError:
            return f"{reason}: {path}"
    return reason


__all__ = ["BuildOptions", "BuildReport", "build_site", "combine_run", "EXIT_OK", "EXIT_FAILED", "EXIT_PARTIAL"]
