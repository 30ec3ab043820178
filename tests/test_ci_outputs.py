"""What CI systems read from reportgen: GitHub annotations (and their escaping), JUnit and
Code Quality reports, the job's step summary, the sticky comment's body and its size."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from reportgen.ci.annotations import (
    Annotation,
    Location,
    escape_data,
    escape_property,
    from_budget,
    github_command,
    without_workflow_commands,
)
from reportgen.ci.codequality import codequality_entry, codequality_report
from reportgen.ci.junit import junit_xml
from reportgen.ci.sticky_comment import CommentError, link_url, marker, marker_key
from reportgen.cli.main import main
from reportgen.compare import BuiltSite, compare_runs
from reportgen.compare import pr_summary as markdown_summary
from reportgen.compare.budget import (
    NOT_CHECKED,
    OVER,
    WITHIN,
    Budget,
    CheckResult,
    Outcome,
    budget_from_options,
    check_site,
)
from reportgen.compare.pr_summary import build_summary
from tests.builtsite import XSS_RUN
from tests.comparesite import BASELINE, CANDIDATE, copy_of_built_site
from tests.conftest import LOGDIR, needs_shared
from tests.test_markdown_summary import ALLOWED_TAGS, render

HOSTILE_RUN = 'run\n::error::injected,title:x%0A<b>&"\x01'


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return copy_of_built_site(tmp_path_factory.mktemp("ci") / "site")


@pytest.fixture
def budget_file(tmp_path) -> Path:
    path = tmp_path / "budget.toml"
    path.write_text('# budgets\nmax_step_ms = 100\nmax_input_percent = 20\n\nmax_regression = "5%"\n')
    return path


# -- annotations


def test_github_escaping_rules():
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("a:b,c%d\r\ne") == "a%3Ab%2Cc%25d%0D%0Ae"
    assert escape_data("%0A") == "%250A"  # % first: an escape in the text stays text
    line = github_command(Annotation("error", HOSTILE_RUN, HOSTILE_RUN, Location("perf/budget, v2.toml", 3)))
    assert "\n" not in line and "\r" not in line
    head, message = line.split("::", 2)[1:]
    assert head == "error file=perf/budget%2C v2.toml,line=3,title=run%0A%3A%3Aerror%3A%3Ainjected%2Ctitle%3Ax%250A" \
                   '<b>&"\x01'
    assert message == 'run%0A::error::injected,title:x%250A<b>&"\x01'


def test_capture_text_runs_no_workflow_command():
    text = f"reportgen check: 1 run\n  over budget: {HOSTILE_RUN}: …"
    wrapped = without_workflow_commands(text, token="t0k3n")
    assert wrapped.splitlines()[0] == "::stop-commands::t0k3n" and wrapped.splitlines()[-1] == "::t0k3n::"
    assert text in wrapped
    assert re.fullmatch(r"::stop-commands::[0-9a-f]{32}", without_workflow_commands("x").splitlines()[0])


def _result(run: str = "pr") -> CheckResult:
    return CheckResult([run], [
        Outcome(run, "max_step_ms", OVER, run, "average step time 137.82 ms is over the 100 ms budget"),
        Outcome(run, "max_input_percent", WITHIN, run, "input 0.4% ≤ 20%"),
        Outcome(run, "max_regression", NOT_CHECKED, f"{run} against main", "regression (a run has no steps)"),
    ])


def test_budget_annotations_point_at_the_budget_file(budget_file):
    budget = budget_from_options(str(budget_file), max_input_percent="30")
    notes = from_budget(_result(), budget)
    assert [(a.severity, a.title, a.location) for a in notes] == [
        ("error", "pr: over the step-time budget", Location(budget_file.as_posix(), 2)),
        ("warning", "pr: regression budget not checked", Location(budget_file.as_posix(), 5)),
    ]
    # A limit given on the command line is nowhere in a file.
    notes = from_budget(_result(), budget_from_options(str(budget_file), max_step_ms="90"))
    assert notes[0].location is None and notes[1].location is not None


def test_annotation_records_are_checked():
    with pytest.raises(ValueError, match="severity"):
        Annotation("fatal", "t", "m")


# -- JUnit and Code Quality


def test_junit_report_has_a_case_per_run_and_budget():
    root = ElementTree.fromstring(junit_xml(_result(HOSTILE_RUN)))
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("3", "1", "1")
    cases = root.findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == ["max_step_ms", "max_input_percent", "max_regression"]
    assert cases[0].get("classname") == HOSTILE_RUN.replace("\x01", "\ufffd")  # XML cannot hold \x01
    assert cases[0].find("failure").get("message").endswith("is over the 100 ms budget")
    assert cases[1].find("failure") is None and cases[2].find("skipped") is not None


def test_codequality_fingerprints_ignore_the_run_name():
    one = codequality_entry(Annotation("error", "pr-1: over", "m1", Location("b.toml", 2), "reportgen/budget/x"))
    two = codequality_entry(Annotation("error", "pr-2: over", "m2", Location("b.toml", 2), "reportgen/budget/x"))
    assert one["fingerprint"] == two["fingerprint"] and one["severity"] == "major"
    assert one["location"] == {"path": "b.toml", "lines": {"begin": 2}}
    bare = codequality_entry(Annotation("warning", "t", "m", None, "reportgen/budget/y"))
    assert bare["location"] == {"path": ".", "lines": {"begin": 1}} and bare["severity"] == "minor"
    assert json.loads(codequality_report([])) == []


def test_check_writes_annotations_junit_and_codequality(site, budget_file, tmp_path, capsys):
    code = main(["check", str(site), "--budget", str(budget_file), "--baseline", CANDIDATE, "--format", "github",
                 "--junit", str(tmp_path / "r" / "junit.xml"), "--codequality", str(tmp_path / "r" / "cq.json")])
    out = capsys.readouterr().out
    assert code == 3
    commands = [line for line in out.splitlines() if line.startswith("::") and not line.startswith("::stop")]
    # The runs' findings come as annotations of their own, one per finding (no budget refuses them here).
    runs = json.loads((site / "summary.json").read_text())["runs"]
    findings = [f for name, run in runs.items() if name != CANDIDATE for f in run.get("findings", {}).get("items", [])]
    assert findings
    finding_commands = [c for c in commands if "%3A " in c.split("::", 2)[1] and " finding " in c.split("::", 2)[1]]
    assert len(finding_commands) == len(findings)
    assert sum(c.startswith("::warning") for c in finding_commands) == sum(f["severity"] in ("high", "medium")
                                                                          for f in findings)
    commands = [c for c in commands if c not in finding_commands]
    errors = [c for c in commands if c.startswith("::error")]
    warnings = [c for c in commands if c.startswith("::warning")]
    assert len(errors) == 3 and all(c.startswith(f"::error file={budget_file.as_posix()},line=") for c in errors)
    assert len(warnings) == 3  # the hostile run has no steps: none of its checks can be made
    assert all(XSS_RUN in w for w in warnings)
    junit = ElementTree.parse(tmp_path / "r" / "junit.xml").getroot()
    assert (junit.get("tests"), junit.get("failures"), junit.get("skipped")) == ("6", "3", "3")
    assert len(json.loads((tmp_path / "r" / "cq.json").read_text())) == 6 + len(findings)
    # Plain text elsewhere: no workflow command at all.
    assert main(["check", str(site), "--budget", str(budget_file), "--baseline", CANDIDATE]) == 3
    assert "::" not in "".join(line[:2] for line in capsys.readouterr().out.splitlines())


def test_a_budget_can_be_turned_off(site, budget_file, capsys):
    budget = budget_from_options(str(budget_file), max_regression="off", max_step_ms="200")
    assert (budget.max_regression, budget.max_step_ms) == (None, 200.0)
    assert budget.turned_off == frozenset({"max_regression"})
    assert budget.source("max_input_percent") == budget_file and budget.source("max_step_ms") is None
    assert main(["check", str(site), "--budget", str(budget_file), "--max-regression", "off", "--runs",
                 CANDIDATE]) == 0
    assert "regression" not in capsys.readouterr().out
    # Everything off: nothing to check, and nothing wrong; no budget at all is still an error.
    assert main(["check", str(site), "--max-step-ms", "off"]) == 0
    assert "no budget left to check (max_step_ms off)" in capsys.readouterr().out
    assert main(["check", str(site)]) == 1
    assert main(["check", str(site), "--max-step-ms", "fast"]) == 1
    assert "max step ms 'fast': give a number, or off" in capsys.readouterr().err


# -- the summary in CI: sticky marker, links, charts, step summary, budgets


def test_sticky_marker_and_keys():
    assert marker("profile") == "<!-- reportgen:sticky:profile -->"
    assert marker_key(marker("gpu.a100_x-8") + "\n## Profile") == "gpu.a100_x-8"
    assert marker_key("## Profile\n" + marker("x")) is None
    for bad in ("", "a b", "a-->", 'a"', "x" * 65):
        with pytest.raises(CommentError):
            marker(bad)
    assert link_url("https://h/a b(c)") == "https://h/a%20b%28c%29"
    with pytest.raises(CommentError):
        link_url("javascript:alert(1)")


def test_comment_body(site, tmp_path, capsys):
    out = tmp_path / "c" / "comment.md"
    code = main(["summary", str(site), "--compare", BASELINE, CANDIDATE, "--sticky", "model-a", "--budget",
                 str(Path(__file__).parent.parent / "examples" / "profile-budget.toml"), "--baseline", BASELINE,
                 "--link", "Workflow run=https://ci.example/runs/1?a=(b)", "--chart-url",
                 "https://storage.example/b/pr 1/summary", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!-- reportgen:sticky:model-a -->\n## Profile comparison")
    parsed = render(text)
    assert set(parsed.tags) <= ALLOWED_TAGS and parsed.comments == [" reportgen:sticky:model-a "]
    images = [v for t, k, v in parsed.attributes if t == "img" and k == "src"]
    assert images == [f"https://storage.example/b/pr%201/summary/comment-{c}.png" for c in ("breakdown", "steps",
                                                                                            "ops")]
    assert {p.name for p in out.parent.iterdir()} == {"comment.md", "comment-breakdown.png", "comment-steps.png",
                                                      "comment-ops.png"}
    links = [v for t, k, v in parsed.attributes if t == "a" and k == "href"]
    assert links == ["https://ci.example/runs/1?a=%28b%29"]
    shown = "".join(parsed.text)
    assert "All 3 checks within budget" in shown  # the fast run against the input-bound one
    assert text.index("### Budgets") < text.index("faster** per step")
    for bad, message in ((["--sticky", "two words"], "sticky comment key"),
                         (["--link", "x=file:///etc/passwd"], "only http"), (["--link", "no-url"], "TEXT=URL")):
        assert main(["summary", str(site), *bad]) == 1
        assert message in capsys.readouterr().err


def test_budget_rows_of_a_run_with_hostile_name(site):
    site_obj = BuiltSite.open(str(site))
    checks = check_site(site_obj, Budget(max_step_ms=100, max_input_percent=20))
    document = build_summary(site_obj, None, with_charts=False, checks=checks, marker=marker("k"))
    parsed = render(document.markdown)
    assert set(parsed.tags) <= ALLOWED_TAGS
    assert not [a for a in parsed.attributes if a[1].startswith("on")]
    assert XSS_RUN in "".join(parsed.text)
    assert "❌ **2 of 4 checks over budget** (2 not checked)." in document.markdown
    assert [b["status"] for b in document.data["budgets"]].count(NOT_CHECKED) == 2


def test_step_summary_is_appended_when_asked(site, tmp_path, monkeypatch, capsys):
    summary_file = tmp_path / "step_summary"
    summary_file.write_text("### earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    # Not asked: the variable alone changes nothing.
    assert main(["summary", str(site)]) == 0
    assert summary_file.read_text() == "### earlier step\n"
    printed = capsys.readouterr().out
    assert main(["summary", str(site), "--step-summary", "--sticky", "k", "-o", str(tmp_path / "s.md")]) == 0
    text = summary_file.read_text(encoding="utf-8")
    assert text.startswith("### earlier step\n\n## Profile summary") and text.endswith(printed)
    assert "reportgen:sticky" not in text and "![" not in text  # no marker; charts only with --chart-url
    # GitHub keeps at most 1 MiB of a step's summary: refused with the reason, rather than cut off by GitHub.
    summary_file.write_text("x" * (1024 * 1024 - 100))
    assert main(["summary", str(site), "--step-summary"]) == 1
    assert "would pass GitHub's 1 MiB limit" in capsys.readouterr().err
    # Outside GitHub Actions: a warning, and the summary still written.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert main(["summary", str(site), "--step-summary"]) == 0
    captured = capsys.readouterr()
    assert "GITHUB_STEP_SUMMARY is not set" in captured.err and captured.out == printed


def test_cut_to_fit_keeps_the_marker_and_counts_bytes(site, monkeypatch):
    site_obj = BuiltSite.open(str(site))
    comparison = compare_runs(site_obj.run(BASELINE), site_obj.run(CANDIDATE))
    monkeypatch.setattr(markdown_summary, "MAX_CHARS", 1500)
    text = build_summary(site_obj, comparison, with_charts=False, marker=marker("k")).markdown
    assert text.startswith(marker("k") + "\n## Profile comparison")
    assert len(text.encode("utf-8")) <= 1500 and text.endswith("(summary cut to fit a comment)\n")


@needs_shared
def test_comment_fits_github_on_the_largest_shared_capture(tmp_path_factory, capsys):
    """Every shared run in one site, compared two by two where they have the most ops and
    kernels, with budgets, marker and links: under GitHub's 65,536 characters."""
    site = tmp_path_factory.mktemp("shared") / "site"
    assert main(["build", str(LOGDIR), "-o", str(site), "-q", "--jobs", "2", "--no-cache"]) in (0, 2)
    runs = json.loads((site / "summary.json").read_text())["runs"]
    assert len(runs) >= 5
    budget = Path(__file__).parent.parent / "examples" / "profile-budget.toml"
    sizes = {}
    for pair in (("gpu_multi_worker", "jax_mlp"), ("tpu_inference_2", "gpu_multi_worker")):
        out = tmp_path_factory.mktemp("comment") / "comment.md"
        assert main(["summary", str(site), "--compare", *pair, "--budget", str(budget), "--baseline", pair[0],
                     "--sticky", "reportgen", "--link", "Workflow run=https://github.com/o/r/actions/runs/1",
                     "--site-url", "https://storage.googleapis.com/bucket/profiles/pr-1/", "-o", str(out)]) == 0
        text = out.read_text(encoding="utf-8")
        sizes[pair] = len(text)
        assert len(text) < 65_536 and len(text.encode("utf-8")) < 65_536
        assert text.startswith(marker("reportgen")) and "(summary cut to fit a comment)" not in text
        assert text.count("<code>") > 50  # runs, ops and kernels are all there
    capsys.readouterr()
    print(f"comment sizes on the shared capture: {sizes}")


def test_refused_findings_are_errors_and_failed_cases(site, tmp_path, capsys):
    code = main(["check", str(site), "--fail-on-finding", "input.*", "--format", "github", "--junit",
                 str(tmp_path / "junit.xml"), "--runs", BASELINE])
    out = capsys.readouterr().out
    assert code == 3
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "finding input.tf_data_bottleneck" in errors[0]
    cases = ElementTree.parse(tmp_path / "junit.xml").getroot().findall("testsuite/testcase")
    assert [(c.get("name"), c.find("failure") is not None) for c in cases] == [("fail_on_finding", True)]
