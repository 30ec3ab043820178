"""Time `reportgen trend` on a history of many runs, and its page in headless Chromium.

The history is made from the bundled sample's built run (tests/trendseries.py: copies of its summary block
and CSVs, a step-time change injected every 250 runs, 0.5 ms of noise). Prints the build's wall time and
peak memory, and the page's load time: from navigation start until every chart is drawn.

    PYTHONPATH=. python bench/trend.py [--runs 1000] [--source SITE]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build_source(folder: Path) -> Path:
    site = folder / "sample-site"
    subprocess.run([sys.executable, "-m", "reportgen", "build", "-o", str(site), "-q", "--jobs", "1"], check=True,
                   cwd=REPO)
    return site


def page_load_seconds(page: Path, profile: Path, loads: int = 3) -> list[float]:
    """Seconds from navigation start until every chart of the page is drawn, for each of `loads` loads in one
    browser (the first one cold: a new profile, nothing cached)."""
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.browser import chromium

    drawn = ("var charts = document.querySelectorAll('[data-vega-spec]');"
             "for (var i = 0; i < charts.length; i++) if (!charts[i].querySelector('svg, canvas')) return null;"
             "return [performance.now()];")
    times = []
    with chromium(profile, window="1280,800") as driver:
        for _ in range(loads):
            driver.get(page.as_uri())
            # Polled every 10 ms: the figure is at most that late.
            done = WebDriverWait(driver, 60, poll_frequency=0.01).until(lambda d: d.execute_script(drawn))
            times.append(done[0] / 1e3)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--source", type=Path, help="a built site holding tf_keras_fast (default: build the sample)")
    args = parser.parse_args()
    from tests.trendseries import make_series

    with tempfile.TemporaryDirectory(prefix="reportgen-bench-trend-") as scratch:
        root = Path(scratch)
        source = args.source or build_source(root)
        started = time.perf_counter()
        make_series(source, "tf_keras_fast", root / "history", args.runs,
                    changes={at: (3.0 if k % 2 == 0 else -2.0) for k, at in enumerate(range(250, args.runs, 250))},
                    noise_ms=0.5, seed=1)
        print(f"made {args.runs} runs in {time.perf_counter() - started:.1f} s")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reportgen", "trend", str(root / "history"), "-q"], check=True,
                       cwd=REPO)
        build = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        peak = after.ru_maxrss / 1024
        page = root / "history" / "trends" / "index.html"
        # On a shared machine the CPU time says what the wall time would be on an idle one.
        print(f"trend of {args.runs} runs: {build:.2f} s wall, {cpu:.2f} s CPU (the whole command), "
              f"peak RSS {peak:.0f} MiB, page {page.stat().st_size / 2**20:.1f} MiB")
        for i in range(2):
            times = page_load_seconds(page, root / f"profile-{i}")
            print("page load in headless Chromium, 1280x800 (navigation start to every chart drawn), a new browser "
                  "then reloads: " + ", ".join(f"{s:.2f} s" for s in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
