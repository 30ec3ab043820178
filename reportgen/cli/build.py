"""`reportgen build`: logdirs to a site (and, on request, a single file, a bucket, a budget check)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

from reportgen.cli.common import EXAMPLES, fail, sample_logdir, warn
from reportgen.errors import NoCapturesError
from reportgen.output.formatting import terminal_text
from reportgen.output.publish import PublishError, is_gcs_url, open_destination, publish_site


def add_parser(sub) -> None:
    build = sub.add_parser(
        "build",
        help="build the site for one or more logdirs",
        description="Read every run and host under LOGDIR (a TensorBoard logdir, its plugins/profile "
        "folder or one run folder; local path or fsspec URL such as gs://…) and write the site.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument("logdirs", nargs="*", metavar="LOGDIR", help="default: the bundled sample")
    build.add_argument(
        "-o", "--output", metavar="DIR|gs://BUCKET/PREFIX",
        help="output folder, or a GCS location to publish to (default: site/, or none with --single-file)",
    )
    build.add_argument(
        "--single-file", metavar="FILE",
        help="also write one self-contained HTML file with every page (no trace, no graph viewer)",
    )
    build.add_argument("--runs", metavar="NAME,...", help="only these runs (comma-separated names)")
    build.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
        help="hosts processed in parallel (default: the number of cores)",
    )
    build.add_argument("--budget", metavar="FILE",
                       help="after building, check the runs against the budgets of FILE (TOML; see "
                       "`reportgen check --help`): exit status 3 when one is exceeded")
    build.add_argument(
        "--scheduler", metavar="tcp://HOST:8786",
        help="run the per-host stage on this Dask cluster (pip install 'reportgen[dask]'); the workers read "
        "the host files from LOGDIR's URL themselves, so give a location they can reach (gs://…)",
    )
    build.add_argument(
        "--no-cache", action="store_true",
        help="recompute every host (by default hosts whose files did not change are reused from the last build)",
    )
    build.add_argument(
        "--cache-dir", metavar="DIR",
        help="keep the rebuild cache in DIR (default: .NAME.reportgen-cache beside the output folder NAME); "
        "a folder of this user's (another user's is not used): entries are data files, signed with a key "
        "of this user's and checked before use",
    )
    build.add_argument(
        "--trace-format", choices=("json", "perfetto", "both"), default="json",
        help="trace export: chunked Chrome JSON (gzip), one Perfetto .pftrace per host, or both (default: json)",
    )
    build.add_argument(
        "--max-memory", metavar="SIZE",
        help="memory one host's decode may use, e.g. 8G or 512M; a capture estimated to need more is refused "
        "with the estimate while the others build (default: 3/4 of the memory available, divided among --jobs)",
    )
    build.add_argument("--timings", action="store_true", help="print the time each build stage took, and peak memory")
    build.add_argument("-v", "--verbose", action="store_true", help="one line per host: decoded or from the cache")
    build.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")


def run(args: argparse.Namespace) -> int:
    # From the first moment: importing the build machinery takes seconds, and a stop signal meanwhile must
    # end the command as one during the build does (one line, 128 + the signal), not by the signal's default.
    from reportgen.pipeline.stopping import BuildStopped, stop_on_signals

    built: list[Path] = []  # the site, once written: a later stop leaves it, not the previous one
    try:
        with stop_on_signals():
            return _run(args, built)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, BuildStopped) else signal.SIGINT
        name = signal.Signals(signum).name
        print(f"reportgen: stopped ({name}) after the site was written to {built[0]}" if built else
              f"reportgen: build stopped ({name}); the output folder is as it was", file=sys.stderr)
        return 128 + signum


def _run(args: argparse.Namespace, built: list[Path]) -> int:
    # The build machinery (pandas, numba, Altair) is imported below, not at the top, so that
    # --help, --version, `serve` and `publish` answer at once, and a wrong option at once too.
    budget = None
    if args.budget:
        from reportgen.compare.budget import BudgetError, load_budget

        try:  # before the build: a broken budget file should not cost a long build
            budget = load_budget(args.budget)
        except BudgetError as exc:
            return fail(str(exc))

    max_memory = None
    if args.max_memory is not None:
        from reportgen.pipeline.memory import parse_size

        try:
            max_memory = parse_size(args.max_memory)
        except ValueError as exc:
            return fail(f"--max-memory: {exc}")
    if args.output is not None and not args.output.strip():
        return fail('-o "": the output folder has no name; give a folder (or gs://BUCKET/PREFIX) for the site')
    locations = args.logdirs or [sample_logdir()]
    runs = {r.strip() for r in args.runs.split(",") if r.strip()} if args.runs else None
    remote = args.output is not None and is_gcs_url(args.output)
    fs = None
    if remote:
        try:  # before the build: a missing credential should not cost a long build
            fs = open_destination(args.output)
        except PublishError as exc:
            return fail(str(exc))
    from reportgen import kernels

    if not args.scheduler and kernels.CACHE_PROBLEM is None and kernels.cold_modules():
        # A machine's first build: the kernels compiled ahead start compiling now, on another core, while
        # this process imports the rest (≈ 2 s); build_site says so and waits for them where needed.
        kernels.start_precompile(kernels.groups_for(args.trace_format))
    from reportgen.errors import SchedulerError
    from reportgen.output.transaction import OutputError
    from reportgen.pipeline.build import BuildOptions, build_site
    from reportgen.pipeline.progress import BuildProgress, command_seconds
    from reportgen.pipeline.timings import format_timings

    with tempfile.TemporaryDirectory(prefix="reportgen-") as scratch:
        # A site that is only published or folded into one file is built in scratch space.
        local = args.output if args.output is not None and not remote else None
        if local is None and not remote and not args.single_file:
            local = "site"
        options = BuildOptions(
            output=local or str(Path(scratch) / "site"),
            runs=runs,
            jobs=max(1, args.jobs),
            progress=not args.quiet and not args.verbose and sys.stderr.isatty(),
            cache=not args.no_cache,
            cache_dir=args.cache_dir,
            scheduler=args.scheduler,
            trace_format=args.trace_format,
            max_memory=max_memory,
            log=(lambda line: print(f"reportgen: {terminal_text(line)}", file=sys.stderr)) if args.verbose else None,
            notes=None if args.quiet else (
                lambda line: print(terminal_text(line, keep_newlines=True), file=sys.stderr)),
        )
        startup = command_seconds()  # the interpreter, the imports and a first build's compile start
        try:
            report = build_site(locations, options)
        except (NoCapturesError, OutputError, SchedulerError) as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"cannot write the site: {exc}")
        built.append(report.output)
        for warning in report.warnings:
            warn(warning)
        for error in report.errors:  # one line each, whatever the path holds
            print(f"reportgen: error: {terminal_text(error['local_message'])}", file=sys.stderr)
        over_budget = None
        if budget is not None:
            from reportgen.cli.check import check_built_site

            over_budget = check_built_site(report.output, budget, jobs=options.jobs)
        timings = {"start-up": startup, **report.timings}
        from reportgen.cli.trend import trend_of_built_site

        try:  # a logdir of nightly runs gets its Trends page, published with the rest
            trend_of_built_site(report.output)
        except OSError as exc:
            return fail(f"cannot write the Trends page: {exc}")
        written = [str(report.output)] if local else []
        if args.single_file:
            from reportgen.export.timeline_embed import embed_timelines
            from reportgen.output.single_file import write_single_file

            # The build's bar has closed: this one goes on with the same clock (the command's).
            progress = BuildProgress(bar=options.progress, log=options.log)
            composing: list[str] = []

            def on_page(page: str, pages: int) -> None:
                if not composing:
                    progress.stage("single file", pages, "page")
                else:
                    progress.step(composing[-1])
                composing.append(page)
                progress.begin(page)

            composed = command_seconds()
            try:
                single = write_single_file(report.output, args.single_file, on_page, embed_timelines)
            except OSError as exc:
                return fail(f"cannot write {args.single_file}: {exc}")
            finally:
                progress.close()
            timings["single file"] = command_seconds() - composed
            written.append(f"{single.output} ({single.bytes / 2**20:.1f} MiB)")
        if remote:
            try:
                published = publish_site(report.output, args.output, fs=fs)
            except PublishError as exc:
                return fail(str(exc))
            written.append(published.url)
    if args.timings:  # the stages of the whole command, whose time the summary line gives too
        print(format_timings(timings, command_seconds(), report.peak_rss), file=sys.stderr)
    if not args.quiet:
        print(
            f"reportgen: {report.runs} run{'s' if report.runs != 1 else ''}, "
            f"{report.hosts} host{'s' if report.hosts != 1 else ''}, {report.events:,} events "
            f"in {command_seconds():.1f} s → {', '.join(written)}"
            + (f" ({len(report.errors)} input{'s' if len(report.errors) != 1 else ''} could not be read)"
               if report.errors else "")
        )
    return over_budget if over_budget is not None else report.exit_code
