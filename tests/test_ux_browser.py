"""What a reader sees: every page of the shared site in headless Chromium at 1280 × 800 and 1440 × 900.

Each page is loaded once (from file://) at 1280 × 800, measured, checked with axe-core, then measured again at
1440 × 900: no page scrolls sideways, the identifying and key columns of every table shown are in view without
scrolling, the run's answer is on the first screen of its summary page, the first view has XProf's defaults, no
console error, and no serious or critical accessibility violation.

axe-core reads each page with the panels of the hosts not shown taken out: they are the shown panel's template
with another host's numbers, hidden from every reader, and walking them was most of axe's time (10 s on a page of
60,000 elements). The ids of the whole page, hidden panels included, are checked unique first: the one rule about
them that a hidden element can break.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.browser import console_errors, needs_browser, start_chromium
from tests.conftest import needs_shared
from tests.sharedsite import COMPARED, shared_site
from tests.sitecheck import html_pages

pytestmark = [needs_browser, needs_shared]

SIZES = ((1280, 800), (1440, 900))
AXE_DIR = Path(__file__).resolve().parent / "vendor" / "axe-core"
LOAD_TIMEOUT_S = 30

# Shown charts drawn; the page's scripts done.
READY = """
return document.readyState === 'complete' &&
  Array.from(document.querySelectorAll('[data-vega-spec]')).every(
    el => el.offsetParent === null || el.querySelector('svg, canvas') !== null);
"""

# Two animation frames: the resize observers have run and the page has been laid out again.
NEXT_FRAMES = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
"""

MEASURE = """
const de = document.documentElement;
const vw = de.clientWidth;
const out = {scrollWidth: de.scrollWidth, clientWidth: vw, innerHeight: window.innerHeight, offscreen: [],
             keyTables: 0};
document.querySelectorAll('table').forEach(t => {
  if (t.offsetParent === null || !t.tHead || !t.tBodies.length) return;
  const heads = Array.from(t.tHead.rows[0].cells);
  const keys = heads.map((th, i) => [th, i]).filter(([th]) => th.hasAttribute('data-key'));
  const row = t.tBodies[0].rows[0];
  if (!keys.length || !row) return;
  out.keyTables += 1;
  const wrap = t.closest('.table-wrap');
  const right = Math.min(vw, wrap ? wrap.getBoundingClientRect().right : vw);
  for (const [th, i] of keys) {
    const cell = row.cells[i];
    if (!cell) continue;
    const r = cell.getBoundingClientRect();
    if (r.width > 0 && r.right > right + 1) out.offscreen.push((t.id || 'table') + ': ' + th.textContent.trim());
  }
});
const answer = document.querySelector('.answer');
out.answerBottom = answer ? answer.getBoundingClientRect().bottom + window.scrollY : null;
// XProf's defaults on first view
const idle = document.querySelector("select[data-host-select^='tfstats-idle']");
out.tfStatsIdle = idle ? idle.value : null;
out.tfStatsIdleRows = Array.from(document.querySelectorAll("table[id^='ops-']"))
  .filter(t => t.offsetParent !== null)
  .some(t => Array.from(t.tBodies[0].rows).some(r => r.textContent.includes('IDLE')));
const opIdle = document.querySelector('[data-op-idle]');
out.opProfileIdle = opIdle ? opIdle.checked : null;
out.opProfileIdleRows = Array.from(document.querySelectorAll('[data-op-rows] .op-label')).some(
  el => el.textContent === 'IDLE');
// Sortable headers show that they sort, before any click.
out.unmarkedSort = Array.from(document.querySelectorAll('table.sortable th button.sort'))
  .filter(b => b.offsetParent !== null && getComputedStyle(b, '::after').content.indexOf('\\u2195') < 0 &&
               !b.parentNode.hasAttribute('aria-sort')).length;
return out;
"""

# Ids used more than once anywhere in the page (the hidden host panels included): labels and ARIA references name
# elements by id.
DUPLICATE_IDS = """
const seen = new Set(), twice = new Set();
document.querySelectorAll('[id]').forEach(el => { if (seen.has(el.id)) twice.add(el.id); seen.add(el.id); });
return Array.from(twice).slice(0, 10);
"""

# The panels of the hosts not shown: see the module notes.
DROP_HIDDEN_PANELS = "document.querySelectorAll('[data-host-panel][hidden]').forEach(el => el.remove());"

# Only the rules that can report a serious or critical violation run: a violation's impact is its rule's or its
# failing checks' own, so a rule whose impacts are all minor or moderate cannot fail the test. Leaving out those
# 29 rules (landmarks, headings, `region`, …) took the shared site's axe time from 33.8 s to 26.6 s.
RULES_OFF = """
const order = {minor: 1, moderate: 2, serious: 3, critical: 4};
const checkImpact = c => order[(axe._audit.data.checks[typeof c === 'string' ? c : c.id] || {}).impact] || 0;
const worst = r => Math.max(order[r.impact] || 0, ...[...r.any, ...r.all, ...r.none].map(checkImpact));
const rules = Object.fromEntries(axe._audit.rules.filter(r => worst(r) < 3).map(r => [r.id, {enabled: false}]));
"""
AXE_RUN = RULES_OFF + """
const done = arguments[arguments.length - 1];
// preload off: axe would fetch the stylesheets, which file:// pages may not
axe.run(document, {resultTypes: ['violations'], preload: false, rules}).then(
  r => done(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(
    v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '))),
  e => done(['axe failed: ' + e]));
"""


def _axe_source() -> str:
    pinned = dict(line.split(" = ", 1) for line in (AXE_DIR / "VERSION").read_text().splitlines() if " = " in line)
    source = (AXE_DIR / pinned["file"]).read_bytes()
    assert hashlib.sha256(source).hexdigest() == pinned["sha256"], "axe-core differs from the version VERSION pins"
    return source.decode("utf-8")


def _resize(driver, width: int, height: int) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def _wait(driver, script: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, LOAD_TIMEOUT_S).until(lambda d: d.execute_script(script))


@pytest.fixture(scope="module")
def site() -> Path:
    return shared_site()


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    browser = start_chromium(tmp_path_factory.mktemp("chromium-ux"), window=f"{SIZES[0][0]},{SIZES[0][1]}")
    browser.set_page_load_timeout(LOAD_TIMEOUT_S)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def seen(site, driver) -> dict[str, dict]:
    """Every page of the shared site as the browser shows it: {page: {"errors", "axe", (w, h): measures}}."""
    # axe-core is put into every page as it loads, by the browser: sent through WebDriver and evaluated after
    # each load, its 0.5 MB cost ≈ 0.1 s a page (70 pages).
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _axe_source()})
    pages = {}
    for path in html_pages(site):
        page = path.relative_to(site).as_posix()
        _resize(driver, *SIZES[0])
        driver.get_log("browser")
        driver.get(path.resolve().as_uri())
        _wait(driver, READY)
        result: dict = {SIZES[0]: driver.execute_script(MEASURE)}
        result["duplicate ids"] = driver.execute_script(DUPLICATE_IDS)
        driver.execute_script(DROP_HIDDEN_PANELS)
        result["axe"] = driver.execute_async_script(AXE_RUN)
        _resize(driver, *SIZES[1])
        driver.execute_async_script(NEXT_FRAMES)  # charts as wide as the page redraw on resize
        _wait(driver, READY)
        result[SIZES[1]] = driver.execute_script(MEASURE)
        result["errors"] = [entry["message"] for entry in console_errors(driver)]
        pages[page] = result
    _resize(driver, *SIZES[0])
    return pages


def test_every_page_of_the_shared_site_is_seen(site, seen):
    runs = {p.split("/")[0] for p in seen if p.endswith("/index.html")}
    assert {"tpu_inference_2", "gpu_multi_worker", "jax_mlp", *COMPARED} <= runs
    assert any(p.startswith("compare/") for p in seen)
    assert len(seen) == len(html_pages(site))


def test_no_console_errors(seen):
    assert {page: r["errors"] for page, r in seen.items() if r["errors"]} == {}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_page_scrolls_sideways(seen, size):
    wide = {page: (r[size]["scrollWidth"], r[size]["clientWidth"]) for page, r in seen.items()
            if r[size]["scrollWidth"] > r[size]["clientWidth"]}
    assert wide == {}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_key_columns_are_in_view_without_scrolling(seen, size):
    assert {page: r[size]["offscreen"] for page, r in seen.items() if r[size]["offscreen"]} == {}
    # The check looked at real tables: the big ones of every tool.
    for tool in ("tf_stats", "kernel_stats", "hlo_stats", "roofline_model", "inventory", "input_pipeline"):
        assert any(r[size]["keyTables"] for p, r in seen.items() if p.endswith(f"/{tool}.html")), tool
    assert seen["index.html"][size]["keyTables"] == 1


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_answer_is_on_the_first_screen_of_every_run(seen, size):
    runs = {page: r[size] for page, r in seen.items() if page.count("/") == 1 and page.endswith("/index.html")}
    assert runs
    late = {page: (m["answerBottom"], m["innerHeight"]) for page, m in runs.items()
            if m["answerBottom"] is None or m["answerBottom"] > m["innerHeight"]}
    assert late == {}


def test_first_view_has_xprofs_defaults(seen):
    first = SIZES[0]
    tf_stats = {p: r[first] for p, r in seen.items() if p.endswith("/tf_stats.html")}
    assert tf_stats
    for page, m in tf_stats.items():
        assert m["tfStatsIdle"] == "without" and not m["tfStatsIdleRows"], page  # "Include IDLE time: No"
    op_profile = {p: r[first] for p, r in seen.items() if p.endswith("/op_profile.html")}
    assert op_profile
    for page, m in op_profile.items():
        assert m["opProfileIdle"] is False and not m["opProfileIdleRows"], page  # idle time excluded


def test_sortable_columns_say_so_before_a_click(seen):
    assert {page: r[SIZES[0]]["unmarkedSort"] for page, r in seen.items() if r[SIZES[0]]["unmarkedSort"]} == {}


def test_no_serious_or_critical_accessibility_violation(seen):
    assert {page: r["axe"] for page, r in seen.items() if r["axe"]} == {}


def test_ids_are_unique_in_every_page(seen):
    assert {page: r["duplicate ids"] for page, r in seen.items() if r["duplicate ids"]} == {}


def test_axe_finds_violations_where_there_are_some(driver, tmp_path):
    """The accessibility checks can fail: a page with an unlabelled control, an image without text and, in a hidden
    host panel, an id used twice."""
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><html lang="en"><head><title>bad</title></head><body><main>'
                    '<input type="text"><img src="data:,"><p id="twice">a</p>'
                    '<section data-host-panel="x" hidden><p id="twice">b</p></section></main></body></html>',
                    encoding="utf-8")
    driver.get(page.as_uri())
    assert driver.execute_script(DUPLICATE_IDS) == ["twice"]
    driver.execute_script(DROP_HIDDEN_PANELS)
    driver.execute_script(_axe_source())
    found = driver.execute_async_script(AXE_RUN)
    assert any(v.startswith("image-alt") for v in found) and any(v.startswith("label") for v in found)
    off = driver.execute_script(RULES_OFF + "return Object.keys(rules);")
    assert "region" in off and "heading-order" in off  # moderate at most
    assert not {"color-contrast", "image-alt", "label", "aria-allowed-attr", "scrollable-region-focusable"} & set(off)


def test_row_count_follows_the_filter_and_pages_stay_small(site, driver):
    from selenium.webdriver.common.by import By

    driver.get((site / "gpu_multi_worker" / "tf_stats.html").resolve().as_uri())
    _wait(driver, READY)
    table = "ops-0-without"
    count = driver.find_element(By.CSS_SELECTOR, f"[data-row-count='{table}']")
    total = int(count.text.split()[0].replace(",", ""))
    assert total > 200  # a table long enough to be shown a page at a time
    assert len(driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")) == 100
    driver.find_element(By.CSS_SELECTOR, f"input[data-filter-table='{table}']").send_keys("Iterator")
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    assert 0 < len(rows) < 100 and all("Iterator" in r.text for r in rows)
    assert count.text == f"{len(rows)} of {total:,} rows"


def test_switchers_navigate_between_runs_and_hosts(site, driver):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get((site / "gpu_multi_worker" / "tf_stats.html").resolve().as_uri())
    _wait(driver, READY)
    # The host switcher in the header shows one host's panel at a time.
    hosts = Select(driver.find_element(By.CSS_SELECTOR, "header .host-switch select"))
    hosts.select_by_index(1)
    shown = [el.get_attribute("data-host") for el in driver.find_elements(By.CSS_SELECTOR,
                                                                            "[data-host-panel='tfstats']")
             if el.is_displayed()]
    assert shown == [hosts.first_selected_option.get_attribute("value")]
    # The run switcher goes to the same tool of another run, or to its summary where it has no such page.
    Select(driver.find_element(By.CSS_SELECTOR, "header [data-run-switch] select")).select_by_visible_text("jax_mlp")
    _wait(driver, READY)
    assert driver.current_url.endswith("/jax_mlp/tf_stats.html")
    Select(driver.find_element(By.CSS_SELECTOR, "header [data-run-switch] select")).select_by_visible_text(
        "tpu_inference_2")
    _wait(driver, READY)
    assert driver.current_url.endswith("/tpu_inference_2/tf_stats.html")
    driver.find_element(By.LINK_TEXT, "Op profile").click()
    _wait(driver, READY)
    Select(driver.find_element(By.CSS_SELECTOR, "header [data-run-switch] select")).select_by_visible_text("jax_mlp")
    _wait(driver, READY)
    assert driver.current_url.endswith("/jax_mlp/index.html")  # no op profile there
    assert console_errors(driver) == []


def test_a_row_link_opens_its_table_page_and_panel(site, driver):
    """A link to a row of a long table (the findings link TF stats rows by id) shows it: the table with IDLE (the
    first view is without, so that table waits to be set up until it is shown), turned to the row's page, the
    filter cleared."""
    from selenium.webdriver.common.by import By

    driver.get((site / "gpu_multi_worker" / "tf_stats.html").resolve().as_uri())
    _wait(driver, READY)
    assert not driver.find_elements(By.CSS_SELECTOR, "#ops-0-with th button.sort")  # hidden: not set up yet
    # A filter typed into the waiting table's box (by script: it is hidden) applies once it is set up.
    driver.execute_script("var box = document.querySelector(\"input[data-filter-table='ops-0-with']\");"
                          "box.value = 'no such op'; box.dispatchEvent(new Event('input'));")
    driver.execute_script("location.hash = 'tf-op-250';")  # rank 250 of 499: the third page of 100 rows
    _wait(driver, "var row = document.getElementById('tf-op-250'); return row !== null && row.offsetParent !== null;")
    top, bottom, shown, idle, box = driver.execute_script(
        "var row = document.getElementById('tf-op-250'); var b = row.getBoundingClientRect();"
        "return [b.top, b.bottom, row.offsetParent !== null,"
        " document.querySelector(\"select[data-host-select='tfstats-idle-0']\").value,"
        " document.querySelector(\"input[data-filter-table='ops-0-with']\").value];")
    assert shown and idle == "with" and 0 <= top and bottom <= driver.execute_script("return window.innerHeight")
    assert box == ""  # cleared to show the row
    assert driver.find_element(By.CSS_SELECTOR, "#tf-op-250 td").text == "250"
    assert driver.find_elements(By.CSS_SELECTOR, "#ops-0-with th button.sort")
    assert console_errors(driver) == []


def test_every_run_of_a_long_module_table_answers(site, driver):
    """The TPU run's HLO module runs (414) are shown 100 at a time: the "Running at" filter counts them all, and a
    run on a later page zooms the memory timeline as one on the first page does."""
    from selenium.webdriver.common.by import By

    driver.get((site / "tpu_inference_2" / "memory_profile.html").resolve().as_uri())
    _wait(driver, READY)
    root = driver.find_element(By.CSS_SELECTOR, "[data-module-runs]")
    status = root.find_element(By.CSS_SELECTOR, "[data-module-status]")
    runs = len(root.find_elements(By.CSS_SELECTOR, "tbody tr"))
    assert runs == 100  # the first page
    at = root.find_element(By.CSS_SELECTOR, "tbody tr").get_attribute("data-start-ms")  # a time some run holds
    driver.execute_script("var box = arguments[0]; box.value = arguments[1]; box.dispatchEvent(new Event('change'));",
                          root.find_element(By.CSS_SELECTOR, "[data-module-time]"), at)
    assert " of 414 runs hold " in status.text, status.text
    driver.execute_script("var box = arguments[0]; box.value = ''; box.dispatchEvent(new Event('change'));",
                          root.find_element(By.CSS_SELECTOR, "[data-module-time]"))
    next_page = [b for b in root.find_elements(By.CSS_SELECTOR, ".pager button") if b.text.startswith("Next")][0]
    next_page.click()
    row = root.find_element(By.CSS_SELECTOR, "tbody tr")
    assert row.find_element(By.CSS_SELECTOR, "td").text != "0"  # a run of the second page
    row.click()
    assert row.get_attribute("aria-selected") == "true" and status.text.startswith("Timeline zoomed to")
    # Filtering on a time only runs of later pages hold shows those runs, from the table's first page.
    at = float(row.get_attribute("data-end-ms"))
    driver.execute_script("var box = arguments[0]; box.value = arguments[1]; box.dispatchEvent(new Event('change'));",
                          root.find_element(By.CSS_SELECTOR, "[data-module-time]"), str(at))
    shown = driver.execute_script("return Array.from(arguments[0].querySelectorAll('tbody tr'))"
                                  ".map(r => [+r.dataset.startMs, +r.dataset.endMs, r.offsetParent !== null]);", root)
    held = int(status.text.split(" of ")[0])
    assert 0 < held == len(shown) and all(start <= at <= end and visible for start, end, visible in shown)
    assert not root.find_element(By.CSS_SELECTOR, ".pager").is_displayed()  # they fit one page
    assert console_errors(driver) == []


def test_a_link_from_another_page_lands_on_a_row_shipped_as_data(site, driver):
    """TF stats rows are data until shown: a link from another page (the findings, the summary) to a row on the
    third page of the table with IDLE, which waits in a hidden panel, renders that page, shows the panel and
    marks the row."""
    driver.get("about:blank")
    driver.get((site / "gpu_multi_worker" / "tf_stats.html").resolve().as_uri() + "#tf-op-250")
    _wait(driver, READY)
    # Shown again once the charts above it are drawn (after the load event): waited for, not slept on.
    _wait(driver, "var row = document.getElementById('tf-op-250'); if (!row) return false;"
                  " var b = row.getBoundingClientRect(); return b.top >= 0 && b.bottom <= window.innerHeight;")
    top, bottom, marked, idle, first, rows = driver.execute_script(
        "var row = document.getElementById('tf-op-250'); var b = row.getBoundingClientRect();"
        "return [b.top, b.bottom, row.classList.contains('row-target'),"
        " document.querySelector(\"select[data-host-select='tfstats-idle-0']\").value,"
        " row.cells[0].textContent, document.querySelectorAll('#ops-0-with tbody tr').length];")
    assert idle == "with" and marked and first == "250" and rows == 100
    assert 0 <= top and bottom <= driver.execute_script("return window.innerHeight")
    assert console_errors(driver) == []


def test_sorting_a_table_of_data_orders_every_row_by_value(site, driver):
    from selenium.webdriver.common.by import By

    driver.get((site / "gpu_multi_worker" / "tf_stats.html").resolve().as_uri())
    _wait(driver, READY)
    table = "ops-0-without"
    heads = driver.find_elements(By.CSS_SELECTOR, f"#{table} thead th")
    index = [h.text for h in heads].index("Occurrences")
    button = heads[index].find_element(By.CSS_SELECTOR, "button.sort")
    button.click()  # descending first
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(r => r.cells[arguments[1]].textContent);",
        f"#{table} tbody tr", index)
    values = [float(v.replace(",", "")) for v in shown]
    assert len(values) == 100 and values == sorted(values, reverse=True) and values[0] > values[-1]
    # The largest of all rows, not of the first page's: the table sorted its data, every page of it.
    everything = driver.execute_script(
        "return JSON.parse(document.getElementById(arguments[0] + '-rows').textContent).rows"
        ".map(r => r[arguments[1]]);", table, index)
    assert values[0] == max(everything)
    assert console_errors(driver) == []


def test_page_scripts_write_units_as_the_pages_do(site, driver):
    """reportgen.js's fmt follows output/formatting.py: the rows a table renders from data read as the cells the
    server writes."""
    from reportgen.output.formatting import fmt_bytes, fmt_duration_us, fmt_gflops

    driver.get((site / "index.html").resolve().as_uri())
    _wait(driver, READY)
    durations = [0.25, 12.5, 999.99, 40_000, 155_546_431.463]
    sizes = [512, 524.288, 3 << 20, 14.4 * 2**30]
    shown = driver.execute_script(
        "var f = window.reportgen.fmt; return [arguments[0].map(v => f.durationUs(v)), arguments[1].map(f.bytes),"
        " f.flopRate(1500 * 1e9)];", durations, sizes)
    assert shown == [[fmt_duration_us(v) for v in durations], [fmt_bytes(v) for v in sizes], fmt_gflops(1500)]


def test_a_cut_name_keeps_its_tail_and_shows_whole_on_hover(site, driver):
    driver.get((site / "tf_keras_input_bound" / "tf_stats.html").resolve().as_uri())
    _wait(driver, READY)
    cells = driver.execute_script(
        "return Array.from(document.querySelectorAll('table.data-table tbody td.name')).filter(td =>"
        " td.offsetParent !== null && td.querySelector('.mid') && td.scrollWidth > td.clientWidth - 1).map(td => {"
        " var c = td.getBoundingClientRect(), t = td.querySelector('.tail').getBoundingClientRect();"
        " return [td.title, td.textContent, td.querySelector('.tail').textContent,"
        "         t.left >= c.left, t.right <= c.right + 1];"
        "}).slice(0, 20);")
    assert cells, "no long name was cut"
    for title, text, tail, tail_starts_inside, tail_ends_inside in cells:
        assert title == text and text.endswith(tail) and tail_starts_inside and tail_ends_inside
    assert any(tail.startswith("/") for _, _, tail, _, _ in cells)  # whole path segments kept


def test_charts_of_panels_not_shown_wait_for_their_panel(site, driver):
    """A JAX run's memory viewer holds every module's charts: only the shown module's are drawn as it opens, and
    another module's when it is picked."""
    from selenium.webdriver.support.ui import Select

    driver.get((site / "jax_mlp" / "memory_viewer.html").resolve().as_uri())
    _wait(driver, READY)
    count = ("return [Array.from(document.querySelectorAll('[data-host-panel][hidden] :is([data-vega-spec], "
             "[data-mv-chart])')).filter(el => el.querySelector('svg')).length,"
             " document.querySelectorAll('[data-host-panel][hidden] [data-vega-spec]').length];")
    drawn_hidden, hidden = driver.execute_script(count)
    assert hidden > 10 and drawn_hidden == 0
    picker = Select(driver.find_element("css selector", "select[data-host-select]"))
    picker.select_by_index(len(picker.options) - 1)
    _wait(driver, READY)  # the module now shown has its charts drawn
    assert console_errors(driver) == []
