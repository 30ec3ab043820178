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
    return parser


def _fail(message: str) -> int:
    print(f"reportgen: {message}", file=sys.stderr)
    return EXIT_FAILED


def _build(args: argparse.Namespace) -> int:
    from reportgen.build import BuildOptions, build_site
    from reportgen.errors import SchedulerError
    from reportgen.site import OutputNotASiteError
    from reportgen.timings import format_timings

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
            log=(lambda line: print(f"reportgen: {line}", file=sys.stderr)) if args.verbose else None,
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
    return report.exit_code


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


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "build":
        return _build(args)
    if args.command == "publish":
        return _publish(args)
    if args.command == "serve":
        return _serve(args)
    parser.print_help()
    return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
