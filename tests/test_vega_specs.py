"""Every chart spec a build writes is valid Vega-Lite.

Pages convert Altair charts without Altair's own schema validation (it cost
seconds per build on large captures, see reportgen/sections/vega.py); this
test puts the same check back, on every chart of sites built from the
bundled sample, every shared capture, the older-format captures and a
comparison page, against the Vega-Lite JSON schema Altair ships. The rows of
inline datasets are checked against the schema's rule for them in Python,
and the schema walks only their first rows (`_rows_checked` says why).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from altair.vegalite.v6.schema import core as vl_core

from tests.clirun import sample_site_build
from tests.conftest import needs_shared
from tests.sharedsite import shared_site
from tests.sitecheck import html_pages

SPEC_SCRIPT = re.compile(r'<script type="application/json" id="([^"]+)-spec">(.*?)</script>', re.S)


def _validator() -> jsonschema.protocols.Validator:
    schema = vl_core.load_schema()
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _page_specs(site: Path) -> list[tuple[str, str, dict]]:
    specs = []
    for page in html_pages(site):
        for chart_id, text in SPEC_SCRIPT.findall(page.read_text(encoding="utf-8")):
            # Jinja's tojson escapes <, >, & and ' as \\u003c etc.: still valid JSON.
            specs.append((str(page.relative_to(site)), chart_id, json.loads(text)))
    return specs


# The schema's InlineDataset: an array whose items are all of one of these JSON types (or a string, an object).
ROW_KINDS = {
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
}
ROWS_VALIDATED = 3


def _rows_checked(rows, where: str, problems: list[str]):
    """`rows`, an inline dataset, checked here against the schema's rule for them (one JSON type throughout) and
    cut to its first rows for the schema's own check. That check walks each row through the rule's four-way anyOf
    and, on the shared site's 172 charts, took 10.8 s, nearly all of it in the rows."""
    if not isinstance(rows, list):
        return rows
    if not any(all(is_kind(v) for v in rows) for is_kind in ROW_KINDS.values()):
        problems.append(f"{where}: the dataset's rows are not all numbers, strings, booleans or objects")
    return rows[:ROWS_VALIDATED]


def _short_data(node, where: str, problems: list[str]):
    """A copy of the spec `node` with every inline dataset (`datasets`, `data.values`) through `_rows_checked`."""
    if isinstance(node, list):
        return [_short_data(item, where, problems) for item in node]
    if not isinstance(node, dict):
        return node
    short = {key: _short_data(value, where, problems) for key, value in node.items()
             if key not in ("datasets", "data")}
    if isinstance(node.get("datasets"), dict):
        short["datasets"] = {name: _rows_checked(rows, where, problems) for name, rows in node["datasets"].items()}
    elif "datasets" in node:
        short["datasets"] = node["datasets"]
    if isinstance(node.get("data"), dict):
        short["data"] = {key: _rows_checked(value, where, problems) if key == "values" else value
                         for key, value in node["data"].items()}
    elif "data" in node:
        short["data"] = node["data"]
    return {key: short[key] for key in node}  # the spec's own key order, for readable error paths


def _assert_valid(site: Path, minimum: int) -> None:
    validator = _validator()
    specs = _page_specs(site)
    assert len(specs) >= minimum, f"expected at least {minimum} charts under {site}, found {len(specs)}"
    problems = []
    for page, chart_id, spec in specs:
        error = jsonschema.exceptions.best_match(validator.iter_errors(_short_data(spec, f"{page}#{chart_id}",
                                                                                    problems)))
        if error is not None:
            problems.append(f"{page}#{chart_id}: {error.message[:300]} at {list(error.absolute_path)}")
    assert not problems, "\n".join(problems)


def test_sample_site_specs_are_valid_vega_lite():
    cwd, proc = sample_site_build()
    assert proc.returncode == 0, proc.stderr
    _assert_valid(cwd / "site", minimum=10)


@needs_shared
def test_every_shared_capture_and_comparison_spec_is_valid_vega_lite():
    site = shared_site()
    assert list(site.glob("compare/*.html")), "the comparison page was not written"
    # Every tool page with a chart: overview, input pipeline, TF stats, kernel stats, op profile,
    # HLO stats, roofline, memory profile, memory viewer, pod viewer, trace, run index.
    _assert_valid(site, minimum=40)


@pytest.mark.parametrize("bad", [{"mark": "no-such-mark"}, {"mark": "bar", "encoding": {"x": {"type": "quantity"}}}])
def test_validator_rejects_invalid_specs(bad):
    assert list(_validator().iter_errors(bad)), "the schema check must be able to fail"


def test_rows_of_mixed_json_types_are_invalid_in_any_row():
    rows = [{"x": i} for i in range(1000)]
    spec = {"data": {"values": [*rows, 5]}, "mark": "bar",
            "layer": [{"data": {"values": ["a", "b", True]}, "mark": "point"}]}
    problems: list[str] = []
    short = _short_data(spec, "page#chart", problems)
    assert problems == ["page#chart: the dataset's rows are not all numbers, strings, booleans or objects"] * 2
    assert short["data"]["values"] == rows[:ROWS_VALIDATED] and list(short) == list(spec)
    problems.clear()
    _short_data({"data": {"values": rows}, "datasets": {"d": [1, 2.5]}, "mark": "bar"}, "page#chart", problems)
    assert problems == []
