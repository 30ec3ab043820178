"""What every command shares: exit statuses, the parser class, messages, the bundled sample."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import resources

from reportgen.output.formatting import terminal_text

# The exit codes of the README's table (reportgen.pipeline.build names them too); bad
# arguments count as "nothing could be built".
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
  reportgen trend 'gs://my-bucket/nightly/*' -o history/     the runs' history: change points, what moved
"""

# `--jobs` of the commands that build runs first when they are not built yet.
BUILD_FIRST_JOBS = {"type": int, "default": os.cpu_count() or 1, "metavar": "N",
                    "help": "hosts processed in parallel when runs must be built first (default: the number of cores)"}


class Parser(argparse.ArgumentParser):
    """argparse exits with status 2 on bad arguments; 2 means a partial site here."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_FAILED, f"{self.prog}: error: {message}\n")


def fail(message: str) -> int:
    print(f"reportgen: {terminal_text(message, keep_newlines=True)}", file=sys.stderr)
    return EXIT_FAILED


def warn(message: str) -> None:
    print(f"reportgen: warning: {terminal_text(message, keep_newlines=True)}", file=sys.stderr)


def sample_logdir() -> str:
    """The bundled sample: two real TF CPU captures (input-bound and fixed)."""
    return str(resources.files("reportgen").joinpath("sample"))
