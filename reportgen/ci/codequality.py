"""GitLab's Code Quality report (`artifacts:reports:codequality`) from annotations.

GitLab shows each entry in the merge request, new ones (by fingerprint, against
the target branch's report) first. The fingerprint leaves the run's name out:
runs are named after the branch or merge request, and a budget broken on the
target branch too is not new.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from reportgen.ci.annotations import ERROR, NOTICE, WARNING, Annotation

SEVERITY = {ERROR: "major", WARNING: "minor", NOTICE: "info"}
NO_FILE = "."  # GitLab requires a path; budgets given on the command line have none


def codequality_entry(annotation: Annotation) -> dict:
    location = annotation.location
    path = location.path if location is not None else NO_FILE
    line = location.line if location is not None and location.line is not None else 1
    fingerprint = hashlib.sha256("\0".join((annotation.check, annotation.severity, path)).encode()).hexdigest()
    return {
        "type": "issue",
        "check_name": annotation.check,
        "description": annotation.message,
        "severity": SEVERITY[annotation.severity],
        "fingerprint": fingerprint,
        "location": {"path": path, "lines": {"begin": line}},
    }


def codequality_report(annotations: Iterable[Annotation]) -> str:
    """The report's JSON text (a list of entries; an empty list when all is well)."""
    return json.dumps([codequality_entry(a) for a in annotations], indent=1, ensure_ascii=False) + "\n"


__all__ = ["codequality_entry", "codequality_report"]
