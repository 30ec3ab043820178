"""Comparing two runs from their built sites: model, Welch test, page."""

from __future__ import annotations

from reportgen.compare.model import Change, Comparison, compare_runs
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver

__all__ = ["BuiltRun", "BuiltSite", "Change", "Comparison", "RunNotFoundError", "RunRef", "RunResolver",
           "compare_runs"]
