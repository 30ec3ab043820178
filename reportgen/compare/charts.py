"""Vega-Lite specs of a comparison, shared by the HTML page and the Markdown PNGs."""

from __future__ import annotations

import altair as alt
import pandas as pd

from reportgen.compare.model import Comparison
from reportgen.core.steps.categories import CATEGORY_LABELS
from reportgen.output.formatting import step_time_axis
from reportgen.sections.vega import category_color, vega_spec

TOP_CHANGES = 10
NAME_LABEL_CHARS = 60
FASTER, SLOWER = "#1a7f37", "#cf222e"


def run_labels(comparison: Comparison) -> tuple[str, str]:
    """How the two runs are named on charts (distinct even when the run names are equal)."""
    return f"Baseline · {comparison.baseline.name}", f"Candidate · {comparison.candidate.name}"


def breakdown_chart(comparison: Comparison) -> dict | None:
    """Both runs' average step, stacked by category, one bar each."""
    if not comparison.breakdown:
        return None
    base, cand = run_labels(comparison)
    unit, value_field, scale = step_time_axis(comparison.typical_step_ms)  # as the page's figures
    rows = []
    for order, change in enumerate(comparison.breakdown):
        for run, value in ((base, change.baseline), (cand, change.candidate)):
            rows.append({"Run": run, "Category": change.label, value_field: (value or 0.0) * scale, "order": order})
    categories = [c.label for c in comparison.breakdown]
    chart = (
        alt.Chart(pd.DataFrame(rows), title="Average step time by category")
        .mark_bar()
        .encode(
            y=alt.Y("Run:N", sort=[base, cand], title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X(f"{value_field}:Q", stack="zero", title=f"Average step time ({unit})"),
            # the categories' colours of every other chart of the site
            color=category_color([*CATEGORY_LABELS.values(), *(c for c in categories if c not in
                                                                 CATEGORY_LABELS.values())], categories),
            order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("Run:N"), alt.Tooltip("Category:N"),
                     alt.Tooltip(f"{value_field}:Q", title=f"Average ({unit})", format=",.3f")],
        )
        .properties(width=600, height=90)
    )
    return vega_spec(chart)


def step_times_chart(comparison: Comparison) -> dict | None:
    """Every step of both runs as a tick, with each run's average: the noise the test weighs."""
    base, cand = run_labels(comparison)
    unit, f, scale = step_time_axis(comparison.typical_step_ms)
    rows = [{"Run": base, "Step": i + 1, f: v * scale} for i, v in enumerate(comparison.baseline.step_times_ms())]
    rows += [{"Run": cand, "Step": i + 1, f: v * scale} for i, v in enumerate(comparison.candidate.step_times_ms())]
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    encoding = {"y": alt.Y("Run:N", sort=[base, cand], title=None, axis=alt.Axis(labelLimit=360))}
    ticks = alt.Chart(frame).mark_tick(thickness=2, size=22).encode(
        x=alt.X(f"{f}:Q", title=f"Step time ({unit})", scale=alt.Scale(zero=True)),
        tooltip=[alt.Tooltip("Run:N"), alt.Tooltip("Step:Q", title="Step (in order)"),
                 alt.Tooltip(f"{f}:Q", title=f"Step time ({unit})", format=",.3f")],
        color=alt.value("#0b57d0"), **encoding)
    means = alt.Chart(frame).mark_point(shape="diamond", size=120, filled=True, color="#1f2328").encode(
        x=alt.X(f"mean({f}):Q"), tooltip=[alt.Tooltip("Run:N"),
                                          alt.Tooltip(f"mean({f}):Q", title=f"Average ({unit})", format=",.3f")],
        **encoding)
    return vega_spec((ticks + means).properties(width=600, height=90, title="Step times (ticks) and averages (◆)"))


def elide(text: str, limit: int) -> str:
    """`text` cut to `limit` characters in the middle: both the scope a name starts with
    and the op it ends with stay readable."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


def change_chart(changes: pd.DataFrame, name_column: str, value_column: str, title: str) -> dict | None:
    """The largest changes as bars left (faster) and right (slower) of zero, in ms."""
    top = changes.head(TOP_CHANGES)
    top = top[top["delta_us"] != 0]
    if top.empty:
        return None
    frame = pd.DataFrame({
        "name": [f"{i + 1}. {elide(str(n), NAME_LABEL_CHARS)}" for i, n in enumerate(top[name_column])],
        "full_name": top[name_column].astype(str).to_numpy(),
        "delta_ms": top["delta_us"].to_numpy() / 1e3,
        "baseline_ms": top[f"{value_column}_baseline"].to_numpy() / 1e3,
        "candidate_ms": top[f"{value_column}_candidate"].to_numpy() / 1e3,
        "change": ["faster" if d < 0 else "slower" for d in top["delta_us"]],
    })
    chart = (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            y=alt.Y("name:N", sort=list(frame["name"]), title=None, axis=alt.Axis(labelLimit=420)),
            x=alt.X("delta_ms:Q", title="Change in total time (ms)"),
            color=alt.Color("change:N", scale=alt.Scale(domain=["faster", "slower"], range=[FASTER, SLOWER]),
                            title=None),
            tooltip=[alt.Tooltip("full_name:N", title="Name"),
                     alt.Tooltip("baseline_ms:Q", title="Baseline (ms)", format=",.3f"),
                     alt.Tooltip("candidate_ms:Q", title="Candidate (ms)", format=",.3f"),
                     alt.Tooltip("delta_ms:Q", title="Change (ms)", format="+,.3f")],
        )
        .properties(width=420, height=max(60, 22 * len(frame)))
    )
    return vega_spec(chart)


def op_change_chart(comparison: Comparison, side: str) -> dict | None:
    ops = comparison.ops[comparison.ops["side"] == side]
    return change_chart(ops, "name", "self_us", f"{side} ops: largest changes in self time")


def kernel_change_chart(comparison: Comparison) -> dict | None:
    if comparison.kernels is None:
        return None
    return change_chart(comparison.kernels, "kernel", "total_us", "GPU kernels: largest changes in total time")


__all__ = ["breakdown_chart", "change_chart", "elide", "kernel_change_chart", "op_change_chart", "run_labels",
           "step_times_chart"]
