"""`reportgen compare` on the bundled sample: the input-bound run against its fixed version."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pandas as pd
import pytest

from reportgen.cli.main import main
from reportgen.compare import BuiltSite, RunNotFoundError, RunRef, RunResolver, compare_runs
from reportgen.output.formatting import fmt_value
from tests.browser import chromium, console_errors, needs_browser
from tests.builtsite import XSS_RUN, built_site
from tests.comparesite import BASELINE, CANDIDATE, PAGE, copy_of_built_site, keyed_rows, read_tables
from tests.htmlscan import scan_html
from tests.sitecheck import assert_links_resolve
from tests.xspace import gpu_space


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    dest = copy_of_built_site(tmp_path_factory.mktemp("compare") / "site")
    assert main(["compare", f"{dest}:{BASELINE}", f"{dest}:{CANDIDATE}", "-q"]) == 0
    return dest


@pytest.fixture(scope="module")
def summary(site) -> dict:
    return json.loads((site / "summary.json").read_text(encoding="utf-8"))["runs"]


@pytest.fixture(scope="module")
def tables(site) -> dict:
    return read_tables((site / PAGE).read_text(encoding="utf-8"))


def _idle(site: Path, run: str) -> float:
    ops = pd.read_csv(site / run / "data/tf_stats/framework_op_stats.csv")
    return float(ops.loc[(ops["Host/device"] == "Host") & (ops["Operation Type"] == "IDLE"),
                         "Total self-time on Host (%)"].sum())


def _expected_figures(site: Path, summary: dict, run: str) -> dict[str, float]:
    block = summary[run]
    overview = block["overview"]
    figures = {
        "step_time": overview["step_time_ms"]["average"],
        "step_time_sd": overview["step_time_ms"]["standard_deviation"],
        "steps": overview["steps"],
        "input_percent": overview["input_percent"],
        "host_idle_percent": _idle(site, run),
        "device_self_us": block["tf_stats"]["device_self_us"],
        "host_self_us": block["tf_stats"]["host_self_us"],
        "ops": block["tf_stats"]["ops"],
    }
    figures.update({f"breakdown/{k}": v for k, v in overview["breakdown_ms"].items()})
    figures.update({f"memory/{k}": p["peak_bytes"] for k, p in block["memory"]["profiles"].items()})
    figures.update({f"input/{k}": v for k, v in block["input_pipeline"]["host_ms"].items()})
    return figures


def _number(cell) -> float | None:
    return float(cell.attrs["data-sort"]) if "data-sort" in cell.attrs else None


def test_candidate_is_about_five_times_faster_and_no_longer_input_bound(site, summary):
    data = json.loads((site / PAGE.replace(".html", ".json")).read_text(encoding="utf-8"))
    assert 4.5 < data["speedup"] < 7.0
    assert data["step_time_ms"]["delta"] < 0
    assert data["input_bound"] == {"baseline": "HIGHLY", "candidate": "NOT"}
    test = data["step_time_test"]
    assert test["judged"] and test["significant"] and test["p_value"] < 1e-3
    assert test["steps_baseline"] == summary[BASELINE]["overview"]["steps"] == 5
    assert test["ci_low_ms"] < data["step_time_ms"]["delta"] < test["ci_high_ms"] < 0
    verdict = "".join(scan_html((site / PAGE).read_text(encoding="utf-8")).text)
    assert f"{data['speedup']:.2f}× faster" in verdict and "beyond the runs' own noise" in verdict
    assert "Welch's t-test" in verdict


def test_every_number_is_a_runs_own_figure_or_their_difference(site, summary, tables):
    base = _expected_figures(site, summary, BASELINE)
    cand = _expected_figures(site, summary, CANDIDATE)
    rows = {}
    for table in ("headline", "breakdown", "op-totals", "input-stages"):
        rows.update(keyed_rows(tables[table]))
    # Every category, allocator and stage the runs have, and nothing else.
    nonzero = {k for k in base if not k.startswith(("breakdown/", "input/")) or base[k] or cand[k]}
    assert set(rows) - {"input_bound"} == nonzero
    for key, row in rows.items():
        if key == "input_bound":
            continue
        _, b, c, delta, delta_pct = row.cells
        assert _number(b) == base[key] and _number(c) == cand[key], key
        assert _number(delta) == cand[key] - base[key], key
        if key.endswith("percent"):
            assert delta_pct.text == "–" and delta.text.endswith(" pp")
        elif base[key]:
            assert _number(delta_pct) == pytest.approx(100 * (cand[key] - base[key]) / base[key], rel=1e-12), key
    step = rows["step_time"].cells
    assert step[1].text == fmt_value(base["step_time"], "ms") == "137.82 ms"
    assert step[2].text == fmt_value(cand["step_time"], "ms") == "24.24 ms"
    assert step[3].text == "-113.58 ms" and step[4].text == "-82.4%"
    assert [c.text for c in rows["input_bound"].cells[1:3]] == ["HIGHLY", "NOT"]


def test_op_rows_are_the_tf_stats_rows_of_each_run(site, tables):
    def self_times(run):
        ops = pd.read_csv(site / run / "data/tf_stats/framework_op_stats.csv", keep_default_na=False)
        ops = ops[(ops["Host/device"] == "Host") & (ops["Operation Type"] != "IDLE")]
        return {(t, n): v for t, n, v in zip(ops["Operation Type"], ops["Operation Name"], ops["Total self-time (us)"])}

    base, cand = self_times(BASELINE), self_times(CANDIDATE)
    rows = tables["ops-host"][1:]
    assert len(rows) == 20
    deltas = []
    for row in rows:
        cells = row.cells
        key = (cells[1].text, cells[2].text.strip())
        status = cells[9].text.strip()
        assert _number(cells[3]) == base.get(key, 0.0) and _number(cells[4]) == cand.get(key, 0.0)
        assert _number(cells[5]) == cand.get(key, 0.0) - base.get(key, 0.0)
        assert status == ("removed" if key not in cand else "added" if key not in base else "")
        deltas.append(abs(_number(cells[5])))
    assert deltas == sorted(deltas, reverse=True)
    # The input-bound run's map-and-batch iterator is the largest change: gone with the new pipeline.
    assert rows[0].cells[2].text.strip() == "Iterator::Root::MapAndBatch" and rows[0].cells[9].text.strip() == "removed"
    assert "ops-device" not in tables  # CPU runs: no device ops
    csv = pd.read_csv(site / "compare" / "data" / f"{BASELINE}--vs--{CANDIDATE}" / "tf_ops.csv")
    assert len(csv) == len(set(base) | set(cand))


def test_input_pipeline_bottleneck_before_and_after(summary, tables):
    rows = keyed_rows(tables["input-bottleneck"])
    before = summary[BASELINE]["input_pipeline"]["bottleneck"]
    after = summary[CANDIDATE]["input_pipeline"]["bottleneck"]
    assert [c.text.strip() for c in rows["bottleneck"].cells[1:]] == [before["iterator"], after["iterator"]]
    assert before["iterator"] == "Iterator::Root::MapAndBatch" and after["iterator"] == "Iterator::Root::Prefetch"
    assert [_number(c) for c in rows["bottleneck_latency_ms"].cells[1:]] == [before["latency_ms"], after["latency_ms"]]
    assert [_number(c) for c in rows["bottleneck_self_time_ms"].cells[1:]] == [before["self_time_ms"],
                                                                            after["self_time_ms"]]


def _local_targets(page: Path) -> list[Path]:
    scan = scan_html(page.read_text(encoding="utf-8"))
    targets = []
    for _tag, _attr, value in scan.links:
        parts = urlsplit(value)
        if parts.scheme or value.startswith("#") or value.startswith("data:"):
            continue
        targets.append((page.parent / unquote(parts.path)).resolve())
    return targets


def test_site_index_lists_the_comparison_and_nothing_else_changed(site):
    before = (built_site().site / "index.html").read_text(encoding="utf-8")
    after = (site / "index.html").read_text(encoding="utf-8")
    block = re.compile(r'<template id="comparisons-start">.*?<template id="comparisons-end"></template>', re.S)
    assert block.sub("", before) == block.sub("", after)
    listed = block.search(after).group(0)
    assert f'href="{PAGE}"' in listed and f"{BASELINE} → {CANDIDATE}" in listed and "-82.4%" in listed
    for path in ("summary.json", f"{BASELINE}/index.html", f"{CANDIDATE}/overview.html"):
        assert (site / path).read_bytes() == (built_site().site / path).read_bytes()


def test_every_link_of_the_page_resolves_and_run_pages_are_linked(site):
    assert_links_resolve(site)
    targets = _local_targets(site / PAGE)
    linked = {t.relative_to(site.resolve()).as_posix() for t in targets}
    assert {f"{BASELINE}/index.html", f"{CANDIDATE}/tf_stats.html", f"{BASELINE}/input_pipeline.html",
            f"{CANDIDATE}/overview.html", "index.html"} <= linked


def test_comparing_again_replaces_the_entry(site, tmp_path):
    copy = shutil.copytree(site, tmp_path / "again")
    assert main(["compare", f"{copy}:{BASELINE}", f"{copy}:{CANDIDATE}", "-q"]) == 0
    assert main(["compare", f"{copy}:{CANDIDATE}", f"{copy}:{BASELINE}", "-q"]) == 0
    entries = json.loads((copy / "compare" / "comparisons.json").read_text())["comparisons"]
    assert [(e["baseline"], e["candidate"]) for e in entries] == [(BASELINE, CANDIDATE), (CANDIDATE, BASELINE)]
    index = (copy / "index.html").read_text(encoding="utf-8")
    assert index.count("--vs--") == 2 and "+468.5%" in index


def test_runs_of_another_site_make_a_folder_of_comparisons(site, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", f"{site}:{BASELINE}", f"{site}:{CANDIDATE}", "-o", str(out)]) == 0
    assert f"{out}/{PAGE}" in capsys.readouterr().out
    html = (out / PAGE).read_text(encoding="utf-8")
    assert "not read from this folder's site" in html
    assert f"../{BASELINE}/" not in html
    assert_links_resolve(out)
    assert f'href="{PAGE}"' in (out / "index.html").read_text(encoding="utf-8")
    # Someone else's folder is never written into.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["compare", f"{site}:{BASELINE}", f"{site}:{CANDIDATE}", "-o", str(foreign)]) == 1
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_unknown_runs_and_locations_are_named(site, tmp_path, capsys):
    assert main(["compare", f"{site}:nope", f"{site}:{CANDIDATE}"]) == 1
    err = capsys.readouterr().err
    assert "has no run 'nope'" in err and BASELINE in err
    assert main(["compare", str(site), f"{site}:{CANDIDATE}"]) == 1
    assert "name one as" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing"), f"{site}:{CANDIDATE}"]) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_run_references():
    assert RunRef.parse("site:run") == RunRef("site", "run")
    assert RunRef.parse("gs://bucket/logs:run_1") == RunRef("gs://bucket/logs", "run_1")
    assert RunRef.parse("gs://bucket/logs") == RunRef("gs://bucket/logs")
    assert RunRef.parse("logs/plugins/profile/run") == RunRef("logs/plugins/profile/run")
    assert str(RunRef("a", "b")) == "a:b"


def test_an_existing_path_with_a_colon_is_taken_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs:2024").mkdir()
    assert RunRef.parse("logs:2024") == RunRef("logs:2024")


def test_capture_text_on_the_page_stays_text(site, tmp_path):
    copy = shutil.copytree(site, tmp_path / "xss")
    assert main(["compare", f"{copy}:{XSS_RUN}", f"{copy}:{CANDIDATE}", "-q"]) == 0
    page = next((copy / "compare").glob("run*--vs--*.html"))
    html = page.read_text(encoding="utf-8")
    for payload in ("<script>alert(", "<img src=x", "<!--\"", 'onmouseover="alert'):
        assert payload not in html
    scan = scan_html(html)
    assert XSS_RUN in "".join(scan.text)
    assert not [a for a in scan.attributes if a[1].startswith("on")]
    assert all(attrs.get("src") or attrs.get("type") == "application/json" for attrs, _ in scan.scripts)
    # The run without steps: no step-time verdict, and the page says why.
    assert "cannot be compared" in "".join(scan.text)
    index = (copy / "index.html").read_text(encoding="utf-8")
    assert "<script>alert(" not in index


def _gpu_capture(kernels: dict[str, int]) -> bytes:
    space = gpu_space("gpuhost")
    line = space.gpu(0).line(1, "Stream #1")
    offset = 0
    for name, duration_ns in kernels.items():
        for _ in range(3):
            line.event(name, offset, duration_ns * 1000, stats={"kernel_details": "regs:32 grid:8,1,1 block:128,1,1",
                                                                  "tf_op": f"model/{name}_op:MatMul"})
            offset += duration_ns * 1000 + 1000
    return space.serialize()


def test_gpu_kernels_of_unbuilt_runs(tmp_path):
    """Runs named as LOGDIR:RUN are built first (once for both), then compared kernel by kernel."""
    profile = tmp_path / "logs" / "plugins" / "profile"
    for run, kernels in (("before", {"gemm_slow": 900, "relu": 100, "dropped": 50}),
                         ("after", {"gemm_slow": 300, "relu": 100, "added_kernel": 20})):
        (profile / run).mkdir(parents=True)
        (profile / run / "gpuhost.xplane.pb").write_bytes(_gpu_capture(kernels))
    resolver = RunResolver(tmp_path / "scratch", jobs=1)
    base, cand = resolver.resolve([RunRef.parse(f"{tmp_path / 'logs'}:before"),
                                   RunRef.parse(f"{tmp_path / 'logs'}:after")])
    assert base.site is cand.site and base.site.temporary  # one build for both
    assert [p.name for p in (tmp_path / "scratch").iterdir() if p.is_dir()] == ["site-1"]  # (and its lock file)
    comparison = compare_runs(base, cand)
    kernels = comparison.kernels.set_index("kernel")
    assert list(comparison.kernels["kernel"]) == ["gemm_slow", "dropped", "added_kernel", "relu"]
    assert kernels.loc["gemm_slow", "delta_us"] == pytest.approx(3 * (300 - 900) / 1000)
    assert kernels.loc["gemm_slow", "delta_percent"] == pytest.approx(-66.666, abs=1e-3)
    assert kernels.loc["dropped", "status"] == "removed" and kernels.loc["added_kernel", "status"] == "added"
    assert kernels.loc["relu", "delta_us"] == 0 and kernels.loc["relu", "status"] == ""
    totals = {c.key: c for c in comparison.kernel_totals}
    assert totals["total_us"].delta == pytest.approx(
        cand.summary.kernel_stats.total_us - base.summary.kernel_stats.total_us)
    assert comparison.step_time.delta is None and comparison.test.result is None

    from reportgen.compare.page import write_comparison

    written = write_comparison(comparison, tmp_path / "out")
    html = written.page.read_text(encoding="utf-8")
    rows = read_tables(html)["kernels"][1:]
    assert [r.cells[1].text.strip() for r in rows] == ["gemm_slow", "dropped", "added_kernel", "relu"]
    assert "GPU kernels that changed most" in html and 'id="compare-kernels"' in html
    assert (tmp_path / "out" / "compare" / "data" / "before--vs--after" / "kernels.csv").is_file()


def test_resolver_reads_a_built_site_without_building(site, tmp_path):
    resolver = RunResolver(tmp_path / "scratch", jobs=1)
    run = resolver.resolve([RunRef(str(site), CANDIDATE)])[0]
    assert not run.site.temporary and not (tmp_path / "scratch").exists()
    assert run.step_times_ms() and sum(run.step_times_ms()) / 5 == pytest.approx(
        run.summary.overview.step_time_ms.average, rel=1e-12)
    with pytest.raises(RunNotFoundError):
        BuiltSite.open(str(site)).run("absent")


@needs_browser
def test_page_works_in_a_browser(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path) as driver:
        driver.get((site / "index.html").as_uri())
        driver.find_element(By.CSS_SELECTOR, f"#comparisons a[href='{PAGE}']").click()
        charts = ("compare-steps", "compare-breakdown", "compare-ops-host")
        WebDriverWait(driver, 30).until(
            lambda d: all(d.find_elements(By.CSS_SELECTOR, f"#{c} svg .mark-rect, #{c} svg .mark-tick, "
                                                           f"#{c} svg .mark-symbol") for c in charts))
        assert driver.current_url.endswith(PAGE)
        # Bars of both runs in the breakdown chart.
        assert len(driver.find_elements(By.CSS_SELECTOR, "#compare-breakdown svg .mark-rect path")) >= 4
        rows = len(driver.find_elements(By.CSS_SELECTOR, "#ops-host tbody tr"))
        box = driver.find_element(By.CSS_SELECTOR, "input[data-filter-table='ops-host']")
        box.send_keys("depthwise")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#ops-host tbody tr")) == 8
        box.clear()
        driver.execute_script("arguments[0].dispatchEvent(new Event('input'))", box)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#ops-host tbody tr")) == rows
        # Sorted by change, ascending (second click): the largest saving first.
        header = driver.find_elements(By.CSS_SELECTOR, "#ops-host thead th")[5]
        header.find_element(By.CSS_SELECTOR, "button.sort").click()
        header.find_element(By.CSS_SELECTOR, "button.sort").click()
        assert header.get_attribute("aria-sort") == "ascending"
        first = driver.find_element(By.CSS_SELECTOR, "#ops-host tbody tr td:nth-child(3)").text
        assert first == "Iterator::Root::MapAndBatch"
        driver.find_element(By.LINK_TEXT, BASELINE).click()
        assert driver.current_url.endswith(f"{BASELINE}/index.html")
        assert console_errors(driver) == []
