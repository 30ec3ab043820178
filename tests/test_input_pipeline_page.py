"""The input pipeline page, its CSVs and its summary.json block, from a real build."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from reportgen.core.input.input_ops import INPUT_OP_COLUMNS
from reportgen.pipeline.build import BuildOptions, build_site
from tests.browser import chromium, console_errors, needs_browser
from tests.xspace import Space, host_space

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "reportgen" / "sample"
NASTY = '<script>alert("x")</script>'
US = 1_000_000


def write_run(logdir: Path, run: str, space: Space) -> None:
    folder = logdir / "plugins" / "profile" / run
    folder.mkdir(parents=True)
    (folder / f"{space.host}.xplane.pb").write_bytes(space.proto.SerializeToString())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("logdir")
    nasty = host_space("h<i>1")
    nasty.host_plane().line(name="python").event("Iterator::Root", 0, 80 * US, id=1).event(
        f"Iterator::Root::{NASTY}", 1 * US, 70 * US, id=2, parent_id=1, name=NASTY)
    write_run(logdir, "nasty", nasty)
    plain = host_space()
    plain.host_plane().line(name="python").event("model/MatMul:MatMul", 0, 10 * US)
    write_run(logdir, "plain", plain)
    out = tmp_path_factory.mktemp("site") / "site"
    report = build_site([str(SAMPLE), str(logdir)], BuildOptions(output=str(out), jobs=1))
    assert report.exit_code == 0
    return out


def test_summary_block(site):
    runs = json.loads((site / "summary.json").read_text())["runs"]
    block = runs["tf_keras_input_bound"]["input_pipeline"]
    assert set(block) == {"input_percent", "input_bound", "host_ms", "bottleneck"}
    assert block["input_percent"] == pytest.approx(73.6, abs=0.05) and block["input_bound"] == "HIGHLY"
    assert set(block["host_ms"]) == {"demanded_file_read", "advanced_file_read", "preprocessing", "enqueue",
                                     "unclassified"}
    assert block["host_ms"]["preprocessing"] == pytest.approx(510.695037)
    assert block["bottleneck"]["iterator"] == "Iterator::Root::MapAndBatch"
    assert block["bottleneck"]["self_time_ms"] == pytest.approx(507.069369)
    page = runs["tf_keras_input_bound"]["tools"]["input_pipeline"]
    assert page == {"page": "tf_keras_input_bound/input_pipeline.html"}
    assert runs["plain"]["input_pipeline"]["bottleneck"] is None
    # No steps: nothing to classify.
    assert runs["plain"]["input_pipeline"]["input_bound"] is None
    assert runs["plain"]["input_pipeline"]["input_percent"] == 0.0
    assert runs["tf_keras_fast"]["input_pipeline"]["input_bound"] == "NOT"
    # The overview quotes the same classification.
    assert runs["tf_keras_input_bound"]["overview"]["input_percent"] == block["input_percent"]


def test_steps_csv(site):
    with open(site / "tf_keras_input_bound" / "data" / "input_pipeline" / "steps.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Step number"] for r in rows] == ["train 6", "train 7", "train 8", "train 9", "train 10"]
    first = rows[0]
    assert float(first["Input (ms)"]) == pytest.approx(94.341095, abs=1e-3)
    assert float(first["Step time (ms)"]) == pytest.approx(120.721571, abs=1e-3)
    assert float(first["Waiting for input (%)"]) == pytest.approx(100 * 94.341095 / 120.721571, abs=1e-3)


def test_input_ops_csv(site):
    with open(site / "tf_keras_input_bound" / "data" / "input_pipeline" / "input_ops.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(INPUT_OP_COLUMNS.values())
    assert [r["Input Op"] for r in rows] == [
        "Iterator::Root::MapAndBatch", "Iterator::Root::MapAndBatch::ShuffleAndRepeat::TensorSlice",
        "Iterator::Root::MapAndBatch::ShuffleAndRepeat", "Iterator::Root"]
    first = rows[0]
    assert first["Count"] == "5" and first["Category"] == "Preprocessing"
    # Percent columns hold percentages (XProf's JSON has fractions).
    assert float(first["Total Self Time (as % of total input-processing time)"]) == pytest.approx(99.29, abs=0.01)
    pipelines = (site / "tf_keras_input_bound" / "data" / "input_pipeline" / "tf_data_pipelines.csv").read_text()
    assert "Iterator::Root::MapAndBatch" in pipelines


def test_page_sections(site):
    html = (site / "tf_keras_input_bound" / "input_pipeline.html").read_text()
    for anchor in ('id="summary"', 'id="device-side"', 'id="host-side"', 'id="tf-data"'):
        assert anchor in html
    assert "Iterator::Root::MapAndBatch" in html
    assert "num_parallel_calls=tf.data.AUTOTUNE" in html  # the concrete suggestion for a sequential map
    assert 'class="bottleneck"' in html and html.count("data-vega-spec") >= 5
    assert ("Your program is HIGHLY input-bound because 73.6% of the total step time sampled is waiting for input."
            in html)
    # XProf's next step in this page's words: there is no "Section 3" here.
    assert "The host-side section below breaks the input time down." in html and "Section 3" not in html
    # XProf's recommendations keep their links, written by the template (never raw markup).
    assert '<a href="https://www.tensorflow.org/api_docs/python/tf/data/Dataset#map" target="_blank" ' \
           'rel="noopener">Dataset map()</a> or preprocess the data OFFLINE.' in html
    plain = (site / "plain" / "input_pipeline.html").read_text()
    assert "no tf.data iterator events" in plain and "No input ops ran on the host" in plain
    assert "No steps were found" in plain and "No step marker observed" in plain
    assert "data-vega-spec" not in plain


def test_capture_text_is_escaped(site):
    html = (site / "nasty" / "input_pipeline.html").read_text()
    assert NASTY not in html and "h<i>1" not in html
    assert "&lt;script&gt;" in html


@needs_browser
def test_page_renders_in_a_browser(site, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path) as driver:
        driver.get((site / "tf_keras_input_bound" / "input_pipeline.html").as_uri())
        charts = "return Array.from(document.querySelectorAll('[data-vega-spec]'))"
        WebDriverWait(driver, 20).until(
            lambda d: all(d.execute_script(charts + ".map(c => !!c.querySelector('svg'))")))
        assert len(driver.execute_script(charts)) >= 5
        assert console_errors(driver) == []
        # The input op table sorts on a header click.
        driver.execute_script("document.querySelector('#input-ops-0 th:nth-child(2) button').click()")
        first = driver.execute_script("return document.querySelector('#input-ops-0 tbody td').textContent")
        assert first in ("Iterator::Root::MapAndBatch::ShuffleAndRepeat::TensorSlice",
                         "Iterator::Root::MapAndBatch::ShuffleAndRepeat")
