"""Every chart spec a build writes is valid Vega-Lite.

Pages convert Altair charts without Altair's own schema validation (it cost
seconds per build on large captures, see reportgen/sections/vega.py); this
test puts the same check back, on every chart of sites built from the
bundled sample, every shared capture, the older-format captures and a
comparison page, against the Vega-Lite JSON schema Altair ships.
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


def _assert_valid(site: Path, minimum: int) -> None:
    validator = _validator()
    specs = _page_specs(site)
    assert len(specs) >= minimum, f"expected at least {minimum} charts under {site}, found {len(specs)}"
    problems = []
    for page, chart_id, spec in specs:
        error = jsonschema.exceptions.best_match(validator.iter_errors(spec))
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
