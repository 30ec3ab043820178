"""`reportgen publish`: a built site to Google Cloud Storage."""

from __future__ import annotations

import argparse
from pathlib import Path

from reportgen.cli.common import EXIT_OK, fail
from reportgen.output.publish import DEFAULT_JOBS, PublishError, publish_site

EXAMPLES = """\
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


def add_parser(sub) -> None:
    publish = sub.add_parser(
        "publish",
        help="upload a built site to Google Cloud Storage",
        description="Upload the site built in SITE to gs://BUCKET/PREFIX, to be served as a static web site.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    publish.add_argument("site", metavar="SITE", help="a folder written by `reportgen build`")
    publish.add_argument("destination", metavar="gs://BUCKET/PREFIX")
    publish.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                         help=f"uploads in parallel (default: {DEFAULT_JOBS})")
    publish.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args: argparse.Namespace) -> int:
    try:
        report = publish_site(Path(args.site), args.destination, jobs=max(1, args.jobs))
    except PublishError as exc:
        return fail(str(exc))
    if not args.quiet:
        print(
            f"reportgen: published {report.objects} files ({report.bytes / 2**20:.1f} MiB) to {report.url} "
            f"in {report.seconds:.1f} s"
            + (f"; deleted {report.deleted} stale object{'s' if report.deleted != 1 else ''}" if report.deleted else "")
        )
    return EXIT_OK
