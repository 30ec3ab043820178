"""`reportgen COMMAND …`: the parser, made of one module per command, and the dispatch to it."""

from __future__ import annotations

import argparse
import sys

from reportgen import __version__
from reportgen.cli import build, check, compare, publish, serve, summary
from reportgen.cli.common import EXAMPLES, EXIT_FAILED, Parser

# In the order `--help` lists them.
COMMANDS = {"build": build, "publish": publish, "serve": serve, "compare": compare, "summary": summary,
            "check": check}


def parser() -> argparse.ArgumentParser:
    top = Parser(
        prog="reportgen",
        description="Turn TensorFlow / JAX profiler captures into a static web site, no server needed.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"reportgen {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    top = parser()
    args = top.parse_args(argv)
    command = COMMANDS.get(args.command)
    if command is None:
        top.print_help()
        return EXIT_FAILED
    return command.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
