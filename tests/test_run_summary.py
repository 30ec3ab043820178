"""The run's summary page and the site index: the answer first, drawn from summary.json; one voice for numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from reportgen.core.input.advice import NEXT_STEP_HOST_SIDE, NEXT_STEP_SKIP, in_our_words
from reportgen.core.tools.overview import dominant_category
from reportgen.output.formatting import fmt_bandwidth, fmt_duration_ps, fmt_flop_rate, fmt_gflops, fmt_gib_per_s
from reportgen.output.site import _environment
from reportgen.sections.base import HostSummary
from reportgen.sections.busy_chart import POOL_ROWS_ABOVE, pool_threads
from reportgen.sections.charts import step_chart
from reportgen.sections.verdict import classification, index_row, run_verdict
from reportgen.summary_blocks import (
    OverviewBlock,
    RecordedOverviewBlock,
    RunSummary,
    StepCategory,
    StepLedgerBlock,
)
from tests.clirun import sample_site_build
from tests.htmlscan import scan_html


@pytest.fixture(scope="module")
def site() -> Path:
    cwd, proc = sample_site_build()
    assert proc.returncode == 0, proc.stderr
    return cwd / "site"


def _runs(site: Path) -> dict:
    return json.loads((site / "summary.json").read_text())["runs"]


def _text(page: Path) -> str:
    return " ".join("".join(scan_html(page.read_text(encoding="utf-8")).text).split())


def test_summary_blocks_carry_the_answer(site):
    runs = _runs(site)
    slow, fast = runs["tf_keras_input_bound"], runs["tf_keras_fast"]
    overview = slow["overview"]
    assert overview["statement"].startswith("Your program is HIGHLY input-bound because 73.6%")
    assert overview["bottleneck"]["category"] == "input"
    assert overview["bottleneck"]["percent"] == pytest.approx(overview["input_percent"], abs=0.1)
    assert fast["overview"]["bottleneck"]["label"] == "Host compute"
    assert [op["name"] for op in overview["top_ops"]][0] == "Iterator::Root::MapAndBatch"
    assert overview["is_training"] is False and slow["tf_stats"]["task_type"] == "Training"
    host = [op for op in slow["tf_stats"]["top_ops"] if op["side"] == "Host"]
    assert host[0]["name"] == "Iterator::Root::MapAndBatch" and 30 < host[0]["self_time_percent"] < 40
    assert [op["self_time_us"] for op in host] == sorted((op["self_time_us"] for op in host), reverse=True)


def test_run_page_leads_with_the_answer(site):
    page = site / "tf_keras_input_bound" / "index.html"
    html = page.read_text(encoding="utf-8")
    text = _text(page)
    # The answer comes before anything else on the page, then the numbers behind it and the way into every tool.
    order = [text.index(s) for s in ("Highly input-bound", "Step time 137.8 ms", "Your program is HIGHLY",
                                     "Iterator::Root::MapAndBatch", "Where the time goes", "Tools for this run")]
    assert order == sorted(order)
    for tool in ("overview", "input_pipeline", "tf_stats", "memory_profile", "trace", "inventory"):
        assert f'href="{tool}.html"' in html
    assert "Planes and lines" not in html  # the inventory has its own page
    assert "Planes and lines" in (site / "tf_keras_input_bound" / "inventory.html").read_text(encoding="utf-8")


def test_site_index_has_one_row_per_run_with_its_answer(site):
    text = _text(site / "index.html")
    # Run, step time, steps, input, bottleneck, findings (how many, the most costly), device, hosts.
    assert re.search(r"tf_keras_input_bound 137\.8 ms ± 11\.9 ms 5 73\.6% HIGHLY Input 73\.6% "
                     r"1 high The step waits for input 73\.6% of the time[^C]* CPU 1", text), text
    # The fixed run's one finding is the positive statement (compute-bound, nothing to fix on the input side).
    assert re.search(r"tf_keras_fast 24\.2 ms ± 0\.8 ms 5 0\.4% NOT Host compute 98\.2% "
                     r"1 info Compute-bound: .*? nothing to fix on the input side CPU 1", text), text
    assert "Step time across runs" in text
    html = (site / "index.html").read_text(encoding="utf-8")
    assert html.count("data-vega-spec=") == 1


# A finding as the findings engine hands it to the page (core.findings.model.Finding's fields).
FINDING = SimpleNamespace(
    id="input-map", severity="high", title="<b>Sequential map</b> holds the input back", ms_per_step=101.5,
    percent_of_step=73.6, percent_of_device_time=None, bytes=None, estimate="the input time per step",
    evidence=[SimpleNamespace(label="Iterator::Root::MapAndBatch", value=107.0, unit="ms", href="")],
    action="Use `num_parallel_calls`", links=[{"label": "Input pipeline", "href": "input_pipeline.html#tf-data"}])


def _landing(site: Path, findings: list | None) -> str:
    block = RunSummary.from_json(_runs(site)["tf_keras_input_bound"])
    hosts = [HostSummary("vm", "vm.xplane.pb", 1, 2, 3, 4, 5, "CPU", 0)]
    nav = [{"title": "Summary", "href": "index.html"}, {"title": "Input pipeline", "href": "input_pipeline.html"}]
    return _environment().get_template("run_index.html").render(
        root="../", assets={"css": "a.css", "vega": "v.js", "js": "r.js"}, nav=nav, run="r", run_hosts=["vm"],
        generator="reportgen test", page="index.html", errors=[], findings=findings,
        verdict=run_verdict("r", block, hosts, nav))


def test_findings_come_right_under_the_answer(site):
    html = _landing(site, [FINDING])
    assert html.index('class="answer') < html.index('class="findings"') < html.index('class="cards"')
    assert "&lt;b&gt;Sequential map&lt;/b&gt;" in html and "<b>Sequential map" not in html  # capture text escaped
    assert 'href="input_pipeline.html#tf-data"' in html and "101.50 ms per step" in html
    assert "No finding" in _landing(site, [])  # the rules ran and none fired: said so
    assert 'class="findings"' not in _landing(site, None)  # older profilers' files: no rules


def test_classification_words():
    assert classification(None)["label"] == "No steps marked"
    high = classification(OverviewBlock.from_json({"steps": 5, "input_bound": "HIGHLY", "statement": "s",
                                                   "bottleneck": {"label": "Input", "percent": 73.6}}))
    assert (high["label"], high["severity"]) == ("Highly input-bound", "bad")
    other = classification(OverviewBlock.from_json({"steps": 5, "input_bound": "NOT", "statement": "",
                                                    "bottleneck": {"label": "Host compute", "percent": 98.2}}))
    assert (other["label"], other["severity"]) == ("Host compute: 98.2% of the step time", "good")
    # XProf's 'All others' heads the answer only without a step ledger to say what that time was.
    xprof_other = OverviewBlock.from_json({"steps": 5, "input_bound": "POTENTIALLY", "statement": "Your program is …",
                                           "bottleneck": {"category": "other", "label": "All others", "percent": 62.7}})
    ledger = StepLedgerBlock.from_json(
        {"steps": 6, "labels": {"compiled_program": "Compiled XLA program (host)", "input": "Waiting for input"},
         "percent": {"compiled_program": 62.2, "input": 35.2}})
    named = classification(xprof_other, ledger)
    assert named["label"] == "Compiled XLA program (host): 62.2% of the step time (step ledger)"
    assert named["statement"] == "XProf: Your program is …"
    assert classification(xprof_other)["label"] == "All others: 62.7% of the step time"
    assert dominant_category({"input": 3.0, "host_compute": 1.0, "other": None}) == StepCategory(
        category="input", label="Input", percent=75.0)
    assert dominant_category({"input": 0.0}) is None


def test_an_older_capture_without_steps_counts_its_summary_step_time():
    hosts = [HostSummary("h", "h.overview_page.json", 1, 0, 0, 0, 0, "TPU", 8)]
    # The recorded overview of an older profiler's files (its page is the run's legacy_overview).
    block = RunSummary.from_json({"tools": {"legacy_overview": {"page": "old/legacy_overview.html"}},
                                  "overview": {"source": "overview_page", "steps": 0, "step_time_ms": {
                                      "average": 313.8, "standard_deviation": 1.0, "minimum": 300.0, "maximum": 320.0},
                                      "device_type": "TPU"}})
    assert isinstance(block.overview, RecordedOverviewBlock)
    row = index_row("old", "old/index.html", block, hosts, [], [])
    assert row["step_ms"] == 313.8 and row["device"] == "TPU × 8"
    assert row["findings"] is None  # no findings block: no rules ran (not "none found")
    assert run_verdict("old", block, hosts, [])["has_steps"]


def test_one_unit_system_per_quantity():
    assert fmt_flop_rate(918e12) == fmt_gflops(918_000) == "918.0 TFLOP/s"
    assert fmt_flop_rate(4.47e9) == "4.47 GFLOP/s"
    assert fmt_bandwidth(1638e9) == fmt_gib_per_s(1525.5) == "1,525.5 GiB/s"
    assert fmt_gib_per_s(21_696) == "21.2 TiB/s"
    assert fmt_duration_ps(693.6e9) == "693.6 ms" and fmt_duration_ps(98.15e12, 2) == "98.15 s"
    assert fmt_duration_ps(1500) == "1.5 ns" and fmt_bandwidth(None) == fmt_flop_rate(float("nan")) == "–"


def test_xprofs_sentences_in_our_words():
    assert "Section 3" not in in_our_words(NEXT_STEP_HOST_SIDE, on_input_page=True)
    assert in_our_words(NEXT_STEP_HOST_SIDE, on_input_page=False) == (
        "The input pipeline page breaks the input time on the host down.")
    assert in_our_words(NEXT_STEP_SKIP, on_input_page=True) == ""


def test_thread_pools_fold_into_one_row_each_when_there_are_many():
    lines = [f"/host:CPU · pool/{i}" for i in range(POOL_ROWS_ABOVE)] + ["/host:CPU · main/1", "/host:CPU · python3"]
    shown = pd.DataFrame({"label": [lines[0], lines[1], lines[-1]], "bin_start_ms": [0.0, 0.0, 0.0],
                          "bin_end_ms": [1.0, 1.0, 1.0], "busy_percent": [100.0, 50.0, 20.0]})
    folded, rows, pooled = pool_threads(shown, lines)
    assert rows == [f"/host:CPU · pool ({POOL_ROWS_ABOVE} threads)", "/host:CPU · main/1", "/host:CPU · python3"]
    assert pooled == POOL_ROWS_ABOVE
    pool = folded[folded["label"] == rows[0]]
    assert pool["busy_percent"].tolist() == [pytest.approx(150.0 / POOL_ROWS_ABOVE, abs=0.01)]  # the pool's average
    few = lines[:5]
    assert pool_threads(shown, few)[1:] == (few, 0)  # a short chart keeps every thread


def test_step_chart_is_page_wide_and_lists_only_categories_with_time():
    steps = pd.DataFrame({"step_name": ["1", "2"], "step_time_ms": [3.0, 4.0], "input": [1.0, 2.0],
                          "host_compute": [2.0, 2.0], "output": [0.0, 0.0]})
    spec = step_chart(steps, {"input": "Input", "host_compute": "Host compute", "output": "Output"})
    assert spec["width"] == "container"
    color = spec["encoding"]["color"]
    assert color["legend"]["values"] == ["Input", "Host compute"]
    assert color["scale"]["domain"] == ["Input", "Host compute", "Output"]  # colours fixed by category


def test_the_runs_chart_says_when_its_linear_scale_thins_the_short_runs():
    from reportgen.sections.site_index import step_span

    assert step_span([{"step_ms": 24.2}, {"step_ms": 137.8}]) is None  # within ten times: nothing to say
    assert step_span([{"step_ms": 6.6}, {"step_ms": None}, {"step_ms": 1805.0}]) == (6.6, 1805.0)
    assert step_span([{"step_ms": 6.6}]) is None


def test_the_runs_chart_reads_microseconds_when_every_step_is_under_a_millisecond():
    from reportgen.core.steps.categories import CATEGORY_KEYS
    from reportgen.sections.site_index import step_time_chart

    key = CATEGORY_KEYS[0]

    def x_axis(*steps_ms: float) -> tuple[str, str, list[float]]:
        spec = step_time_chart([{"name": f"run{i}", "step_ms": ms, "breakdown_ms": {key: ms}}
                                for i, ms in enumerate(steps_ms)])
        x = spec["encoding"]["x"]
        return x["title"], x["field"], [row[x["field"]] for row in spec["datasets"][spec["data"]["name"]]]

    # 9 µs steps: in ms the ticks read 0.0000, 0.0005, … and run into each other.
    assert x_axis(0.009, 0.012) == ("Average step time (µs)", "us", [9.0, 12.0])
    assert x_axis(0.009, 24.2) == ("Average step time (ms)", "ms", [0.009, 24.2])


def test_step_times_under_a_millisecond_read_in_microseconds():
    from reportgen.output.formatting import fmt_step_time

    assert fmt_step_time(0.009) == "9.0 µs"
    assert fmt_step_time(0.0003, 1, like=0.009) == "0.3 µs"  # the spread in its average's unit
    assert fmt_step_time(24.2) == "24.2 ms" and fmt_step_time(1805.0) == "1,805.0 ms"
    assert fmt_step_time(0.0, 1, like=24.2) == "0.0 ms" and fmt_step_time(0.0) == "0.0 ms"
    assert fmt_step_time(None) == "–"


def test_a_microbenchmarks_pages_give_its_step_times_in_microseconds(tmp_path, capsys):
    from reportgen.cli.main import main
    from tests.logdirs import make_logdir
    from tests.xspace import host_space

    space = host_space("vm")
    line = space.host_plane().line(1, "python")
    for step in range(2):  # 9 µs steps, 2 µs of them waiting for input (bench/many_hosts.py's tiny host)
        start = step * 10_000_000
        line.event("train_step", start, 9_000_000, step_num=step, _r=1)
        line.event("IteratorGetNext", start + 100_000, 2_000_000)
        line.event("forward", start + 2_200_000, 5_000_000)
    logdir = make_logdir(tmp_path / "logs", {"micro": {"vm": space.serialize()}, "micro_2": {"vm": space.serialize()}})
    assert main(["build", str(logdir), "-o", str(tmp_path / "site"), "-q", "--jobs", "1"]) == 0
    summary = _text(tmp_path / "site" / "micro" / "index.html")
    index = _text(tmp_path / "site" / "index.html")
    assert "Step time 9.0 µs ± 0.0 µs over 2 steps (fastest 9.0 µs, slowest 9.0 µs)" in summary
    assert re.search(r"Average step time\s*9\.0 µs\s*± 0\.0 µs, 2 steps", summary)  # the card under the answer
    assert "At stake: ≈ 2.00 µs per step" in summary  # the input finding
    assert "9.0 µs ± 0.0 µs" in index
    # Nowhere on either page a time in ms: the findings' evidence and the breakdown table follow the step.
    assert not re.search(r"\d ms\b", summary) and not re.search(r"\d ms\b", index)
    # The Markdown summary and its comparison too (a pull-request comment), with XProf's ms everywhere else.
    comment = tmp_path / "pr.md"
    assert main(["summary", str(tmp_path / "site"), "--compare", "micro", "micro_2",
                 "-o", str(comment)]) == 0
    text = comment.read_text(encoding="utf-8").replace("\\", "")
    assert "| 9.00 µs ± 0.00 µs |" in text and "≈ 2.00 µs per step" in text
    assert "| Step time (average) | 9.00 µs | 9.00 µs | ±0.00 µs |" in text
    assert not re.search(r"\d ms\b", text), text
    from reportgen.compare import BuiltSite
    from reportgen.compare.pr_summary import build_summary

    chart = build_summary(BuiltSite.open(str(tmp_path / "site"))).charts[0].spec  # the runs' breakdown, beside it
    assert chart["encoding"]["x"] == {"field": "us", "stack": "zero", "title": "Average step time (µs)",
                                      "type": "quantitative"}
    # The comparison page, its figures and its charts (the Markdown comparison's PNGs are the same charts).
    site = tmp_path / "site"
    assert main(["compare", f"{site}:micro", f"{site}:micro_2", "-q"]) == 0
    (page,) = (site / "compare").glob("*.html")
    shown = _text(page)
    assert "The candidate's average step takes 9.00 µs against 9.00 µs: ±0.00 µs" in shown
    assert not re.search(r"\d ms\b", shown), shown
    specs = dict(re.findall(r'<script type="application/json" id="([^"]+)-spec">(.*?)</script>',
                            page.read_text(encoding="utf-8"), re.S))
    breakdown, steps = (json.loads(specs[f"compare-{name}"]) for name in ("breakdown", "steps"))
    assert breakdown["encoding"]["x"]["title"] == "Average step time (µs)"
    assert steps["layer"][0]["encoding"]["x"]["title"] == "Step time (µs)"
    # The budget check: the run's figures in µs, the budgets as the user gave them.
    capsys.readouterr()
    assert main(["check", str(tmp_path / "site"), "--max-step-ms", "5", "--max-regression", "1ms", "--baseline",
                 "micro", "--runs", "micro_2"]) == 0
    text = capsys.readouterr().out
    assert "average step time 9.00 µs ≤ 5 ms" in text
    assert "step time 9.00 µs → 9.00 µs (±0.00 µs, " in text
