"""GitHub Actions' job summary: Markdown appended to the file named by $GITHUB_STEP_SUMMARY.

Appending is asked for (`reportgen summary --step-summary`), never implied by
the variable being set: a command whose output depends on the environment
would write twice in a workflow that already redirects it, and behave
differently when the same script runs on a laptop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV = "GITHUB_STEP_SUMMARY"
LIMIT_BYTES = 1024 * 1024  # GitHub refuses a step's summary beyond 1 MiB


class StepSummaryError(Exception):
    """The step summary cannot be written; the message says why."""


def step_summary_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The job summary file of this GitHub Actions step, or None outside GitHub Actions."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return Path(value) if value else None


def append_step_summary(markdown: str, path: Path) -> None:
    """Append `markdown` as a block of its own (the file holds every step's summary so far)."""
    data = markdown if markdown.endswith("\n") else markdown + "\n"
    try:
        size = path.stat().st_size if path.exists() else 0
        if size + len(data.encode("utf-8")) > LIMIT_BYTES:
            raise StepSummaryError(f"{path}: the step summary would pass GitHub's 1 MiB limit")
        with path.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if size else "") + data)
    except OSError as exc:
        raise StepSummaryError(f"{path}: cannot append the step summary ({exc.strerror or exc})") from exc


__all__ = ["ENV", "StepSummaryError", "append_step_summary", "step_summary_file"]
