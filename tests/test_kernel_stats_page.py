"""The kernel stats page, CSV and summary block, built end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from reportgen.core.tools.kernel_stats import XPROF_COLUMNS
from reportgen.loaders.xspace import decode_xspace
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.pipeline.host_stage import host_context
from reportgen.sections.kernel_stats import KernelStatsSection, compact_kernel_name
from tests.browser import chromium, console_errors, needs_browser
from tests.conftest import LOGDIR, ORACLE, host_files, needs_shared
from tests.xspace import gpu_space

CSV = "data/kernel_stats/kernel_stats.csv"


@pytest.fixture(scope="module")
def shared_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    report = build_site([str(LOGDIR)], BuildOptions(output=str(out), runs={"gpu_multi_worker", "tf_keras_fast"},
                                                    jobs=1))
    assert report.exit_code == 0
    return out


@needs_shared
def test_summary_block_and_tool_listing(shared_site):
    summary = json.loads((shared_site / "summary.json").read_text())
    gpu = summary["runs"]["gpu_multi_worker"]
    oracle = json.loads((ORACLE / "gpu_multi_worker" / "kernel_stats.json").read_text())
    total_us = sum(row["c"][11]["v"] for row in oracle["rows"])
    assert gpu["tools"]["kernel_stats"] == {"page": "gpu_multi_worker/kernel_stats.html"}
    block = gpu["kernel_stats"]
    assert {k: block[k] for k in ("kernels", "total_us", "tensor_core_percent")} == {
        "kernels": 30, "total_us": pytest.approx(total_us, abs=1e-3), "tensor_core_percent": 0.0}
    # The kernels with the most time, by name over all their rows, as the run's summary page lists them.
    top = block["top_kernels"]
    assert top[0]["name"] == oracle["rows"][0]["c"][1]["v"]
    assert [k["total_us"] for k in top] == sorted((k["total_us"] for k in top), reverse=True)
    assert sum(k["percent"] for k in top) <= 100.0 + 1e-9
    cpu = summary["runs"]["tf_keras_fast"]
    assert "kernel_stats" not in cpu and "kernel_stats" not in cpu["tools"]
    assert not (shared_site / "tf_keras_fast" / "kernel_stats.html").exists()
    assert not (shared_site / "tf_keras_fast" / CSV).exists()


@needs_shared
def test_csv_is_xprofs_combined_table_plus_host(shared_site):
    with open(shared_site / "gpu_multi_worker" / CSV, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    with open(ORACLE / "gpu_multi_worker" / "kernel_stats.csv", newline="", encoding="utf-8") as handle:
        oracle = list(csv.reader(handle))
    assert rows[0] == oracle[0] + ["Host"]
    assert len(rows) == len(oracle)
    for mine, theirs in zip(rows[1:], oracle[1:]):
        assert mine[1] == theirs[1] and mine[9] == theirs[9]  # kernel and op names, verbatim
        assert [float(v) for v in mine[10:15]] == pytest.approx([float(v) for v in theirs[10:15]])
        assert mine[15] in {p.stem.removesuffix(".xplane") for p in host_files("gpu_multi_worker")}


@needs_shared
def test_page_has_a_view_per_host_and_all_hosts(shared_site):
    html = (shared_site / "gpu_multi_worker" / "kernel_stats.html").read_text()
    assert 'data-host-select="kernel_stats"' in html
    assert html.count('data-host-panel="kernel_stats"') == 3
    assert "All 2 hosts" in html
    for label in XPROF_COLUMNS.values():
        assert label in html
    assert (shared_site / "gpu_multi_worker" / "index.html").read_text().count("kernel_stats.html") >= 1


@needs_shared
def test_tpu_and_cpu_hosts_have_no_kernel_stats():
    section = KernelStatsSection()
    for run in ("tpu_inference_2", "tf_keras_fast"):
        path = host_files(run)[0]
        capture = decode_xspace(str(path), path.read_bytes())
        assert section.host_part(host_context(run, capture, "")) is None


def test_capture_text_is_escaped_and_single_host_has_no_selector(tmp_path):
    space = gpu_space("onehost")
    line = space.gpu(0).line(1, "Stream #1")
    evil = "<script>alert(1)</script>"
    line.event(evil, 0, 5000, stats={"kernel_details": "regs:1", "tf_op": '<img src=x onerror="boom()">:'})
    line.event("volta_h884gemm", 10_000, 15000, stats={"kernel_details": "regs:1", "tf_op": "d/MatMul:MatMul"})
    run_dir = tmp_path / "logs" / "plugins" / "profile" / "run1"
    run_dir.mkdir(parents=True)
    (run_dir / "onehost.xplane.pb").write_bytes(space.serialize())
    report = build_site([str(tmp_path / "logs")], BuildOptions(output=str(tmp_path / "site"), jobs=1))
    assert report.exit_code == 0
    html = (tmp_path / "site" / "run1" / "kernel_stats.html").read_text()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    # The rows are data (the page's script makes their cells as text): the names come back whole from the block.
    import re

    block = json.loads(re.search(r'id="kernels-[^"]*-rows">(.*?)</script>', html, re.S).group(1))
    names = {row[1] if isinstance(row[1], str) else row[1][0] for row in block["rows"]}
    assert evil in names and '<img src=x onerror="boom()">' in {row[-5] for row in block["rows"]}
    assert "data-host-select" not in html
    summary = json.loads((tmp_path / "site" / "summary.json").read_text())["runs"]["run1"]["kernel_stats"]
    assert {k: summary[k] for k in ("kernels", "total_us", "tensor_core_percent")} == {
        "kernels": 2, "total_us": 0.02, "tensor_core_percent": 75.0}
    assert [k["percent"] for k in summary["top_kernels"]] == [75.0, 25.0]


def test_compact_kernel_names():
    eigen = ("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<"
             "Eigen::Tensor<Eigen::half, 1, 1, long>, 16, Eigen::MakePointer>, Eigen::TensorConversionOp<Eigen::half, "
             "Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16, Eigen::MakePointer> const> const> const, "
             "Eigen::GpuDevice>, long>(Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<Eigen::Tensor<"
             "Eigen::half, 1, 1, long>, 16, Eigen::MakePointer>, Eigen::TensorConversionOp<Eigen::half, "
             "Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16, Eigen::MakePointer> const> const> const, "
             "Eigen::GpuDevice>, long)")
    assert compact_kernel_name(eigen, 120) == (
        "EigenMetaKernel<TensorEvaluator<TensorAssignOp<TensorMap<\u2026>, "
        "TensorConversionOp<half, TensorMap<\u2026>>>, GpuDevice>, long>"
    )
    assert compact_kernel_name("volta_h884gemm_128x128_ldg8_nn", 120) == "volta_h884gemm_128x128_ldg8_nn"
    assert len(compact_kernel_name("k" * 500, 120)) == 120


@needs_shared
@needs_browser
def test_page_works_in_a_browser(shared_site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    with chromium(tmp_path) as driver:
        driver.get((shared_site / "gpu_multi_worker" / "kernel_stats.html").as_uri())
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#kernel-pie-all svg"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#kernels-all tbody tr")
        assert len(rows) == 30
        # Filter by a fragment that only appears in the full (not the compact) names.
        box = driver.find_element(By.CSS_SELECTOR, "input[data-filter-table='kernels-all']")
        box.send_keys("FillPhiloxRandom")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#kernels-all tbody tr")) == 2
        assert driver.find_element(By.CSS_SELECTOR, "[data-row-count='kernels-all']").text == "2 of 30 rows"
        Select(driver.find_element(By.CSS_SELECTOR, "select[data-host-select]")).select_by_index(1)
        assert driver.find_element(By.CSS_SELECTOR, "#kernels-host-1").is_displayed()
        assert not driver.find_element(By.CSS_SELECTOR, "#kernels-all").is_displayed()
        assert console_errors(driver) == []


@needs_shared
def test_the_chart_has_a_slice_per_table_row_below_the_table(shared_site):
    """Each slice is one row of the table, labelled with its rank there and holding its total: slices of a
    kernel name's rows merged had a legend whose "#2" showed 22.5 ms where row 2 said 19.1 ms, and ranks 7, 8
    and 10 missing. The page leads with the table; the chart comes after it."""
    import re

    page = (shared_site / "gpu_multi_worker" / "kernel_stats.html").read_text(encoding="utf-8")
    spec = json.loads(re.search(r'<script type="application/json" id="kernel-pie-all-spec">(.*?)</script>',
                                page, re.S).group(1))
    slices = next(iter(spec["datasets"].values()))
    with open(shared_site / "gpu_multi_worker" / CSV, newline="", encoding="utf-8") as handle:
        totals = sorted((float(r["Total Duration (μs)"]) for r in csv.DictReader(handle)), reverse=True)
    ranked = [s for s in slices if s["label"].startswith("#")]
    assert [int(s["label"][1:].split(" ", 1)[0]) for s in ranked] == list(range(1, len(ranked) + 1))
    assert [s["total_us"] for s in ranked] == pytest.approx(totals[:len(ranked)])
    assert slices[-1]["label"] == f"{len(totals) - len(ranked)} other rows"
    assert page.index('id="kernels-all"') < page.index('id="kernel-pie-all"')
