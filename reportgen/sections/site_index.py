"""The site index (`index.html`): one row per run with its answer, and the runs' step times side by side."""

from __future__ import annotations

import altair as alt
import pandas as pd

from reportgen.core.steps.categories import CATEGORY_KEYS, CATEGORY_LABELS
from reportgen.output.formatting import step_time_axis
from reportgen.sections.vega import category_color, responsive, vega_spec


def step_time_chart(rows: list[dict]) -> dict | None:
    """Average step time of each run with steps, stacked by category (only the categories some run has).

    In µs when every run's step is under a millisecond (`step_time_axis` of the longest): ms ticks would read
    0.0000, 0.0005, … and run into each other on the horizontal axis."""
    with_steps = [r for r in rows if r.get("step_ms") is not None]
    unit, value, scale = step_time_axis(max((r["step_ms"] for r in with_steps), default=0.0))
    step = f"step_{value}"
    records = []
    for order, row in enumerate(with_steps):
        for key in CATEGORY_KEYS:
            ms = (row.get("breakdown_ms") or {}).get(key) or 0.0
            if ms > 0:
                records.append({"run": row["name"], "order": order, "Category": CATEGORY_LABELS[key],
                                "cat_order": CATEGORY_KEYS.index(key), value: ms * scale,
                                step: row["step_ms"] * scale})
    if not records:
        return None
    frame = pd.DataFrame(records)
    runs = list(dict.fromkeys(frame["run"]))
    every = [CATEGORY_LABELS[k] for k in CATEGORY_KEYS]
    shown = [label for label in every if label in set(frame["Category"])]
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("run:N", sort=runs, title=None, axis=alt.Axis(labelLimit=260)),
            x=alt.X(f"{value}:Q", stack="zero", title=f"Average step time ({unit})"),
            color=category_color(every, shown),
            order=alt.Order("cat_order:Q"),
            tooltip=[alt.Tooltip("run:N", title="Run"),
                     alt.Tooltip(f"{step}:Q", title=f"Step time ({unit})", format=",.2f"),
                     alt.Tooltip("Category:N"), alt.Tooltip(f"{value}:Q", title=unit, format=",.2f")],
        )
        .properties(height=max(40, 22 * len(runs)))
    )
    return responsive(vega_spec(chart))


def site_index_context(rows: list[dict]) -> dict:
    return {
        "runs": rows,
        "host_total": sum(len(r["hosts"]) for r in rows),
        "chart": step_time_chart(rows),
        "without_steps": [r["name"] for r in rows if r.get("step_ms") is None],
        "step_span": step_span(rows),
    }


def step_span(rows: list[dict]) -> tuple[float, float] | None:
    """The runs' shortest and longest average step (ms) when they span more than ten times: the stacked chart
    cannot take a log scale, so the page says that the short runs' bars are thin and the table sorts them."""
    steps = [r["step_ms"] for r in rows if r.get("step_ms")]
    if len(steps) < 2 or max(steps) < 10 * min(steps):
        return None
    return min(steps), max(steps)


__all__ = ["site_index_context", "step_span", "step_time_chart"]
