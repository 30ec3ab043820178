"""In-page timeline benchmark: build cost of its data, and first paint / frame times in headless Chromium.

    PYTHONPATH=. python bench/timeline.py build --copies 50 200
    PYTHONPATH=. python bench/timeline.py browse SITE/RUN/trace.html [OTHER_SITE/RUN/trace.html …] [--runs 3]
    PYTHONPATH=. python bench/timeline.py speedscope --copies 1 10 --speedscope DIR

* build: the shared GPU capture tiled N times (bench/tile.py), decoded once, then the trace
  export run twice in this process, without and with the timeline's files (the only work the
  timeline adds to a build): seconds, files, bytes, bytes per event.
* browse: the trace page from file://, in a fresh headless Chromium at 1280 × 800 per run:
  first paint (navigation start → the timeline's first data drawn, `timeline-first-paint`),
  then requestAnimationFrame intervals while input is sent through the DevTools protocol as a
  user would: W held (zoom in), D held (pan), S held (zoom out), Ctrl + wheel zooms at the mouse
  and mouse drags; per phase the median, 95th percentile and longest frame, and the frames over
  50 ms. The data the view needed is loaded during these phases and counts in them. Then the JS
  heap in use (the DevTools protocol's JSHeapUsedSize, after a garbage collection) beside the
  bytes of the timeline's files the page loaded. Several pages (the same capture built by two
  checkouts) are measured in turns, run by run, so that each figure stands beside the other's
  under the same load: read them as ratios on a shared machine.
* speedscope: the same capture's Chrome JSON opened in speedscope's own app from file:// (its
  `#localProfilePath=` script, the only way it reads a local file), time until its flame graph
  is drawn. speedscope's release folder comes from `npm pack speedscope`.

Results print as JSON and go to bench/out/timeline.json. The machine is shared: the load average
is recorded with each figure.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
SOURCE = REPO.parent / "shared" / "captures" / "logdir" / "plugins" / "profile" / "gpu_multi_worker" / \
    "34.83.195.179_6003.xplane.pb"

FRAME_RECORDER = """
window.__frames = [];
(function loop(last) {
  requestAnimationFrame(function (now) { window.__frames.push(now - last); loop(now); });
})(performance.now());
"""


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def tiled(copies: int, work: Path) -> Path:
    if copies == 1:
        return SOURCE
    out = work / f"x{copies}.xplane.pb"
    if not out.exists():
        subprocess.run([sys.executable, str(REPO / "bench" / "tile.py"), str(SOURCE), str(copies), "-o", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
    return out


def bench_build(copies: list[int]) -> list[dict]:
    from reportgen.export.host_export import export_host
    from reportgen.loaders.logdir import read_file
    from reportgen.loaders.xspace import decode_xspace

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in copies:
            path = tiled(n, work)
            capture = decode_xspace(str(path), read_file(str(path)))
            row = {"copies": n, "loadavg_before": loadavg()}
            for with_timeline in (False, True):
                out = work / f"out-{n}-{with_timeline}"
                started = time.perf_counter()
                cpu = time.process_time()
                export = export_host(capture, "bench", out / capture.host, "json", timeline=with_timeline)
                label = "with_timeline" if with_timeline else "without"
                row[f"{label}_s"] = round(time.perf_counter() - started, 2)
                row[f"{label}_cpu_s"] = round(time.process_time() - cpu, 2)
                row["events"] = export.events
                row["chunk_bytes"] = sum(c.bytes for c in export.chunks)
                if export.timeline:
                    tl = export.timeline
                    row.update(timeline_s=round(tl.seconds, 2), timeline_files=tl.files, timeline_bytes=tl.bytes,
                               timeline_bytes_per_event=round(tl.bytes / max(tl.events, 1), 1),
                               windows=tl.windows, lod_levels=tl.lod_levels)
                    sizes = {}
                    for name in tl.files_written:
                        kind = Path(name).name.split("-")[0].rstrip("0123456789") or "index"
                        sizes[kind] = sizes.get(kind, 0) + (out / capture.host / name).stat().st_size
                    row["timeline_bytes_by_kind"] = sizes
                shutil.rmtree(out)
            row["loadavg_after"] = loadavg()
            results.append(row)
            print(json.dumps(row), flush=True)
    return results


def _stats(frames: list[float]) -> dict:
    if not frames:
        return {}
    ordered = sorted(frames)
    return {"frames": len(frames), "median_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1), "max_ms": round(ordered[-1], 1),
            "over_50ms": sum(1 for f in frames if f > 50)}


def _cdp_key(driver, key: str, kind: str) -> None:
    driver.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": f"Key{key.upper()}",
                                                       "text": key if kind == "keyDown" else "",
                                                       "windowsVirtualKeyCode": ord(key.upper())})


def _phase(driver, action) -> dict:
    driver.execute_script("window.__frames.length = 0;")
    action()
    time.sleep(0.3)
    frames = driver.execute_script("return window.__frames.slice(1);")
    state = driver.execute_script(
        "var r = document.querySelector('[data-timeline]'); return [r.dataset.mode, +r.dataset.drawn];")
    return {**_stats(frames), "mode_after": state[0], "drawn_after": state[1]}


FIRST_PAINT = "var m = performance.getEntriesByName('timeline-first-paint'); return m.length ? m[0].startTime : null;"


def _first_paint(driver, url: str) -> float | None:
    driver.get(url)
    deadline = time.time() + 60
    while time.time() < deadline:
        first = driver.execute_script(FIRST_PAINT)
        if first is not None:
            return round(first, 1)
        time.sleep(0.05)
    return None


class _Input:
    """User input through the DevTools protocol, at a point of the timeline's canvas."""

    def __init__(self, driver):
        self.driver = driver
        rect = driver.execute_script(
            "var c = document.querySelector('[data-timeline] canvas'); c.scrollIntoView();"
            "var r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height];")
        self.x, self.y = rect[0] + rect[2] / 2, rect[1] + min(rect[3] / 2, 200)
        driver.execute_script("document.activeElement && document.activeElement.blur();")

    def mouse(self, kind: str, x: float, **extra) -> None:
        self.driver.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": self.y, **extra})

    def hold(self, key: str, seconds: float) -> None:
        _cdp_key(self.driver, key, "keyDown")
        time.sleep(seconds)
        _cdp_key(self.driver, key, "keyUp")

    def wheel(self, delta: float, times: int) -> None:
        for _ in range(times):
            self.mouse("mouseWheel", self.x, deltaX=0, deltaY=delta, modifiers=2)  # Ctrl + wheel: zoom
            time.sleep(0.016)

    def drag(self, dx: float, steps: int) -> None:
        self.mouse("mousePressed", self.x, button="left", clickCount=1)
        for k in range(1, steps + 1):
            self.mouse("mouseMoved", self.x + dx * k / steps, button="left", buttons=1)
            time.sleep(0.016)
        self.mouse("mouseReleased", self.x + dx, button="left", clickCount=1)


def _interact(driver) -> dict:
    driver.execute_script(FRAME_RECORDER)
    user = _Input(driver)
    phases = {}
    for label, action in (
        ("hold W 4 s (zoom in)", lambda: user.hold("w", 4.0)),
        ("hold D 2 s (pan)", lambda: user.hold("d", 2.0)),
        ("drag 60 moves (pan)", lambda: user.drag(-400, 60)),
        ("hold S 4 s (zoom out)", lambda: user.hold("s", 4.0)),
        ("ctrl+wheel in x60", lambda: user.wheel(-120, 60)),
        ("ctrl+wheel out x60", lambda: user.wheel(120, 60)),
    ):
        phases[label] = _phase(driver, action)
        time.sleep(1.0)
    return phases


TIMELINE_FILES = """
return [...document.querySelectorAll('script[data-timeline-base]')].map(function (e) { return e.src; });
"""


def _heap(driver) -> dict:
    """JS heap in use after a full collection, and the timeline files the page loaded (their bytes on disk)."""
    from urllib.parse import unquote, urlparse

    driver.execute_cdp_cmd("HeapProfiler.enable", {})
    driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    driver.execute_cdp_cmd("Performance.enable", {})
    metrics = {m["name"]: m["value"] for m in driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
    files = driver.execute_script(TIMELINE_FILES)
    loaded = sum(Path(unquote(urlparse(url).path)).stat().st_size for url in set(files))
    heap = metrics.get("JSHeapUsedSize", 0)
    return {"heap_used_mib": round(heap / 2**20, 1), "timeline_files_loaded": len(set(files)),
            "timeline_bytes_loaded_mib": round(loaded / 2**20, 2),
            "heap_over_loaded": round(heap / loaded, 2) if loaded else None}


def bench_browse(pages: list[str], runs: int) -> list[dict]:
    from tests.browser import start_chromium

    out = [{"page": page, "first_paint_ms": [], "loadavg": loadavg()} for page in pages]
    for run in range(runs):
        for row in out:  # in turns: each page's run beside the other's, under the same load
            with tempfile.TemporaryDirectory() as profile:
                driver = start_chromium(Path(profile), window="1280,800")
                try:
                    row["first_paint_ms"].append(_first_paint(driver, Path(row["page"]).resolve().as_uri()))
                    if run == runs - 1:
                        row["heap_at_first_paint"] = _heap(driver)
                        row["phases"] = _interact(driver)
                        row["heap_after_interaction"] = _heap(driver)
                        frames = [p["p95_ms"] for p in row["phases"].values() if "p95_ms" in p]
                        row["worst_phase_p95_ms"] = max(frames) if frames else None
                        row["console_errors"] = [e["message"] for e in driver.get_log("browser")
                                                 if e["level"] == "SEVERE"]
                finally:
                    driver.quit()
    for row in out:
        row["loadavg_after"] = loadavg()
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_speedscope(copies: list[int], release: Path) -> list[dict]:
    from reportgen.export.host_export import export_host
    from reportgen.loaders.logdir import read_file
    from reportgen.loaders.xspace import decode_xspace
    from tests.browser import start_chromium

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        app = work / "speedscope"
        shutil.copytree(release, app)
        for n in copies:
            path = tiled(n, work)
            capture = decode_xspace(str(path), read_file(str(path)))
            export = export_host(capture, "bench", work / f"json-{n}", "json", max_events=10**9, max_bytes=1 << 62,
                                 timeline=False)
            raw = gzip.decompress((work / f"json-{n}" / Path(export.chunks[0].file).name).read_bytes())
            profile = work / f"profile-{n}.js"
            profile.write_text("speedscope.loadFileFromBase64('trace.json', '" +
                               base64.b64encode(raw).decode() + "');\n")
            row = {"copies": n, "events": export.events, "json_bytes": len(raw), "loadavg": loadavg()}
            with tempfile.TemporaryDirectory() as profile_dir:
                driver = start_chromium(Path(profile_dir), window="1280,800")
                try:
                    started = time.time()
                    driver.get((app / "index.html").as_uri() + "#localProfilePath=" + str(profile).lstrip("/"))
                    drawn = False
                    while time.time() - started < 120 and not drawn:
                        # Its header names the thread on view: "<process> (pid …), <thread> (tid …) (1/N)".
                        drawn = driver.execute_script("return document.querySelectorAll('canvas').length > 0 && "
                                                      "/\\(1\\/\\d+\\)/.test(document.body.innerText);")
                        time.sleep(0.05)
                    row["first_paint_s"] = round(time.time() - started, 2) if drawn else None
                    log = driver.get_log("browser")
                    row["console_errors"] = [e["message"][:200] for e in log if e["level"] == "SEVERE"]
                    # Events it could not nest (its tracks are stacks: partly overlapping events break them).
                    row["events_it_could_not_nest"] = sum("Tried to end" in e["message"] for e in log)
                finally:
                    driver.quit()
            results.append(row)
            print(json.dumps(row), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("--copies", type=int, nargs="+", default=[50, 200])
    w = sub.add_parser("browse")
    w.add_argument("page", nargs="+")
    w.add_argument("--runs", type=int, default=3)
    s = sub.add_parser("speedscope")
    s.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    s.add_argument("--speedscope", type=Path, required=True, help="speedscope's dist/release folder")
    args = parser.parse_args()
    if args.what == "build":
        result = {"build": bench_build(args.copies)}
    elif args.what == "browse":
        result = {"browse": bench_browse(args.page, args.runs)}
    else:
        result = {"speedscope": bench_speedscope(args.copies, args.speedscope)}
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / "timeline.json"
    previous = json.loads(target.read_text()) if target.exists() else {}
    previous.update(result)
    target.write_text(json.dumps(previous, indent=1))


if __name__ == "__main__":
    main()
