"""Command line: `reportgen build [LOGDIR ...] [-o DIR] …`."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import resources

from reportgen import __version__
from reportgen.build import EXIT_FAILED, BuildOptions, build_site
from reportgen.errors import NoCapturesError
from reportgen.site import OutputNotASiteError

EXAMPLES = """\
examples:
  reportgen build                          build the bundled sample into site/
  reportgen build ~/logs/fit -o report/    every run under a TensorBoard logdir
  reportgen build gs://bucket/logs --runs 2024_06_01_12_00_00
  reportgen build logs/plugins/profile/run1 -q
"""


def sample_logdir() -> str:
    """The bundled sample: two real TF CPU captures (input-bound and fixed)."""
    return str(resources.files("reportgen").joinpath("sample"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    build.add_argument("-o", "--output", default="site", metavar="DIR", help="output folder (default: site/)")
    build.add_argument("--runs", metavar="NAME,...", help="only these runs (comma-separated names)")
    build.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
        help="hosts processed in parallel (default: the number of cores)",
    )
    build.add_argument(
        "--trace-format", choices=("json", "perfetto", "both"), default="json",
        help="trace export: chunked Chrome JSON (gzip), one Perfetto .pftrace per host, or both (default: json)",
    )
    build.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    return parser


def _build(args: argparse.Namespace) -> int:
    locations = args.logdirs or [sample_logdir()]
    runs = {r.strip() for r in args.runs.split(",") if r.strip()} if args.runs else None
    options = BuildOptions(
        output=args.output,
        runs=runs,
        jobs=max(1, args.jobs),
        progress=not args.quiet and sys.stderr.isatty(),
        trace_format=args.trace_format,
    )
    try:
        report = build_site(locations, options)
    except (NoCapturesError, OutputNotASiteError) as exc:
        print(f"reportgen: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"reportgen: cannot write the site: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for error in report.errors:
        print(f"reportgen: error: {error['message']}", file=sys.stderr)
    if not args.quiet:
        print(
            f"reportgen: {report.runs} run{'s' if report.runs != 1 else ''}, "
            f"{report.hosts} host{'s' if report.hosts != 1 else ''}, {report.events:,} events "
            f"in {report.seconds:.1f} s → {report.output}"
            + (f" ({len(report.errors)} input{'s' if len(report.errors) != 1 else ''} could not be read)"
               if report.errors else "")
        )
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "build":
        return _build(args)
    parser.print_help()
    return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
