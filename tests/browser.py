"""Headless Debian Chromium through Selenium, as every browser test starts it.

`needs_browser` skips a test (with the install command) where chromium or
chromedriver is missing; `chromium(profile_dir)` opens a browser that logs
the console, so that `console_errors(driver)` can assert a page raised none;
`screenshot(driver, name)` keeps a PNG when REPORTGEN_SCREENSHOTS names a folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

HAVE_BROWSER = Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()
SKIP_REASON = (f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
               "apt-get install chromium chromium-driver")
needs_browser = pytest.mark.skipif(not HAVE_BROWSER, reason=SKIP_REASON)

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")


def start_chromium(profile_dir: Path, window: str = "1400,1000"):
    """A new headless browser with its own profile folder; the caller quits it."""
    if not HAVE_BROWSER:
        pytest.skip(SKIP_REASON)
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a test dependency")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={window}", f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@contextmanager
def chromium(profile_dir: Path, window: str = "1400,1000") -> Iterator:
    driver = start_chromium(profile_dir, window)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[dict]:
    """The SEVERE console entries logged since the last call."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(driver, name: str) -> None:
    """Keep a screenshot named `name` in the folder REPORTGEN_SCREENSHOTS names, for a look (none without it)."""
    folder = os.environ.get("REPORTGEN_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))
