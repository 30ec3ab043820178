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

import pandas as pd


def vega_spec(chart: Any, datasets: dict[str, pd.DataFrame | list[dict]] | None = None) -> dict:
    """The chart's Vega-Lite spec; `datasets` fills `alt.Data(name=...)` sources by name."""
    spec = chart.to_dict(validate=False)
    if datasets:
        rows = {name: data.to_dict("records") if isinstance(data, pd.DataFrame) else data
                for name, data in datasets.items()}
        spec.setdefault("datasets", {}).update(rows)
    return spec
