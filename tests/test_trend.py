"""`reportgen trend`: histories made from the sample's built run with injected step-time changes of known size at
known runs (tests/trendseries.py), read back from local folders and from gs:// through the GCS emulator."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

import pytest

from reportgen.cli.main import main
from reportgen.compare.sources import BuiltSite
from reportgen.compare.trend import build_history, ledger_causes
from reportgen.summary_blocks import RunSummary
from tests.browser import chromium, console_errors, needs_browser, screenshot
from tests.builtsite import built_site, xss_xspace
from tests.conftest import GCS_BUCKET
from tests.sitecheck import page_links
from tests.trendseries import make_series, moved_op, run_name

SOURCE_RUN = "tf_keras_fast"
NOISE_MS = 0.5
CHANGES = {20: 4.0, 40: -2.5}  # run index → ms per step from that run on
SLOW_FINDING = {"id": "steps.host_compute_bound", "severity": "medium", "title": "<b>Host compute</b> & more"}


@pytest.fixture(scope="module")
def source() -> Path:
    return built_site().site


@pytest.fixture(scope="module")
def stepped(source, tmp_path_factory) -> Path:
    """60 nightly runs, σ = 0.5 ms of noise, +4 ms from run 20 and −2.5 ms from run 40; run 30 has two hosts."""

    def edit(index: int, block: dict) -> None:
        if index == 30:
            block["overview"]["host_count"], block["hosts"] = 2, ["vm", "vm-2"]
        if index == 45:  # another program: other top ops, and an HLO module the others lack
            block["tf_stats"]["top_ops"] = [{**op, "name": f"other_model/op_{i}"}
                                            for i, op in enumerate(block["tf_stats"]["top_ops"])]
            block["graph_viewer"] = {"modules": {"jit_other_model": {}}}
        if 20 <= index < 40:  # a finding that comes with the slowdown and goes with it
            block["findings"]["items"] = [*block["findings"]["items"], SLOW_FINDING]

    site = tmp_path_factory.mktemp("stepped") / "site"
    make_series(source, SOURCE_RUN, site, 60, changes=CHANGES, noise_ms=NOISE_MS, seed=3, edit=edit)
    return site


def test_change_points_are_the_injected_ones_with_their_sizes(stepped, source):
    history = build_history([BuiltSite.open(str(stepped))])
    found = [(c.before.name, c.after.name) for c in history.change_points]
    assert found == [(run_name(at - 1), run_name(at)) for at in CHANGES]
    for point, injected in zip(history.change_points, CHANGES.values()):
        assert abs(point.size_ms - injected) <= NOISE_MS
        assert point.test.ci_low <= injected <= point.test.ci_high
        # The op the change was put on moved most, by about the change.
        top = point.movers[0]
        assert (top.kind, top.name) == ("op", moved_op(source, SOURCE_RUN))
        assert abs(top.delta_ms - injected) <= 2 * NOISE_MS
    assert history.noise_ms == pytest.approx(NOISE_MS, rel=0.5)
    first, second = history.change_points
    assert [f.id for f in first.findings_appeared] == [SLOW_FINDING["id"]] and first.findings_gone == []
    assert [f.id for f in second.findings_gone] == [SLOW_FINDING["id"]] and second.findings_appeared == []
    # Run by run, among the comparable runs (run 30 is not one).
    assert [(e.run.name, [f.id for f in e.appeared], [f.id for f in e.gone]) for e in history.finding_events] \
        == [(run_name(20), [SLOW_FINDING["id"]], []), (run_name(40), [], [SLOW_FINDING["id"]])]


def test_a_flat_noisy_series_has_no_change_point(source, tmp_path):
    for seed in range(3):
        make_series(source, SOURCE_RUN, tmp_path / f"flat-{seed}", 40, noise_ms=NOISE_MS, seed=seed)
        assert build_history([BuiltSite.open(str(tmp_path / f"flat-{seed}"))]).change_points == []


def test_a_run_of_another_program_is_flagged_and_left_out(stepped):
    history = build_history([BuiltSite.open(str(stepped))])
    odd = [(r.name, r.not_comparable_because) for r in history.not_comparable]
    assert odd == [(run_name(30), "2 hosts where the series has 1"),
                   (run_name(45), "other HLO modules (added jit_other_model); only 0 of its 5 top ops are among "
                                  "the series' usual ones")]
    for point in history.change_points:
        assert {run_name(30), run_name(45)}.isdisjoint(r.name for r in point.segment_before + point.segment_after)


def test_runs_are_ordered_by_capture_time_across_sites(source, tmp_path):
    # Two sites given newest first, each holding part of the series, their names in the other order than their
    # capture times: the history is in capture order.
    make_series(source, SOURCE_RUN, tmp_path / "late", 10, first=10, prefix="a_")
    make_series(source, SOURCE_RUN, tmp_path / "early", 10, prefix="b_")
    history = build_history([BuiltSite.open(str(tmp_path / p)) for p in ("late", "early")])
    assert [r.name for r in history.runs] == [run_name(i, "b_") for i in range(10)] + [
        run_name(i, "a_") for i in range(10, 20)]
    late = BuiltSite.open(str(tmp_path / "late"))
    assert [r.name for r in build_history([late], "*_01_1[3-5]_*").runs] == [run_name(i, "a_") for i in (12, 13, 14)]


def test_runs_without_a_timestamp_name_are_ordered_by_the_profilers_start(source):
    # The bundled sample's runs carry no timestamp in their names; their captures' Task Environment plane says
    # tf_keras_input_bound was profiled 6.6 s before tf_keras_fast, which natural name order would put first.
    site = BuiltSite.open(str(source))
    sample = ("tf_keras_input_bound", "tf_keras_fast")
    starts = {name: site.run(name).summary.inventory.profile_start for name in sample}
    assert starts == {"tf_keras_input_bound": "2026-11-21T17:53:50.907Z", "tf_keras_fast": "2026-11-21T17:53:57.546Z"}
    assert [r.name for r in build_history([site]).runs if r.name in sample] == list(sample)
    # A run whose capture does not say (the site's hand-made run) comes after the dated ones.
    assert build_history([site]).runs[-1].name not in sample


def test_causes_come_from_the_step_ledger_when_a_run_has_one(stepped, source, tmp_path):
    # The block as the run pages' step ledger writes it: causes by key, named by `labels`, in `precedence` order.
    block = {"step_ledger": {"steps": 2, "precedence": ["device_compute", "input", "python"],
                             "labels": {"device_compute": "Device compute", "input": "Input", "python": "Python"},
                             "average_ms": {"python": 0.5, "input": 1.0, "device_compute": 3.0}}}
    assert list(ledger_causes(RunSummary.from_json(block)).items()) == [
        ("Device compute", 3.0), ("Input", 1.0), ("Python", 0.5)]
    per_step = {"step_ledger": {"steps": 2, "per_step": [{"ms": {"compute": 3.0, "input": 1.0}},
                                                         {"ms": {"compute": 5.0}}]}}
    assert ledger_causes(RunSummary.from_json(per_step)) == {"compute": 4.0, "input": 0.5}
    assert ledger_causes(RunSummary()) is None
    assert ledger_causes(RunSummary.from_json({"step_ledger": {"steps": 4}})) is None
    make_series(source, SOURCE_RUN, tmp_path / "ledger", 6, edit=lambda i, b: b.update(block))
    assert main(["trend", str(tmp_path / "ledger"), "-q"]) == 0
    html = (tmp_path / "ledger" / "trends" / "index.html").read_text(encoding="utf-8")
    assert "Each run's step ledger" in html and '"Device compute"' in html
    # A site of this version carries the block; without it (runs built before the ledger): the overview's breakdown.
    run = build_history([BuiltSite.open(str(stepped))]).runs[0]
    assert run.causes[0] == "ledger"
    run.run.summary = replace(run.summary, blocks={k: v for k, v in run.summary.blocks.items() if k != "step_ledger"})
    kind, causes = run.causes
    assert kind == "breakdown" and causes["Host compute"] == pytest.approx(
        run.summary.overview.breakdown_ms["host_compute"])


def test_command_writes_the_page_into_the_site_with_every_link_resolving(stepped, tmp_path):
    site = shutil.copytree(stepped, tmp_path / "site")
    assert main(["trend", str(site), "-q"]) == 0
    page = site / "trends" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert f'href="../{run_name(20)}/index.html"' in html
    # Every link of the page (assets at the site root, the runs' pages, its downloads) resolves.
    targets = [unquote(value.split("#")[0]) for _tag, _attr, value in page_links(page)
               if "://" not in value and not value.startswith(("#", "data:"))]
    assert targets and [t for t in targets if not (page.parent / t).exists()] == []
    data = json.loads((site / "trends" / "trend.json").read_text(encoding="utf-8"))
    assert [c["after"] for c in data["change_points"]] == [run_name(at) for at in CHANGES]
    assert len(data["runs"]) == 60 and [r["index"] for r in data["runs"] if not r["comparable"]] == [30, 45]
    assert "&lt;b&gt;Host compute&lt;/b&gt; &amp; more" in html and "<b>Host compute" not in html


def test_capture_text_on_the_page_stays_text(source, tmp_path):
    prefix = '<img src=x onerror=alert(1)>"&'
    make_series(source, SOURCE_RUN, tmp_path / "site", 8, prefix=prefix)
    assert main(["trend", str(tmp_path / "site"), "-o", str(tmp_path / "out"), "-q"]) == 0
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.fixture
def gcs_env(gcs_emulator, monkeypatch):
    pytest.importorskip("gcsfs")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    return gcs_emulator


def test_history_from_gcs_equals_the_local_one(source, gcs_env, tmp_path):
    from reportgen.output.publish import gcs_filesystem, publish_site

    # Two nightly sites (a change at run 6), published as a nightly job publishes them: one folder each.
    fs = gcs_filesystem(gcs_env)
    local_sites = []
    for part, first in (("a", 0), ("b", 6)):
        make_series(source, SOURCE_RUN, tmp_path / part, 6, changes={6: 4.0}, noise_ms=NOISE_MS, seed=7, first=first)
        publish_site(tmp_path / part, f"gs://{GCS_BUCKET}/nightly/{part}", fs=fs, jobs=2)
        local_sites.append(BuiltSite.open(str(tmp_path / part)))
    remote = build_history([BuiltSite.open(f"gs://{GCS_BUCKET}/nightly/{p}") for p in "ab"]).as_dict()
    local = build_history(local_sites).as_dict()
    for run in remote["runs"] + local["runs"]:
        run.pop("site")
    assert remote == local and [c["after"] for c in remote["change_points"]] == [run_name(6)]
    # The command lists the sites of a gs:// pattern itself (no shell expands it).
    assert main(["trend", f"gs://{GCS_BUCKET}/nightly/*", "-o", str(tmp_path / "out"), "-q"]) == 0
    assert json.loads((tmp_path / "out" / "trend.json").read_text(encoding="utf-8"))["change_points"][0][
        "movers"] == remote["change_points"][0]["movers"]
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert f"https://storage.googleapis.com/{GCS_BUCKET}/nightly/b/{run_name(6)}/index.html" in html


@needs_browser
def test_page_draws_and_a_run_opens_from_the_chart(stepped, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    site = shutil.copytree(stepped, tmp_path / "site")
    assert main(["trend", str(site), "-q"]) == 0
    with chromium(tmp_path / "profile", window="1280,800") as driver:
        driver.get((site / "trends" / "index.html").as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trend-steps svg .mark-symbol.role-mark path")) == 60)
        screenshot(driver, "trend.png")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#trend-causes svg .mark-area path")) >= 1
        assert len(driver.find_elements(By.CSS_SELECTOR, "section.change-point")) == 2
        assert console_errors(driver) == []
        first = driver.find_elements(By.CSS_SELECTOR, "#trend-steps svg .mark-symbol.role-mark path")[0]
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", first)
        WebDriverWait(driver, 10).until(lambda d: len(d.window_handles) > 1 or "trends" not in d.current_url)
        if len(driver.window_handles) > 1:
            driver.switch_to.window(driver.window_handles[-1])
        # The synthetic runs' pages are copies (their site has no runs.js): only where the click went counts.
        assert driver.current_url.endswith(f"{run_name(0)}/index.html")


@pytest.fixture(scope="module")
def flat_history(source, tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("history") / "site"
    make_series(source, SOURCE_RUN, site, 30, noise_ms=NOISE_MS, seed=2)
    return site


@pytest.mark.parametrize("change, code", [(4.0, 3), (0.0, 0)])
def test_check_judges_a_run_against_its_history(source, flat_history, tmp_path, capsys, change, code):
    make_series(source, SOURCE_RUN, tmp_path / "candidate", 1, changes={30: change}, first=30, seed=5)
    assert main(["check", str(tmp_path / "candidate"), "--max-regression", "5%", "--history",
                 str(flat_history)]) == code
    out = capsys.readouterr().out
    assert "against the median" in out and "of the last 30 comparable runs" in out
    assert ("over the 5% regression budget; beyond the runs' noise" in out) == (code == 3)


def test_summary_places_the_run_in_its_history(source, flat_history, tmp_path, capsys):
    make_series(source, SOURCE_RUN, tmp_path / "candidate", 1, changes={30: 4.0}, first=30, seed=5)
    assert main(["summary", str(tmp_path / "candidate"), "--history", str(flat_history)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("- "))
    assert "slower than 30 of the last 30 runs; +" in line and "against their median" in line
    assert "beyond their noise" in line and "Conv2DBackpropFilter</code> +" in line


def test_trend_charts_are_valid_vega_lite(stepped, tmp_path):
    from tests.test_vega_specs import _assert_valid

    site = shutil.copytree(stepped, tmp_path / "site")
    assert main(["trend", str(site), "-q"]) == 0
    _assert_valid(site / "trends", minimum=4)  # step time, input share, memory peak, causes


def test_a_built_logdir_of_nightly_runs_gets_its_trends_page(tmp_path):
    # Tiny captures (a line of 20 events each): what is under test is the series, not the runs.
    capture = xss_xspace()
    for i in range(6):
        run = tmp_path / "logs/plugins/profile" / run_name(i, "")
        run.mkdir(parents=True)
        (run / "vm.xplane.pb").write_bytes(capture)
    site = tmp_path / "site"
    for _ in range(2):  # the second build replaces the first one's Trends page with its own
        assert main(["build", str(tmp_path / "logs"), "-o", str(site), "-q", "--jobs", "1"]) == 0
        assert '<a href="trends/index.html">Trends across these 6 runs</a>' in (site / "index.html").read_text()
        assert len(json.loads((site / "trends/trend.json").read_text())["runs"]) == 6
    # Runs not named after their capture time (the session's site) are no series: no Trends page.
    assert not (built_site().site / "trends").exists()
