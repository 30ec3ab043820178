"""Altair charts to Vega-Lite spec dicts, the way every page embeds them.

Altair validates each spec against the Vega-Lite JSON schema when it is
converted, and copies and checks every inline data row on the way: on a large
capture that took more of a site build than computing the numbers. Specs are
converted without validation here; the test suite validates every spec of a
built site against the same schema instead (tests/test_vega_specs.py), and
the browser tests draw every chart.

Large data goes in as named datasets after conversion, so Altair never walks
the rows at all.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

# Charts embed their data in the page on purpose (the site works offline and
# from file://); the sections size that data, so Altair's 5,000-row guard,
# meant for notebooks, does not apply.
alt.data_transformers.disable_max_rows()

Datasets = dict[str, "pd.DataFrame | list[dict]"]


def vega_spec(chart: Any, datasets: Datasets | None = None) -> dict:
    """The chart's Vega-Lite spec; `datasets` fills `alt.Data(name=...)` sources by name."""
    spec = chart.to_dict(validate=False)
    return with_datasets(spec, datasets) if datasets else spec


# One colour per step-time category on every chart of the site (Tableau 10), whichever categories a chart shows.
CATEGORY_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
                   "#bab0ac"]


def category_color(labels: list[str], shown: list[str]) -> alt.Color:
    """The colour channel for step-time categories: colours fixed by position in `labels`, legend of `shown`."""
    return alt.Color("Category:N", sort=shown, title="Category",
                     scale=alt.Scale(domain=labels, range=CATEGORY_COLORS[:len(labels)]),
                     legend=alt.Legend(values=shown, labelLimit=300))


def responsive(spec: dict) -> dict:
    """The spec drawn as wide as its page column (`width: "container"`), so that no chart is a narrow strip on a
    wide screen or wider than a narrow one. The chart macro gives such charts a full-width container."""
    return {**spec, "width": "container", "autosize": {"type": "fit-x", "contains": "padding"}}


def with_datasets(spec: dict, datasets: Datasets) -> dict:
    """A copy of `spec` (a chart built once and reused, e.g. per host) holding these datasets.

    Only the top level is copied: specs are never changed once built."""
    rows = {name: records(data) if isinstance(data, pd.DataFrame) else data for name, data in datasets.items()}
    return {**spec, "datasets": {**spec.get("datasets", {}), **rows}}


def records(frame: pd.DataFrame) -> list[dict]:
    """`frame.to_dict("records")`, a few times faster: columns become lists in one C call each."""
    names = [str(c) for c in frame.columns]
    columns = [frame[c].to_numpy().tolist() for c in frame.columns]
    return [dict(zip(names, row)) for row in zip(*columns)]
