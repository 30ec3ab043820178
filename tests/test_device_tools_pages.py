"""Op profile, HLO op stats, roofline and pod viewer pages built end to end, and used in a browser."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import orjson
import pytest

from reportgen.core.tools.hlo_stats import COLUMNS as HLO_COLUMNS
from reportgen.core.tools.roofline import COLUMNS as ROOFLINE_COLUMNS
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.sections.op_profile import CSV_COLUMNS
from reportgen.sections.registry import SECTIONS
from tests.browser import console_errors, needs_browser, screenshot, start_chromium
from tests.builtsite import built_site
from tests.conftest import LOGDIR, ORACLE, needs_shared
from tests.xspace import Space

DEVICE_PAGES = ("op_profile", "hlo_stats", "roofline_model")
# The small TPU capture's op names and framework ops are HTML/JS payloads, so every page that
# shows them proves they are escaped.
XSS_OP = '</script><script>alert("op")</script>"<!--'
PROGRAM_ID = 7
SHARED_RUNS = {"tpu_inference_2", "gpu_multi_worker"}
TPU_PAIR = "tpu_pair"  # two hosts of one TPU core each, 3 and 1 steps: per-host op profiles
TPU_POD = "tpu_pod"  # two hosts of one TPU core each, 3 steps each: a pod of two cores


def tpu_space(hostname: str = "tpuhost", steps: int = 3) -> Space:
    """One TensorCore with steps, two ops and peak capabilities."""
    space = Space((hostname,))
    space.plane("/host:CPU", 0).line(1, "python").event("main", 0, 10)
    name = hostname.encode()
    plane = space.plane("/device:TPU:0", 5, stats={
        "core_details": bytes([0x0A, len(name)]) + name,  # CoreDetails.hostname
        "peak_teraflops_per_second": 100.0, "peak_hbm_bw_gigabytes_per_second": 1000.0,
        "device_type_string": "TPU test",
    })
    step_line = plane.line(1, "Steps")
    op_line = plane.line(2, "XLA Ops")
    for op, symbol, category, flops in ((XSS_OP, 1, "loop fusion", 1000), ("copy.1", 2, "data formatting", 0)):
        plane.metadata(op, program_id=PROGRAM_ID, symbol_id=symbol, hlo_category=category, flops=flops,
                       bytes_accessed=100, tf_op=XSS_OP + ":")
    for i in range(steps):
        base = i * 1_000_000
        step_line.event(str(i), base, 900_000)
        op_line.event(XSS_OP, base + 10_000, 500_000)
        op_line.event("copy.1", base + 600_000, 200_000)
    return space


def write_tpu_run(logdir: Path, run: str = "tpu_small", hostname: str = "tpuhost") -> Path:
    """A logdir run folder holding the capture; returns the logdir."""
    space = tpu_space(hostname)
    space.capture(hostname, sort_lines=True)  # sorts the lines as saved captures are
    space.write(logdir / "plugins" / "profile" / run, hostname)
    return logdir


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The small TPU run built in code, plus (when present) two shared runs: TPU, and GPU on two hosts."""
    root = tmp_path_factory.mktemp("device")
    logdir = write_tpu_run(root / "logs")
    for host, steps in (("pair-a", 3), ("pair-b", 1)):  # a run of two TPU hosts
        tpu_space(host, steps).write(logdir / "plugins" / "profile" / TPU_PAIR, host)
    for host in ("tpuhost-a", "tpuhost-b"):
        write_tpu_run(root / "logs", run=TPU_POD, hostname=host)
    locations = [str(logdir)]
    runs = {"tpu_small", TPU_PAIR, TPU_POD}
    if LOGDIR.exists():
        locations.append(str(LOGDIR))
        runs |= SHARED_RUNS
    # Only the sections under test (and the run page): the other tools' pages are tested elsewhere.
    sections = [s for s in SECTIONS if s.slug in ("inventory", *DEVICE_PAGES, "pod_viewer")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("reportgen.pipeline.build.SECTIONS", sections)
        report = build_site(locations, BuildOptions(output=str(root / "site"), runs=runs, jobs=1))
    assert report.exit_code == 0
    return root / "site"


def _summary(site: Path) -> dict:
    return json.loads((site / "summary.json").read_text())["runs"]


def _csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_small_tpu_run_has_every_device_page_with_escaped_names(site):
    summary = _summary(site)["tpu_small"]
    for slug in DEVICE_PAGES:
        assert summary["tools"][slug] == {"page": f"tpu_small/{slug}.html"}
        html = (site / "tpu_small" / f"{slug}.html").read_text()
        assert '<script>alert("op")' not in html and "<!--" not in html.split("</head>", 1)[1]
    # One core: no pod viewer (XProf no longer lists the tool; one core's steps are the overview's graph).
    assert "pod_viewer" not in summary["tools"] and not (site / "tpu_small" / "pod_viewer.html").exists()
    block = summary["op_profile"]
    assert {"flops_utilization_percent", "categories", "hbm_utilization_percent", "idle_percent",
            "peak_flop_rate", "peak_hbm_bandwidth", "top_ops"} == set(block)
    assert block["peak_flop_rate"] == 100e12 and block["peak_hbm_bandwidth"] == 1000e9
    # The summary page's device ops: idle excluded, as XProf's op profile shows them first.
    assert [op["name"] for op in block["top_ops"]] == [XSS_OP, "copy.1"]
    assert sum(op["time_percent"] for op in block["top_ops"]) == pytest.approx(100.0)
    names = [c["name"] for c in block["categories"]]
    assert names == ["loop fusion", "IDLE", "data formatting"]
    assert sum(c["time_percent"] for c in block["categories"]) == pytest.approx(100.0, abs=0.01)
    # 3 × 1000 FLOPs over the ops' (clock-normalized) 2.1 µs, against 100 TFLOP/s.
    assert block["flops_utilization_percent"] == pytest.approx(100 * (3000 / 2100) / 100_000, rel=1e-4)


def test_tpu_pod_viewer_breaks_steps_down_by_category(site):
    html = (site / TPU_POD / "pod_viewer.html").read_text()
    assert "broken down by HLO op category" in html
    rows = _csv(site / TPU_POD / "data" / "pod_viewer" / "pod_stats.csv")
    assert rows[0][:4] == ["Step", "Core id", "Host", "Step time (us)"] and rows[0][-1] == "Bottleneck"
    assert [(r[0], r[2]) for r in rows[1:]] == [(step, host) for step in "012" for host in ("tpuhost-a", "tpuhost-b")]
    assert all(r[-1] == "Output" for r in rows[1:])  # XProf's numbers in the CSV
    assert "loop fusion" in html  # the page's breakdown and bottleneck: HLO categories


def test_a_run_of_two_hosts_has_each_hosts_op_profile_beside_the_combined_one(site):
    html = (site / "tpu_pair" / "op_profile.html").read_text()
    assert '<option value="pair-a">pair-a</option>' in html and '<option value="pair-b">pair-b</option>' in html
    payload = json.loads(html.split('<script type="application/json" id="op-profile-data">', 1)[1].split(
        "</script>", 1)[0])
    assert sorted(payload["hosts"]) == ["pair-a", "pair-b"] and set(payload["hosts"]["pair-a"]) == set(payload["trees"])

    def occurrences(rows: list[list[str]]) -> int:
        return int(next(r for r in rows if r[0].endswith(f"loop fusion > {XSS_OP}"))[CSV_COLUMNS.index("Occurrences")])

    folder = site / "tpu_pair" / "data" / "op_profile"
    assert occurrences(_csv(folder / "op_profile.csv")) == 4  # 3 steps on pair-a, 1 on pair-b
    assert occurrences(_csv(folder / "op_profile__pair-a.csv")) == 3
    assert occurrences(_csv(folder / "op_profile__pair-b.csv")) == 1
    assert 'href="data/op_profile/op_profile__pair-b.csv"' in html
    # One host: no host choice (its combined view is that host's).
    assert "data-op-host" not in (site / "tpu_small" / "op_profile.html").read_text()


def test_hosts_trees_stay_within_the_pages_budget(tmp_path, monkeypatch):
    from reportgen.core.host import HostContext
    from reportgen.core.ops.device_run import device_part
    from reportgen.core.tools.op_profile import op_profile_data
    from reportgen.sections import op_profile as section

    parts = {}
    for host, steps in (("pair-a", 3), ("pair-b", 1)):
        capture = tpu_space(host, steps).capture(host, sort_lines=True)
        parts[host] = device_part(HostContext(run="r", host=host, capture=capture, site_dir=str(tmp_path)))
    data = op_profile_data(["pair-a", "pair-b"], parts)
    whole = section.page_payload(data)
    assert list(whole["hosts"]) == ["pair-a", "pair-b"] and whole["hosts_left_out"] == []
    one_host = len(orjson.dumps(whole["hosts"]["pair-a"]))
    monkeypatch.setattr(section, "MAX_HOST_TREES_BYTES", one_host + 10)
    cut = section.page_payload(data)
    assert list(cut["hosts"]) == ["pair-a"] and cut["hosts_left_out"] == ["pair-b"]


def test_op_profile_csv_is_the_program_tree_flattened(site):
    rows = _csv(site / "tpu_small" / "data" / "op_profile" / "op_profile.csv")
    assert rows[0] == CSV_COLUMNS
    assert rows[1][:2] == ["by_program", "by_program"] and float(rows[1][3]) == pytest.approx(100.0)
    paths = [r[0] for r in rows[1:]]
    # Program 7 has no HLO module in the capture: XProf names its node "main".
    assert f"by_program > main > loop fusion > {XSS_OP}" in paths
    assert "by_program > IDLE" in paths


@needs_shared
def test_shared_runs_list_the_pages_they_have_data_for(site):
    summary = _summary(site)
    tpu = summary["tpu_inference_2"]
    assert set(DEVICE_PAGES) <= set(tpu["tools"]) and "pod_viewer" not in tpu["tools"]  # no steps
    gpu = summary["gpu_multi_worker"]
    # XProf lists all three device tools for the GPU capture; no XLA op ran, so they have no op rows.
    assert set(DEVICE_PAGES) | {"pod_viewer"} <= set(gpu["tools"])
    assert gpu["op_profile"]["categories"] == [{"name": "IDLE", "time_percent": 100.0}]
    for slug in DEVICE_PAGES:
        html = (site / "gpu_multi_worker" / f"{slug}.html").read_text()
        assert html.count("data-no-device-ops") == 1 and "its kernels are\nTensorFlow's" in html
    assert "data-no-device-ops" not in (site / "tpu_inference_2" / "hlo_stats.html").read_text()
    assert "data-no-device-tools" not in (site / "gpu_multi_worker" / "index.html").read_text()


@needs_shared
def test_gpu_hlo_stats_and_roofline_are_xprofs_empty_table_and_program_records(site):
    """What XProf has for the GPU capture: HLO op stats without a row; the roofline's program records
    (per infeed/outfeed choice: Total, Average, step 0) and its peaks."""
    assert _csv(site / "gpu_multi_worker" / "data" / "hlo_stats" / "hlo_stats.csv") == [list(HLO_COLUMNS.values())]
    records, _diagnostics = json.loads((ORACLE / "gpu_multi_worker" / "roofline_model.json").read_text())
    rows = _csv(site / "gpu_multi_worker" / "data" / "roofline_model" / "roofline_model.csv")
    assert len(rows) - 1 == len(records["rows"]) == 6
    header = rows[0]
    for ours, theirs in zip(rows[1:], records["rows"]):
        expected = {c["id"]: cell.get("v") for c, cell in zip(records["cols"], theirs["c"])}
        assert ours[header.index(ROOFLINE_COLUMNS["step"])] == expected["step"]
        assert float(ours[header.index(ROOFLINE_COLUMNS["total_time"])]) == pytest.approx(expected["total_time"])
        assert ours[header.index(ROOFLINE_COLUMNS["bound_by"])] == expected["bound_by"] == "Unknown"
    html = (site / "gpu_multi_worker" / "roofline_model.html").read_text()
    # 1,246,391.9 µs shown in seconds, its raw µs kept for sorting.
    assert "836.4 GiB/s" in html and 'data-sort="1246391.9">1.25 s<' in html


def test_single_core_cpu_runs_have_neither_device_pages_nor_a_pod_viewer():
    built = built_site()  # the bundled CPU samples, shared with the publishing tests
    summary = _summary(built.site)
    for run in ("tf_keras_fast", "tf_keras_input_bound"):
        tools = summary[run]["tools"]
        for slug in (*DEVICE_PAGES, "pod_viewer"):
            assert slug not in tools and slug not in summary[run]
            assert not (built.site / run / f"{slug}.html").exists()
            assert not (built.site / run / "data" / slug).exists()
        index = (built.site / run / "index.html").read_text()
        assert "XProf also lists the op profile, HLO op stats and roofline for this run" in index


@needs_shared
def test_shared_tpu_summary_and_csvs_match_xprof(site):
    expected = json.loads((ORACLE / "tpu_inference_2" / "op_profile.by_category.json").read_text())["byCategory"]
    block = _summary(site)["tpu_inference_2"]["op_profile"]
    assert block["flops_utilization_percent"] == pytest.approx(100 * expected["metrics"]["flops"], rel=1e-4)
    total = expected["metrics"]["rawTime"]
    assert block["categories"] == [{"name": c["name"], "time_percent": pytest.approx(100 * c["metrics"]["rawTime"]
                                                                                     / total, abs=1e-3)}
                                   for c in expected["children"]]
    hlo = _csv(site / "tpu_inference_2" / "data" / "hlo_stats" / "hlo_stats.csv")
    oracle = _csv(ORACLE / "tpu_inference_2" / "hlo_stats.csv")
    assert hlo[0] == list(HLO_COLUMNS.values()) == oracle[0]
    assert [r[3] for r in hlo[1:]] == [r[3] for r in oracle[1:]]  # op names in XProf's order
    roofline = _csv(site / "tpu_inference_2" / "data" / "roofline_model" / "roofline_model.csv")
    assert roofline[0] == list(ROOFLINE_COLUMNS.values())
    assert len(roofline) - 1 == 38
    gpu_pods = _csv(site / "gpu_multi_worker" / "data" / "pod_viewer" / "pod_stats.csv")
    assert [(r[0], r[1], r[-1]) for r in gpu_pods[1:]] == [("0", "1", "Device compute"),
                                                           ("0", "1001", "Device compute")]




def _row_names(driver) -> list[str]:
    """The tree's rows as shown: op names, and the "… N more" rows."""
    from selenium.webdriver.common.by import By

    names = []
    for row in driver.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr"):
        labels = row.find_elements(By.CSS_SELECTOR, ".op-label")
        names.append(labels[0].text if labels else row.text)
    return names


def _row(driver, name: str):
    from selenium.webdriver.common.by import By

    for row in driver.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr[data-path]"):
        if row.find_element(By.CSS_SELECTOR, ".op-label").text == name:
            return row
    raise AssertionError(f"no row {name!r} in {_row_names(driver)}")


@needs_shared
@needs_browser
def test_op_profile_page_interactions(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = start_chromium(tmp_path, "1400,1200")
    try:
        driver.get((site / "tpu_inference_2" / "op_profile.html").as_uri())
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr"))
        # Program view: the root and the programs open, categories closed.
        names = _row_names(driver)
        assert names[:3] == ["by_program", "jit_f(12190760917235803885)", "copy-done"]
        # XProf's first view: idle time excluded, so the program holds 99.54% of the time (XProf shows the same).
        assert "IDLE" not in names and "copy-done.4" not in names
        assert not driver.find_element(By.CSS_SELECTOR, "[data-op-idle]").is_selected()
        assert _row(driver, "jit_f(12190760917235803885)").find_elements(By.CSS_SELECTOR, "td.num")[0].text == "99.54%"
        # Expand a category to its ops, largest first.
        _row(driver, "copy-done").find_element(By.CSS_SELECTOR, "button.op-toggle").click()
        names = _row_names(driver)
        start = names.index("copy-done") + 1
        assert names[start:start + 6] == ["copy-done.4", "copy-done.2", "copy-done", "copy-done.5", "copy-done.1",
                                          "copy-done.3"]
        # Top 90% of the category's time: the four long copies (the two short ones are folded).
        driver.find_element(By.CSS_SELECTOR, "[data-op-top90]").click()
        names = _row_names(driver)
        assert "copy-done.1" not in names and "copy-done.5" in names
        assert any(n.startswith("… 2 more") for n in names)
        driver.find_element(By.CSS_SELECTOR, "[data-op-top90]").click()
        # Expand a fusion group and one fusion to the instructions inside it.
        _row(driver, "loop fusion").find_element(By.CSS_SELECTOR, "button.op-toggle").click()
        _row(driver, "broadcast_add_fusion.1 and its duplicate(s)").find_element(
            By.CSS_SELECTOR, "button.op-toggle").click()
        _row(driver, "broadcast_add_fusion.1").find_element(By.CSS_SELECTOR, "button.op-toggle").click()
        names = _row_names(driver)
        assert {"constant.7", "broadcast.8", "add.4"} <= set(names)
        # Select the fusion: its details.
        _row(driver, "broadcast_add_fusion.1").click()
        details = driver.find_element(By.CSS_SELECTOR, "[data-op-details]")
        assert "broadcast_add_fusion.1" in details.find_element(By.TAG_NAME, "h3").text
        text = details.text
        assert "loop fusion" in text and "jit(f)/jit(main)/add:" in text
        assert "%broadcast_add_fusion.1 = f32[5,1024,1024,256]{3,2,1,0:T(8,128)} fusion(" in text
        assert "f32[5,1024,1024,256]{3,2,1,0:T(8,128)}" in text and "Padded to" in text
        assert "host_offload_stress_test.py:29" in text
        # How many ops to show.
        Select(driver.find_element(By.CSS_SELECTOR, "[data-op-show]")).select_by_value("10")
        # Group by category, idle time still out; then put idle time in.
        driver.find_element(By.CSS_SELECTOR, "input[name='op-group'][value='category']").click()
        names = _row_names(driver)
        assert names[0] == "by_category" and "IDLE" not in names and names[1:3] == ["copy-done", "loop fusion"]
        root_time = driver.find_element(By.CSS_SELECTOR, "[data-op-rows] tr td.num").text
        assert root_time == "100.00%"
        # Order by wasted time (XProf 2.24): programs by the time they leave both peaks unused; idle time,
        # which has none, last.
        driver.find_element(By.CSS_SELECTOR, "input[name='op-group'][value='program']").click()
        driver.find_element(By.CSS_SELECTOR, "[data-op-idle]").click()
        programs = ["jit_f(12190760917235803885)", "jit__psum(9646411105960254074)",
                    "jit_broadcast_in_dim(11287434908481120160)"]
        names = _row_names(driver)
        assert [n for n in names if n in programs or n == "IDLE"] == [programs[0], "IDLE", *programs[1:]]
        driver.find_element(By.CSS_SELECTOR, "[data-op-wasted]").click()
        names = _row_names(driver)
        assert [n for n in names if n in programs or n == "IDLE"] == [*programs, "IDLE"]
        cells = _row(driver, "copy-done").find_elements(By.TAG_NAME, "td")
        assert [c.text for c in cells[1:5]] == ["-", "83.59%", "82.51%", "24.87%"]  # type, time, wasted, HBM
        assert [c.text for c in _row(driver, "IDLE").find_elements(By.TAG_NAME, "td")[1:5]] == [
            "-", "13.36%", "-", "0.0%"]
        screenshot(driver, "op-profile-wasted.png")
        flops_cell = driver.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr td.util")[0]
        assert "hsl(" in flops_cell.get_attribute("style") or "rgb(" in flops_cell.get_attribute("style")
        assert console_errors(driver) == []
    finally:
        driver.quit()


@needs_browser
def test_device_pages_render_in_a_browser_without_running_capture_text(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = start_chromium(tmp_path, "1400,1200")
    try:
        for slug in (*DEVICE_PAGES, "pod_viewer"):
            driver.get((site / (TPU_POD if slug == "pod_viewer" else "tpu_small") / f"{slug}.html").as_uri())
            if slug == "op_profile":
                WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr"))
                _row(driver, "loop fusion").find_element(By.CSS_SELECTOR, "button.op-toggle").click()
                _row(driver, XSS_OP).click()  # the payload is shown as text, never run
                assert XSS_OP in driver.find_element(By.CSS_SELECTOR, "[data-op-details] h3").text
            else:
                WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".chart svg"))
            if slug == "pod_viewer":
                select = Select(driver.find_element(By.CSS_SELECTOR, ".chart select"))
                assert [o.text for o in select.options] == ["0", "1", "2"]
                select.select_by_visible_text("2")
            assert console_errors(driver) == []
    finally:
        driver.quit()


@needs_browser
def test_op_profile_works_in_the_single_file_report(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from reportgen.output.single_file import compose

    document, _report = compose(site)
    path = tmp_path / "report.html"
    path.write_text(document, encoding="utf-8")
    driver = start_chromium(tmp_path / "profile", "1400,1200")
    try:
        driver.get(path.as_uri())
        section = driver.find_element(By.CSS_SELECTOR, "section[data-page='tpu_small/op_profile.html']")
        WebDriverWait(driver, 20).until(lambda d: section.find_elements(By.CSS_SELECTOR, "[data-op-rows] tr"))
        assert section.find_elements(By.CSS_SELECTOR, ".op-label")[0].text == "by_program"
        assert console_errors(driver) == []
    finally:
        driver.quit()
