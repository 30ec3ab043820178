"""`reportgen check` and `reportgen build --budget`: exit status 3 when a budget is exceeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reportgen.cli.main import main
from reportgen.compare.budget import EXIT_BUDGET_EXCEEDED, BudgetError, Regression, load_budget
from reportgen.summary_blocks import FindingItem
from tests.builtsite import XSS_RUN
from tests.comparesite import BASELINE, CANDIDATE, copy_of_built_site

SAMPLE = Path(__file__).resolve().parent.parent / "reportgen" / "sample"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return copy_of_built_site(tmp_path_factory.mktemp("budget") / "site")


def _check(capsys, *args: str) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def test_input_bound_run_breaches_the_input_budget(site, capsys):
    code, out = _check(capsys, str(site), "--max-step-ms", "150", "--max-input-percent", "20")
    assert code == EXIT_BUDGET_EXCEEDED == 3
    over = [line for line in out.splitlines() if line.startswith("  over budget:")]
    assert over == [f"  over budget: {BASELINE}: 73.6% of the step time waits for input, over the 20% budget "
                    "(max input percent; XProf: HIGHLY input-bound)"]
    assert f"within budget: {BASELINE}: average step time 137.82 ms ≤ 150 ms" in out
    assert f"within budget: {CANDIDATE}: input 0.4% ≤ 20%" in out
    assert f"not checked: {XSS_RUN}: step time (the run has no steps)" in out


def test_step_time_budget(site, capsys):
    code, out = _check(capsys, str(site), "--max-step-ms", "100", "--runs", f"{BASELINE},{CANDIDATE}")
    assert code == 3 and out.count("over budget:") == 1 and "137.82 ms is over the 100 ms budget" in out
    assert _check(capsys, str(site), "--max-step-ms", "150", "--runs", CANDIDATE)[0] == 0


def test_regression_against_a_baseline(site, capsys):
    code, out = _check(capsys, str(site), "--max-regression", "5%", "--baseline", CANDIDATE, "--runs", BASELINE)
    assert code == 3
    assert (f"{BASELINE} against {CANDIDATE}: step time 24.24 ms → 137.82 ms (+113.58 ms, +468.5%), over the 5% "
            "regression budget; beyond the runs' noise (p < 0.0001)") in out
    # The fixed run is faster than the input-bound one: no regression, in % or in ms.
    assert _check(capsys, str(site), "--max-regression", "5%", "--baseline", BASELINE, "--runs", CANDIDATE)[0] == 0
    code, out = _check(capsys, str(site), "--max-regression", "100ms", "--baseline", f"{site}:{CANDIDATE}",
                       "--runs", BASELINE)
    assert code == 3 and "over the 100 ms regression budget" in out


def test_a_check_that_cannot_be_made_is_status_1(site, capsys):
    assert main(["check", str(site)]) == 1
    assert "give at least one budget" in capsys.readouterr().err
    assert main(["check", str(site), "--max-regression", "5%"]) == 1
    assert "needs a baseline" in capsys.readouterr().err
    assert main(["check", str(site), "--max-step-ms", "10", "--runs", "absent"]) == 1
    assert "has no run 'absent'" in capsys.readouterr().err
    assert main(["check", str(site), "--max-regression", "five", "--baseline", CANDIDATE]) == 1
    assert "give a percentage" in capsys.readouterr().err


@pytest.mark.parametrize("text, expected", [
    ("5%", Regression(5.0, "percent")), ("5", Regression(5.0, "percent")), (5, Regression(5.0, "percent")),
    (2.5, Regression(2.5, "percent")), ("12ms", Regression(12.0, "ms")), (" 0.5 ms ", Regression(0.5, "ms")),
])
def test_regression_limits(text, expected):
    assert Regression.parse(text) == expected


@pytest.mark.parametrize("text", ["-5%", "5 percent", "", "ms", True])
def test_bad_regression_limits(text):
    with pytest.raises(BudgetError):
        Regression.parse(text)


@pytest.mark.parametrize("content, message", [
    ("max_step_ms = 150\nmax_step = 3\n", "unknown key max_step"),
    ("max_step_ms = \n", "not valid TOML"),
    ("max_regression = '5%'\n", "needs a baseline"),
    ("baseline = 'main'\n", "sets no budget"),
    ("max_step_ms = 'fast'\n", "must be a non-negative number"),
    ("max_input_percent = 20\nruns = 'a'\n", "runs must be a list"),
    ("fail_on_finding = 3\n", "give a severity or a finding id"),
    ("fail_on_finding = ['high', 'a b']\n", "fail on finding 'a b'"),
])
def test_bad_budget_files(tmp_path, content, message):
    path = tmp_path / "budget.toml"
    path.write_text(content)
    with pytest.raises(BudgetError, match=message):
        load_budget(path)


def test_build_with_a_budget_file(site, tmp_path, capsys):
    """The budget's baseline is a run of another site, named relative to the budget file."""
    (tmp_path / "budget.toml").write_text(
        f'max_step_ms = 150\nmax_input_percent = 0.1\nmax_regression = "5%"\nbaseline = "site:{BASELINE}"\n')
    (tmp_path / "site").symlink_to(site)
    out = tmp_path / "out"
    code = main(["build", str(SAMPLE), "--runs", CANDIDATE, "-o", str(out), "--budget",
                 str(tmp_path / "budget.toml"), "--jobs", "1", "-q"])
    printed = capsys.readouterr().out
    assert code == 3
    assert json.loads((out / "summary.json").read_text())["runs"][CANDIDATE]["overview"]["input_percent"] > 0.1
    assert f"over budget: {CANDIDATE}: 0.4% of the step time waits for input, over the 0.1% budget" in printed
    assert f"within budget: {CANDIDATE} against {BASELINE}: step time 137.82 ms → 24.24 ms" in printed
    # A broken budget file stops the build before it starts.
    (tmp_path / "bad.toml").write_text("max_step = 1\n")
    assert main(["build", str(SAMPLE), "-o", str(tmp_path / "never"), "--budget", str(tmp_path / "bad.toml")]) == 1
    assert not (tmp_path / "never").exists()


def test_findings_budget_refuses_a_severity_and_worse_or_ids(site, tmp_path, capsys):
    (tmp_path / "budget.toml").write_text('fail_on_finding = "high, capture.*"\n')
    budget = load_budget(tmp_path / "budget.toml")
    assert budget.fail_on_finding == ["high", "capture.*"]
    assert budget.refused(FindingItem(id="input.bound", severity="high")) == "high"
    assert budget.refused(FindingItem(id="capture.no_steps", severity="low")) == "capture.*"
    assert budget.refused(FindingItem(id="steps.variance", severity="medium")) is None
    assert main(["check", str(site), "--budget", str(tmp_path / "budget.toml"), "--runs", BASELINE]) == 3
    out = capsys.readouterr().out
    assert f"over budget: {BASELINE}: finding input.tf_data_bottleneck (high): The step waits for input" in out
    assert main(["check", str(site), "--fail-on-finding", "medium", "--runs", CANDIDATE]) == 0
    assert f"within budget: {CANDIDATE}: no finding matches medium" in capsys.readouterr().out
    # `off` drops the file's findings budget: nothing is left to check.
    assert main(["check", str(site), "--budget", str(tmp_path / "budget.toml"), "--fail-on-finding", "off"]) == 0
