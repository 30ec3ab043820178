"""Page weight and opening times: every page of a built site in headless Chromium, in one run.

    PYTHONPATH=. python bench/pages.py [SITE | --logdir LOGDIR] [--json FILE] [--single-file FILE]
        [--window 1280,800] [--budget]

With a LOGDIR (by default the shared captures) it builds the site into a
temporary folder first. Each page is opened from disk (`file://`, as users
open a site) in one fresh headless Chromium, one page at a time, and after
its `load` event it reports: the HTML's bytes, the DOM's nodes (elements,
text and comments: `document.querySelectorAll('*')` counts elements only,
which hides text-heavy tables), and the Navigation Timing figures
DOMContentLoaded and load (ms from the navigation's start). It prints one
table of all pages, the 10 worst by DOMContentLoaded, and the pages past the
page budget (DOMContentLoaded ≤ 1.5 s, load ≤ 2.5 s, ≤ 15,000 nodes,
≤ 1 MiB; a single-file report's DOMContentLoaded ≤ 5 s); `--json` writes
the same figures. `--budget` exits 1 when a page is past it.

The machine is shared: a page's times move by tens of percent from run to
run; the bytes and nodes do not.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_LOGDIR = REPO.parent / "shared" / "captures" / "logdir"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

BUDGET = {"dom_content_loaded_ms": 1500.0, "load_ms": 2500.0, "nodes": 15_000, "bytes": 1 << 20}
SINGLE_FILE_BUDGET = {"dom_content_loaded_ms": 5000.0}  # the single-file report: opens (DOMContentLoaded) in 5 s

# Every node of the document, text and comments included, after the page's scripts ran.
COUNT_NODES = """
var walker = document.createTreeWalker(document, NodeFilter.SHOW_ALL);
var n = 0;
while (walker.nextNode()) n++;
return n;
"""
TIMING = """
var t = performance.getEntriesByType('navigation')[0];
return [t.domContentLoadedEventEnd, t.loadEventEnd];
"""


@dataclass
class PageFigures:
    page: str
    bytes: int
    nodes: int
    dom_content_loaded_ms: float
    load_ms: float
    single_file: bool = False

    def over_budget(self) -> list[str]:
        budget = SINGLE_FILE_BUDGET if self.single_file else BUDGET
        return [key for key, limit in budget.items() if getattr(self, key) > limit]


def start_browser(window: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 f"--window-size={window}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(300)
    return driver


def measure(driver, path: Path, root: Path) -> PageFigures:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")  # a fresh navigation entry each time, so that timings never carry over
    driver.get(path.resolve().as_uri())  # returns after the load event
    WebDriverWait(driver, 300).until(lambda d: d.execute_script(TIMING)[1] > 0)
    dcl, load = driver.execute_script(TIMING)
    nodes = driver.execute_script(COUNT_NODES)
    return PageFigures(str(path.relative_to(root)), path.stat().st_size, int(nodes), round(dcl, 1), round(load, 1))


def pages_of(site: Path) -> list[Path]:
    # The trace chunks' and timeline's data are not pages; every .html the site links is.
    return sorted(p for p in site.rglob("*.html") if "data" not in p.relative_to(site).parts)


def table(rows: list[PageFigures]) -> str:
    head = f"{'page':<48} {'KiB':>9} {'nodes':>9} {'DCL ms':>9} {'load ms':>9}  over budget"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.page:<48} {r.bytes / 1024:>9,.1f} {r.nodes:>9,} {r.dom_content_loaded_ms:>9,.0f} "
                     f"{r.load_ms:>9,.0f}  {', '.join(r.over_budget())}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, help="a built site (default: build --logdir first)")
    parser.add_argument("--logdir", type=Path, default=DEFAULT_LOGDIR)
    parser.add_argument("--single-file", type=Path, help="also open this single-file report")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--window", default="1280,800")
    parser.add_argument("--budget", action="store_true", help="exit 1 when a page is past the budget")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="reportgen-pages-") as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            subprocess.run([sys.executable, "-m", "reportgen", "build", str(args.logdir), "-o", str(site), "-q"],
                           check=True, cwd=REPO)
        files = pages_of(site)
        driver = start_browser(args.window)
        try:
            rows = [measure(driver, p, site) for p in files]
            if args.single_file:
                report = measure(driver, args.single_file, args.single_file.parent)
                report.single_file = True
                rows.append(report)
        finally:
            driver.quit()

    print(table(rows))
    worst = sorted(rows, key=lambda r: r.dom_content_loaded_ms, reverse=True)[:10]
    print("\nThe 10 worst by DOMContentLoaded\n" + table(worst))
    over = [r for r in rows if r.over_budget()]
    print(f"\n{len(rows)} pages; {len(over)} past the budget "
          f"(DOMContentLoaded ≤ {BUDGET['dom_content_loaded_ms']:,.0f} ms, load ≤ {BUDGET['load_ms']:,.0f} ms, "
          f"≤ {BUDGET['nodes']:,} nodes, ≤ 1 MiB; a single-file report DOMContentLoaded ≤ 5,000 ms)")
    if args.json:
        args.json.write_text(json.dumps({"budget": BUDGET, "single_file_budget": SINGLE_FILE_BUDGET,
                                         "pages": [asdict(r) for r in rows], "worst": [r.page for r in worst]},
                                        indent=1))
    return 1 if args.budget and over else 0


if __name__ == "__main__":
    sys.exit(main())
