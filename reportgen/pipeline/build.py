"""`reportgen build`: logdirs → decoded hosts → sections → a static site.

Hosts are independent until their run is combined, so the per-host stage
(`reportgen.pipeline.host_stage`: decode, then every section's `host_part`) runs in
worker processes, or on a Dask cluster with `scheduler=`, when there is more
than one host to compute; only the small per-host results travel back. Hosts
whose file, names and code did not change since the last build come from the
rebuild cache (`reportgen.pipeline.cache`) instead. Combining and rendering
happen here, in host order, so the output is the same whatever the number of
jobs, the runner or the cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from reportgen import __version__
from reportgen.core.ops.views import forget_combined
from reportgen.errors import NoCapturesError
from reportgen.loaders.limits import format_bytes
from reportgen.loaders.logdir import RunSource, discover, file_name, merge_same_folder, problem_text
from reportgen.names import PRINTABLE, file_part
from reportgen.output.formatting import terminal_text
from reportgen.output.site import PageWriter, asset_files, write_asset_files, write_page_assets, write_runs_script
from reportgen.output.transaction import OutputError, SiteTransaction
from reportgen.pipeline.cache import HostCache, default_cache_dir
from reportgen.pipeline.heap import LongLived
from reportgen.pipeline.host_stage import HostOutcome, HostTask, plain_pages
from reportgen.pipeline.memory import default_budget
from reportgen.pipeline.progress import BuildProgress
from reportgen.pipeline.runners import PARALLEL_MIN_BYTES
from reportgen.pipeline.timings import Timings, peak_rss_bytes
from reportgen.sections.base import RunContext
from reportgen.sections.registry import SECTIONS
from reportgen.sections.site_index import site_index_context
from reportgen.sections.verdict import index_row, run_verdict
from reportgen.summary_blocks import SCHEMA_VERSION, RunError, RunSummary, ToolPage

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARTIAL = 2

STAGING_FOLDER = ".staging"  # inside the temporary site: each host's own output folder
# What compiling the kernels adds to every build when they cannot be cached (all compiled in the building
# process, measured on 2 cores: 18.5-19.3 s against 2.9-3.6 s). A first build's compile is measured as it
# runs instead (`kernels.compile_seconds`), and said when it ends.
IN_MEMORY_COMPILE_S = 16


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
    max_memory: int | None = None  # bytes one host's stage may use; default: the machine's share (build_site)


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


# Names the site uses at its top level: a run folder must never take one.
RESERVED_RUN_NAMES = frozenset({"assets", "compare", "index.html", "runs.js", "summary.json"})


# The longest uniqueness suffix a run's name may get (`-99999`), kept free of its 255 bytes.
RUN_SUFFIX_ROOM = 6


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


def _start_kernels(tasks: list[HostTask], options: BuildOptions, progress: BuildProgress):
    """On a machine's first build: say that the kernels compile, once, and start compiling the
    analyses' kernels and the trace writer ahead in child processes (see `reportgen.kernels`)."""
    from reportgen import kernels

    if kernels.CACHE_PROBLEM is not None:
        progress.note(f"reportgen: warning: compiled kernels cannot be kept ({kernels.CACHE_PROBLEM}): they are "
                      f"compiled in memory, about {IN_MEMORY_COMPILE_S} s on every build; set NUMBA_CACHE_DIR to a "
                      "writable folder to keep them")
        return [], True
    if all(task.host.legacy for task in tasks) or not kernels.cold_modules():
        return kernels.started_children(), False
    # Unless `reportgen build` has started them already, before importing what builds (see cli/build.py).
    kernels.start_precompile(kernels.groups_for(options.trace_format))
    children = kernels.started_children()
    progress.note("reportgen: first build on this machine: compiling its kernels (capture decoder, analyses, "
                  f"trace writer), once (kept in {kernels.CACHE_DIR})")
    return children, True


def _say_compiled(progress: BuildProgress) -> None:
    """The first build's compile, measured, once it has ended (its children have exited)."""
    from reportgen import kernels

    seconds = kernels.compile_seconds()
    if seconds is not None:
        progress.note(f"reportgen: kernels compiled in {seconds:.1f} s, once (kept in {kernels.CACHE_DIR})")


def _open_cache(options: BuildOptions, transaction: SiteTransaction) -> HostCache | None:
    # Host-stage settings that change what a host produces are part of its cache key.
    settings = {"trace_format": options.trace_format}
    if not options.cache:
        return None
    root = Path(options.cache_dir) if options.cache_dir is not None else default_cache_dir(transaction.target)
    cache = HostCache(root, settings, log=options.log)
    cache.open(exclusive=options.cache_dir is None)  # the cache beside the site is under the site's lock
    return cache


def _run_hosts(tasks: list[HostTask], staging: Path, options: BuildOptions, cache: HostCache | None,
               timings: Timings, progress: BuildProgress, jobs: int, compiling: bool, heap: LongLived,
               ) -> tuple[list[HostOutcome], str]:
    """Every host's outcome, in task order (from the cache where possible), and where they ran."""
    from reportgen.pipeline import runners

    progress.stage("hosts", len(tasks), "host")
    if compiling:
        progress.doing("compiling kernels (once)")
    step = progress.step
    log = options.log or (lambda _line: None)
    outcomes: list[HostOutcome | None] = [None] * len(tasks)
    work = []
    with timings.stage("cache.lookup"):
        for task in tasks:
            out_dir = staging / f"{task.index:06d}"
            hit = cache.lookup(task, out_dir) if cache is not None else None
            if hit is not None:
                outcomes[task.index] = hit
                log(f"{task.shown_path}: from the rebuild cache")
                step(terminal_text(f"{task.run}/{task.host.host}"))
            else:
                work.append((task, out_dir, cache is not None and cache.needs_worker_hash(task)))
    stats = {task.index: HostCache._stat_key(task.host.path) for task, _, _ in work} if cache else {}

    def done(task: HostTask, outcome: HostOutcome) -> None:
        if outcome.write_error is not None:  # the disk, not the capture: the build stops here
            raise OSError(*outcome.write_error)
        outcomes[task.index] = outcome
        heap.kept()
        timings.merge(outcome.timings)
        if cache is not None:
            cache.learn(task, outcome, stats.get(task.index))
        seconds = sum(outcome.timings.values())
        log(f"{task.shown_path}: " + (f"failed: {outcome.error}" if outcome.error else
                                      f"decoded, {outcome.summary.events:,} events in {seconds:.2f} s"))
        step(terminal_text(f"{task.run}/{task.host.host}"))  # on the progress bar: names as text

    def started(task: HostTask) -> None:
        progress.begin(f"{task.run}/{task.host.host}")

    runner = "none"
    with timings.stage("hosts"):
        if work and options.scheduler:
            runner = "dask"
            runners.run_dask(work, options.scheduler, done, started)
        elif jobs > 1 and runners.worth_a_pool(work, options.parallel_min_bytes):
            runner = "processes"
            runners.run_pool(work, jobs, done, started)
        elif work:
            runner = "serial"
            runners.run_serial(work, done, started)
    if cache is not None:
        with timings.stage("cache.store"):
            for task, out_dir, _ in work:
                cache.store(task, outcomes[task.index], out_dir)
    return outcomes, runner


def _place_outputs(outcomes: list[HostOutcome], staging: Path, site_dir: Path) -> subprocess.Popen | None:
    """Move each successful host's files into the site, in host order, and start removing the rest in a
    child process (returned: wait for it before the site is committed; None when it could not start and
    the rest was removed here).

    What is left are the hosts' emptied folders (six a host) and failed hosts' files: with a thousand
    hosts their removal took ≈ 0.9 s of the build, mostly waiting on the disk, which the pages'
    rendering now fills. A child process, not a thread: a thread needs the GIL between two folders,
    and the rendering holds it (measured: a thread removed almost nothing while the pages rendered)."""
    for index, outcome in enumerate(outcomes):
        if outcome.error is None and outcome.files:
            _move_tree(staging / f"{index:06d}", site_dir)
    if sys.executable:  # None or "" in an embedding program that cannot start another Python
        try:
            return subprocess.Popen([sys.executable, "-I", "-S", "-c", REMOVE_FOLDER, str(staging)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, ValueError):
            pass
    shutil.rmtree(staging, ignore_errors=True)
    return None


# The staging folder's removal, in a child process of its own (`_place_outputs`).
REMOVE_FOLDER = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"
# How long the commit waits for that child before ending it and removing the rest itself (a program
# that embeds Python may name itself as `sys.executable` and not run the command at all).
REMOVAL_WAIT_S = 30.0


def _finish_removal(remover: subprocess.Popen | None, staging: Path) -> None:
    """Wait for the staging folder's removal; what the child could not remove is removed here."""
    _wait_or_end(remover)
    shutil.rmtree(staging, ignore_errors=True)


def _wait_or_end(remover: subprocess.Popen | None) -> None:
    if remover is None:
        return
    try:
        remover.wait(timeout=REMOVAL_WAIT_S)
    except subprocess.TimeoutExpired:
        remover.kill()
        remover.wait()


def _move_tree(source: Path, target: Path) -> None:
    """Merge the folder `source` into the folder `target`: an entry `target` lacks is moved whole
    (a host's own folders, one rename each instead of a folder made and one rename per file), a
    folder both have is merged, a file both have is replaced. With a thousand hosts, folder and file
    operations were a good part of the host stage's time on a slow disk."""
    with os.scandir(source) as entries:
        for entry in entries:
            there = target / entry.name
            if entry.is_dir(follow_symlinks=False) and there.is_dir():
                _move_tree(Path(entry.path), there)
            else:
                os.replace(entry.path, there)


def build_site(locations: list[str], options: BuildOptions) -> BuildReport:
    """Build the site. Raises NoCapturesError when nothing can be built."""
    started = time.perf_counter()
    if options.scheduler:  # a bad address is one message now, not one after discovery and kernels
        from reportgen.pipeline.runners import check_scheduler_address

        check_scheduler_address(options.scheduler)
    plain_pages()
    timings = Timings()
    with timings.stage("discover"):
        sources: list[RunSource] = []
        for location in locations:
            sources.extend(discover(location, options.runs))
        sources = merge_same_folder(sources)
        named = _unique_run_names(sources)
        hosts = [(name, host) for name, run in named for host in run.hosts]
        # On Dask, each worker sets its own default from its machine (pipeline/host_stage.py). Locally the
        # machine's share is divided among the host stages that can run at once: no more than there are hosts.
        budget = options.max_memory or (None if options.scheduler
                                        else default_budget(max(1, min(options.jobs, len(hosts)))))
        tasks = [HostTask(index=i, run=name, host=host, trace_format=options.trace_format, memory_budget=budget)
                 for i, (name, host) in enumerate(hosts)]
    if options.log is not None and budget is not None:
        options.log(f"memory budget: {format_bytes(budget)} per host (--max-memory to change it)")

    transaction = SiteTransaction(Path(options.output), shown=options.output)
    cache = None
    progress = BuildProgress(bar=options.progress, log=options.log, notes=options.notes)
    compiling: list = []
    remover: subprocess.Popen | None = None
    heap = LongLived()
    try:
        site_dir = transaction.tmp
        cache = _open_cache(options, transaction)
        with timings.stage("kernels"):
            compiling, cold = _start_kernels(tasks, options, progress)
        staging = site_dir / STAGING_FOLDER
        # Children compiling kernels ahead are among the N jobs while they run.
        jobs = max(1, options.jobs - len(compiling))
        outcomes, runner = _run_hosts(tasks, staging, options, cache, timings, progress, jobs, cold, heap)
        heap.freeze()
        with timings.stage("outputs"):
            remover = _place_outputs(outcomes, staging, site_dir)
        with timings.stage("assets"):
            assets, asset_contents = asset_files()
            write_asset_files(site_dir, asset_contents)
        summary, run_rows, all_errors = _render_runs(named, tasks, outcomes, site_dir, assets, cache, timings,
                                                     options.log or (lambda _line: None), progress, heap)
        with timings.stage("assets (pages)"):
            shown = {slug for block in summary.values() for slug in block.get("tools", {})}
            write_page_assets(site_dir, assets, {key for s in SECTIONS if s.slug in shown for key in s.assets})
        # What the site shows carries no path of the build machine.
        site_errors = [{k: v for k, v in e.items() if k != "local_message"} for e in all_errors]
        root = PageWriter(site_dir=site_dir, assets=assets)
        with timings.stage("site index"):
            write_runs_script(site_dir, [{"name": r["name"], "folder": quote(r["name"]), "pages": r["pages"]}
                                         for r in run_rows])
            root.write_html("index.html", "site_index.html", errors=site_errors, **site_index_context(run_rows))
        summary_doc = {
            "schema": SCHEMA_VERSION,
            "generator": f"reportgen {__version__}",
            "runs": summary,
            "hosts": sum(1 for o in outcomes if o.error is None),
            "errors": site_errors,
        }
        with timings.stage("summary.json"):
            root.write_json("summary.json", summary_doc)
        if all(o.error is not None for o in outcomes):
            raise NoCapturesError(
                "no host file could be read:\n  " + "\n  ".join(terminal_text(e["local_message"]) for e in all_errors)
            )
        with timings.stage("outputs (removal waited for)"):
            _finish_removal(remover, staging)
        with timings.stage("commit"):
            transaction.commit()
        if cache is not None:
            with timings.stage("cache.prune"):
                if options.cache_dir is None:
                    cache.prune()
                cache.save_memo()
    except OSError as exc:  # a full disk, a folder that cannot be written: the previous site is untouched
        _wait_or_end(remover)  # the temporary site goes as a whole once the child is done
        transaction.abort()
        progress.close()
        raise OutputError(f"{options.output}: the site could not be written ({_what_failed(exc, transaction)}); "
                          "the output folder is as it was") from exc
    except BaseException:
        _wait_or_end(remover)  # the temporary site goes as a whole once the child is done
        transaction.abort()
        progress.close()
        raise  # children compiling kernels ahead go on alone: what they compile is kept for the next build
    finally:
        heap.release()
    progress.close()
    for child in compiling:  # done by now, unless no host got as far as the analyses or the trace export
        child.wait()
    if cold:
        _say_compiled(progress)
    worker_rss = max((o.peak_rss for o in outcomes), default=0)
    return BuildReport(
        output=transaction.target,
        runs=len(named),
        hosts=sum(1 for o in outcomes if o.error is None),
        events=sum(o.summary.events for o in outcomes if o.summary),
        seconds=time.perf_counter() - started,
        errors=all_errors,
        exit_code=EXIT_PARTIAL if all_errors else EXIT_OK,
        timings=timings.seconds,
        peak_rss=max(peak_rss_bytes(), worker_rss),
        decoded=[o.path for o in outcomes if not o.cached and o.summary is not None],
        cached=[o.path for o in outcomes if o.cached],
        warnings=list(cache.warnings) if cache is not None else [],
        runner=runner,
    )


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


def _render_runs(named, tasks: list[HostTask], outcomes: list[HostOutcome], site_dir: Path, assets,
                 cache: HostCache | None, timings: Timings, log: Callable[[str], None], progress: BuildProgress,
                 heap: LongLived):
    progress.stage("pages", len(named), "run")
    by_run: dict[str, list[tuple[HostTask, HostOutcome]]] = {}
    for task, outcome in zip(tasks, outcomes):
        by_run.setdefault(task.run, []).append((task, outcome))
    summary: dict[str, dict] = {}
    rows = []
    all_errors = []
    for name, source in named:
        pairs = by_run.get(name, [])
        host_outcomes = [o for _, o in pairs]
        errors, local_messages = [], []
        progress.begin(name)
        for path, why, detail in source.problems:  # inputs found but not usable (links, FIFOs, unreadable)
            shown = name if path.rstrip("/") == source.path.rstrip("/") else f"{name}/{file_name(path)}"
            errors.append({"path": shown, "message": f"{shown}: {why}"})
            local_messages.append(problem_text(path, why, detail))
        for o in host_outcomes:
            if o.error:
                errors.append({"path": o.path, "message": o.error})
                local_messages.append(o.local_error)
            for bad in o.file_errors:  # files of an older profiler's host: the rest of it built
                errors.append({"path": bad["path"], "message": bad["message"]})
                local_messages.append(bad["local_message"])
        all_errors.extend({"run": name, **e, "local_message": m} for e, m in zip(errors, local_messages))
        key = None
        if cache is not None and not source.problems:  # pages naming problems are rendered afresh
            key = cache.run_key(name, [t for t, _ in pairs], host_outcomes, assets)
        reused = None
        if key is not None and all(o.cached for o in host_outcomes):
            with timings.stage("cache.runs"):
                reused = cache.lookup_run(key, site_dir / name)
        if reused is not None:
            run_summary, row = reused
            log(f"{name}: pages from the rebuild cache")
        else:
            run_summary, row = _render_run(name, host_outcomes, errors, site_dir, assets, timings, heap)
            if key is not None:
                with timings.stage("cache.runs"):
                    cache.store_run(key, site_dir / name, run_summary, row)
        summary[name] = run_summary
        rows.append(row)
        progress.step(name)
    return summary, rows, all_errors


def combine_run(name: str, host_outcomes: list[HostOutcome], errors: list[dict] | None = None,
                timings: Timings | None = None) -> RunContext:
    """Combine a run's hosts, section by section in registry order (`RunContext.sections`: each section's data)."""
    timings = timings if timings is not None else Timings()
    good = [o for o in host_outcomes if o.error is None]
    run_ctx = RunContext(name=name, hosts=[o.summary for o in good], errors=errors if errors is not None else [])
    try:
        for section in SECTIONS:
            parts = {o.host: o.parts[section.slug] for o in good if section.slug in o.parts}
            if not parts:
                continue
            with timings.stage(f"combine.{section.slug}"):
                data = section.combine(run_ctx, parts)  # the findings section (last) reads what the others computed
            if data is not None:
                run_ctx.sections[section.slug] = data
    finally:
        forget_combined()  # the hosts' combined views the sections shared (core/ops/views.py)
    return run_ctx


def _render_run(name: str, host_outcomes: list[HostOutcome], errors: list[dict], site_dir: Path, assets,
                timings: Timings, heap: LongLived) -> tuple[dict, dict]:
    """Combine a run's hosts and write its pages: (its summary.json block, its site index row)."""
    run_ctx = combine_run(name, host_outcomes, errors, timings)
    heap.freeze()  # the run's combined tables live until its pages are written
    computed = run_ctx.sections
    tools = [
        {"slug": s.slug, "title": s.title, "href": f"{s.slug}.html"}
        for s in SECTIONS
        if s.listed and s.slug in computed
    ]
    extra = [{"title": s.title, "href": s.nav_page} for s in SECTIONS if s.nav_page and s.slug in computed]
    nav = [{"title": "Summary", "href": "index.html"}, *tools, *extra]
    page = PageWriter(site_dir=site_dir, assets=assets, folder=name, nav=nav, run=name,
                      hosts=[h.host for h in run_ctx.hosts])
    (site_dir / name).mkdir(parents=True, exist_ok=True)
    run_summary = RunSummary(
        hosts=tuple(o.host for o in host_outcomes if o.error is None),
        errors=tuple(RunError(path=e["path"], message=e["message"]) for e in errors),
        tools={t["slug"]: ToolPage(page=f"{name}/{t['href']}") for t in tools},
    )
    for section in SECTIONS:
        if section.slug not in computed:
            continue
        with timings.stage(f"render.{section.slug}"):
            section.render(computed[section.slug], page)
            block = section.summary(computed[section.slug])
        if block is not None:
            run_summary = run_summary.with_block(section.summary_key or section.slug, block)
    with timings.stage("render.summary"):
        # The run's answer, drawn from the summary blocks the sections just wrote; its findings (None for runs of
        # older profilers' files, which have no rules) right under it.
        findings = computed.get("findings")
        page.write_html("index.html", "run_index.html", errors=errors,
                        findings=findings.findings if findings is not None else None,
                        verdict=run_verdict(name, run_summary, run_ctx.hosts, nav))
    row = index_row(name, quote(name) + "/index.html", run_summary, run_ctx.hosts, errors,
                    [{"title": t["title"], "href": quote(name) + "/" + t["href"]} for t in tools])
    row["pages"] = [item["href"] for item in nav]
    return run_summary.to_json(), row


__all__ = ["BuildOptions", "BuildReport", "build_site", "combine_run", "EXIT_OK", "EXIT_FAILED", "EXIT_PARTIAL"]
