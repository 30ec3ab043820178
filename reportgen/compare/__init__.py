"""Reading built sites back: comparing two runs, budgets, pull-request summaries. Nothing here decodes a capture.

`sources.py` finds built runs (`SITE:RUN`, `LOGDIR:RUN`, a run folder; unbuilt runs are built into scratch
space) and reads their summary.json blocks and CSVs; `model.py` compares two runs (`welch.py`: is the step-time
change beyond the runs' noise?); `page.py` and `charts.py` write the comparison page; `budget.py` checks runs
against performance budgets; `pr_summary.py` writes the Markdown (or JSON) pull-request summary; `trend.py` reads
a history of many runs and finds its change points, `trend_page.py` writes its Trends page.
"""

from __future__ import annotations

from reportgen.compare.model import Change, Comparison, compare_runs
from reportgen.compare.sources import BuiltRun, BuiltSite, RunNotFoundError, RunRef, RunResolver

__all__ = ["BuiltRun", "BuiltSite", "Change", "Comparison", "RunNotFoundError", "RunRef", "RunResolver",
           "compare_runs"]
