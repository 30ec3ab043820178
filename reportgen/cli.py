"""Command line: `reportgen build|publish|serve …`."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from reportgen import __version__
from reportgen.errors import NoCapturesError
from reportgen.publish import DEFAULT_JOBS, PublishError, is_gcs_url, open_destination, publish_site

DEFAULT_COMPARE_OUTPUT = "comparisons"  # where `compare` writes runs that are not in one site

# The exit codes of OUTPUTS.md (reportgen.build names them too); bad arguments
# count as "nothing could be built". The build machinery (pandas, numba,
# Altair) is imported only by `build`, so that --help, --version, `serve` and
# `publish` answer at once.
EXIT_OK = 0
EXIT_FAILED = 1

EXAMPLES = """\
examples:
  reportgen build                          build the bundled sample into site/
  reportgen build ~/logs/fit -o report/    every run under a TensorBoard logdir
  reportgen build gs://bucket/logs --runs 2024_06_01_12_00_00
  reportgen build logs/plugins/profile/run1 -q
  reportgen build ~/logs/fit -o gs://my-bucket/reports/fit     build and publish to GCS
  reportgen build ~/logs/fit --single-file report.html         one file to attach or mail
  reportgen publish site/ gs://my-bucket/reports/fit           publish a built site
  reportgen serve site/ --port 8000                            look at it on http://127.0.0.1:8000/
  reportgen compare site:before site:after                     compare two runs of a built site
  reportgen summary site/ --compare before after -o pr.md      a pull-request comment, charts beside it
  reportgen check site/ --max-step-ms 150 --max-input-percent 20    exit 3 when over budget
"""

COMPARE_EXAMPLES = """\
BASELINE and CANDIDATE name a run as SITE:RUN (a site written by `reportgen build`),
LOGDIR:RUN, a run folder, or a site or logdir holding one run. Runs that are not
built yet are built first into scratch space. Every figure is read from the runs'
built pages (summary.json and CSVs); the step-time change is judged against the
runs' own step-to-step noise with Welch's t-test.

examples:
  reportgen compare site:before site:after             writes site/compare/before--vs--after.html
  reportgen compare logs/plugins/profile/a logs/plugins/profile/b -o cmp/
  reportgen compare ~/logs:run1 ~/logs:run2
"""

SUMMARY_EXAMPLES = """\
examples:
  reportgen summary site/                                      Markdown to stdout
  reportgen summary site/ --compare main pr -o comment.md      plus comment-breakdown.png, … beside it
  reportgen summary ~/logs --format json
  reportgen summary site/ --compare main pr --site-url https://storage.googleapis.com/b/site -o pr.md
  reportgen summary site/ --compare main pr --budget budget.toml --baseline main --sticky profile \
      -o comment.md --step-summary

In GitHub Actions, --step-summary appends the Markdown to the job summary ($GITHUB_STEP_SUMMARY);
it is never appended unless asked. Charts are named <stem>-breakdown.png, <stem>-steps.png and
<stem>-ops.png after -o FILE's stem; --chart-url links them where a workflow publishes them.
--sticky KEY opens the Markdown with <!-- reportgen:sticky:KEY -->, the marker by which a CI step
finds the pull-request comment to edit instead of adding one on each push.
"""

CHECK_EXAMPLES = """\
Exit status: 0 every run is within budget, 3 a budget is exceeded (each violation is
listed), 1 the check could not be made. A budget file (TOML) holds the same budgets:

  max_step_ms = 150
  max_input_percent = 20
  max_regression = "5%"          # or 5 (percent), or "12ms"
  baseline = "main"              # a run of the site, or SITE:RUN, LOGDIR:RUN, a run folder
  runs = ["pr"]                  # optional: only these runs (default: all but the baseline)

examples:
  reportgen check site/ --max-step-ms 150 --max-input-percent 20
  reportgen check site/ --max-regression 5% --baseline main
  reportgen check ~/logs --budget budget.toml
  reportgen check site/ --budget budget.toml --max-regression off        drop one budget of the file
  reportgen check site/ --budget budget.toml --format github --junit junit.xml   GitHub annotations, JUnit
  reportgen build ~/logs -o site/ --budget budget.toml

--format github prints an ::error annotation for each breach and a ::warning for each check that
could not be made; --junit FILE writes one test case per run and budget (breaches fail);
--codequality FILE writes GitLab's Code Quality report.
"""

PUBLISH_EXAMPLES = """\
The site is uploaded file by file: assets and data first, then the tool pages,
the run index pages, the site index and summary.json last, so readers never
follow a link to a missing object. Objects under PREFIX from an earlier publish
that are not part of this site are deleted; a PREFIX holding anything other
than a reportgen site is refused.

Credentials: Application Default Credentials (`gcloud auth application-default
login`, GOOGLE_APPLICATION_CREDENTIALS=key.json, or the machine's service account
on Google Cloud). STORAGE_EMULATOR_HOST=host:port sends everything to a local
emulator instead, without credentials.

examples:
  reportgen publish site/ gs://my-bucket/reports/fit
  STORAGE_EMULATOR_HOST=127.0.0.1:9023 reportgen publish site/ gs://test-bucket/site
"""

SERVE_EXAMPLES = """\
examples:
  reportgen serve                      serve site/ on http://127.0.0.1:8000/
  reportgen serve report/ --port 0     any free port (the URL is printed)
"""


def sample_logdir() -> str:
    """The bundled sample: two real TF CPU captures (input-bound and fixed)."""
    return str(resources.files("reportgen").joinpath("sample"))


class _Parser(argparse.ArgumentParser):
    """argparse exits with status 2 on bad arguments; 2 means a partial site here."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_FAILED, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reportgen",
        description="Turn TensorFlow / JAX profiler captures into a static web site, no server needed.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reportgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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
        help="also write one self-contained HTML file with every page (no trace)",
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
        "only this user may write to it: cache entries are Python pickles",
    )
    build.add_argument(
        "--trace-format", choices=("json", "perfetto", "both"), default="json",
        help="trace export: chunked Chrome JSON (gzip), one Perfetto .pftrace per host, or both (default: json)",
    )
    build.add_argument("--timings", action="store_true", help="print the time each build stage took, and peak memory")
    build.add_argument("-v", "--verbose", action="store_true", help="one line per host: decoded or from the cache")
    build.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")

    publish = sub.add_parser(
        "publish",
        help="upload a built site to Google Cloud Storage",
        description="Upload the site built in SITE to gs://BUCKET/PREFIX, to be served as a static web site.",
        epilog=PUBLISH_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    publish.add_argument("site", metavar="SITE", help="a folder written by `reportgen build`")
    publish.add_argument("destination", metavar="gs://BUCKET/PREFIX")
    publish.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                         help=f"uploads in parallel (default: {DEFAULT_JOBS})")
    publish.add_argument("-q", "--quiet", action="store_true", help="no summary line")

    serve = sub.add_parser(
        "serve",
        help="serve a built site on this machine",
        description="Serve SITE over http (needed for 'Open in Perfetto UI'); Ctrl-C stops.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("site", nargs="?", default="site", metavar="SITE", help="default: site/")
    serve.add_argument("--port", type=int, default=8000, help="default: 8000; 0 picks a free port")
    serve.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                       help="address to listen on (default: 127.0.0.1, this machine only)")
    _add_compare_parsers(sub)
    return parser


def _add_compare_parsers(sub) -> None:
    jobs = {"type": int, "default": os.cpu_count() or 1, "metavar": "N",
            "help": "hosts processed in parallel when runs must be built first (default: the number of cores)"}
    compare = sub.add_parser(
        "compare", help="compare two runs: step time, breakdown, ops, kernels, input pipeline",
        description="Write a page comparing CANDIDATE with BASELINE: compare/<a>--vs--<b>.html.",
        epilog=COMPARE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("baseline", metavar="BASELINE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    compare.add_argument("-o", "--output", metavar="DIR",
                         help="folder to write into (default: the runs' site when both are runs of one built site, "
                         f"which then lists the comparison on its index; otherwise {DEFAULT_COMPARE_OUTPUT}/)")
    compare.add_argument("--jobs", **jobs)
    compare.add_argument("-q", "--quiet", action="store_true", help="no summary line")

    summary = sub.add_parser(
        "summary", help="a Markdown (or JSON) summary for a pull-request comment",
        description="Summarise the runs of SITE (or LOGDIR, built first) as GitHub-flavoured Markdown under "
        "65,000 characters: headline numbers, bottlenecks and, with --compare, the top changes.",
        epilog=SUMMARY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    summary.add_argument("location", metavar="LOGDIR|SITE")
    summary.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"),
                         help="compare two runs (run names of the site, or run references as for `compare`)")
    summary.add_argument("--format", choices=("markdown", "json"), default="markdown", help="default: markdown")
    summary.add_argument("--site-url", metavar="URL", help="where the site is published: the summary links to it")
    summary.add_argument("-o", "--output", metavar="FILE",
                         help="write FILE, and the charts as PNG files beside it (default: stdout, no charts)")
    summary.add_argument("--chart-url", metavar="URL",
                         help="link the charts as URL/<file> (where the workflow publishes them) instead of by file "
                         "name")
    summary.add_argument("--step-summary", action="store_true",
                         help="also append the Markdown to $GITHUB_STEP_SUMMARY (GitHub Actions' job summary; charts "
                         "only with --chart-url)")
    summary.add_argument("--sticky", metavar="KEY",
                         help="open with the hidden marker <!-- reportgen:sticky:KEY --> of a sticky pull-request "
                         "comment")
    summary.add_argument("--link", action="append", metavar="TEXT=URL",
                         help="end with this link (repeatable), e.g. the workflow run")
    _add_budget_arguments(summary, "budgets to show the check of, first (the exit status stays 0: "
                          "`reportgen check` fails a job)")
    summary.add_argument("--jobs", **jobs)

    check = sub.add_parser(
        "check", help="check runs against performance budgets (exit status 3 when over budget)",
        description="Check every run of SITE (or LOGDIR, built first) against the budgets given.",
        epilog=CHECK_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("location", metavar="SITE_OR_LOGDIR")
    _add_budget_arguments(check)
    check.add_argument("--runs", metavar="NAME,...", help="only these runs (default: every run but the baseline)")
    check.add_argument("--format", choices=("text", "github"), default="text",
                       help="github: also an ::error / ::warning annotation line per breach (default: text)")
    check.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report: a test case per run and budget")
    check.add_argument("--codequality", metavar="FILE", help="also write a GitLab Code Quality report (JSON)")
    check.add_argument("--jobs", **jobs)


def _add_budget_arguments(parser: argparse.ArgumentParser, title: str | None = None) -> None:
    group = parser.add_argument_group(title)
    group.add_argument("--budget", metavar="FILE", help="budgets from a TOML file; options given here override it")
    group.add_argument("--max-step-ms", metavar="MS", help="largest average step time allowed (off: none)")
    group.add_argument("--max-input-percent", metavar="PERCENT",
                       help="largest share of the step time spent waiting for input (off: none)")
    group.add_argument("--max-regression", metavar="LIMIT",
                       help="largest step-time increase over --baseline: 5%% or 12ms (off: none)")
    group.add_argument("--baseline", metavar="RUN_OR_SITE",
                       help="the run to measure regressions against: a run of SITE, or SITE:RUN, LOGDIR:RUN, a folder")


def _fail(message: str) -> int:
    print(f"reportgen: {message}", file=sys.stderr)
    return EXIT_FAILED


def _build(args: argparse.Namespace) -> int:
    from reportgen.build import BuildOptions, build_site
    from reportgen.errors import SchedulerError
    from reportgen.site import OutputNotASiteError
    from reportgen.timings import format_timings

    budget = None
    if args.budget:
        from reportgen.budget import BudgetError, load_budget

        try:  # before the build: a broken budget file should not cost a long build
            budget = load_budget(args.budget)
        except BudgetError as exc:
            return _fail(str(exc))

    locations = args.logdirs or [sample_logdir()]
    runs = {r.strip() for r in args.runs.split(",") if r.strip()} if args.runs else None
    remote = args.output is not None and is_gcs_url(args.output)
    fs = None
    if remote:
        try:  # before the build: a missing credential should not cost a long build
            fs = open_destination(args.output)
        except PublishError as exc:
            return _fail(str(exc))
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
            log=(lambda line: print(f"reportgen: {line}", file=sys.stderr)) if args.verbose else None,
            notes=None if args.quiet else (lambda line: print(line, file=sys.stderr)),
        )
        try:
            report = build_site(locations, options)
        except (NoCapturesError, OutputNotASiteError, SchedulerError) as exc:
            return _fail(str(exc))
        except OSError as exc:
            return _fail(f"cannot write the site: {exc}")
        for warning in report.warnings:
            print(f"reportgen: warning: {warning}", file=sys.stderr)
        for error in report.errors:
            print(f"reportgen: error: {error['local_message']}", file=sys.stderr)
        over_budget = None
        if budget is not None:
            from reportgen.compare_cli import check_built_site

            over_budget = check_built_site(report.output, budget, jobs=options.jobs)
        if args.timings:
            print(format_timings(report.timings, report.seconds, report.peak_rss), file=sys.stderr)
        written = [str(report.output)] if local else []
        if args.single_file:
            from reportgen.singlefile import write_single_file

            try:
                single = write_single_file(report.output, args.single_file)
            except OSError as exc:
                return _fail(f"cannot write {args.single_file}: {exc}")
            written.append(f"{single.output} ({single.bytes / 2**20:.1f} MiB)")
        if remote:
            try:
                published = publish_site(report.output, args.output, fs=fs)
            except PublishError as exc:
                return _fail(str(exc))
            written.append(published.url)
    if not args.quiet:
        print(
            f"reportgen: {report.runs} run{'s' if report.runs != 1 else ''}, "
            f"{report.hosts} host{'s' if report.hosts != 1 else ''}, {report.events:,} events "
            f"in {report.seconds:.1f} s → {', '.join(written)}"
            + (f" ({len(report.errors)} input{'s' if len(report.errors) != 1 else ''} could not be read)"
               if report.errors else "")
        )
    return over_budget if over_budget is not None else report.exit_code


def _publish(args: argparse.Namespace) -> int:
    try:
        report = publish_site(Path(args.site), args.destination, jobs=max(1, args.jobs))
    except PublishError as exc:
        return _fail(str(exc))
    if not args.quiet:
        print(
            f"reportgen: published {report.objects} files ({report.bytes / 2**20:.1f} MiB) to {report.url} "
            f"in {report.seconds:.1f} s"
            + (f"; deleted {report.deleted} stale object{'s' if report.deleted != 1 else ''}" if report.deleted else "")
        )
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from reportgen.serve import serve

    site = Path(args.site)
    if not (site / "index.html").is_file():
        return _fail(f"{site}: not a built site (no index.html); build one with `reportgen build -o {site}`")
    try:
        serve(site, port=args.port, bind=args.bind)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        return _fail(f"cannot serve on {args.bind}:{args.port}: {exc.strerror or exc}")
    return EXIT_OK


def _check_budget(args: argparse.Namespace):
    from reportgen.budget import budget_from_options

    return budget_from_options(args.budget, max_step_ms=args.max_step_ms, max_input_percent=args.max_input_percent,
                               max_regression=args.max_regression, baseline=args.baseline,
                               runs=getattr(args, "runs", None))


def _compare_commands(args: argparse.Namespace) -> int:
    from reportgen import compare_cli
    from reportgen.budget import BudgetError

    jobs = max(1, args.jobs)
    if args.command == "compare":
        return compare_cli.compare_command(args.baseline, args.candidate, args.output, jobs=jobs, quiet=args.quiet)
    try:
        budget = _check_budget(args)
    except BudgetError as exc:
        return _fail(str(exc))
    if args.command == "summary":
        return compare_cli.summary_command(args.location, args.compare, fmt=args.format, site_url=args.site_url,
                                           output=args.output, jobs=jobs, chart_url=args.chart_url, budget=budget,
                                           sticky=args.sticky, links=args.link, step_summary=args.step_summary)
    if budget.empty and not budget.turned_off:
        return _fail("check: give at least one budget (--max-step-ms, --max-input-percent, --max-regression "
                     "or --budget FILE)")
    return compare_cli.check_command(args.location, budget, jobs=jobs, fmt=args.format, junit=args.junit,
                                     codequality=args.codequality)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "build":
        return _build(args)
    if args.command == "publish":
        return _publish(args)
    if args.command == "serve":
        return _serve(args)
    if args.command in ("compare", "summary", "check"):
        return _compare_commands(args)
    parser.print_help()
    return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
