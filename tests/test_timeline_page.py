"""The trace page's timeline in headless Chromium, opened from file:// on the shared captures.

What the page reports (tracks, events) is checked against the chunk manifest, a clicked event's
details against the chunk files, and zooming to a step, keys and deep links against the steps and
times the build wrote.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from reportgen.cli.main import main
from tests.browser import console_errors, needs_browser, start_chromium
from tests.chrome_json import read_chunk
from tests.conftest import LOGDIR, needs_shared
from tests.firefox import needs_firefox
from tests.timeline_files import read_index

pytestmark = [needs_shared, needs_browser]

# Screenshots go here too when set (to look at them after a run).
SCREENSHOTS = os.environ.get("REPORTGEN_SCREENSHOTS")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("timeline") / "site"
    code = main(["build", str(LOGDIR), "-o", str(out), "-q", "--jobs", "1",
                 "--runs", "gpu_multi_worker,tf_keras_input_bound"])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = start_chromium(tmp_path_factory.mktemp("profile"), window="1280,800")
    yield d
    d.quit()


def _open(driver, page: Path, fragment: str = "") -> dict:
    driver.get(page.as_uri() + fragment)
    driver.implicitly_wait(0)
    from selenium.webdriver.support.ui import WebDriverWait

    # A deep link (a fragment with a view) is opened once the page has applied it. Read from what was asked, not
    # from location.hash: the page writes its view there itself, soon after it is ready.
    linked = "=" in fragment
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "var r = [...document.querySelectorAll('[data-timeline]')].find(e => e.offsetParent !== null);"
        "return r && r.dataset.ready && (!arguments[0] || r.dataset.linked);", linked))
    return driver.execute_script("""
      var root = [...document.querySelectorAll('[data-timeline]')].find(e => e.offsetParent !== null);
      var tl = root.timeline, v = tl.view();
      return {host: root.dataset.host, events: +root.dataset.events, tracks: +root.dataset.tracks,
              drawnTracks: tl.tracks.length, status: root.querySelector('[data-timeline-status]').textContent,
              mode: root.dataset.mode, drawn: +root.dataset.drawn, view: v, selected: root.dataset.selected || null};
    """)


def _shot(driver, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SCREENSHOTS) / name)


def _manifest_events(site: Path, run: str) -> dict[str, int]:
    manifest = json.loads((site / run / "trace" / "manifest.json").read_text())
    events: dict[str, int] = {}
    for c in manifest["chunks"]:
        if c["format"] == "json.gz":
            events[c["host"]] = events.get(c["host"], 0) + c["events"]
    return events


def _click_event(driver, track_title: str) -> dict:
    """Click the middle of the longest event drawn in a track; returns that event as the page holds it."""
    target = driver.execute_script("""
      var root = [...document.querySelectorAll('[data-timeline]')].find(e => e.offsetParent !== null);
      var tl = root.timeline, plugin = tl.tracks.find(p => p.track.title === arguments[0]);
      var best = null;
      plugin.flatTree.forEach(n => { if (!best || n.source.duration > best.source.duration) best = n; });
      var engine = plugin.renderEngine;
      var mid = best.source.start + best.source.duration / 2;
      tl.setView(best.source.start - best.source.duration, best.source.start + 2 * best.source.duration);
      var top = engine.position + best.level * 17;
      tl.scroller.scrollTop = Math.max(0, top - 100);
      return {name: best.source.name, ps: best.source.ps, dps: best.source.dps, level: best.level, top: top};
    """, track_title)
    import time

    time.sleep(0.5)  # one frame for the new view, and the hit regions flame-chart-js adds 16 ms later
    point = driver.execute_script("""
      var root = [...document.querySelectorAll('[data-timeline]')].find(e => e.offsetParent !== null);
      var tl = root.timeline, plugin = tl.tracks.find(p => p.track.title === arguments[0]);
      var node = plugin.flatTree.find(n => n.source.ps === arguments[1] && n.level === arguments[2]);
      tl.scroller.scrollIntoView({block: "start"});
      var rect = tl.canvas.getBoundingClientRect();
      return {x: rect.left + plugin.renderEngine.timeToPosition(node.source.start + node.source.duration / 2),
              y: rect.top + plugin.renderEngine.position + node.level * 17 + 8};
    """, track_title, target["ps"], target["level"])
    # A real click, through the browser's input pipeline, at that point of the viewport.
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        driver.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": kind, "x": point["x"], "y": point["y"],
                                                            "button": "left", "clickCount": 1})
    return target


def test_timeline_from_file_reports_the_manifest_and_shows_the_clicked_event(site, driver, tmp_path):
    run = "gpu_multi_worker"
    page = site / run / "trace.html"
    state = _open(driver, page)
    host = state["host"]
    folder = site / run / "trace" / host / "timeline"
    index = read_index(folder)
    manifest_events = _manifest_events(site, run)
    assert state["events"] + index["counter_samples"] == manifest_events[host]
    assert state["tracks"] == len(index["tracks"]) == state["drawnTracks"]
    assert f"{manifest_events[host] - index['counter_samples']:,} events in {len(index['tracks'])} tracks" in \
        state["status"]
    assert state["mode"] == "detail" and state["drawn"] == index["events"]  # 20,631 events: one window, all drawn
    _shot(driver, tmp_path, "timeline-gpu.png")

    clicked = _click_event(driver, "Stream #134(Compute)")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.querySelector('section:not([hidden]) [data-timeline]').dataset.argsReady"))
    details = driver.execute_script("""
      var panel = document.querySelector('section:not([hidden]) [data-timeline-details]');
      return {name: panel.querySelector('h4').textContent,
              start: panel.querySelector('[data-field=start_us]').textContent,
              dur: panel.querySelector('[data-field=dur_us]').textContent,
              event: JSON.parse(panel.querySelector('[data-timeline-args]').dataset.event),
              text: panel.textContent, hidden: panel.hidden};
    """)
    assert not details["hidden"] and details["name"] == clicked["name"]
    # The same event in the chunk file: name, thread, times and args.
    doc = read_chunk(site / run / "trace" / host / f"{host}-000.json.gz")
    matches = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["name"] == clicked["name"]
               and round(e["ts"] * 1e6) == clicked["ps"]]
    assert len(matches) == 1
    event = matches[0]
    assert details["event"] == event
    assert details["start"].startswith(f"{event['ts']:.6f}".rstrip("0").rstrip("."))
    assert details["dur"].startswith(f"{event['dur']:.6f}".rstrip("0").rstrip("."))
    for key, value in event.get("args", {}).items():
        assert f"args.{key}" in details["text"] and str(value) in details["text"]
    _shot(driver, tmp_path, "timeline-gpu-selected.png")

    # W zooms in around the centre, S back out, D pans right.
    from selenium.webdriver.common.action_chains import ActionChains

    before = driver.execute_script("return document.querySelector('section:not([hidden]) [data-timeline]')"
                                   ".timeline.view()")
    driver.execute_script("document.activeElement && document.activeElement.blur()")
    ActionChains(driver).key_down("w").pause(0.5).key_up("w").perform()
    after = driver.execute_script("return document.querySelector('section:not([hidden]) [data-timeline]')"
                                  ".timeline.view()")
    assert after[1] - after[0] < 0.8 * (before[1] - before[0])
    ActionChains(driver).key_down("d").pause(0.3).key_up("d").perform()
    panned = driver.execute_script("return document.querySelector('section:not([hidden]) [data-timeline]')"
                                   ".timeline.view()")
    assert panned[0] > after[0]
    assert console_errors(driver) == []


def test_zoom_to_a_step(site, driver, tmp_path):
    run = "tf_keras_input_bound"
    page = site / run / "trace.html"
    state = _open(driver, page)
    index = read_index(site / run / "trace" / state["host"] / "timeline")
    steps = index["steps"]
    assert len(steps) == 5
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    number, start_ps, end_ps = steps[2]
    Select(driver.find_element(By.CSS_SELECTOR, "[data-timeline-step]")).select_by_value(str(number))
    view = driver.execute_script("return document.querySelector('[data-timeline]').timeline.view()")
    t0, t1 = start_ps / 1e9, end_ps / 1e9
    pad = (t1 - t0) * 0.02
    assert view[0] == pytest.approx(t0 - pad, abs=1e-3) and view[1] == pytest.approx(t1 + pad, abs=1e-3)
    driver.execute_script("return new Promise(r => setTimeout(r, 400))")
    assert f"t0={view[0]:.6f}" in driver.execute_script("return location.hash")
    _shot(driver, tmp_path, "timeline-step.png")
    assert console_errors(driver) == []


def test_deep_link_opens_a_host_range_and_event(site, driver, tmp_path):
    run = "gpu_multi_worker"
    page = site / run / "trace.html"
    manifest = json.loads((site / run / "trace" / "manifest.json").read_text())
    second = sorted({c["host"] for c in manifest["chunks"]})[1]
    doc = read_chunk(site / run / "trace" / second / f"{second}-000.json.gz")
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "args" in e and "correlation_id" in e["args"]
               and e["tid"] == 134]
    kernel = sorted(kernels, key=lambda e: e["ts"])[len(kernels) // 2]
    t0 = kernel["ts"] / 1e3 - 1.0  # ms
    t1 = kernel["ts"] / 1e3 + 5.0
    name = kernel["name"]
    fragment = f"#host={quote(second)}&t0={t0}&t1={t1}&q={quote(name)}"
    state = _open(driver, page, fragment)
    assert state["host"] == second
    assert driver.execute_script("return document.querySelector('select[data-host-select]').value") == second
    assert state["view"][0] >= t0 - 1e-6 and state["view"][1] <= t1 + 1e-6
    driver.execute_script("return new Promise(r => setTimeout(r, 600))")
    details = driver.execute_script("""
      var panel = document.querySelector('section:not([hidden]) [data-timeline-details]');
      return {name: panel.querySelector('h4').textContent, selected: panel.closest('[data-timeline]').dataset.selected,
              hash: location.hash};
    """)
    # The first event named like `q` that starts in the range: at or before our kernel.
    first = min((e for e in doc["traceEvents"] if e.get("ph") == "X" and name.lower() in e["name"].lower()
                 and t0 * 1e3 <= e["ts"] <= t1 * 1e3), key=lambda e: e["ts"])
    assert details["name"] == first["name"]
    assert details["selected"].endswith(":" + str(round(first["ts"] * 1e6)))
    assert "sel=" + details["selected"] in details["hash"]
    _shot(driver, tmp_path, "timeline-deeplink.png")

    # The link the page wrote opens the same event again.
    driver.get("about:blank")
    again = _open(driver, page, details["hash"])
    assert again["host"] == second and again["selected"] == details["selected"]
    assert console_errors(driver) == []


def _follow(driver, page: Path, selector: str) -> tuple[str, dict]:
    """Open `page`, follow its first link matching `selector`, and wait for the timeline to open it."""
    from selenium.webdriver.common.by import By

    driver.get(page.as_uri())
    link = driver.find_element(By.CSS_SELECTOR, selector)
    href = link.get_attribute("href")
    driver.get(href)  # what a click does, without scrolling the link into view first
    return href, _open(driver, page.parent / "trace.html", "#" + href.split("#", 1)[1])


def test_links_from_other_pages_open_the_timeline(site, driver):
    from urllib.parse import unquote

    run = site / "gpu_multi_worker"
    # Overview: a top op (on a GPU, its full name is the kernel's long_name) opens with one of its events selected.
    href, state = _follow(driver, run / "overview.html", "a.timeline-link")
    name = unquote(href.split("q=", 1)[1])
    driver.execute_script("return new Promise(r => setTimeout(r, 800))")
    shown = driver.execute_script("""
      var root = document.querySelector('section:not([hidden]) [data-timeline]');
      return root.dataset.argsReady && root.querySelector('[data-timeline-args]').dataset.event;""")
    event = json.loads(shown)
    assert name in (event["name"], event.get("args", {}).get("long_name"))  # exactly, not a longer name
    # Kernel stats: a kernel row.
    href, state = _follow(driver, run / "kernel_stats.html", "a.timeline-link")
    kernel = unquote(href.split("q=", 1)[1])
    assert state["selected"] is not None
    assert driver.execute_script(
        "return document.querySelector('section:not([hidden]) [data-timeline-details] h4').textContent") == kernel
    # Input pipeline: a step row zooms to that step.
    href, state = _follow(driver, site / "tf_keras_input_bound" / "input_pipeline.html", "a.timeline-link")
    index = read_index(site / "tf_keras_input_bound" / "trace" / state["host"] / "timeline")
    step = int(unquote(href.split("step=", 1)[1]).split()[-1])
    _, start_ps, end_ps = next(s for s in index["steps"] if s[0] == step)
    # The step and 2% of it on each side (shifted to stay within the trace where it starts the trace).
    width = (end_ps - start_ps) / 1e9
    assert state["view"][0] <= start_ps / 1e9 and state["view"][1] >= end_ps / 1e9
    assert state["view"][1] - state["view"][0] == pytest.approx(width * 1.04, abs=1e-3)
    assert console_errors(driver) == []


def test_single_file_report_embeds_each_hosts_busiest_step(site, driver, tmp_path):
    from reportgen.export.timeline_embed import MAX_EMBEDDED_BYTES
    from reportgen.output.single_file import write_single_file

    report = tmp_path / "report.html"
    write_single_file(site, report)
    document = report.read_text(encoding="utf-8")
    embedded = sum(len(m) for m in re.findall(r"<script type=\"application/json\" data-timeline-data[^>]*>.*?</script>",
                                                document, re.S))
    assert 0 < embedded <= MAX_EMBEDDED_BYTES + 64 * 1024  # the excerpts, plus each host's index
    driver.get(report.as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    # A report's timelines start as they come into view.
    driver.execute_script("document.querySelector('[data-timeline]').scrollIntoView();")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('[data-timeline]')].some(e => e.dataset.ready)"))
    driver.execute_script("return new Promise(r => setTimeout(r, 500))")
    shown = driver.execute_script("""
      return [...document.querySelectorAll('[data-timeline]')].filter(e => e.dataset.ready).map(e => ({
        host: e.dataset.host, drawn: +e.dataset.drawn, mode: e.dataset.mode,
        status: e.querySelector('[data-timeline-status]').textContent,
        page: e.closest('section.page').dataset.page}));""")
    assert shown
    for entry in shown:
        index = read_index(site / entry["page"].rsplit("/", 1)[0] / "trace" / entry["host"] / "timeline")
        excerpt = index["excerpt"]
        assert entry["mode"] == "detail" and entry["drawn"] >= excerpt["events"] > 0
        assert "This single-file report holds" in entry["status"] and f"{index['events']:,}" in entry["status"]
        if excerpt["step"] is not None:
            assert f"step {excerpt['step']}," in entry["status"]
    # A kernel stats row's link opens its run's timeline here, with the kernel selected when the excerpt has it.
    kernel = driver.execute_script("""
      var a = document.querySelector("section[data-page='gpu_multi_worker/kernel_stats.html'] a.timeline-link");
      a.click();
      return decodeURIComponent(a.dataset.view.split("q=")[1]);""")
    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        "return document.querySelector(\"section[data-page='gpu_multi_worker/trace.html'] [data-timeline]\")"
        ".dataset.linked"))
    status = driver.execute_script(
        "var r = document.querySelector(\"section[data-page='gpu_multi_worker/trace.html'] [data-timeline]\");"
        "var h = r.querySelector('[data-timeline-details] h4');"
        "return [r.dataset.selected || null, h && h.textContent,"
        " r.querySelector('[data-timeline-status]').textContent]")
    assert status[1] == kernel or "No event named like" in status[2]
    _shot(driver, tmp_path, "timeline-single-file.png")
    assert console_errors(driver) == []


def test_a_small_hosts_timeline_is_one_file_and_opens_with_its_events_args_and_excerpt(driver, tmp_path):
    """A pod's tiny host: index.js carries every part (windows, args, excerpt); the page draws every event, shows
    a clicked event's args, and the single-file report embeds the excerpt, without another file to load."""
    from reportgen.export import timeline
    from reportgen.output.single_file import write_single_file
    from tests.logdirs import make_logdir, small_capture
    from tests.timeline_files import inline_parts

    logdir = make_logdir(tmp_path / "logs", {"pod": {f"host{i}": small_capture(i) for i in range(2)}})
    site = tmp_path / "site"
    assert main(["build", str(logdir), "-o", str(site), "-q", "--jobs", "1", "--no-cache"]) == 0
    folder = site / "pod" / "trace" / "host0" / timeline.DIR
    assert sorted(p.name for p in folder.iterdir()) == ["index.js"]
    index = read_index(folder)
    parts = {w[k] for w in index["windows"] for k in ("key", "args")} | {index["excerpt"]["key"],
                                                                         index["excerpt"]["args"]}
    assert parts <= set(inline_parts(folder)) and "w-000" in parts
    assert (folder / "index.js").stat().st_size <= timeline.SMALL_TIMELINE_BYTES + 4096

    state = _open(driver, (site / "pod" / "trace.html").resolve())
    assert state["host"] == "host0" and state["mode"] == "detail" and state["drawn"] == index["events"] > 0
    clicked = _click_event(driver, index["tracks"][0]["title"])
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.querySelector('section:not([hidden]) [data-timeline]').dataset.argsReady"))
    shown = driver.execute_script("return document.querySelector('section:not([hidden]) [data-timeline-details] h4')"
                                  ".textContent")
    assert shown == clicked["name"]
    # No part was asked for as a file of its own: the page inserted index.js alone.
    inserted = driver.execute_script("return [...document.querySelectorAll('script[src*=\"/timeline/\"]')]"
                                     ".map(s => s.getAttribute('src'))")
    assert inserted and all(src.endswith("/index.js") for src in inserted), inserted
    _shot(driver, tmp_path, "timeline-small-host.png")
    assert console_errors(driver) == []

    report = tmp_path / "report.html"
    write_single_file(site, report)
    driver.get(report.as_uri())
    _scroll_to_each_timeline(driver)
    embedded = driver.execute_script(
        "return [...document.querySelectorAll('[data-timeline]')].filter(e => e.dataset.ready)"
        ".map(e => [e.dataset.host, +e.dataset.drawn, e.dataset.mode])")
    assert ["host0", index["events"], "detail"] in embedded
    assert console_errors(driver) == []


def _scroll_to_each_timeline(driver) -> None:
    """A single-file report starts each timeline as it comes into view: bring each there, and wait for it."""
    from selenium.webdriver.support.ui import WebDriverWait

    shown = driver.execute_script("return [...document.querySelectorAll('[data-timeline]')]"
                                  ".map((e, i) => e.offsetParent === null ? -1 : i).filter(i => i >= 0)")
    for i in shown:  # those of host panels not shown start when their panel is
        driver.execute_script("document.querySelectorAll('[data-timeline]')[arguments[0]].scrollIntoView();", i)
        WebDriverWait(driver, 30).until(lambda d, i=i: d.execute_script(
            "return !!document.querySelectorAll('[data-timeline]')[arguments[0]].dataset.ready", i))


def test_single_file_report_keeps_two_runs_hosts_of_one_name_apart(driver, tmp_path):
    """One document holds every run's trace page: a host named alike in two runs shows its own events and args."""
    from selenium.webdriver.support.ui import WebDriverWait

    from reportgen.output.single_file import write_single_file
    from tests.logdirs import make_logdir, small_capture

    # small_capture(i)'s "worker" events last i * 1000 + k ps: 0.5 µs in runa, 0.9 µs in runb.
    logdir = make_logdir(tmp_path / "logs", {"runa": {"host0": small_capture(500)},
                                             "runb": {"host0": small_capture(900)}})
    site = tmp_path / "site"
    assert main(["build", str(logdir), "-o", str(site), "-q", "--jobs", "1", "--no-cache"]) == 0
    report = tmp_path / "report.html"
    write_single_file(site, report)
    driver.get(report.as_uri())
    _scroll_to_each_timeline(driver)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('[data-timeline]')].filter(e => e.dataset.ready).length === 2"))
    for run, expected_us in (("runa", 0.500003), ("runb", 0.900003), ("runa", 0.500003)):
        # Select the run's longest worker event as a click does; its args come from the embedded excerpt.
        driver.execute_script("""
          var root = document.querySelector("section[data-page='" + arguments[0] + "/trace.html'] [data-timeline]");
          var tl = root.timeline, plugin = tl.tracks.find(p => p.track.title === "worker"), best = null;
          plugin.flatTree.forEach(n => { if (!best || n.source.duration > best.source.duration) best = n; });
          root.querySelector('[data-timeline-details]').innerHTML = "";
          tl.select(plugin, best);""", run)
        event = WebDriverWait(driver, 20).until(lambda d, shown=run: d.execute_script(
            "var a = document.querySelector(\"section[data-page='\" + arguments[0] + \"/trace.html'] "
            "[data-timeline-args]\"); return a && a.dataset.event && JSON.parse(a.dataset.event);", shown))
        assert event["name"] == "op3" and event["dur"] == pytest.approx(expected_us), (run, event)
    assert console_errors(driver) == []


@needs_firefox
def test_firefox_opens_the_timeline_from_file(site, tmp_path):
    from tests.firefox import console_errors as firefox_errors
    from tests.firefox import firefox

    run = "gpu_multi_worker"
    profile = tmp_path / "firefox"
    with firefox(profile) as ff:
        ff.navigate((site / run / "trace.html").as_uri())
        state = None
        for _ in range(300):
            state = ff.execute_script(
                "var r = document.querySelector('[data-timeline]');"
                "return r.dataset.ready ? {host: r.dataset.host, drawn: +r.dataset.drawn, mode: r.dataset.mode,"
                " status: r.querySelector('[data-timeline-status]').textContent} : null;", sandbox=None)
            if state:
                break
            time.sleep(0.1)
        assert state, "the timeline did not draw in Firefox"
        index = read_index(site / run / "trace" / state["host"] / "timeline")
        assert state["mode"] == "detail" and state["drawn"] == index["events"]
        # Search selects an event, whose arguments come from the window's args file.
        ff.execute_script("document.querySelector('[data-timeline]').timeline.search('MemcpyH2D');", sandbox=None)
        details = None
        for _ in range(100):
            details = ff.execute_script(
                "var r = document.querySelector('[data-timeline]');"
                "var args = r.querySelector('[data-timeline-args]');"
                "return r.dataset.argsReady ? JSON.parse(args.dataset.event) : null;",
                sandbox=None)
            if details:
                break
            time.sleep(0.1)
        assert details and details["name"] == "MemcpyH2D" and details["ph"] == "X"
        # W zooms in.
        before = ff.execute_script("return document.querySelector('[data-timeline]').timeline.view();", sandbox=None)
        ff.execute_script("document.activeElement && document.activeElement.blur();"
                          "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'w'}));", sandbox=None)
        time.sleep(0.4)
        ff.execute_script("document.dispatchEvent(new KeyboardEvent('keyup', {key: 'w'}));", sandbox=None)
        after = ff.execute_script("return document.querySelector('[data-timeline]').timeline.view();", sandbox=None)
        assert after[1] - after[0] < before[1] - before[0]
        (tmp_path / "timeline-firefox.png").write_bytes(base64.b64decode(ff.screenshot()))
    assert firefox_errors(profile) == []
