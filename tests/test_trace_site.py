"""The trace page, manifest.json and the summary.json `trace` block, on the bundled sample."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from reportgen.cli.main import main
from tests.browser import console_errors, start_chromium

MANIFEST_KEYS = {"host", "file", "format", "first_us", "last_us", "first_step", "last_step", "events", "bytes"}


@pytest.fixture(scope="module")
def site(tmp_path_factory, sample_logdir) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    code = main(["build", str(sample_logdir), "-o", str(out), "-q", "--jobs", "1", "--trace-format", "both",
                 "--runs", "tf_keras_fast"])
    assert code == 0
    return out


def test_manifest_and_summary_block(site):
    summary = json.loads((site / "summary.json").read_text())
    for run in ("tf_keras_fast",):
        manifest = json.loads((site / run / "trace" / "manifest.json").read_text())
        chunks = manifest["chunks"]
        assert {c["format"] for c in chunks} == {"json.gz", "pftrace"}
        for c in chunks:
            assert MANIFEST_KEYS <= set(c) <= MANIFEST_KEYS | {"uncompressed_bytes"}
            path = site / run / "trace" / c["file"]
            assert path.stat().st_size == c["bytes"]
            assert c["first_us"] <= c["last_us"] and c["first_step"] <= c["last_step"]
        block = summary["runs"][run]["trace"]
        assert block == {
            "chunks": len(chunks),
            "events": sum(c["events"] for c in chunks if c["format"] == "json.gz"),
            "bytes": sum(c["bytes"] for c in chunks),
        }
        assert summary["runs"][run]["tools"]["trace"] == {"page": f"{run}/trace.html"}


def test_page_links_every_file_and_explains_the_trace(site):
    html = (site / "tf_keras_fast" / "trace.html").read_text()
    manifest = json.loads((site / "tf_keras_fast" / "trace" / "manifest.json").read_text())
    for c in manifest["chunks"]:
        assert f'href="trace/{c["file"]}" download' in html
        assert f'data-perfetto-url="trace/{c["file"]}"' in html
    for needle in ("How to read a trace", "<kbd>w</kbd>", "<kbd>f</kbd>", "<kbd>m</kbd>", "Steps", "XLA Ops",
                   "Infeed", "tf.data", "Differences from XProf", "chrome://tracing", "data-when-file"):
        assert needle in html
    script = re.search(r'<script src="(\.\./assets/trace-[0-9a-f]+\.js)">', html)
    assert script and (site / "tf_keras_fast" / script.group(1)).exists()
    assert "data-vega-spec" in html  # the overview chart
    assert 'href="trace.html"' in (site / "tf_keras_fast" / "index.html").read_text()


def test_open_in_perfetto_is_offered_over_http_only(site, tmp_path):
    served = tmp_path / "served"
    shutil.copytree(site, served)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = start_chromium(tmp_path / "profile")
    try:
        from selenium.webdriver.common.by import By

        driver.get(f"http://127.0.0.1:{server.server_port}/tf_keras_fast/trace.html")
        buttons = driver.find_elements(By.CSS_SELECTOR, "[data-perfetto-url]")
        assert buttons and all(b.is_displayed() for b in buttons)
        assert not driver.find_element(By.CSS_SELECTOR, "[data-when-file]").is_displayed()
        driver.implicitly_wait(10)
        assert driver.find_elements(By.CSS_SELECTOR, ".chart svg")
        assert console_errors(driver) == []

        driver.get((served / "tf_keras_fast" / "trace.html").as_uri())
        assert not any(b.is_displayed() for b in driver.find_elements(By.CSS_SELECTOR, "[data-perfetto-url]"))
        assert driver.find_element(By.CSS_SELECTOR, "[data-when-file]").is_displayed()
    finally:
        driver.quit()
        server.shutdown()
