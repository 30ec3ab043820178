"""Annotations: problems a CI system shows beside the code (GitHub's `::error` lines).

An annotation is a plain record (severity, title, message, optional file
location), so anything that judges a run can feed the same writers: budget
breaches (`from_budget`) and the runs' findings (`from_findings`). Each writer
takes a list of annotations: `github_commands` (GitHub Actions workflow
commands) and `reportgen.ci.codequality` (GitLab's Code Quality report).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reportgen.compare.budget import NOT_CHECKED, OVER, Budget, CheckResult

ERROR, WARNING, NOTICE = "error", "warning", "notice"
SEVERITIES = (ERROR, WARNING, NOTICE)


@dataclass(frozen=True)
class Location:
    """Where an annotation points: a file of the repository, optionally a line."""

    path: str  # relative to the repository root, with forward slashes
    line: int | None = None


@dataclass(frozen=True)
class Annotation:
    severity: str  # ERROR, WARNING or NOTICE
    title: str
    message: str
    location: Location | None = None
    check: str = "reportgen"  # a stable name of the rule that made it (for fingerprints)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"annotation severity {self.severity!r}: one of {', '.join(SEVERITIES)}")


# GitHub's rules (the toolkit's escapeData / escapeProperty): the message may not
# hold % or line breaks; a property (file, title) may not hold those, nor : or ,
# which separate the properties.
_DATA = {"%": "%25", "\r": "%0D", "\n": "%0A"}
_PROPERTY = {**_DATA, ":": "%3A", ",": "%2C"}


def escape_data(text: str) -> str:
    return "".join(_DATA.get(ch, ch) for ch in text)


def escape_property(text: str) -> str:
    return "".join(_PROPERTY.get(ch, ch) for ch in text)


def github_command(annotation: Annotation) -> str:
    """One `::error file=…,line=…,title=…::message` line."""
    props = []
    if annotation.location is not None:
        props.append(f"file={escape_property(annotation.location.path)}")
        if annotation.location.line is not None:
            props.append(f"line={annotation.location.line}")
    props.append(f"title={escape_property(annotation.title)}")
    return f"::{annotation.severity} {','.join(props)}::{escape_data(annotation.message)}"


def github_commands(annotations: Iterable[Annotation]) -> list[str]:
    return [github_command(a) for a in annotations]


def without_workflow_commands(text: str, token: str | None = None) -> str:
    """`text` (which holds capture names) wrapped so that GitHub runs none of its lines
    as a workflow command: a run folder named `x\\n::add-mask::…` stays text."""
    token = token or secrets.token_hex(16)
    return f"::stop-commands::{token}\n{text}\n::{token}::"


def repository_path(path: Path, root: Path | None = None) -> str:
    """`path` relative to the repository (GITHUB_WORKSPACE / CI_PROJECT_DIR, else the
    current folder), as annotations name files; unchanged when it lies outside."""
    if root is None:
        root = Path(os.environ.get("GITHUB_WORKSPACE") or os.environ.get("CI_PROJECT_DIR") or os.getcwd())
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def key_line(path: Path, key: str) -> int | None:
    """The line of a TOML file that sets top-level `key` (1-based), if it can be read."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    return next((number for number, line in enumerate(lines, 1) if pattern.match(line)), None)


BUDGET_TITLES = {
    "max_step_ms": "step-time budget",
    "max_input_percent": "input-share budget",
    "max_regression": "regression budget",
    "fail_on_finding": "findings budget",
}
# A finding the budget does not refuse is still shown: high and medium ones as warnings, the others as notices.
FINDING_ANNOTATION = {"high": WARNING, "medium": WARNING, "low": NOTICE, "info": NOTICE}


def from_budget(result: CheckResult, budget: Budget) -> list[Annotation]:
    """An error for each run over a budget, a warning for each check that could not be
    made; located on the budget file's line when the limit came from a file."""
    annotations = []
    for outcome in result.outcomes:
        if outcome.status not in (OVER, NOT_CHECKED):
            continue
        what = BUDGET_TITLES.get(outcome.budget, outcome.budget)
        title = f"{outcome.run}: over the {what}" if outcome.status == OVER else f"{outcome.run}: {what} not checked"
        if outcome.finding:
            title = f"{outcome.run}: finding {outcome.finding}"
        source = budget.source(outcome.budget)
        location = Location(repository_path(source), key_line(source, outcome.budget)) if source else None
        check = f"reportgen/finding/{outcome.finding}" if outcome.finding else f"reportgen/budget/{outcome.budget}"
        annotations.append(Annotation(ERROR if outcome.status == OVER else WARNING, title, outcome.message,
                                      location, check=check))
    return annotations


def from_findings(result: CheckResult, budget: Budget) -> list[Annotation]:
    """One annotation per finding of the checked runs that the budget does not refuse (`from_budget` makes the
    refused ones errors): what is wrong, what is at stake, what to do."""
    annotations = []
    for run, findings in result.findings.items():
        for f in findings:
            if budget.refused(f) is not None:
                continue
            message = f"{f.title}. What to do: {f.action}"
            annotations.append(Annotation(FINDING_ANNOTATION.get(f.severity, NOTICE),
                                          f"{run}: {f.severity} finding {f.id}", message,
                                          check=f"reportgen/finding/{f.id}"))
    return annotations


__all__ = ["ERROR", "NOTICE", "SEVERITIES", "WARNING", "Annotation", "Location", "escape_data", "escape_property",
           "from_budget", "from_findings", "github_command", "github_commands", "key_line", "repository_path",
           "without_workflow_commands"]
