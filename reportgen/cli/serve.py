"""`reportgen serve`: a built site over http on this machine."""

from __future__ import annotations

import argparse
from pathlib import Path

from reportgen.cli.common import EXIT_OK, fail

EXAMPLES = """\
examples:
  reportgen serve                      serve site/ on http://127.0.0.1:8000/
  reportgen serve report/ --port 0     any free port (the URL is printed)
"""


def add_parser(sub) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve a built site on this machine",
        description="Serve SITE over http (needed for 'Open in Perfetto UI'); Ctrl-C stops.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("site", nargs="?", default="site", metavar="SITE", help="default: site/")
    serve.add_argument("--port", type=int, default=8000, help="default: 8000; 0 picks a free port")
    serve.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                       help="address to listen on (default: 127.0.0.1, this machine only)")


def run(args: argparse.Namespace) -> int:
    from reportgen.output.serve import serve

    if not 0 <= args.port <= 65535:
        return fail(f"--port {args.port}: a port is a number from 0 to 65535 (0 picks a free one)")
    site = Path(args.site)
    if not (site / "index.html").is_file():
        return fail(f"{site}: not a built site (no index.html); build one with `reportgen build -o {site}`")
    try:
        serve(site, port=args.port, bind=args.bind)
    except KeyboardInterrupt:
        pass
    except (OSError, OverflowError, ValueError) as exc:
        return fail(f"cannot serve on {args.bind}:{args.port}: {getattr(exc, 'strerror', None) or exc}")
    return EXIT_OK
