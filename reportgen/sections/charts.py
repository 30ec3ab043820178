"""The stacked step-time chart, one for every page that shows steps (overview, input pipeline, older captures)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from reportgen.sections.vega import category_color, responsive, vega_spec


def step_chart(steps: pd.DataFrame, labels: dict[str, str]) -> dict | None:
    """Step time per step, stacked by category in the order of `labels` (XProf's step-time graph).

    `steps`: one row per step with `step_name`, `step_time_ms` and one column (ms) per key of `labels`.
    None when there is no step.
    """
    if steps.empty:
        return None
    # The legend lists the categories some step spends time in; the tooltip still gives every category.
    every = list(labels.values())
    order = [label for key, label in labels.items() if (steps[key].fillna(0) > 0).any()] or every
    wide = steps[["step_name", "step_time_ms", *labels]].rename(columns=labels)
    wide = wide.rename(columns={"step_name": "Step", "step_time_ms": "Step time"})
    wide["Step"] = wide["Step"].astype(str)
    wide["order"] = range(len(wide))
    tooltip = [alt.Tooltip("Step:N"), alt.Tooltip("Step time:Q", title="Step time (ms)", format=",.2f"),
               alt.Tooltip("Category:N"), alt.Tooltip("ms:Q", title="This category (ms)", format=",.2f")]
    tooltip += [alt.Tooltip(f"{label}:Q", title=f"{label} (ms)", format=",.2f") for label in every]
    chart = (
        alt.Chart(wide)
        .transform_fold(order, as_=["Category", "ms"])
        .transform_calculate(cat_order=f"indexof({order!r}, datum.Category)")
        .mark_bar()
        .encode(
            x=alt.X("Step:N", sort=alt.SortField("order"), title="Step"),
            y=alt.Y("ms:Q", stack="zero", title="Time (ms)"),
            color=category_color(every, order),
            order=alt.Order("cat_order:Q"),
            tooltip=tooltip,
        )
        .properties(height=300)
    )
    return responsive(vega_spec(chart))
