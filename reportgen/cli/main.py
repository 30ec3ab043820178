"""`reportgen COMMAND …`: the parser, made of one module per command, and the dispatch to it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from reportgen import __version__
from reportgen.cli import build, check, compare, publish, serve, summary, trend
from reportgen.cli.common import EXAMPLES, EXIT_FAILED, Parser

# In the order `--help` lists them.
COMMANDS = {"build": build, "publish": publish, "serve": serve, "compare": compare, "summary": summary,
            "check": check, "trend": trend}


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


def entry() -> NoReturn:
    """The `reportgen` command (and `python -m reportgen`): `main`, then out without the interpreter's teardown.

    A build's process holds pandas, numba's kernels and LLVM: unwinding them at exit took ≈ 0.25 s of every
    command, a sixth of the bundled sample's build. When `main` returns, everything the command wrote is closed
    and everything it started has ended (files, the site's swap, worker processes, the kernel compiler, uploads),
    so what is left is the buffered output and the exit status. (`--help`, `--version` and usage errors leave
    through argparse's SystemExit, the usual way.)
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`reportgen … | head`): nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
