"""summary.json as types: what a build writes reads back into them and out again byte for byte, older files read
as the readers read them before, and the documented keys are the types' keys."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from reportgen.core.findings.model import SEVERITIES, Evidence, Finding, Link
from reportgen.core.steps.ledger import LEDGER_KEYS
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.summary_blocks import (
    SCHEMA_VERSION,
    FindingEvidence,
    FindingItem,
    FindingLink,
    MemoryBlock,
    OverviewBlock,
    ProgramMemory,
    RecordedInputPipelineBlock,
    RecordedOpProfileBlock,
    RecordedOverviewBlock,
    RunSummary,
    SiteSummary,
    TraceBlock,
    contract,
    contract_markdown,
    finite,
)
from tests.clirun import sample_site_build
from tests.conftest import CAPTURES, REPO

LEGACY = CAPTURES / "legacy"


def _reads_back_as_written(site: Path) -> SiteSummary:
    raw = (site / "summary.json").read_text(encoding="utf-8")
    summary = SiteSummary.from_json(json.loads(raw))
    # The build writes with json.dumps(indent=1): the types give back the same text, key order included.
    assert json.dumps(summary.to_json(), indent=1) == raw
    return summary


def test_a_built_site_reads_into_the_types_and_back_byte_for_byte():
    cwd, proc = sample_site_build()
    assert proc.returncode == 0, proc.stderr
    summary = _reads_back_as_written(cwd / "site")
    assert summary.schema == SCHEMA_VERSION and summary.generator.startswith("reportgen ")
    run = summary.runs["tf_keras_input_bound"]
    assert isinstance(run.overview, OverviewBlock) and run.overview.input_bound == "HIGHLY"
    assert run.input_pipeline.bottleneck.iterator == "Iterator::Root::MapAndBatch"
    assert run.step_ledger.precedence == LEDGER_KEYS and run.findings.items[0].id
    assert list(run.tools)[0] == "overview" and run.tools["overview"].page == "tf_keras_input_bound/overview.html"


@pytest.mark.skipif(not LEGACY.exists(), reason=f"legacy captures not present at {LEGACY}")
def test_older_profilers_runs_read_into_their_recorded_blocks_and_back(tmp_path):
    out = tmp_path / "site"
    build_site([str(LEGACY)], BuildOptions(output=str(out), jobs=1, cache=False))
    summary = _reads_back_as_written(out)
    kinds = {type(block) for run in summary.runs.values() for block in run.blocks.values()}
    # Each recorded tool's block is read as the recorded tool wrote it (its keys in its order).
    assert {RecordedOverviewBlock, RecordedInputPipelineBlock, RecordedOpProfileBlock} <= kinds
    assert OverviewBlock not in kinds


def test_a_file_of_an_older_build_reads_with_defaults_where_keys_are_missing_or_wrong():
    # A run as a build of before the step ledger, findings and inventory wrote it, with a text and a boolean
    # where numbers belong (as no build wrote, but a hand-edited file may hold).
    run = RunSummary.from_json({
        "hosts": ["h", 3], "errors": [{"path": "h/x.pb", "message": "bad"}, "junk"], "tools": {"overview": {}},
        "overview": {"steps": "5", "step_time_ms": {"average": 12.5, "standard_deviation": True},
                     "breakdown_ms": {"input": 1.0, "host_compute": "x"}, "input_bound": "NOT"},
        "memory": {"profiles": {"h/gpu": {"peak_bytes": 10}}}, "future_block": {"x": 1}})
    assert run.hosts == ("h",) and [e.message for e in run.errors] == ["bad"] and run.tools["overview"].page == ""
    overview = run.overview
    assert overview.steps == 0 and overview.step_time_ms.average == 12.5
    assert overview.step_time_ms.standard_deviation is None and overview.breakdown_ms == {"input": 1.0}
    assert run.step_ledger is None and run.findings is None and run.inventory is None
    assert run.memory.profiles["h/gpu"].capacity_bytes is None and run.memory.modules is None
    assert "future_block" not in run.blocks  # a key this version does not know is not read
    assert RunSummary.from_json("not a run") == RunSummary() and SiteSummary.from_json([]).runs == {}
    assert RunSummary.from_json({"hosts": "vm", "errors": {"path": "x"}}) == RunSummary()
    assert [finite(v) for v in (1, 2.5, "3", True, None, float("nan"), float("inf"))] == [1.0, 2.5, 3.0, None,
                                                                                         None, None, None]


def test_blocks_write_only_the_keys_they_hold_and_memory_merges_its_two_parts():
    assert "not_produced" not in TraceBlock(chunks=1).to_json()
    assert TraceBlock(not_produced=({"host": "h"},)).to_json()["not_produced"] == [{"host": "h"}]
    recorded = RecordedOverviewBlock(source="overview_page", steps=0, device_type="TPU")
    assert list(recorded.to_json()) == ["source", "steps", "device_type"]
    stated = RecordedOverviewBlock(source="overview_page", statement="", bottleneck=None)
    assert list(stated.to_json())[-2:] == ["statement", "bottleneck"]  # a null bottleneck beside its statement
    run = RunSummary().with_block("memory", MemoryBlock(profiles={})).with_block(
        "memory", MemoryBlock(modules={"m": ProgramMemory(peak_bytes=1, peak_unpadded_bytes=1)}))
    assert run.to_json()["memory"] == {"profiles": {}, "modules": {"m": {"peak_bytes": 1, "peak_unpadded_bytes": 1}}}


def test_the_documented_key_list_is_the_types():
    assert (REPO / "docs" / "summary-json.md").read_text(encoding="utf-8") == contract_markdown(), (
        "docs/summary-json.md differs from reportgen/summary_blocks.py: run python scripts/summary_contract.py")


def test_the_readme_names_only_keys_the_types_hold():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Outputs and exit status"):text.index("| exit status | meaning |")]
    section = re.sub(r"```json.*?```", "", section, flags=re.S)  # the findings example: its keys are below too
    named = set(re.findall(r"`([a-z_][a-z0-9_.]*)`", section))
    keys = {part for path, _, _ in contract() for part in re.split(r"[. ()*\[\]]+", path) if part}
    keys |= {f.name for cls in (SiteSummary, RunSummary) for f in dataclasses.fields(cls)} - {"blocks"}
    # Values rather than keys: step ledger causes (map keys), severities, evidence units, and the keys of an
    # evidence's `source`, whose shapes core/findings/model.py owns.
    values = {*LEDGER_KEYS, *SEVERITIES, "us", "count", "csv", "where", "column", "aggregate", "page_text",
              "summary", "trace_total"}
    words = {"summary.json", "profile_start_time", "tf.py_function", "numpy_function"}  # not summary.json keys
    unknown = sorted(n for n in named - values - words if not set(n.split(".")) <= keys)
    assert unknown == [], f"README.md names summary.json keys the types do not hold: {unknown}"


def test_a_finding_item_holds_every_field_a_finding_writes():
    # The findings block holds each finding as Finding.as_dict writes it: a field added there needs its twin here
    # (from_json would drop it from summary.json otherwise).
    for written, typed in ((Finding, FindingItem), (Evidence, FindingEvidence), (Link, FindingLink)):
        assert [f.name for f in dataclasses.fields(written)] == [f.name for f in dataclasses.fields(typed)]
    finding = Finding("input.x", "high", "t", "e", "a", [Evidence("l", 1.5, "ms", {"summary": ["overview"]})],
                      [Link("l", "overview.html")], ms_per_step=float("nan"), claims=["input"])
    assert FindingItem.from_json(finding.as_dict()).to_json() == finding.as_dict()
