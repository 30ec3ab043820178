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
    # The click waits for the new view to be drawn: until flame-chart-js's hit regions (made as it draws)
    # hold the event where the new view puts it.
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script("""
      var root = [...document.querySelectorAll('[data-timeline]')].find(e => e.offsetParent !== null);
      var tl = root.timeline, plugin = tl.tracks.find(p => p.track.title === arguments[0]);
      var node = plugin.flatTree.find(n => n.source.ps === arguments[1] && n.level === arguments[2]);
      var x = plugin.renderEngine.timeToPosition(node.source.start + node.source.duration / 2);
      return (plugin.interactionsEngine.hitRegions || []).some(r => r.type === 'cluster' &&
        r.data.nodes.indexOf(node) >= 0 && r.x <= x && x <= r.x + r.w);
    """, track_title, target["ps"], target["level"]))
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
              start: panel.querySelector('[data-field=file_times]').dataset.ts,
              dur: panel.querySelector('[data-field=file_times]').dataset.dur,
              shown: panel.querySelector('[data-field=start]').textContent,
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
    assert details["start"] == f"{event['ts']:.6f}".rstrip("0").rstrip(".")
    assert details["dur"] == f"{event['dur']:.6f}".rstrip("0").rstrip(".")
    # On screen, from the start of the step the page opened on, to about a thousandth of the event's duration.
    assert re.fullmatch(r"[+−][0-9,]+(\.[0-9]+)? (s|ms|µs|ns) from step \d+ start", details["shown"]), details["shown"]
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


def test_ruler_units_follow_the_zoom_details_dock_below_and_marks_measure(site, driver, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains

    run = "gpu_multi_worker"
    _open(driver, site / run / "trace.html")
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    units = {}
    for width_ms in (400.0, 0.4, 0.0004):
        ruler = driver.execute_script(f"""
          var tl = {tl}, mid = (tl.span[0] + tl.span[1]) / 2;
          tl.setView(mid - arguments[0] / 2, mid + arguments[0] / 2);
          var t = tl.ticks();
          return {{unit: tl.root.dataset.rulerUnit, labels: t.list.map(x => x.label), step: t.step}};""", width_ms)
        assert len(ruler["labels"]) >= 5 and all(label.endswith(" " + ruler["unit"]) for label in ruler["labels"])
        units[width_ms] = ruler["unit"]
    assert units == {400.0: "ms", 0.4: "µs", 0.0004: "ns"}

    # Scrolling the tracks leaves the ruler where it is, above them; canvas and details share the first screen.
    layout = driver.execute_script(f"""
      var tl = {tl}, before = tl.ruler.getBoundingClientRect().top;
      tl.scroller.scrollTop = 400;
      var ruler = tl.ruler.getBoundingClientRect(), stage = tl.scroller.getBoundingClientRect();
      var details = tl.details.getBoundingClientRect();
      return {{moved: ruler.top - before, above: ruler.bottom <= stage.top + 1, scrolled: tl.scroller.scrollTop,
              stage: stage.height, details: details.height, bottom: details.bottom, screen: window.innerHeight}};""")
    assert layout["moved"] == 0 and layout["above"] and layout["scrolled"] > 0
    assert layout["stage"] >= 200 and layout["details"] >= 80 and layout["bottom"] <= layout["screen"], layout

    # M marks the selected event's start and end: the measure is its duration; a click on the ruler adds a mark.
    event = driver.execute_script(f"""
      var tl = {tl}, plugin = tl.tracks.find(p => p.track.title === 'Stream #134(Compute)'), node = plugin.flatTree[40];
      tl.select(plugin, node);
      tl.setView(node.source.start - node.source.duration, node.source.start + 2 * node.source.duration);
      document.activeElement && document.activeElement.blur();
      return {{dps: node.source.dps, start: node.source.start}};""")
    ActionChains(driver).send_keys("m").perform()
    assert int(driver.execute_script(f"return {tl}.root.dataset.measurePs")) == pytest.approx(event["dps"], abs=2)
    point = driver.execute_script(f"""
      var tl = {tl}, rect = tl.ruler.getBoundingClientRect();
      return {{x: rect.left + tl.xOf(tl.view()[1]) - 20, y: rect.top + rect.height / 2}};""")
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        driver.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": kind, "x": point["x"], "y": point["y"],
                                                            "button": "left", "clickCount": 1})
    marks = driver.execute_script(f"var tl = {tl}; return [tl.marks, tl.view(), +tl.root.dataset.measurePs, "
                                  "tl.root.querySelector('[data-timeline-measure]').textContent]")
    assert len(marks[0]) == 3 and marks[0][1] < marks[0][2] <= marks[1][1]
    assert marks[2] == pytest.approx((marks[0][2] - marks[0][1]) * 1e9, abs=2)
    assert marks[3].startswith("3 marks; the last two ")
    _shot(driver, tmp_path, "timeline-ruler-marks.png")
    assert console_errors(driver) == []


def _drag(driver, x0: float, y0: float, x1: float, y1: float, modifiers: int = 0) -> None:
    """A real drag through the browser's input pipeline (8: Shift held)."""
    def send(kind: str, x: float, y: float, buttons: int) -> None:
        driver.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                            "buttons": buttons, "clickCount": 1,
                                                            "modifiers": modifiers})
    send("mouseMoved", x0, y0, 0)
    send("mousePressed", x0, y0, 1)
    for i in range(1, 9):
        send("mouseMoved", x0 + (x1 - x0) * i / 8, y0 + (y1 - y0) * i / 8, 1)
    send("mouseReleased", x1, y1, 0)


def _area_in_python(folder: Path, index: dict, t0_ms: float, t1_ms: float, tracks: list[int]) -> dict:
    """Perfetto's area aggregation over the exported windows: per name, occurrences (slices overlapping the range),
    wall (their parts inside it), self (wall less the parts inside it of their children: the next level of the same
    thread, starting within them) and max wall; in ps."""
    from tests.timeline_files import read_columns

    p0, p1 = t0_ms * 1e9, t1_ms * 1e9
    events: dict[tuple[int, int, float], tuple[float, str]] = {}  # (track, level, start) → (end, name)
    for w in index["windows"]:
        if w["end"] < p0 or w["start"] > p1:
            continue
        _, cols = read_columns(folder / f"{w['key']}.js")
        for r in range(len(cols.start)):
            a, b = float(cols.start[r]), float(cols.start[r] + cols.dur[r])
            if int(cols.track[r]) in tracks and b > p0 and a < p1:
                events[(int(cols.track[r]), int(cols.level[r]), a)] = (b, cols.name[r])

    def clip(a: float, b: float) -> float:
        return min(b, p1) - max(a, p0)

    own = {key: clip(key[2], end) for key, (end, _) in events.items()}
    firsts = {(k, t["level"]) for k in tracks for t in index["tracks"][k]["threads"]}
    for (k, level, a), (b, _) in events.items():
        if level == 0 or (k, level) in firsts:
            continue
        parents = [key for key, (end, _) in events.items() if key[0] == k and key[1] == level - 1
                   and key[2] <= a < end]
        if parents:
            own[max(parents, key=lambda key: key[2])] -= clip(a, b)
    rows: dict[str, list[float]] = {}
    for key, (end, name) in events.items():
        row = rows.setdefault(name, [0, 0.0, 0.0, 0.0])
        wall = clip(key[2], end)
        row[0] += 1
        row[1] += wall
        row[2] += own[key]
        row[3] = max(row[3], wall)
    return rows


def test_area_selection_aggregates_as_python_does_from_the_exported_windows(site, driver, tmp_path):
    import csv
    import io

    run = "tf_keras_input_bound"
    state = _open(driver, site / run / "trace.html")
    folder = site / run / "trace" / state["host"] / "timeline"
    index = read_index(folder)
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    # Shift-drag in the default pan mode, over the middle of the step, from the first track into the second.
    points = driver.execute_script(f"""
      var tl = {tl}, rect = tl.canvas.getBoundingClientRect();
      var a = tl.tracks[0].renderEngine, b = tl.tracks[1].renderEngine;
      return {{x0: rect.left + tl.canvas.width * 0.3, x1: rect.left + tl.canvas.width * 0.75,
              y0: rect.top + a.position + 20, y1: rect.top + b.position + 10, mode: tl.root.dataset.mouseMode}};""")
    assert points["mode"] == "pan"
    _drag(driver, points["x0"], points["y0"], points["x1"], points["y1"], modifiers=8)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.areaReady"))
    area, shown, note = driver.execute_script(f"""
      var tl = {tl};
      return [tl.area, [...tl.details.querySelectorAll('[data-timeline-area] tbody tr')].map(
                tr => [tr.dataset.name, ...JSON.parse(tr.dataset.values)]), tl.details.textContent];""")
    assert area["tracks"] == [0, 1] and area["t1"] > area["t0"]
    assert "a slice cut by the range counts only its part inside it" in note
    expected = _area_in_python(folder, index, area["t0"], area["t1"], area["tracks"])
    got = {name: [count, wall, own, top] for name, count, wall, own, top in shown}
    assert set(got) == set(expected) and len(shown) == len(got)
    for name, (count, wall, own, top) in expected.items():
        assert got[name][0] == count, name
        assert got[name][1:] == [pytest.approx(wall, abs=2), pytest.approx(own, abs=2), pytest.approx(top, abs=1)], name
    # Both parts of the definition matter here: slices cut by the range, and self time below wall time.
    assert any(own < wall for _, wall, own, _ in expected.values())
    cut = driver.execute_script(f"""
      var tl = {tl}, a = tl.area;
      return a.tracks.some(k => tl.tracks[k].flatTree.some(n => {{
        var s = n.source, end = s.start + s.duration;
        return s.count === 1 && s.start < a.t1 && end > a.t0 && (s.start < a.t0 || end > a.t1);
      }}));""")
    assert cut
    # Sorted by wall time first (as Perfetto), then by a clicked header; the CSV is the table in its order.
    walls = [row[2] for row in shown]
    assert walls == sorted(walls, reverse=True)
    driver.execute_script(f"{tl}.details.querySelector('th[data-key=count] button').click()")
    counts = driver.execute_script(f"return [...{tl}.details.querySelectorAll('[data-timeline-area] tbody tr')]"
                                   ".map(tr => JSON.parse(tr.dataset.values)[0])")
    assert counts == sorted(counts, reverse=True) and counts != [row[1] for row in shown]
    table = list(csv.reader(io.StringIO(driver.execute_script(f"return {tl}.areaCsv()"))))
    assert table[0] == ["name", "occurrences", "wall_us", "self_us", "average_us", "max_us"]
    assert [int(row[1]) for row in table[1:]] == counts
    for row in table[1:]:
        count, wall, own, top = expected[row[0]]
        assert [float(x) for x in row[2:]] == [pytest.approx(wall / 1e6, abs=1e-5), pytest.approx(own / 1e6, abs=1e-5),
                                             pytest.approx(wall / count / 1e6, abs=1e-5),
                                             pytest.approx(top / 1e6, abs=1e-5)]
    # A row outlines its slices: every one of them is drawn at this zoom.
    first = driver.execute_script(f"var tr = {tl}.details.querySelector('[data-timeline-area] tbody tr'); tr.click();"
                                  "return tr.dataset.name")
    assert int(driver.execute_script(f"return {tl}.root.dataset.highlighted")) == expected[first][0]
    _shot(driver, tmp_path, "timeline-area.png")
    # Escape clears the area; key 1 turns a plain drag into a selection.
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("document.activeElement && document.activeElement.blur()")
    ActionChains(driver).send_keys("\ue00c").send_keys("1").perform()
    assert driver.execute_script(f"return [{tl}.area, {tl}.root.dataset.mouseMode]") == [None, "select"]
    _drag(driver, points["x0"], points["y0"], points["x1"], points["y0"] + 4)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.area && {tl}.root.dataset.areaReady"))
    assert driver.execute_script(f"return {tl}.area.tracks") == [0]
    assert console_errors(driver) == []


def _matches_in_python(folder: Path, index: dict, text: str, track_filter: str = "") -> list[tuple[float, int, str]]:
    """(start ps, track, "track:level:start") of every event named like `text` (name or long name, any case) on the
    tracks whose title or process holds `track_filter`, from the exported windows, in time order."""
    from tests.timeline_files import read_columns

    ok = [not track_filter or track_filter.lower() in (t["title"] + "\n" + t["process"]).lower()
          for t in index["tracks"]]
    found = {}
    for w in index["windows"]:
        _, cols = read_columns(folder / f"{w['key']}.js")
        for r in range(len(cols.start)):
            track = int(cols.track[r])
            if ok[track] and (text.lower() in cols.name[r].lower() or text.lower() in cols.long_name[r].lower()):
                start = float(cols.start[r])
                found[(track, int(cols.level[r]), start)] = (start, track, f"{track}:{int(cols.level[r])}:{start:.0f}")
    return sorted(found.values())


def test_find_counts_steps_lists_and_filters_matches(site, driver, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    run = "gpu_multi_worker"
    state = _open(driver, site / run / "trace.html")
    folder = site / run / "trace" / state["host"] / "timeline"
    index = read_index(folder)
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    expected = _matches_in_python(folder, index, "memcpy")
    assert len(expected) > 20

    def shown() -> dict:
        return driver.execute_script(f"""
          var tl = {tl}, root = tl.root;
          return {{count: root.querySelector('[data-timeline-count]').textContent, matches: +root.dataset.matches,
                  selected: root.dataset.selected || null, view: tl.view()}};""")

    def wait_selected(key: str) -> None:
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.selected") == key)

    box = driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-search]")
    box.send_keys("MemCpy", Keys.ENTER)
    # A new search starts at the view's start (the step the page opened on).
    first = next(i for i, m in enumerate(expected) if m[0] >= state["view"][0] * 1e9)
    wait_selected(expected[first][2])
    now = shown()
    assert now["matches"] == len(expected) and now["count"] == f"{first + 1} / {len(expected):,}"
    box.send_keys(Keys.ENTER)
    wait_selected(expected[(first + 1) % len(expected)][2])
    assert shown()["count"] == f"{(first + 1) % len(expected) + 1} / {len(expected):,}"
    ActionChains(driver).key_down(Keys.SHIFT).send_keys_to_element(box, Keys.ENTER).key_up(Keys.SHIFT).perform()
    wait_selected(expected[first][2])
    # The list: one entry per match (up to its length), a click goes to it.
    listed = driver.execute_script(f"return {tl}.root.querySelectorAll('[data-timeline-matches] li').length")
    assert listed == min(len(expected), 500)
    driver.execute_script(f"{tl}.root.querySelector('[data-timeline-matches] [data-match=\"2\"]').click()")
    wait_selected(expected[2][2])
    assert shown()["count"] == f"3 / {len(expected):,}"
    _shot(driver, tmp_path, "timeline-find.png")
    # The track filter narrows the matches to tracks named like it.
    narrowed = _matches_in_python(folder, index, "memcpy", "D2H")
    assert 0 < len(narrowed) < len(expected)
    track_filter = driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-track-filter]")
    track_filter.send_keys("d2h", Keys.ENTER)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return +{tl}.root.dataset.matches") == len(narrowed))
    assert console_errors(driver) == []


@pytest.fixture(scope="module")
def tpu_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("timeline-tpu") / "site"
    assert main(["build", str(LOGDIR), "-o", str(out), "-q", "--jobs", "1", "--runs", "tpu_inference_2"]) == 0
    return out


def test_a_host_launch_shows_its_flow_to_the_device_and_keys_follow_it(tpu_site, driver, tmp_path):
    from collections import defaultdict

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.timeline_files import read_columns

    run = host = "tpu_inference_2"
    folder = tpu_site / run / "trace" / host / "timeline"
    index = read_index(folder)
    doc = read_chunk(tpu_site / run / "trace" / host / f"{host}-000.json.gz")
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    flows = defaultdict(list)
    for e in doc["traceEvents"]:
        if "bind_id" in e:
            flows[e["bind_id"]].append(e)
    # A program launch on the host and the program it started on TPU core 0: the capture's own host → device link.
    def span(members: list[dict]) -> float:
        return max(e["ts"] + e["dur"] for e in members) - min(e["ts"] for e in members)

    launches = [members for members in flows.values()
                if any(e["name"] == "DoEnqueueProgram" and e.get("flow_out") for e in members)
                and any(processes[e["pid"]].endswith("/device:TPU:0") for e in members)]
    assert launches
    chain = sorted(min(launches, key=span), key=lambda e: e["ts"])  # the tightest: every hop on screen at once
    keys = {}
    for w in index["windows"]:
        _, cols = read_columns(folder / f"{w['key']}.js")
        for r in range(len(cols.start)):
            keys[(cols.name[r], round(float(cols.start[r])))] = \
                f"{int(cols.track[r])}:{int(cols.level[r])}:{float(cols.start[r]):.0f}"
    chain_keys = [keys[(e["name"], round(e["ts"] * 1e6))] for e in chain]
    launch = next(i for i, e in enumerate(chain) if e["name"] == "DoEnqueueProgram")
    device = next(i for i, e in enumerate(chain) if processes[e["pid"]].endswith("/device:TPU:0"))
    assert index["tracks"][int(chain_keys[device].split(":")[0])]["process"].endswith("/device:TPU:0")
    t0 = chain[0]["ts"] / 1e3 - 0.05
    t1 = max(e["ts"] + e["dur"] for e in chain) / 1e3 + 0.05
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    _open(driver, tpu_site / run / "trace.html", f"#host={quote(host)}&t0={t0}&t1={t1}&sel={chain_keys[launch]}")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.flowShown")
                                    == chain_keys[launch])
    shown = driver.execute_script(f"""
      var tl = {tl}, m = tl.flow.members, ctx = tl.overlay.getContext('2d'), inside = 0, inked = 0;
      // Points along the drawn curve of each hop (the curve's own formula): ink where they are on screen.
      for (var i = 0; i + 1 < m.length; i++) {{
        var x0 = tl.xOf(Math.min(m[i].start + m[i].dur, m[i + 1].start) / 1e9), y0 = tl.yOf(m[i].track, m[i].level);
        var x1 = tl.xOf(m[i + 1].start / 1e9), y1 = tl.yOf(m[i + 1].track, m[i + 1].level), mid = (x0 + x1) / 2;
        for (var t = 0.05; t < 0.96; t += 0.05) {{
          var u = 1 - t, x = u*u*u*x0 + 3*u*u*t*mid + 3*u*t*t*mid + t*t*t*x1;
          var y = u*u*u*y0 + 3*u*u*t*y0 + 3*u*t*t*y1 + t*t*t*y1;
          if (x < 1 || y < 1 || x > tl.overlay.width - 2 || y > tl.overlay.height - 2) continue;
          inside++;
          var px = ctx.getImageData(Math.round(x) - 1, Math.round(y) - 1, 3, 3).data;
          for (var k = 3; k < px.length; k += 4) if (px[k] > 0) {{ inked++; break; }}
        }}
      }}
      return {{keys: JSON.parse(tl.root.dataset.flow), arrows: +tl.root.dataset.flowArrows, inside: inside,
              inked: inked, text: tl.details.querySelector('[data-timeline-flow]').textContent}};""")
    assert shown["keys"] == chain_keys and shown["arrows"] == len(chain) - 1
    assert shown["inside"] > 0 and shown["inked"] == shown["inside"], shown
    assert f"{len(chain)} events, this is {launch + 1}" in shown["text"]
    _shot(driver, tmp_path, "timeline-flow.png")
    # ] follows the flow to its next hop (the device's program, when the launch is its first event), [ comes back.
    driver.execute_script("document.activeElement && document.activeElement.blur()")
    ActionChains(driver).send_keys("]").perform()
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.selected")
                                    == chain_keys[launch + 1])
    if launch == 0:
        assert launch + 1 == device
    ActionChains(driver).send_keys("[").perform()
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.selected")
                                    == chain_keys[launch])
    assert console_errors(driver) == []


def test_pinned_tracks_and_hidden_processes_are_kept_in_the_link(site, driver, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = "gpu_multi_worker"
    page = site / run / "trace.html"
    _open(driver, page)
    index = read_index(site / run / "trace" / driver.execute_script(
        "return document.querySelector('section:not([hidden]) [data-timeline]').dataset.host") / "timeline")
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    compute = next(k for k, t in enumerate(index["tracks"]) if t["title"] == "Stream #134(Compute)")
    first_process = index["tracks"][0]["process"]
    hidden = [k for k, t in enumerate(index["tracks"]) if t["process"] == first_process]
    assert compute not in hidden

    def layout() -> dict:
        return driver.execute_script(f"""
          var tl = {tl}, drawn = tl.tracks.filter(p => tl.drawnTrack(p.trackIndex));
          drawn.sort((a, b) => a.renderEngine.position - b.renderEngine.position);
          return {{order: drawn.map(p => p.trackIndex), hash: location.hash, selected: tl.root.dataset.selected || null,
                  nodes: tl.tracks[arguments[0]].flatTree.length}};""", compute)

    before = layout()
    assert before["order"] == list(range(len(index["tracks"])))
    driver.execute_script(f"var tl = {tl}, p = tl.tracks[arguments[0]]; tl.select(p, p.flatTree[3]);", compute)
    selected = driver.execute_script(f"return {tl}.root.dataset.selected")
    driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-pin]").click()
    pinned = layout()
    assert pinned["order"][0] == compute and sorted(pinned["order"]) == before["order"]
    assert pinned["selected"] == selected and pinned["nodes"] == before["nodes"]  # same data, same selection
    # Hide the first process from one of its events' details.
    driver.execute_script(f"var tl = {tl}, p = tl.tracks[arguments[0]]; tl.select(p, p.flatTree[0]);", hidden[0])
    driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-hide]").click()
    WebDriverWait(driver, 10).until(lambda d: "hide=0" in d.execute_script("return location.hash"))
    shown = layout()
    assert shown["order"][0] == compute and not set(hidden) & set(shown["order"])
    assert len(shown["order"]) == len(index["tracks"]) - len(hidden)
    assert f"pin={compute}" in shown["hash"] and "hide=0" in shown["hash"]
    _shot(driver, tmp_path, "timeline-pinned.png")
    # The link opens the same layout.
    driver.get("about:blank")
    _open(driver, page, shown["hash"])
    assert layout()["order"] == shown["order"]
    driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-layout] button").click()
    assert layout()["order"] == before["order"]
    assert console_errors(driver) == []


def test_all_flows_in_view_by_category(tpu_site, driver, tmp_path):
    from collections import defaultdict

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    run = host = "tpu_inference_2"
    doc = read_chunk(tpu_site / run / "trace" / host / f"{host}-000.json.gz")
    flows = defaultdict(list)
    for e in doc["traceEvents"]:
        if "bind_id" in e:
            flows[e["bind_id"]].append(e)
    hops = []  # (category, from ps, to ps): each hop's time across the view, as the page counts it
    for members in flows.values():
        members.sort(key=lambda e: e["ts"])
        for a, b in zip(members, members[1:]):
            t0 = min(round((a["ts"] + a["dur"]) * 1e6), round(b["ts"] * 1e6))
            hops.append((members[0].get("cat", ""), t0, max(t0, round(b["ts"] * 1e6))))
    _open(driver, tpu_site / run / "trace.html")
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-all-flows]").click()
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(f"return {tl}.root.dataset.allFlowHops") is not None)

    def in_view(cat: str = "") -> int:
        v = driver.execute_script(f"return {tl}.view()")
        p0, p1 = v[0] * 1e9, v[1] * 1e9
        return sum(1 for c, t0, t1 in hops if (not cat or c == cat) and t0 <= p1 and t1 >= p0)

    for cat in ("", "tpu_launch"):
        if cat:
            Select(driver.find_element(By.CSS_SELECTOR, "section:not([hidden]) [data-timeline-flow-cat]")) \
                .select_by_value(cat)
        counts = driver.execute_script(f"var r = {tl}.root; return [+r.dataset.allFlowHops, +r.dataset.allFlowArrows]")
        expected = in_view(cat)
        assert counts[0] == expected > 0, cat
        assert counts[1] == min(expected, (expected + (-(-expected // 400)) - 1) // (-(-expected // 400)))
    _shot(driver, tmp_path, "timeline-all-flows.png")
    assert console_errors(driver) == []


def test_tracks_off_screen_are_drawn_once_scrolled_to(tpu_site, driver):
    from selenium.webdriver.support.ui import WebDriverWait

    run = "tpu_inference_2"
    _open(driver, tpu_site / run / "trace.html")
    tl = "document.querySelector('section:not([hidden]) [data-timeline]').timeline"
    # The host's last track with events in the view, far below the first screen: no bar of it is drawn (flame-chart-js
    # registers a hit region for each bar it draws), until the tracks are scrolled to it.
    state = driver.execute_script(f"""
      var tl = {tl}, v = tl.view();
      var p = tl.tracks.filter(p => p.flatTree.some(n => n.source.start < v[1] &&
                                                        n.source.start + n.source.duration > v[0])).pop();
      return {{k: p.trackIndex, position: p.renderEngine.position, screen: tl.scroller.clientHeight,
              regions: p.interactionsEngine.hitRegions.length}};""")
    assert state["position"] > 3 * state["screen"] and state["regions"] == 0
    driver.execute_script(f"var tl = {tl}; tl.scroller.scrollTop = arguments[0] - 50;", state["position"])
    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
        f"return {tl}.tracks[arguments[0]].interactionsEngine.hitRegions.length", state["k"]) > 0)
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


def test_the_page_leads_with_the_timeline_opened_on_the_median_step(site, driver, tmp_path):
    run = "tf_keras_input_bound"
    state = _open(driver, site / run / "trace.html")
    steps = read_index(site / run / "trace" / state["host"] / "timeline")["steps"]
    assert len(steps) == 5
    # The median step by duration (steps of this run differ: its input pipeline stalls some of them).
    number, start_ps, end_ps = sorted(steps, key=lambda s: s[2] - s[1])[2]
    t0, t1 = start_ps / 1e9, end_ps / 1e9
    pad = (t1 - t0) * 0.02
    assert state["view"] == [pytest.approx(t0 - pad, abs=1e-3), pytest.approx(t1 + pad, abs=1e-3)]
    assert driver.execute_script("return document.querySelector('[data-timeline-step]').value") == str(number)
    layout = driver.execute_script("""
      var root = document.querySelector('[data-timeline]'), main = root.closest('main') || document.body;
      var h1 = main.querySelector('h1'), next = h1.nextElementSibling;
      while (next && !next.offsetParent) next = next.nextElementSibling;  // an empty error list
      var files = [...main.querySelectorAll('h2')].find(h => h.textContent === 'Trace files');
      return {top: root.getBoundingClientRect().top, leads: next.contains(root) && next.firstElementChild === root,
              filesAfter: !!(root.compareDocumentPosition(files) & Node.DOCUMENT_POSITION_FOLLOWING),
              noteAfter: !!(root.compareDocumentPosition(document.querySelector('[data-when-file]'))
                            & Node.DOCUMENT_POSITION_FOLLOWING)};""")
    assert layout == {"top": layout["top"], "leads": True, "filesAfter": True, "noteAfter": True}
    assert layout["top"] < 160  # right under the page's header and title, at 1280 x 800
    _shot(driver, tmp_path, "timeline-leads.png")
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
    from reportgen.export.timeline_embed import embed_timelines
    from reportgen.output.single_file import MAX_EMBEDDED_BYTES, write_single_file

    report = tmp_path / "report.html"
    write_single_file(site, report, timelines=embed_timelines)
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
    from reportgen.export.timeline_embed import embed_timelines
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
    write_single_file(site, report, timelines=embed_timelines)
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

    from reportgen.export.timeline_embed import embed_timelines
    from reportgen.output.single_file import write_single_file
    from tests.logdirs import make_logdir, small_capture

    # small_capture(i)'s "worker" events last i * 1000 + k ps: 0.5 µs in runa, 0.9 µs in runb.
    logdir = make_logdir(tmp_path / "logs", {"runa": {"host0": small_capture(500)},
                                             "runb": {"host0": small_capture(900)}})
    site = tmp_path / "site"
    assert main(["build", str(logdir), "-o", str(site), "-q", "--jobs", "1", "--no-cache"]) == 0
    report = tmp_path / "report.html"
    write_single_file(site, report, timelines=embed_timelines)
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

    Wait = pytest.importorskip("marionette_driver.wait").Wait

    run = "gpu_multi_worker"
    profile = tmp_path / "firefox"
    with firefox(profile) as ff:
        ff.navigate((site / run / "trace.html").as_uri())
        state = Wait(ff, timeout=30).until(lambda m: m.execute_script(
            "var r = document.querySelector('[data-timeline]');"
            "return r.dataset.ready ? {host: r.dataset.host, drawn: +r.dataset.drawn, mode: r.dataset.mode,"
            " status: r.querySelector('[data-timeline-status]').textContent} : null;", sandbox=None),
            message="the timeline did not draw in Firefox")
        index = read_index(site / run / "trace" / state["host"] / "timeline")
        assert state["mode"] == "detail" and state["drawn"] == index["events"]
        # Search selects an event, whose arguments come from the window's args file.
        ff.execute_script("document.querySelector('[data-timeline]').timeline.search('MemcpyH2D');", sandbox=None)
        details = Wait(ff, timeout=10).until(lambda m: m.execute_script(
            "var r = document.querySelector('[data-timeline]');"
            "var args = r.querySelector('[data-timeline-args]');"
            "return r.dataset.argsReady ? JSON.parse(args.dataset.event) : null;", sandbox=None),
            message="the searched event's arguments were not shown")
        assert details and details["name"] == "MemcpyH2D" and details["ph"] == "X"
        # W zooms in.
        before = ff.execute_script("return document.querySelector('[data-timeline]').timeline.view();", sandbox=None)
        ff.execute_script("document.activeElement && document.activeElement.blur();"
                          "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'w'}));", sandbox=None)
        # W held zooms in frame by frame: released once the view has narrowed.
        Wait(ff, timeout=10).until(lambda m: m.execute_script(
            "var v = document.querySelector('[data-timeline]').timeline.view();"
            "return v[1] - v[0] < arguments[0];", script_args=(before[1] - before[0],), sandbox=None),
            message="holding W did not zoom in")
        ff.execute_script("document.dispatchEvent(new KeyboardEvent('keyup', {key: 'w'}));", sandbox=None)
        after = ff.execute_script("return document.querySelector('[data-timeline]').timeline.view();", sandbox=None)
        assert after[1] - after[0] < before[1] - before[0]
        (tmp_path / "timeline-firefox.png").write_bytes(base64.b64decode(ff.screenshot()))
    assert firefox_errors(profile) == []
