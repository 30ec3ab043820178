"""The labelled corpus (tests/data/findings_corpus.toml): on every real capture listed, the findings an expert
expects, with their numbers, and none of those that must not fire; on every run, no two findings count the same
moment and their shares of the step add up to at most 100%."""

from __future__ import annotations

import json
import shutil
import sys
from functools import cache
from pathlib import Path

import pytest

from reportgen.pipeline.build import BuildOptions, build_site
from tests.conftest import LOGDIR, REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = tomllib.loads((REPO / "tests" / "data" / "findings_corpus.toml").read_text())["run"]
LOCAL = REPO / "tests" / "captures"


@cache
def _site(source: str) -> dict:
    """summary.json's runs of a build of the shared logdir, or of one tests/captures folder."""
    from tests.sharedsite import shared_site

    if source == "shared":
        return json.loads((shared_site() / "summary.json").read_text())["runs"]
    root = Path(_tmp()) / source
    run = root / "logs" / "plugins" / "profile" / source
    run.mkdir(parents=True)
    for f in (LOCAL / source).glob("*.xplane.pb*"):
        shutil.copy(f, run / f.name)
    report = build_site([str(root / "logs")], BuildOptions(output=str(root / "site"), jobs=1))
    assert report.exit_code == 0
    return json.loads((root / "site" / "summary.json").read_text())["runs"]


@cache
def _tmp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="corpus-")


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_findings_an_expert_expects(case):
    if case["source"] == "shared" and not LOGDIR.exists():
        pytest.skip("needs ../shared/captures (absent in a fresh clone)")
    block = _site(case["source"])[case["name"]]
    items = block["findings"]["items"]
    ids = [i["id"] for i in items]
    for wanted in case.get("expect", []):
        assert wanted["id"] in ids, f"{case['name']}: {wanted['id']} missing (found {ids})"
        item = next(i for i in items if i["id"] == wanted["id"])
        for key in ("percent_of_step", "percent_of_device_time"):
            if key in wanted:
                low, high = wanted[key]
                assert item[key] is not None and low <= item[key] <= high, (case["name"], wanted["id"], key, item[key])
        if "severity" in wanted:
            assert item["severity"] == wanted["severity"], (case["name"], wanted["id"])
        text = " ".join((item["title"], item["action"], item["estimate"]))
        for words in wanted.get("contains", []):
            assert words in text, (case["name"], wanted["id"], words)
        for words in wanted.get("not_contains", []):
            assert words not in text, (case["name"], wanted["id"], words)
    fired = set(case.get("forbid", [])) & set(ids)
    assert not fired, f"{case['name']}: must stay silent: {sorted(fired)}"
    ledger = block.get("step_ledger")
    for cause, (low, high) in case.get("ledger", {}).items():
        assert ledger is not None and low <= ledger["percent"][cause] <= high, (case["name"], cause)
    # No moment counted twice; shares within 100%.
    claims = [c for i in items for c in i["claims"]]
    assert len(claims) == len(set(claims)), case["name"]
    assert sum(i["percent_of_step"] or 0.0 for i in items) <= 100.0 + 1e-6, case["name"]
