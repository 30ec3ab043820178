"""The memory pages, CSVs and summary.json block as users and scripts see them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from reportgen.pipeline.build import BuildOptions, build_site
from tests.browser import chromium, console_errors, needs_browser, screenshot
from tests.conftest import LOGDIR, ORACLE, needs_shared
from tests.hlo_builder import sample_module
from tests.xspace import Space, memory_event

EVIL = "<script>alert(1)</script>"
MODULE = "jit_sample(7)"


def risky_capture() -> bytes:
    """An allocator at 96% of its capacity, an op name with markup, and one HLO module."""
    b = Space(("host",))
    line = b.plane("/host:CPU").line(name="tf_Compute")
    memory_event(line, "MemoryAllocation", 100, allocator="GPU_0_bfc", heap=96_000, free=4_000, requested=90_000,
                 allocated=96_000, address=0x10, peak=96_000, tf_op=EVIL, region_type="output", data_type=1,
                 shape="[24000]")
    memory_event(line, "MemoryDeallocation", 200, allocator="GPU_0_bfc", heap=0, free=100_000, requested=90_000,
                 allocated=96_000, address=0x10, peak=96_000)
    b.plane("/host:metadata").metadata("jit_sample(7)", md_id=7, **{"Hlo Proto": sample_module().SerializeToString()})
    return b.serialize()


def tpu_capture() -> bytes:
    """A TPU host: one allocator with a few events on its thread, two cores' XLA Modules lines (one module
    name with markup)."""
    b = Space(("tpuhost",))
    line = b.plane("/host:CPU").line(name="tpu_runtime")
    for i, heap in enumerate((1_000, 5_000, 2_000, 8_000, 3_000)):
        memory_event(line, "MemoryAllocation", (i + 1) * 10_000_000_000, allocator="0", heap=heap, free=10_000,
                     requested=heap, allocated=heap, address=i, peak=heap)
    for core in (0, 1):
        modules = b.plane(f"/device:TPU:{core}").line(1, "XLA Modules")
        modules.event("jit_f(1)", 5_000_000_000, 20_000_000_000).event(EVIL, 30_000_000_000, 10_000_000_000)
    return b.serialize()


def plain_capture() -> bytes:
    b = Space(("host",))
    b.plane("/host:CPU").line(name="python").event("train", 0, 10, _r=1)
    return b.serialize()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("logdir")
    for run, data in (("risky", risky_capture()), ("plain", plain_capture()), ("tpu", tpu_capture())):
        folder = logdir / "plugins" / "profile" / run
        folder.mkdir(parents=True)
        (folder / "host.xplane.pb").write_bytes(data)
    out = tmp_path_factory.mktemp("out") / "site"
    report = build_site([str(logdir)], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == 0
    return out


def test_summary_memory_block(site):
    summary = json.loads((site / "summary.json").read_text())
    risky = summary["runs"]["risky"]
    assert set(risky["tools"]) >= {"memory_profile", "memory_viewer"}
    profile = risky["memory"]["profiles"]["host/GPU_0_bfc"]
    assert profile == {"peak_bytes": 96_000, "peak_time_ms": 100 / 1e9, "capacity_bytes": 100_000,
                       "fragmentation_percent": 0.0, "allocations": 1, "deallocations": 1}
    assert risky["memory"]["modules"] == {MODULE: {"peak_bytes": 131088 + 65536,
                                                   "peak_unpadded_bytes": 16 + 65536 + 51200 + 65536}}


def test_runs_without_memory_data_have_no_pages(site):
    summary = json.loads((site / "summary.json").read_text())
    plain = summary["runs"]["plain"]
    assert "memory" not in plain
    assert not {"memory_profile", "memory_viewer"} & set(plain["tools"])
    assert not (site / "plain" / "memory_profile.html").exists()
    assert not (site / "plain" / "memory_viewer.html").exists()
    assert "memory_profile.html" not in (site / "plain" / "index.html").read_text()


def test_breakdown_csv_uses_xprof_labels(site):
    path = site / "risky" / "data" / "memory_profile" / "host__GPU_0_bfc__breakdown.csv"
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["Op Name", "Allocation Size (GiBs)", "Requested Size (GiBs)", "Occurrences",
                             "Region type", "Data type", "Shape", "Allocation Size (bytes)", "Requested Size (bytes)"]
    assert rows[0]["Op Name"] == EVIL and rows[0]["Allocation Size (bytes)"] == "96000"
    assert float(rows[0]["Allocation Size (GiBs)"]) == pytest.approx(96_000 / 2**30)


def test_buffers_csv_per_module(site):
    path = site / "risky" / "data" / "memory_viewer" / f"{MODULE}__buffers.csv"
    rows = list(csv.DictReader(path.open()))
    assert [r["Instruction"] for r in rows] == ["p0", "tuple.1{0}", "copy.2", "small (<16384 bytes)"]
    copy = rows[2]
    assert (copy["Size (bytes)"], copy["Unpadded size (bytes)"], copy["Extra memory (bytes)"]) == (
        "65536", "51200", "14336")
    assert float(copy["Expansion"]) == pytest.approx(65536 / 51200)
    assert copy["Shape"] == "f32[100,128]{1,0:T(8,128)}" and copy["Memory space"] == "0"


def test_pages_lead_with_out_of_memory_help(site):
    for page, needle in (("memory_profile.html", "96.0% of the allocator"),
                         ("memory_viewer.html", "of the device memory capacity")):
        html = (site / "risky" / page).read_text()
        assert "Out-of-memory risk" in html and needle in html
        assert html.index("Out-of-memory risk") < html.index("<h2")


def test_capture_text_is_escaped(site):
    html = (site / "risky" / "memory_profile.html").read_text()
    assert EVIL not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@needs_shared
def test_real_runs_pages_and_names(tmp_path):
    out = tmp_path / "site"
    report = build_site([str(LOGDIR)], BuildOptions(output=str(out), runs={"jax_mlp", "tf_keras_fast"}, jobs=1))
    assert report.exit_code == 0
    summary = json.loads((out / "summary.json").read_text())["runs"]
    names = (ORACLE / "jax_mlp" / "tool_names.txt").read_text().split("hlo_modules:", 1)[1].strip().split(",")
    assert list(summary["jax_mlp"]["memory"]["modules"]) == names
    assert "profiles" not in summary["jax_mlp"]["memory"]  # JAX on CPU records no allocator events
    assert sorted(p.name for p in (out / "jax_mlp" / "data" / "memory_viewer").iterdir()) == sorted(
        f"{n}__buffers.csv" for n in names)
    assert list(summary["tf_keras_fast"]["memory"]["profiles"]) == ["vm/mklcpu"]
    assert "modules" not in summary["tf_keras_fast"]["memory"]
    assert (out / "tf_keras_fast" / "data" / "memory_profile" / "vm__mklcpu__breakdown.csv").exists()
    assert not (out / "tf_keras_fast" / "memory_viewer.html").exists()


@needs_browser
def test_pointing_at_a_buffer_shows_its_lifetime(site, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path) as driver:
        driver.get((site / "risky" / "memory_viewer.html").as_uri())
        wait = WebDriverWait(driver, 20)
        status = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "[data-mv-status]").text and
                            d.find_element(By.CSS_SELECTOR, "[data-mv-status]"))
        highlight = "g.mark-rect.layer_0_marks path"
        assert driver.find_elements(By.CSS_SELECTOR, highlight) == []
        row = driver.find_element(By.CSS_SELECTOR, "tr[data-span-label='copy.2']")
        ActionChains(driver).move_to_element(row).perform()
        wait.until(lambda d: "copy.2: allocated at position 4, freed at position 7" in status.text)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, highlight)) == 1)
        row.click()
        assert row.get_attribute("aria-selected") == "true" and "(selected)" in status.text
        ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
        wait.until(lambda d: "(selected)" in status.text)  # a selected buffer stays shown
        assert console_errors(driver) == []


def test_a_tpu_hosts_module_runs_are_listed_with_their_csv(site):
    html = (site / "tpu" / "memory_profile.html").read_text()
    assert html.count('<tr tabindex="0" data-start-ms=') == 4 and EVIL not in html
    assert 'data-start-ms="30.0" data-end-ms="40.0"' in html
    with open(site / "tpu" / "data" / "memory_profile" / "host__hlo_modules.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Id", "HLO Module", "Device", "Start Time (ms)", "End Time (ms)", "Duration (ms)"]
    assert [r[:3] for r in rows[1:]] == [["0", "jit_f(1)", "TPU:0"], ["1", EVIL, "TPU:0"], ["2", "jit_f(1)", "TPU:1"],
                                         ["3", EVIL, "TPU:1"]]
    assert "data-module-runs" not in (site / "risky" / "memory_profile.html").read_text()  # no TPU: no table


@needs_browser
def test_selecting_a_module_run_zooms_the_timeline_to_it(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path, window="1280,800") as driver:
        driver.get((site / "tpu" / "memory_profile.html").as_uri())
        wait = WebDriverWait(driver, 20)
        chart = wait.until(lambda d: d.execute_script(
            "var c = document.querySelector('[data-vega-spec]'); return c && c.vegaView ? c.id : null;"))

        def domain():
            return driver.execute_script(f"return document.getElementById('{chart}').vegaView.signal('time_domain');")

        assert domain() == [0, 50]  # the whole recording: 0 to the last event (ms)
        rows = driver.find_elements(By.CSS_SELECTOR, "[data-module-runs] tbody tr")
        rows[1].click()  # the second module on TPU:0, from 30 to 40 ms; its name is shown as text
        wait.until(lambda d: domain() == [30, 40])
        status = driver.find_element(By.CSS_SELECTOR, "[data-module-status]").text
        assert status == f"Timeline zoomed to {EVIL} on TPU:0: 30.000–40.000 ms."
        ticks = [t.text for t in driver.find_elements(By.CSS_SELECTOR, f"#{chart} .role-axis-label text")]
        assert ticks[:6] == ["30.0", "32.0", "34.0", "36.0", "38.0", "40.0"]  # the time axis, zoomed
        screenshot(driver, "memory-profile-module-zoom.png")
        rows[1].click()  # again: the whole timeline
        wait.until(lambda d: domain() == [0, 50])
        rows[0].click()
        driver.find_element(By.CSS_SELECTOR, "[data-module-reset]").click()
        wait.until(lambda d: domain() == [0, 50])
        time = driver.find_element(By.CSS_SELECTOR, "[data-module-time]")
        time.send_keys("35\n")
        # The table shows the runs that hold 35 ms (the others out of it, as a filtered table's).
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-module-runs] tbody tr") == [rows[1], rows[3]])
        assert console_errors(driver) == []


def test_chart_values_keep_six_digits_and_leave_what_is_not_finite_alone():
    """A fuzzed capture's absurd sizes reach the chart as inf: rounding them warned (inf × 0) on stderr."""
    import warnings

    import numpy as np

    from reportgen.sections.memory_profile import _digits

    values = np.array([0.0, 1.234567891, np.inf, -np.inf, np.nan, 123456789.123, 5e-320, -0.00012345678])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _digits(values)
    assert got[0] == 0 and got[1] == 1.23457 and got[5] == 123457000.0 and got[6] == 0 and got[7] == -0.000123457
    assert np.isposinf(got[2]) and np.isneginf(got[3]) and np.isnan(got[4])
