"""`reportgen build --single-file`: one self-contained HTML file with every page."""

from __future__ import annotations

import html
import json
import re
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from reportgen.output.single_file import MAX_INLINE_FILE, compose, page_order
from reportgen.output.site import Assets, PageWriter, _environment
from tests.browser import chromium, console_errors
from tests.builtsite import XSS_HOST, XSS_LINE, XSS_RUN, built_site
from tests.conftest import needs_shared
from tests.htmlscan import scan_html


@pytest.fixture(scope="module")
def built():
    return built_site()


@pytest.fixture(scope="module")
def document(built) -> str:
    return built.single_file.read_text(encoding="utf-8")


def _section_pages(document: str) -> list[str]:
    return re.findall(r'<section class="page" id="[^"]+" data-page="([^"]+)">', document)


def test_every_page_once_in_reading_order(built, document):
    pages = [html.unescape(p) for p in _section_pages(document)]
    site_pages = sorted(p.relative_to(built.site).as_posix() for p in built.site.rglob("*.html"))
    assert sorted(pages) == site_pages
    runs = list(json.loads((built.site / "summary.json").read_text(encoding="utf-8"))["runs"])
    assert pages[0] == "index.html"
    assert [p.split("/")[0] for p in pages[1:] if p.endswith("/index.html")] == runs


def test_self_contained_and_small(built, document):
    size = built.single_file.stat().st_size
    assert size < 10 * 2**20
    scan = scan_html(document)
    for tag, attribute, value in scan.links:
        assert value.startswith(("#", "data:", "https://", "http://")), f"{tag} {attribute}={value[:60]}"
        if tag in ("script", "link", "img"):
            assert value.startswith("data:"), f"{tag} loads {value[:60]}"
    assert "<link rel=\"stylesheet\"" not in document
    # The Vega bundle is inlined exactly once.
    bundle = next((built.site / "assets").glob("vega-bundle-*.js")).read_text(encoding="utf-8")
    probe = bundle[200:400]
    assert document.count(probe) == 1
    # Each script the pages load is inlined once (an asset no page uses is left out).
    loaded = {
        value.rsplit("/", 1)[-1]
        for page in built.site.rglob("*.html")
        for tag, attribute, value in scan_html(page.read_text(encoding="utf-8")).links
        if tag == "script" and attribute == "src"
    }
    # The site's run list (the run switcher's) has no use in the single file.
    assert "runs.js" in loaded
    code_scripts = [content for attrs, content in scan.scripts if not attrs.get("type")]
    assert len(code_scripts) == len(loaded - {"runs.js"}) > 0


def test_ids_unique_and_internal_links_resolve(document):
    scan = scan_html(document)
    assert len(scan.ids) == len(set(scan.ids))
    ids = set(scan.ids)
    for tag, _attribute, value in scan.links:
        if value.startswith("#") and tag == "a":
            assert value[1:] in ids, value
    for _tag, name, value in scan.attributes:
        if name == "data-vega-spec":
            assert value in ids
    # The CSV downloads travel inside the file.
    downloads = [value for tag, name, value in scan.attributes if name == "download"]
    assert "lines.csv" in downloads


def _write_tool_pages(site: Path, run: str) -> None:
    """Pages as later tool sections write them: an overview and a trace-like page."""
    assets_dir = site / "assets"
    assets = Assets(**{key: "assets/" + next(assets_dir.glob(f"{stem}-*")).name
                       for key, stem in (("vega", "vega-bundle"), ("css", "style"), ("js", "reportgen"))})
    nav = [{"title": "Run", "href": "index.html"}, {"title": "Overview", "href": "overview.html"},
           {"title": "Zeta", "href": "zeta.html"}]
    page = PageWriter(site_dir=site, assets=assets, folder=run, nav=nav, run=run)
    env = _environment()
    template = env.from_string(
        '{% extends "base.html" %}{% import "macros.html" as m %}{% block main %}'
        '<h1 id="top">{{ heading }}</h1>{{ m.chart("steps", spec, "Steps") }}'
        '<a href="#top">up</a> <a href="overview.html#top">overview top</a> '
        '<a href="trace/vm/chunk-0.json.gz">chunk 0</a> <a href="data/zeta/big.csv">big table</a>'
        '{% endblock %}'
    )
    spec = {"data": {"values": [{"x": 1, "y": 2}]}, "mark": "point",
            "encoding": {"x": {"field": "x", "type": "quantitative"}}}
    for name, heading in (("zeta.html", "Zeta tool"), ("overview.html", "Overview")):
        text = template.render(root="../", assets={k: "../" + v for k, v in assets.items()}, nav=nav,
                               run=run, generator="reportgen test", page=name, heading=heading, spec=spec)
        page.path(name).write_text(text, encoding="utf-8")
    page.write_csv("data/zeta/big.csv", pd.DataFrame({"v": range(MAX_INLINE_FILE // 4)}))
    chunk = page.path("trace/vm/chunk-0.json.gz")
    chunk.write_bytes(b"\x1f\x8b")
    summary = json.loads((site / "summary.json").read_text(encoding="utf-8"))
    summary["runs"][run]["tools"] = {"zeta": {"page": f"{run}/zeta.html"},
                                     "overview": {"page": f"{run}/overview.html"}}
    (site / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def test_pages_added_by_later_sections_are_included(built):
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        shutil.copytree(built.site, site)
        _write_tool_pages(site, "tf_keras_fast")
        order = page_order(site)
        start = order.index("tf_keras_fast/index.html")
        assert order[start:start + 2] == ["tf_keras_fast/index.html", "tf_keras_fast/overview.html"]
        assert "tf_keras_fast/zeta.html" in order
        document, report = compose(site)
        # Every chart of every page, the two pages written above included.
        charts = sum(p.read_text(encoding="utf-8").count("data-vega-spec=") for p in site.rglob("*.html"))
        # Left out: the oversized CSV and every trace file (the trace never travels in the single file).
        expected_omitted = sorted(
            ["tf_keras_fast/data/zeta/big.csv"]
            + [p.relative_to(site).as_posix() for p in site.glob("*/trace/**/*")
               if p.is_file() and "/timeline/" not in p.as_posix()]  # the timeline's excerpt is embedded instead
        )
    assert report.pages == len(order)
    assert report.charts == charts
    assert "tf_keras_fast/trace/vm/chunk-0.json.gz" in expected_omitted
    assert sorted(report.omitted) == expected_omitted
    scan = scan_html(document)
    ids = set(scan.ids)
    assert "p-tf_keras_fast-zeta--top" in ids and "p-tf_keras_fast-overview--top" in ids
    hrefs = [value for tag, name, value in scan.links if tag == "a"]
    assert "#p-tf_keras_fast-overview--top" in hrefs  # from zeta.html, to the other page's element
    assert "#p-tf_keras_fast-zeta--top" in hrefs
    assert not [h for h in hrefs if "chunk-0" in h or "big.csv" in h]
    assert "The timeline trace is not included in this file" in document
    assert "<code>tf_keras_fast/trace/</code>" in document
    assert "<code>tf_keras_fast/trace/vm/</code> (1 file)" in document


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


CHARTS_DRAWN = """
var charts = document.querySelectorAll('[data-vega-spec]');
var drawn = 0;
charts.forEach(function (el) { if (el.querySelector('svg, canvas')) drawn++; });
return [charts.length, drawn];
"""


def _open_and_wait(driver, url: str) -> tuple[int, int]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: (lambda c: c[0] == c[1])(d.execute_script(CHARTS_DRAWN)))
    return tuple(driver.execute_script(CHARTS_DRAWN))


def test_opens_from_file_with_every_chart_and_no_console_error(built, browser):
    charts, drawn = _open_and_wait(browser, built.single_file.as_uri())
    in_site = sum(p.read_text(encoding="utf-8").count("data-vega-spec=") for p in built.site.rglob("*.html"))
    assert charts == drawn == in_site > 0
    problems = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == []
    text = browser.find_element("tag name", "body").text
    assert XSS_RUN in text and XSS_HOST in text
    assert browser.execute_script("return document.querySelectorAll('main img, main [onerror]').length") == 0
    # An in-page link lands on its section.
    browser.execute_script(
        "document.querySelector('a[href=\"#p-tf_keras_fast-index\"]').click();")
    assert browser.execute_script("return location.hash") == "#p-tf_keras_fast-index"


def test_capture_strings_stay_text_in_the_site_page(built, browser):
    page = built.site / XSS_RUN / "inventory.html"
    charts, drawn = _open_and_wait(browser, page.as_uri())
    assert charts == drawn == 1
    assert console_errors(browser) == []
    text = browser.find_element("tag name", "main").text
    assert XSS_LINE.split(" onmouseover")[0] in text
    assert XSS_HOST in text


def test_charts_are_drawn_as_they_come_into_view(built, tmp_path):
    """The report draws the charts near the screen first; the rest wait for the page to be idle (here never: the
    browser's idle callback is taken away before the page runs), and a chart scrolled to is drawn then."""
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path / "profile", window="1280,800") as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                               {"source": "window.requestIdleCallback = function () {};"})
        driver.get(built.single_file.as_uri())
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "return document.readyState === 'complete' && document.querySelector('[data-vega-spec] svg') !== null"))
        last = "var charts = document.querySelectorAll('[data-vega-spec]'); return charts[charts.length - 1];"
        assert driver.execute_script(f"{last}").get_attribute("data-embedded") is None  # far below: not drawn
        driver.execute_script(f"(function () {{ {last} }})().scrollIntoView();")
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            f"return (function () {{ {last} }})().querySelector('svg') !== null"))
        assert console_errors(driver) == []


@needs_shared
def test_a_link_to_a_row_shipped_as_data_lands_on_it_in_the_report(browser, tmp_path):
    """Rows as data take the prefix the report gives their page's ids, so a link to a TF stats row (an in-page
    anchor here) finds the row, rendered from the data."""
    from selenium.webdriver.support.ui import WebDriverWait

    from reportgen.output.single_file import write_single_file
    from tests.sharedsite import shared_site

    report = tmp_path / "report.html"
    write_single_file(shared_site(), report)
    document = report.read_text(encoding="utf-8")
    # The anchor a link to TF stats row 250 (the table with IDLE: a hidden panel, its third page) takes here.
    block = re.search(r'id="(p-gpu_multi_worker-tf_stats--)ops-0-with-rows">', document)
    assert block and '"tf-op-250"' in document
    row = block.group(1) + "tf-op-250"
    assert f'id="{row}"' not in document  # not an element until the report renders it
    browser.get("about:blank")
    browser.get(report.as_uri() + "#" + row)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "var r = document.getElementById(arguments[0]); return !!r && r.tagName === 'TR' && r.offsetParent !== null;",
        row))
