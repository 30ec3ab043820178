"""`reportgen trend`: the history of many built runs, its change points and what moved across them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.cli.common import BUILD_FIRST_JOBS, EXIT_OK, fail, warn
from reportgen.output.formatting import fmt_change_pct, fmt_step_delta

if TYPE_CHECKING:  # imported when the command runs (see reportgen/cli/check.py)
    from reportgen.compare.sources import BuiltSite
    from reportgen.compare.trend import History

DEFAULT_OUTPUT = "trends"

EXAMPLES = """\
Each SITE is a folder or gs:// URL written by `reportgen build` (or `publish`): the history is read from
the runs' summary.json and CSVs, never from their captures, so a nightly job builds its new run only.
A LOGDIR that is not a site is built first, into the output folder. Runs are ordered by the capture time
their folder's name holds (TensorBoard's YYYY_MM_DD_HH_MM_SS); runs whose program differs from the
series' (host count, device, HLO modules, top ops) are flagged and left out of the change points.

examples:
  reportgen trend 'gs://bucket/nightly/*' -o history/          (each night's site, one run each)
  reportgen trend site/ --series 'nightly_*'                     writes site/trends/index.html
  reportgen trend ~/logs -o site/                                 build the logdir, then its Trends page
"""


def add_parser(sub) -> None:
    trend = sub.add_parser(
        "trend", help="the history of many runs: change points in step time and what moved across them",
        description="Write a Trends page of the runs of the SITEs given: index.html, trend.json, data/*.csv "
        "(trends/ inside a built site).", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    trend.add_argument("locations", metavar="SITE_OR_LOGDIR", nargs="+")
    trend.add_argument("-o", "--output", metavar="DIR",
                       help=f"folder to write into (default: the site when one local site is given, else "
                       f"{DEFAULT_OUTPUT}/)")
    trend.add_argument("--series", metavar="PATTERN", help="only the runs whose name matches this glob pattern")
    trend.add_argument("--jobs", **BUILD_FIRST_JOBS)
    trend.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args: argparse.Namespace) -> int:
    return trend_command(args.locations, args.output, series=args.series, jobs=max(1, args.jobs), quiet=args.quiet)


def expand(locations: list[str]) -> list[str]:
    """Locations with glob patterns in a URL (a shell does not expand gs:// ones) replaced by the sites they
    match: the folders holding a summary.json, in name order."""
    import fsspec

    out = []
    for location in locations:
        if any(c in location for c in "*?[") and "://" in location:
            fs, path = fsspec.core.url_to_fs(location)
            fs.invalidate_cache()  # a nightly job may have published a site since this process last listed
            protocol = location.split("://", 1)[0]
            out += sorted(f"{protocol}://{p}" for p in fs.glob(path) if fs.exists(p.rstrip("/") + "/summary.json"))
        else:
            out.append(location)
    return out


def open_sites(locations: list[str], output: str, jobs: int) -> list[BuiltSite]:
    """The sites at `locations`; those that are not sites are built, together, into `output`."""
    from reportgen.compare.sources import BuiltSite

    sites = {loc: BuiltSite.open(loc) for loc in locations}
    unbuilt = [loc for loc, site in sites.items() if site is None]
    if unbuilt:
        from reportgen.pipeline.build import BuildOptions, build_site  # the build's modules only when building

        report = build_site(unbuilt, BuildOptions(output=output, jobs=jobs))
        for error in report.errors:
            warn(error.get("local_message", error["message"]))
        built = BuiltSite.open(output)
        assert built is not None, "a finished build always writes summary.json"
        sites.update({loc: built for loc in unbuilt})
    unique: dict[int, BuiltSite] = {}
    for site in sites.values():  # a site given twice (or built once for several logdirs) counts once
        unique.setdefault(id(site), site)
    return list(unique.values())


def describe(history: History) -> str:
    runs = f"{len(history.runs)} run{'s' if len(history.runs) != 1 else ''}"
    if history.not_comparable:
        runs += f" ({len(history.not_comparable)} not comparable)"
    if not history.change_points:
        return f"{runs}, no change point"
    like = max((r.step_ms for r in history.runs if r.step_ms is not None), default=None)
    points = "; ".join(f"{c.before.name} → {c.after.name} {fmt_step_delta(c.size_ms, 2, like)} "
                       f"({fmt_change_pct(c.size_percent)})" for c in history.change_points)
    return f"{runs}, {len(history.change_points)} change point{'s' if len(history.change_points) != 1 else ''}: " \
           + points


def trend_command(locations: list[str], output: str | None, series: str | None = None, jobs: int = 1,
                  quiet: bool = False) -> int:
    from reportgen.compare.sources import BuiltSite
    from reportgen.compare.trend import build_history
    from reportgen.compare.trend_page import write_trend
    from reportgen.errors import NoCapturesError
    from reportgen.output.transaction import OutputError

    try:
        locations = expand(locations)
    except (OSError, ValueError) as exc:
        return fail(f"cannot list {exc}")
    if output is None:
        local = [loc for loc in locations if "://" not in loc and Path(loc).is_dir()]
        output = locations[0] if len(locations) == 1 and local and BuiltSite.open(locations[0]) else DEFAULT_OUTPUT
    try:
        sites = open_sites(locations, output, jobs)
    except NoCapturesError as exc:
        return fail(f"not a reportgen site, and {exc}")
    except OutputError as exc:
        return fail(str(exc))
    history = build_history(sites, series)
    if not history.runs:
        return fail(f"no run{f' matches {series!r}' if series else ''} in {', '.join(locations)}")
    try:
        written = write_trend(history, Path(output))
    except OutputError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write the Trends page: {exc}")
    if not quiet:
        print(f"reportgen: trend: {describe(history)} → {written.page}", file=sys.stderr)
    return EXIT_OK


SERIES_MIN_RUNS = 6  # the fewest runs a change point can be found in (3 on each side)


def trend_of_built_site(site_dir: Path) -> Path | None:
    """`build`: a site whose logdir holds a series (6 runs or more named after their capture time, as
    TensorBoard names them) gets its Trends page; the page written, or None."""
    from reportgen.compare.sources import BuiltSite
    from reportgen.compare.trend import capture_time

    site = BuiltSite.open(str(site_dir))
    if site is None:
        return None
    dated = [name for name in site.run_names if capture_time(site.run(name).folder) or capture_time(name)]
    if len(dated) < SERIES_MIN_RUNS:
        return None
    from reportgen.compare.trend import build_history
    from reportgen.compare.trend_page import write_trend

    return write_trend(build_history([site]), site_dir).page
