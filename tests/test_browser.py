"""The built sample in a real browser: headless Debian Chromium via Selenium.

Every page is opened both from `file://` (a site copied to a laptop) and
from a loopback web server; each must load without console errors and with
every chart drawn (an `svg` or `canvas` inside each chart container).
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.browser import chromium, needs_browser
from tests.clirun import sample_site_build
from tests.sitecheck import assert_links_resolve, html_pages

pytestmark = needs_browser

CHART_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def site() -> Path:
    """The bundled sample as `python -m reportgen build` writes it with no arguments."""
    cwd, proc = sample_site_build()
    assert proc.returncode == 0, proc.stderr
    return cwd / "site"


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        browser.set_page_load_timeout(CHART_TIMEOUT_S)
        yield browser


@pytest.fixture(scope="module")
def server(site):
    """The site served over HTTP on a free loopback port, for the module's duration."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's signature
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _page_ids(site: Path) -> list[str]:
    return [str(p.relative_to(site)) for p in html_pages(site)]


def _open(driver, url: str) -> list[dict]:
    """Load `url`, wait for every chart to be drawn; return the console messages of the load."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop messages of earlier pages
    driver.get(url)
    WebDriverWait(driver, CHART_TIMEOUT_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )

    def charts_drawn(d) -> bool:
        return d.execute_script(
            "return Array.from(document.querySelectorAll('.chart, [data-vega-spec]'))"
            ".every(el => el.offsetParent === null || el.querySelector('svg, canvas') !== null)"
        )

    try:
        WebDriverWait(driver, CHART_TIMEOUT_S).until(charts_drawn)
    except Exception:  # report which charts are missing, with the console, instead of a bare timeout
        pass
    return driver.get_log("browser")


def _check_page(driver, url: str) -> int:
    messages = _open(driver, url)
    errors = [m for m in messages if m.get("level") in ("SEVERE", "ERROR")]
    assert not errors, f"console errors on {url}:\n" + "\n".join(m["message"] for m in errors)
    # Every chart shown is drawn (one in a hidden panel is drawn when its panel is shown).
    charts = driver.execute_script(
        "return Array.from(document.querySelectorAll('.chart, [data-vega-spec]'))"
        ".map(el => [el.id, el.querySelector('svg, canvas') !== null, el.offsetParent !== null])"
    )
    missing = [cid for cid, drawn, shown in charts if shown and not drawn]
    assert not missing, f"charts not drawn on {url}: {missing}\nconsole: {[m['message'] for m in messages]}"
    # reportgen.js ran: the sortable tables got their keyboard-accessible sort buttons, but those of a host panel not
    # shown, which get theirs when it is.
    assert driver.execute_script(
        "return Array.from(document.querySelectorAll('table.sortable'))"
        ".filter(t => !t.closest('[data-host-panel][hidden]'))"
        ".every(t => Array.from(t.tHead.rows[0].cells).every(th => th.querySelector('button.sort')))"
    )
    return len(charts)


@pytest.mark.parametrize("origin", ["file", "http"])
def test_every_page_loads_cleanly_with_charts(site, driver, server, origin):
    base = site.resolve().as_uri() + "/" if origin == "file" else server
    charts = {}
    for page in _page_ids(site):
        charts[page] = _check_page(driver, base + quote(page))
    runs = [p for p in charts if p.endswith("/index.html")]
    assert sorted(runs) == ["tf_keras_fast/index.html", "tf_keras_input_bound/index.html"]
    inventories = [p for p in charts if p.endswith("/inventory.html")]
    assert len(inventories) == 2 and all(charts[p] >= 1 for p in inventories), charts


def test_charts_are_vega_svg(site, driver):
    """The chart is a real Vega rendering of the capture (marks drawn), not an empty box."""
    _open(driver, site.resolve().as_uri() + "/tf_keras_input_bound/inventory.html")
    marks = driver.execute_script(
        "const svg = document.querySelector('.chart svg');"
        "return svg ? svg.querySelectorAll('path, rect').length : 0"
    )
    assert marks > 10


def test_every_relative_link_resolves(site):
    assert_links_resolve(site)
    assert len(html_pages(site)) >= 3
