"""Kernel stats against XProf's own output on the real GPU capture: every row, every column."""

from __future__ import annotations

import csv
import json
import math

import pytest

from reportgen.core.events.table import EventTable
from reportgen.core.ops.kernel_reports import combine_host_reports, kernel_reports, kernel_stats_table
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import ORACLE, host_files, needs_shared

RUN = "gpu_multi_worker"
pytestmark = needs_shared


@pytest.fixture(scope="module")
def host_reports():
    reports = {}
    for path in host_files(RUN):
        capture = decode_xspace(str(path), path.read_bytes())
        reports[capture.host] = kernel_reports(EventTable(capture))
    assert len(reports) == 2
    return reports


def assert_table_matches(table, oracle: dict) -> None:
    columns = [c["id"] for c in oracle["cols"]]
    assert len(table) == len(oracle["rows"])
    assert len(oracle["rows"]) > 0
    for index, row in enumerate(oracle["rows"]):
        for column, cell in zip(columns, row["c"]):
            mine, theirs = table[column].iloc[index], cell["v"]
            where = f"row {index + 1}, column {column}"
            if isinstance(theirs, (bool, str)):
                assert mine == theirs, where
            else:
                assert math.isclose(float(mine), theirs, rel_tol=1e-12, abs_tol=1e-9), where


def test_each_host_matches_xprof(host_reports):
    for host, reports in host_reports.items():
        oracle = json.loads((ORACLE / RUN / "per_host" / host / "kernel_stats.json").read_text())
        assert_table_matches(kernel_stats_table(reports), oracle)


def test_all_hosts_combined_match_xprof(host_reports):
    oracle = json.loads((ORACLE / RUN / "kernel_stats.json").read_text())
    combined = kernel_stats_table(combine_host_reports(host_reports))
    assert_table_matches(combined, oracle)
    # The two host files are identical: XProf keeps both copies of every kernel, side by side.
    assert list(combined["host"][:2]) == sorted(host_reports)


def test_column_labels_are_xprofs():
    from reportgen.core.tools.kernel_stats import XPROF_COLUMNS

    oracle = json.loads((ORACLE / RUN / "kernel_stats.json").read_text())
    assert {c["id"]: c["label"] for c in oracle["cols"]} == XPROF_COLUMNS
    with open(ORACLE / RUN / "kernel_stats.csv", newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == list(XPROF_COLUMNS.values())
